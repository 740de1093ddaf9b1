"""The position-keeping loader: exact ranges, defects of the file at the right place, safety."""

from __future__ import annotations

import json

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from memlint.documents import structured
from memlint.documents.structured import MAX_DEPTH, MAX_NODES, load
from memlint.model.diagnostics import Position, Range

# A DeepSpeed config as the HF docs write it (two-space indent, "auto" values, 1e9 integers).
DS_ZERO3 = """\
{
  "bf16": {
    "enabled": "auto"
  },
  "zero_optimization": {
    "stage": 3,
    "offload_param": {"device": "cpu", "pin_memory": true},
    "stage3_max_live_parameters": 1e9
  },
  "gradient_accumulation_steps": "auto",
  "train_micro_batch_size_per_gpu": "auto"
}
"""

AXOLOTL = """\
base_model: NousResearch/Llama-3.2-1B
# comments and blank lines do not move anything

load_in_4bit: true
adapter: qlora
lora_target_modules:
  - q_proj
  - v_proj
datasets:
  - path: teknium/GPT4-LLM-Cleaned
    type: alpaca
learning_rate: 2e-5
lr_min: 2.0e-6
"""


def r(line: int, column: int, end_line: int, end_column: int) -> Range:
    return Range.of(line, column, end_line, end_column)


# --------------------------------------------------------------------------- ranges


def test_json_values_and_keys_have_exact_ranges():
    data = load(DS_ZERO3, "json")
    assert data.ok and data.problems == []
    assert data.value["zero_optimization"]["stage3_max_live_parameters"] == 1e9  # json semantics
    assert data.range_of(("zero_optimization", "stage")) == r(6, 13, 6, 14)
    assert data.range_of(("zero_optimization", "stage"), key=True) == r(6, 4, 6, 11)
    assert data.range_of(("zero_optimization", "offload_param", "device")) == r(7, 32, 7, 37)
    assert data.range_of(("zero_optimization", "offload_param")) == r(7, 21, 7, 58)
    assert data.range_of(("bf16", "enabled")) == r(3, 15, 3, 21)
    assert data.range_of(("zero_optimization",)) == r(5, 23, 9, 3)
    assert data.range_of(()) == r(1, 0, 12, 1)


def test_yaml_values_keys_and_sequences_have_exact_ranges():
    data = load(AXOLOTL, "yaml")
    assert data.ok
    assert data.range_of(("base_model",)) == r(1, 12, 1, 37)
    assert data.range_of(("load_in_4bit",), key=True) == r(4, 0, 4, 12)
    assert data.range_of(("lora_target_modules", 1)) == r(8, 4, 8, 10)
    assert data.range_of(("datasets", 0, "type")) == r(11, 10, 11, 16)
    # a block collection ends where its last value ends, not at the next key
    assert data.range_of(("lora_target_modules",)) == r(7, 2, 8, 10)
    assert data.range_of(("datasets", 0)) == r(10, 4, 11, 16)


def test_yaml_scalars_are_what_safe_load_gives():
    data = load(AXOLOTL, "yaml")
    assert data.value == yaml.safe_load(AXOLOTL)
    assert data.value["learning_rate"] == "2e-5"  # YAML 1.1: no dot, so a string
    assert data.value["lr_min"] == 2.0e-6


def test_missing_path_falls_back_to_the_nearest_key():
    data = load(DS_ZERO3, "json")
    assert data.range_of(("zero_optimization", "reduce_bucket_size")) == r(5, 2, 5, 21)
    assert data.range_of(("nothing", "here")) == r(2, 2, 2, 8)  # the first key of the file
    assert load("", "yaml").range_of(("base_model",)) == Range.file_start()


def test_columns_count_code_points_after_non_ascii_text():
    data = load('run_name: "Llama — ÄÖ 😀"\nmicro_batch_size: 2\nnote: é\n', "yaml")
    assert data.range_of(("run_name",)) == r(1, 10, 1, 24)
    assert data.range_of(("note",)) == r(3, 6, 3, 7)


def test_crlf_line_endings():
    data = load('{\r\n  "train_batch_size": 16,\r\n  "fp16": {"enabled": true}\r\n}\r\n', "json")
    assert data.range_of(("train_batch_size",)) == r(2, 22, 2, 24)
    assert data.range_of(("fp16", "enabled")) == r(3, 22, 3, 26)


def test_json_indented_with_tabs():
    data = load('{\n\t"zero_optimization": {\n\t\t"stage": 2\n\t}\n}\n', "json")
    assert data.ok and data.value == {"zero_optimization": {"stage": 2}}
    assert data.range_of(("zero_optimization", "stage")) == r(3, 11, 3, 12)


def test_anchors_aliases_and_merge_keys():
    text = (
        "defaults: &defaults\n"
        "  micro_batch_size: 2\n"
        "  sequence_len: 4096\n"
        "run:\n"
        "  <<: *defaults\n"
        "  sequence_len: 8192\n"
        "copy: *defaults\n"
    )
    data = load(text, "yaml")
    assert data.value == yaml.safe_load(text)
    assert data.value["run"] == {"micro_batch_size": 2, "sequence_len": 8192}
    # a merged key points at the `<<` that brought it; an explicit key at itself
    assert data.range_of(("run", "micro_batch_size"), key=True) == r(5, 2, 5, 4)
    assert data.range_of(("run", "micro_batch_size")) == r(5, 6, 5, 15)
    assert data.range_of(("run", "sequence_len")) == r(6, 16, 6, 20)
    assert data.range_of(("copy",)) == r(7, 6, 7, 15)


def test_keys_are_text_as_written():
    data = load("1: one\nyes: true\nnull: x\n", "yaml")
    assert data.value == {"1": "one", "yes": True, "null": "x"}


def test_items_walks_every_value_in_order():
    data = load('{"a": {"b": [1, {"c": 2}]}, "d": 3}', "json")
    assert [p for p, _ in data.items()] == [(), ("a",), ("a", "b"), ("a", "b", 0), ("a", "b", 1),
                                            ("a", "b", 1, "c"), ("d",)]


def test_source_gives_the_text_of_a_range():
    data = load(AXOLOTL, "yaml")
    assert data.source(data.range_of(("base_model",))) == "NousResearch/Llama-3.2-1B"
    assert data.source(data.range_of(("datasets", 0))) == "path: teknium/GPT4-LLM-Cleaned\n    type: alpaca"


# --------------------------------------------------------------------------- defects of the file


def test_invalid_json_is_reported_at_its_line_and_column():
    data = load('{\n  "train_batch_size": 16\n  "fp16": {"enabled": true}\n}\n', "json")
    assert not data.ok and data.value is None
    [problem] = data.problems
    assert problem.kind == "syntax"
    assert problem.message == "invalid JSON: Expecting ',' delimiter"
    assert problem.range == r(3, 2, 3, 3)


def test_trailing_comma_points_at_the_comma():
    data = load('{\n  "zero_optimization": {\n    "stage": 2,\n  },\n  "fp16": {"enabled": true}\n}\n', "json")
    [problem] = data.problems
    assert problem.message == "invalid JSON: trailing comma before `}`; remove it"
    assert problem.range == r(3, 14, 3, 15)


def test_comments_in_json_are_named():
    data = load('{\n  // ZeRO-2 for 8 GPUs\n  "train_batch_size": 16\n}\n', "json")
    [problem] = data.problems
    assert "comments are not JSON" in problem.message
    assert problem.range == r(2, 2, 2, 3)


def test_duplicate_keys_in_json_and_yaml():
    data = load('{\n  "train_micro_batch_size_per_gpu": 4,\n  "train_micro_batch_size_per_gpu": 16\n}\n', "json")
    assert data.ok and data.value == {"train_micro_batch_size_per_gpu": 16}
    [problem] = data.problems
    assert problem.kind == "duplicate-key"
    assert problem.range == r(3, 2, 3, 34)
    assert "first set on line 2" in problem.message

    data = load("datasets:\n  - path: a\n    type: alpaca\n    path: b\n", "yaml")
    [problem] = data.problems
    assert problem.kind == "duplicate-key" and problem.range == r(4, 4, 4, 8)


def test_tab_indentation_in_yaml():
    data = load("base_model: meta-llama/Llama-3.2-1B\ndatasets:\n  - path: x\n\t  type: alpaca\n", "yaml")
    [problem] = data.problems
    assert problem.kind == "syntax"
    assert "tab character indents this line" in problem.message
    assert problem.range == r(4, 0, 4, 1)


def test_several_yaml_documents():
    data = load("distributed_type: MULTI_GPU\nnum_processes: 8\n---\ndistributed_type: NO\n", "yaml")
    assert not data.ok
    [problem] = data.problems
    assert problem.kind == "multiple-documents"
    assert problem.range == r(3, 0, 3, 3)
    assert data.value == {"distributed_type": "MULTI_GPU", "num_processes": 8}


def test_leading_document_marker_is_one_document():
    data = load("---\nbase_model: x\n", "yaml")
    assert data.ok and data.value == {"base_model": "x"}


def test_invalid_yaml_is_reported_where_the_parser_stops():
    data = load("base_model: x\nlora_target_modules: [q_proj, v_proj\nsequence_len: 2048\n", "yaml")
    [problem] = data.problems
    assert problem.kind == "syntax" and problem.message.startswith("invalid YAML: ")
    assert problem.range.start.line == 3
    assert data.partial_keys == ("base_model", "lora_target_modules")


def test_python_tags_are_refused_and_never_constructed():
    text = "base_model: !!python/object/apply:os.system ['echo pwned']\nsequence_len: 2048\n"
    data = load(text, "yaml")
    assert not data.ok
    [problem] = data.problems
    assert problem.kind == "unsupported-tag"
    assert problem.range == r(1, 12, 1, 13)


def test_hyperpyyaml_tags_are_the_projects_and_stay_text():
    # CosyVoice's conf/cosyvoice.yaml, read by the project with hyperpyyaml.load_hyperpyyaml
    text = ("__set_seed1: !apply:random.seed [1986]\nsample_rate: 22050\nllm_input_size: 896\n"
            "llm: !new:cosyvoice.llm.llm.TransformerLM\n    text_encoder_input_size: !ref <text_encoder_input_size>\n"
            "    llm_input_size: !ref <llm_input_size>\n"
            "optim: !name:torch.optim.Adam\n")
    data = load(text, "yaml")
    assert data.ok and data.problems == []
    assert data.value["sample_rate"] == 22050
    # a Python tag in the same file is still refused
    assert [p.kind for p in load(text + "evil: !!python/object/apply:os.system ['id']\n", "yaml").problems] == [
        "unsupported-tag"]


def test_control_characters():
    data = load("base_model: x\nnote: \x07\n", "yaml")
    [problem] = data.problems
    assert problem.kind == "syntax" and problem.range == r(2, 6, 2, 7)


def test_empty_documents():
    assert load("", "yaml").value is None and load("", "yaml").problems == []
    assert load("# only a comment\n", "yaml").ok
    [problem] = load("", "json").problems
    # an empty document has no character to underline: the range is empty, not past the end
    assert problem.message == "invalid JSON: Expecting value" and problem.range == r(1, 0, 1, 0)


# --------------------------------------------------------------------------- safety


def _billion_laughs(levels: int = 9) -> str:
    lines = ['lol0: &lol0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels + 1):
        refs = ", ".join([f"*lol{level - 1}"] * 9)
        lines.append(f"lol{level}: &lol{level} [{refs}]")
    return "\n".join(lines) + "\n"


def test_alias_bomb_is_refused_before_it_expands():
    """Each alias counts the values it stands for; the count passes the budget at the second
    alias of `lol5` (line 6), and nothing after it is read or built."""
    data = load(_billion_laughs(), "yaml")
    assert data.value is None and not data.ok
    [problem] = data.problems
    assert problem.kind == "too-large" and f"{MAX_NODES:,}" in problem.message
    assert problem.range == r(6, 20, 6, 21)


def test_aliases_below_the_budget_share_values():
    data = load(_billion_laughs(levels=3), "yaml")
    assert data.ok
    assert data.value["lol3"][0] is data.value["lol2"]  # not copied


class _ScannerWithANestingLimit(yaml.SafeLoader):
    """The scanner of PyYAML >= 6.0.3's libyaml, in pure Python: flow nesting past 1,000
    levels is refused with its "exceeded maximum nesting depth", and as it reads a line of
    ``[[[[`` to the end before its first token, before any event reaches memlint's composer."""

    def fetch_flow_collection_start(self, TokenClass):
        if self.flow_level >= 1000:
            raise yaml.scanner.ScannerError(None, None, "exceeded maximum nesting depth", self.get_mark())
        super().fetch_flow_collection_start(TokenClass)


# The YAML scanners a user may have: PyYAML's pure-Python one (no nesting limit of its own, as
# every release before 6.0.3), one that refuses deep nesting itself (the libyaml of 6.0.3 and
# later), and whatever this machine's PyYAML uses.
SCANNERS = {
    "pure-python": yaml.SafeLoader,
    "limit-1000": _ScannerWithANestingLimit,
    "installed": getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader,
}


@pytest.fixture(params=sorted(SCANNERS))
def scanner(request, monkeypatch):
    monkeypatch.setattr(structured, "_Loader", SCANNERS[request.param])
    return request.param


@pytest.mark.parametrize("syntax", ["yaml", "json"])
@pytest.mark.parametrize("levels", [63, MAX_DEPTH, MAX_DEPTH + 1, 1_000, 1_001, 100_000])
def test_nesting_stops_at_the_depth_budget_whatever_the_scanner(scanner, syntax, levels):
    """Up to the budget the value is read; past it the same problem, at the same place
    (column 64, where the nesting passes the budget), whichever PyYAML reads the text."""
    data = load("[" * levels + "]" * levels, syntax)
    if levels <= MAX_DEPTH:
        assert data.ok and data.problems == []
        value, depth = data.value, 0
        while value:
            value, depth = value[0], depth + 1
        assert depth == levels - 1
        return
    [problem] = data.problems
    assert problem.kind == "too-large" and f"{MAX_DEPTH} levels" in problem.message
    assert problem.range == r(1, MAX_DEPTH, 1, MAX_DEPTH + 1)
    assert data.value is None


@pytest.mark.parametrize("syntax", ["yaml", "json"])
def test_deep_nesting_over_many_lines_and_in_mappings(scanner, syntax):
    """One bracket a line (the scanner no longer reads ahead) and nested mappings."""
    data = load("[\n" * 100_000 + "]" * 100_000, syntax)
    [problem] = data.problems
    assert problem.kind == "too-large" and problem.range.start.line == MAX_DEPTH + 1
    data = load('{"a": ' * 2_000 + "1" + "}" * 2_000, syntax)
    [problem] = data.problems
    assert problem.kind == "too-large" and problem.range.start == Position(1, 6 * MAX_DEPTH)


def test_deep_block_yaml_stops_at_the_depth_budget():
    data = load("".join("  " * i + f"k{i}:\n" for i in range(10_000)), "yaml")
    [problem] = data.problems
    assert problem.kind == "too-large" and problem.range.start.line == MAX_DEPTH + 1


# A DeepSpeed config with a batch size of 5,000 nines: Python's int() (and so json.load and
# yaml.safe_load) refuses integers of over 4,300 digits.
HUGE = "9" * 5_000


@pytest.mark.parametrize("syntax", ["yaml", "json"])
@pytest.mark.parametrize("written, why", [
    (HUGE, "5,000 digits) is not a sane integer"),
    ("9" * 4_000, "4,000 digits) is not a sane integer"),
    (str(2**64), "20 digits) is not a sane integer"),
    ("-" + str(2**63 + 1), "19 digits) is not a sane integer"),
])
def test_integers_no_tool_can_take_are_reported_at_the_value(syntax, written, why):
    text = f'{{"train_micro_batch_size_per_gpu": {written}, "zero_optimization": {{"stage": 2}}}}'
    data = load(text, syntax)
    [problem] = data.problems
    assert problem.kind == "out-of-range" and why in problem.message
    assert problem.range == r(1, 35, 1, 35 + len(written))
    assert ("json.load and yaml.safe_load fail" in problem.message) == (len(written) > 4_300)
    assert len(problem.message) < 300  # the number is abbreviated, not repeated
    # the rest of the file is read; the number stays as written
    assert data.ok and data.get("zero_optimization", "stage") == 2
    assert data.get("train_micro_batch_size_per_gpu") == written


@pytest.mark.parametrize("syntax", ["yaml", "json"])
def test_64_bit_integers_zero_and_negative_zero_are_sane(syntax):
    text = f'{{"seed": {2**64 - 1}, "low": {-2**63}, "zero": -0, "half": -0.0, "pi": 3.14}}'
    data = load(text, syntax)
    assert data.problems == []
    assert data.value == {"seed": 2**64 - 1, "low": -2**63, "zero": 0, "half": -0.0, "pi": 3.14}


def test_a_float_that_overflows_is_reported_not_read_as_infinity():
    text = '{"gradient_clipping": 1e999, "lr": -1E+400, "ok": 1e308}'
    data = load(text, "json")
    assert [(p.kind, p.range.start.column) for p in data.problems] == [
        ("out-of-range", text.index("1e999")), ("out-of-range", text.index("-1E+400"))]
    assert "too large for a 64-bit float" in data.problems[0].message
    assert data.value == {"gradient_clipping": "1e999", "lr": "-1E+400", "ok": 1e308}
    # YAML 1.1 reads `1.0e+999` as a float (the sign is required), `1e999` as a string
    data = load("max_grad_norm: 1.0e+999\nwarmup_ratio: 1e999\n", "yaml")
    [problem] = data.problems
    assert problem.kind == "out-of-range" and problem.range == r(1, 15, 1, 23)
    assert data.value == {"max_grad_norm": "1.0e+999", "warmup_ratio": "1e999"}


def test_nan_and_infinity_as_written_are_values_not_problems():
    """Python's json reads `NaN` and `Infinity`, YAML `.nan` and `.inf`: the tools take them;
    whether the setting may be one is the schema's question."""
    import math

    data = load('{"gradient_clipping": NaN, "lr": -Infinity}', "json")
    assert data.problems == [] and math.isnan(data.value["gradient_clipping"]) and data.value["lr"] == -math.inf
    data = load("max_grad_norm: .nan\nwarmup_ratio: -.inf\n", "yaml")
    assert data.problems == [] and math.isnan(data.value["max_grad_norm"]) and data.value["warmup_ratio"] == -math.inf


def test_numbers_as_keys_stay_text():
    """A key is the text as written (YAML's simple keys end at 1,024 characters)."""
    big = "9" * 1_000
    text = f"1: one\n2.5: half\n{big}: huge\n0x10: hex\nnull: none\n[1, 2]: list\n"
    data = load(text, "yaml")
    assert data.problems == []
    assert list(data.value) == ["1", "2.5", big, "0x10", "null", "[1, 2]"]
    assert data.key_ranges[(big,)] == r(3, 0, 3, 1_000)
    data = load(f'{{"1": 1, "{HUGE}": 2}}', "json")
    assert data.problems == [] and list(data.value) == ["1", HUGE]


def test_recursive_and_undefined_aliases():
    [problem] = load("a: &a [1, *a]\n", "yaml").problems
    assert problem.kind == "syntax" and problem.range == r(1, 10, 1, 12)
    [problem] = load("a: *missing\n", "yaml").problems
    assert problem.kind == "syntax"


# --------------------------------------------------------------------------- agreement with the libraries

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(json_values, st.sampled_from([None, 2, "\t"]))
def test_json_values_match_json_and_every_value_has_a_range(value, indent):
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    data = load(text, "json")
    assert data.ok and data.value == json.loads(text)
    for path, _ in data.items():
        assert path in data.value_ranges, path


@settings(max_examples=150, deadline=None)
@given(json_values, st.booleans())
def test_yaml_values_match_safe_load(value, flow):
    text = yaml.safe_dump(value, default_flow_style=flow, allow_unicode=True)
    data = load(text, "yaml")
    assert data.ok
    expected = yaml.safe_load(text)
    if isinstance(expected, dict):  # keys are the text as written
        expected = {str(k): v for k, v in expected.items()}
    assert data.value == expected


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list('{}[]:,-?&*!|>"\'#\t\n abc1.e%@`~\\') + ["\x00", "é", "\x85"]),
               max_size=80),
       st.sampled_from(["json", "yaml"]))
def test_any_text_loads_without_raising(text, syntax):
    data = load(text, syntax)
    assert data.ok == (not any(p.kind in ("syntax", "too-large", "multiple-documents", "unsupported-tag")
                               for p in data.problems))
    for problem in data.problems:
        assert problem.range.start.line >= 1 and problem.range.start.column >= 0


def test_a_key_holding_a_stand_in_character_keeps_its_range():
    """YAML reads the JSON text with the characters it refuses swapped for private-use stand-ins;
    a key that already holds one (U+F007F stands in for DEL) must come back as written."""
    for value in ({"\U000f007f": None}, {"\U000f007f\x7f": 1, "\x7f": [2]}, {"\U0010007f": {"\U000f0085": 0}}):
        for indent in (None, 2):
            text = json.dumps(value, indent=indent, ensure_ascii=False)
            data = load(text, "json")
            assert data.ok and data.value == value
            assert [path for path, _ in data.items() if path not in data.value_ranges] == [], text
