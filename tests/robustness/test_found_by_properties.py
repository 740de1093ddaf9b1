"""Regression tests for what the property tests found, each with the input they shrank to.

Line breaks were the common cause: memlint's positions count lines the way libcst and the
Language Server Protocol do (``\\n``, ``\\r\\n``, ``\\r``), but several places counted with
``str.splitlines`` (which also breaks at ``\\f``, ``\\x1c``, ``\\x85``, ``\\u2028`` ...), with
``\\n`` only (``json``, the shell reader), or with YAML's rules (NEL, LS, PS are breaks).
"""

from __future__ import annotations

import json
from pathlib import Path

from robustness_checks import assert_sound, check_tree, document_lines, write_tree

from memlint.check.run import lint
from memlint.documents.structured import load
from memlint.lint.apply_fixes import apply_edits
from memlint.model.diagnostics import Edit, Position, Range
from memlint.project.settings import Settings


def r(line: int, column: int, end_line: int, end_column: int) -> Range:
    return Range(Position(line, column), Position(end_line, end_column))


def lint_tree(tree: Path, files: dict[str, str]):
    write_tree(tree, {"memlint.toml": 'gpu = "a100-80gb"\n', **files})
    return lint([tree], Settings(root=tree, gpu="a100-80gb"))


def test_json_error_after_a_raw_carriage_return_is_on_the_editors_line(tmp_path: Path):
    # shrunk from a mutated tests/real_runs DeepSpeed config: json counts lines at \n only
    text = '{\n  "zero_optimization": {\n    "overl\rap_comm": true\n  }\n}\n'
    [problem] = load(text, "json").problems
    assert problem.message == "invalid JSON: Invalid control character"  # not "... character at"
    assert problem.range == r(3, 10, 3, 10)  # the end of `    "overl`, where the \r breaks the line
    result = lint_tree(tmp_path, {"ds_config.json": text})
    [syntax] = [d for d in result.diagnostics if d.code == "CFG006"]
    assert syntax.range.start.line == 3


def test_yaml_positions_count_editor_lines_not_yamls():
    # YAML breaks lines at NEL (\x85), LS (\u2028) and PS (\u2029); editors do not
    data = load('note: "a\u2028b"\nbf16: true\n', "yaml")
    assert data.value == {"note": "a\u2028b", "bf16": True}
    assert data.range_of(("bf16",)) == r(2, 6, 2, 10)
    assert data.range_of(("note",)) == r(1, 6, 1, 11)
    data = load("plain: x\x85bf16: 1\n", "yaml")  # a NEL ends the plain scalar, for YAML
    assert data.range_of(("bf16",)) == r(1, 15, 1, 16)


def test_one_character_problem_at_the_end_of_a_file_stays_inside_it():
    [problem] = load("bf16: [true, false\n", "yaml").problems
    assert problem.range == r(2, 0, 2, 0)


def test_python_syntax_error_past_the_end_of_the_line_stays_inside_it(tmp_path: Path):
    # shrunk from a mutated examples/custom-loop-gpt2-v100/data.py: CPython puts a bad
    # unindent one column past the line's end
    script = "import torch\ndef f():\n        x = 1\n    y = 2\n"
    result = lint_tree(tmp_path, {"train.py": script})
    [syntax] = [d for d in result.diagnostics if d.code == "SYN001"]
    assert syntax.message.endswith("unindent does not match any outer indentation level")
    assert syntax.range == r(4, 9, 4, 9)


def test_launcher_positions_after_a_lone_carriage_return(tmp_path: Path):
    # shrunk from a mutated tests/real_runs/dschat387-* run.sh: a stray \r in a comment
    script = "#!/bin/bash\n# modifi\red run\ndeepspeed --num_gpus 1 main.py --per_device_train_batch_size 8\n"
    # main.py trains (an engine step), so the launch is a run memlint judges (a launcher whose
    # script trains nothing gets no memory verdict)
    main = ("import argparse\nimport deepspeed\nfrom transformers import AutoModelForCausalLM\n\n"
            "parser = argparse.ArgumentParser()\nparser.add_argument('--per_device_train_batch_size', type=int)\n"
            "args = parser.parse_args()\n"
            "model = AutoModelForCausalLM.from_pretrained('meta-llama/Llama-3.1-8B')\n"
            "engine, _, loader, _ = deepspeed.initialize(model=model, config={'train_micro_batch_size_per_gpu': "
            "args.per_device_train_batch_size})\n"
            "for batch in loader:\n    loss = engine(**batch).loss\n    engine.backward(loss)\n    engine.step()\n")
    result = lint_tree(tmp_path, {"run.sh": script, "main.py": main, "memlint.toml": 'gpu = "a10g"\n'})
    found = [d for d in result.diagnostics if d.path.endswith("run.sh")]
    assert found, "the launcher is reported"
    lines = document_lines(tmp_path / "run.sh")
    for d in found:
        assert lines[d.range.start.line - 1].startswith("deepspeed"), (d.range, lines)


def test_a_yaml_key_with_a_line_break_stays_on_one_line_of_output(tmp_path: Path):
    # shrunk from a generated Axolotl config: `? "a\nb"` is a key, quoted in the message
    config = 'base_model: Qwen/Qwen2.5-0.5B\nsequence_len: 2048\n"batch\\nsize\\x1b[2J": 4\n'
    write_tree(tmp_path, {"memlint.toml": 'gpu = "a10g"\n', "qlora.yml": config})
    outcome = check_tree(tmp_path, output_format="concise")
    assert_sound(outcome)
    [unknown] = [line for line in outcome.stdout.splitlines() if "CFG001" in line]
    assert "`batch\\nsize\\x1b[2J`" in unknown
    assert [d.message for d in outcome.diagnostics if d.code == "CFG001"][0].count("\n") == 1


def test_fix_edits_land_on_libcst_lines_after_a_form_feed():
    # a form feed (page break) in a comment: str.splitlines breaks there, libcst does not
    text = "import torch\n# section\x0cbreak\nloss.backward()\n"
    edit = Edit("train.py", r(3, 0, 3, 4), "(loss / 8)")
    assert apply_edits(text, [edit]) == "import torch\n# section\x0cbreak\n(loss / 8).backward()\n"


def test_inserted_lines_take_the_files_line_endings():
    text = "import torch\r\nclip(model)\r\n"
    edit = Edit("train.py", r(2, 0, 2, 0), "scaler.unscale_(optimizer)\n")
    assert apply_edits(text, [edit]) == "import torch\r\nscaler.unscale_(optimizer)\r\nclip(model)\r\n"


def test_explicitly_tagged_values_their_constructor_cannot_read_do_not_crash():
    # found through a generated config with `!!float` written before an empty value; PyYAML's
    # constructors raise IndexError, KeyError or AttributeError on these (yaml.safe_load too)
    for text, raw in (('a: !!float ""', ""), ('a: !!int ""', ""), ("a: !!bool x", "x"), ("a: !!timestamp x", "x"),
                      ("a: !!float", "")):
        data = load(text, "yaml")
        assert data.value == {"a": raw}, text


def test_nonlocal_at_module_level_is_a_syntax_error_not_an_internal_error(tmp_path: Path):
    # from a generated script: ast.parse and libcst accept it, CPython's compiler refuses it,
    # and libcst's scope analysis raised NotImplementedError inside TRN006 (an internal error)
    script = "import torch\n\nfor batch in loader:\n    nonlocal model\n    loss = model(**batch).loss\n"
    result = lint_tree(tmp_path, {"train.py": script})
    assert not result.internal_errors
    [syntax] = [d for d in result.diagnostics if d.code == "SYN001"]
    assert "nonlocal declaration not allowed at module level" in syntax.message
    assert syntax.range == r(4, 4, 4, 18)


def test_settings_are_discovered_afresh_when_the_working_directory_changes(tmp_path: Path):
    # found while checking fixes: `memlint check .` run in-process in one project, then in
    # another, kept the first project's settings (the discovery cache was keyed by ".")
    first, second = tmp_path / "first", tmp_path / "second"
    config = '{"train_batch_size": 128, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 4}'
    write_tree(first, {"memlint.toml": 'gpu = "a10g"\n', "ds_config.json": config})
    write_tree(second, {"memlint.toml": 'gpu = "a10g"\ngpus = 4\n', "ds_config.json": config})
    # (each project's unused config also carries the project's one MEM003 note: no model to estimate with)
    assert [d.code for d in check_tree(first).diagnostics if d.code != "MEM003"] == []  # 8 GPUs would do
    assert [d.code for d in check_tree(second).diagnostics if d.code != "MEM003"] == ["CFG010"]  # 4 × 4 × 4 ≠ 128


def test_sarif_uris_are_percent_encoded(tmp_path: Path):
    # the SARIF validator of the property tests: a path with a space, a percent sign or an
    # accent was written into artifactLocation.uri as is, which is not a URI reference
    config = '{"zero_optimization": {"stage": 7}}'
    write_tree(tmp_path, {"memlint.toml": 'gpu = "a10g"\n', "run configs/données 100%.json": config})
    outcome = check_tree(tmp_path, output_format="sarif")
    assert_sound(outcome)
    # the invalid stage; the config's note that nothing uses it (MEM003) sits on the same file
    [result] = [r for r in json.loads(outcome.stdout)["runs"][0]["results"] if r["ruleId"] == "CFG002"]
    location = result["locations"][0]["physicalLocation"]["artifactLocation"]
    assert location == {"uri": "run%20configs/donn%C3%A9es%20100%25.json", "uriBaseId": "%SRCROOT%"}


def test_a_mapping_where_a_config_names_a_kernel_or_a_module_is_a_schema_error_not_a_crash(tmp_path: Path, capsys):
    # found by test_generated_projects: a LLaMA-Factory `flash_attn` (and a torchtune LoRA module
    # list entry) written as a mapping reached a dictionary lookup as a key
    result = lint_tree(tmp_path, {
        "sft.yaml": "model_name_or_path: Qwen/Qwen2.5-0.5B\nstage: sft\ndo_train: true\n"
                    "finetuning_type: lora\nflash_attn: {fa2: true}\n",
        "lora.yaml": "model:\n  _component_: torchtune.models.llama3_2.lora_llama3_2_1b\n"
                     "  lora_attn_modules: [{q_proj: true}, v_proj]\nbatch_size: 2\n",
    })
    assert "internal error" not in capsys.readouterr().err
    assert [d.code for d in result.diagnostics if Path(str(d.path)).name == "sft.yaml"].count("CFG002") == 1
