"""The adapter's pieces without a server: position encodings, editor settings, the settings-file
edit behind "Ignore in this file", suppression-comment actions, debouncing."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from memlint.lsp import actions
from memlint.lsp.convert import position_at_offset, split_lines, to_lsp_diagnostic, to_lsp_range, to_memlint_position
from memlint.lsp.debounce import Debouncer
from memlint.lsp.hover import rule_code_at, rule_page
from memlint.lsp.per_file_ignores import add_ignore, ignore_in_settings
from memlint.lsp.settings import EditorSettings, layer, parse_editor_settings
from memlint.model.diagnostics import Diagnostic, Edit, Fix, Position, Range, Severity
from memlint.project.settings import Settings, discover

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

UTF8, UTF16, UTF32 = (PositionCodec(e) for e in ("utf-8", "utf-16", "utf-32"))
LINE = 'args = TrainingArguments(run_name="🦙 微调", per_device_train_batch_size=16)'


# ----------------------------------------------------------------- positions


@pytest.mark.parametrize("codec, expected", [(UTF16, 71), (UTF8, 77), (UTF32, 70)])
def test_ranges_after_an_emoji_and_cjk_in_each_encoding(codec, expected):
    column = LINE.index("=16") + 1  # code points, memlint's convention
    rng = to_lsp_range(codec, [LINE], Range.of(1, column, 1, column + 2))
    assert rng == types.Range(types.Position(0, expected), types.Position(0, expected + 2))
    # and back: a client position maps to the same code point
    assert to_memlint_position(codec, [LINE], rng.start) == Position(1, column)


def test_lines_split_where_lsp_splits_them():
    text = "a = 1\r\nb = '\x0c'\rc = 2\n"
    assert split_lines(text) == ["a = 1", "b = '\x0c'", "c = 2", ""]
    assert position_at_offset(UTF16, text, text.index("c")) == types.Position(2, 0)
    # a finding past the last line lands at the end of the document, not on a missing line
    assert to_lsp_range(UTF16, ["x = 1"], Range.of(7, 0, 7, 3)).start == types.Position(0, 5)


@given(st.lists(st.sampled_from(["x = 1", "", "    y", "\n", "\r", "\r\n", "\x0c", "\u2028", "é 🦙"]), max_size=12))
def test_lines_of_a_buffer_with_or_without_carriage_returns_split_as_lsp_counts_them(parts):
    """A buffer without ``\r`` is split the fast way: the same lines as LSP's line breaks."""
    text = "".join(parts)
    assert split_lines(text) == re.split(r"\r\n|\r|\n", text)


def test_a_diagnostic_carries_its_fix_in_client_units():
    text = '{"run_name": "🦙", "gradient_checkpointing": false}'
    column = text.index("false")
    fix = Fix("enable gradient checkpointing", (Edit("/p/a.json", Range.of(1, column, 1, column + 5), "true"),))
    diagnostic = Diagnostic("TST901", "off", "/p/a.json", Range.of(1, column, 1, column + 5), Severity.WARNING, fix=fix)
    converted = to_lsp_diagnostic(diagnostic, [text], UTF16, lambda path: None)
    (edit,) = converted.data["fix"]["edits"]
    assert edit["range"]["start"]["character"] == column + 1  # the llama is two UTF-16 units
    assert converted.data["syntax"] == "json" and converted.data["fix"]["safe"] is True
    action = actions.fix_action(converted, {edit["uri"]: 3}, actions.EditSupport(document_changes=True))
    assert action.is_preferred and action.edit.document_changes[0].text_document.version == 3
    # a fix whose other file cannot be read is not offered half-done
    elsewhere = Fix("x", (Edit("/p/other.json", Range.of(1, 0, 1, 1), "y"),))
    other = Diagnostic("TST901", "off", "/p/a.json", Range.of(1, 0, 1, 1), Severity.WARNING, fix=elsewhere)
    assert "fix" not in to_lsp_diagnostic(other, [text], UTF16, lambda path: None).data


# ----------------------------------------------------------------- editor settings


def test_editor_settings_unset_keys_leave_the_files_values():
    file_settings = Settings(gpu="a10g", select=("MEM",), ignore=("MEM002",))
    editor = parse_editor_settings({"enable": True, "gpu": None, "gpus": None, "select": None, "ignore": None,
                                    "run": "onType"})
    assert layer(file_settings, editor) == file_settings
    editor = parse_editor_settings({"memlint": {"gpu": "H100", "gpus": 8.0, "ignore": "mem001, MEM003"}})
    merged = layer(file_settings, editor)
    assert (merged.gpu, merged.gpus, merged.select, merged.ignore) == ("H100", 8, ("MEM",), ("MEM001", "MEM003"))


def test_editor_settings_problems_are_named_and_skipped():
    editor = parse_editor_settings({"gpu": "h100-xxl", "gpus": 0, "run": "always", "enable": "yes", "select": [1]})
    assert editor.gpu is None and editor.gpus is None and editor.run == "onType" and editor.enable
    joined = " ".join(editor.problems)
    for key in ("memlint.gpu", "memlint.gpus", "memlint.run", "memlint.enable", "memlint.select"):
        assert key in joined
    assert parse_editor_settings(None) == EditorSettings()


# ----------------------------------------------------------------- per-file ignores

PYPROJECT = """\
[project]
name = "llama-sft"  # the training repo
dependencies = ["transformers>=4.45", "trl"]

[tool.memlint]
gpu = "a100-80gb"

[tool.ruff]
line-length = 110
"""


def test_per_file_ignore_creates_the_table_and_keeps_the_file():
    new = add_ignore(PYPROJECT, Path("pyproject.toml"), "configs/ds_config.json", "MEM001")
    assert new.startswith(PYPROJECT)
    data = tomllib.loads(new)
    assert data["tool"]["memlint"]["per-file-ignores"] == {"configs/ds_config.json": ["MEM001"]}
    assert data["tool"]["ruff"] == {"line-length": 110}
    # again for another code: added to the same entry; the same code again: nothing to do
    newer = add_ignore(new, Path("pyproject.toml"), "configs/ds_config.json", "MEM002")
    assert tomllib.loads(newer)["tool"]["memlint"]["per-file-ignores"]["configs/ds_config.json"] == ["MEM001", "MEM002"]
    assert add_ignore(newer, Path("pyproject.toml"), "configs/ds_config.json", "MEM001") is None


def test_per_file_ignore_in_an_existing_table_with_neighbours():
    text = PYPROJECT.replace('gpu = "a100-80gb"\n', 'gpu = "a100-80gb"\n\n[tool.memlint.per-file-ignores]\n'
                             '"legacy/*.py" = [\n  "MEM003",  # old scripts\n]\n')
    new = add_ignore(text, Path("pyproject.toml"), "ds.json", "MEM001")
    table = tomllib.loads(new)["tool"]["memlint"]["per-file-ignores"]
    assert table == {"legacy/*.py": ["MEM003"], "ds.json": ["MEM001"]}
    assert "  \"MEM003\",  # old scripts\n" in new and new.index('"ds.json"') < new.index("[tool.ruff]")
    multi = add_ignore(text, Path("pyproject.toml"), "legacy/*.py", "MEM001")
    assert tomllib.loads(multi)["tool"]["memlint"]["per-file-ignores"]["legacy/*.py"] == ["MEM003", "MEM001"]


def test_per_file_ignore_refuses_layouts_it_cannot_edit_safely():
    inline = '[tool.memlint]\nper-file-ignores = { "a.json" = ["MEM002"] }\n'
    assert add_ignore(inline, Path("pyproject.toml"), "b.json", "MEM001") is None
    assert add_ignore("not = [valid", Path("memlint.toml"), "b.json", "MEM001") is None


def test_ignore_in_settings_picks_the_file_in_force(tmp_path: Path):
    config = tmp_path / "configs" / "zero3.json"
    config.parent.mkdir()
    config.write_text("{}")
    # no settings at all: a new memlint.toml at the project root
    edit = ignore_in_settings(None, tmp_path, config, "MEM001", lambda p: None)
    assert edit.created and edit.path == tmp_path / "memlint.toml"
    assert edit.new_text == '[per-file-ignores]\n"configs/zero3.json" = ["MEM001"]\n'
    edit.path.write_text(edit.new_text)
    settings = discover(tmp_path)
    assert settings.ignored_in_file("MEM001", config) and not settings.ignored_in_file("MEM002", config)
    # a pyproject.toml without [tool.memlint] gets the table (and becomes the settings file)
    edit.path.unlink()
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    edit = ignore_in_settings(None, tmp_path, config, "MEM001", lambda p: None)
    assert not edit.created and edit.path.name == "pyproject.toml"
    edit.path.write_text(edit.new_text)
    assert discover(config).ignored_in_file("MEM001", config)
    # the open buffer of the settings file is what gets edited, not the disk
    buffer = '[project]\nname = "x"  # unsaved\n'
    edit = ignore_in_settings(None, tmp_path, config, "MEM002", lambda p: buffer)
    assert edit.new_text.startswith(buffer)
    # a file outside the project cannot be named by a pattern
    assert ignore_in_settings(None, tmp_path / "configs", tmp_path / "other.json", "MEM001", lambda p: None) is None


# ----------------------------------------------------------------- suppression comments


def _diagnostic(line: int, syntax: str, code: str = "MEM001") -> types.Diagnostic:
    rng = types.Range(types.Position(line, 0), types.Position(line, 1))
    return types.Diagnostic(range=rng, message="m", code=code, source="memlint", data={"syntax": syntax})


def test_ignore_line_is_not_offered_inside_strings_or_block_scalars():
    script = 'model = load("x")\nPROMPT = """first\nsecond"""\n'
    ok = actions.ignore_line_action(_diagnostic(0, "python"), "file:///t.py", script, 1, UTF16, actions.EditSupport())
    assert ok.edit.changes["file:///t.py"][0].new_text == 'model = load("x")  # memlint: ignore[MEM001]'
    assert actions.ignore_line_action(_diagnostic(1, "python"), "file:///t.py", script, 1, UTF16,
                                      actions.EditSupport()) is None
    config = "system_prompt: |\n  You are helpful.\nmicro_batch_size: 8\n"
    assert actions.ignore_line_action(_diagnostic(1, "yaml"), "file:///a.yaml", config, 1, UTF16,
                                      actions.EditSupport()) is None
    merged = actions.ignore_line_action(_diagnostic(2, "yaml", "MEM002"), "file:///a.yaml",
                                        "a: 1\nb: 2\nmicro_batch_size: 8  # memlint: ignore[MEM001]\n", 1, UTF16,
                                        actions.EditSupport())
    assert merged.edit.changes["file:///a.yaml"][0].new_text == "micro_batch_size: 8  # memlint: ignore[MEM001, MEM002]"


def test_rule_hover_finds_the_code_under_the_cursor():
    line = "trainer.train()  # memlint: ignore[MEM002, MEM001]"
    assert rule_code_at(line, line.index("MEM001") + 3) == ("MEM001", line.index("MEM001"), line.index("MEM001") + 6)
    assert rule_code_at(line, 3) is None
    page = rule_page("MEM001")
    assert "**Why it matters**" in page and "``" not in page
    assert "selects" in rule_page("MEM") and rule_page("XYZ") is None


# ----------------------------------------------------------------- debouncing


def _recording_job(done: list[tuple[int, float]], n: int):
    async def work() -> None:
        done.append((n, asyncio.get_running_loop().time()))
    return work


def test_a_burst_of_edits_is_linted_once_after_its_last_edit():
    async def scenario() -> list[int]:
        done: list[tuple[int, float]] = []
        debouncer = Debouncer(0.02)
        for n in range(50):
            debouncer.schedule("file:///args.yaml", _recording_job(done, n))
        debouncer.schedule("file:///other.yaml", _recording_job(done, 100))  # not delayed by the burst
        await asyncio.sleep(0.2)
        return [n for n, _ in done]

    # the leading job of the burst was still pending when the second edit came: cancelled
    assert sorted(asyncio.run(scenario())) == [49, 100]


def test_an_isolated_edit_runs_at_once_and_a_quick_second_one_waits_out_the_delay():
    async def scenario() -> tuple[list[tuple[int, float]], float, float]:
        loop = asyncio.get_running_loop()
        done: list[tuple[int, float]] = []
        debouncer = Debouncer(0.2)
        start = loop.time()
        await debouncer.schedule("file:///train.py", _recording_job(done, 1))  # typed after a pause
        first_done = loop.time()
        # the next keystroke comes 0.2 s later at most: part of a burst, so it waits
        second = debouncer.schedule("file:///train.py", _recording_job(done, 2))
        assert debouncer.pending("file:///train.py")
        await second
        await asyncio.sleep(0.25)  # a pause longer than the delay: the next edit is isolated again
        third_scheduled = loop.time()
        await debouncer.schedule("file:///train.py", _recording_job(done, 3))
        return [(n, t - start) for n, t in done], first_done - start, third_scheduled - start

    done, first_done, third_scheduled = asyncio.run(scenario())
    assert [n for n, _ in done] == [1, 2, 3]
    assert done[0][1] < 0.1, "an isolated edit waited for the debounce timer"
    assert done[1][1] - first_done >= 0.2, "an edit within the delay of the last one ran before the delay"
    assert done[2][1] - third_scheduled < 0.1, "an edit after a quiet spell waited for the timer"


def test_an_explicit_delay_is_waited_out_and_a_closed_document_starts_afresh():
    async def scenario() -> list[float]:
        loop = asyncio.get_running_loop()
        done: list[tuple[int, float]] = []
        debouncer = Debouncer(0.2)
        start = loop.time()
        await debouncer.schedule("file:///ds.json", _recording_job(done, 1), delay=0.05)
        debouncer.forget("file:///ds.json")  # closed, then opened again and edited at once
        await debouncer.schedule("file:///ds.json", _recording_job(done, 2))
        return [t - start for _, t in done]

    waited, reopened = asyncio.run(scenario())
    assert waited >= 0.05
    assert reopened - waited < 0.1, "a reopened document's first edit waited for the timer"


# ----------------------------------------------------------------- hover targets in Python

SCRIPT = '''\
from transformers import TrainingArguments as TA, Trainer

def build(model, data):
    args = TA(
        output_dir="out",
        per_device_train_batch_size=8,  # 🦙
        gradient_checkpointing=True,
    )
    return Trainer(model=model, args=args, train_dataset=data)
'''


def _run_with_facts(path: str, fact_ranges: dict[str, Range], anchor: Range):
    from dataclasses import dataclass as _dataclass

    from memlint.facts.plan import TrainingPlan
    from memlint.facts.resolve import ResolvedRun
    from memlint.model.provenance import Location, Sourced

    facts = {name: Sourced(1, Location(path, rng), name) for name, rng in fact_ranges.items()}
    plan = TrainingPlan(entry=path, anchor=Location(path, anchor), facts=facts, documents=(path,))

    @_dataclass
    class Estimate:  # the shape session.RunEstimate has, without estimating
        run: ResolvedRun

    return Estimate(ResolvedRun(plan=plan, arch=None, setup=None, problem="unit test"))


def test_python_hover_target_is_the_innermost_run_call_through_aliases():
    from memlint.documents.parsed import parse_document
    from memlint.documents.reading import document_from_text
    from memlint.lsp.convert import same_file
    from memlint.lsp.hover import runs_at, target_at

    parsed = parse_document(document_from_text("/p/train.py", SCRIPT))
    on_batch = Position(6, SCRIPT.splitlines()[5].index("8"))
    target = target_at(parsed, on_batch)
    assert target is not None and (target.range.start.line, target.range.end.line) == (4, 8)  # the TA(...) call
    assert target_at(parsed, Position(9, 12)).range.start.line == 9  # Trainer(...)
    assert target_at(parsed, Position(3, 4)) is None  # `def build`: no run call here

    in_args = _run_with_facts("/p/train.py", {"micro_batch": Range.of(6, 36, 6, 37)}, Range.of(9, 11, 9, 70))
    other = _run_with_facts("/p/train.py", {"micro_batch": Range.of(20, 0, 20, 1)}, Range.of(20, 0, 20, 5))
    assert runs_at([other, in_args], "/p/train.py", target, same_file) == [in_args]
    # nothing inside the call: every run of the file is shown
    unrelated = target_at(parsed, Position(9, 12))
    assert runs_at([other], "/p/train.py", unrelated, same_file) == [other]


def test_lsp_without_its_extra_exits_2_and_says_what_to_install():
    import subprocess

    code = ("import sys; sys.modules['pygls'] = None; sys.modules['lsprotocol'] = None\n"
            "from memlint.cli.main import main; raise SystemExit(main(['lsp']))")
    env = {**__import__("os").environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 2
    assert "pip install 'memlint[lsp]'" in run.stderr
    assert run.stdout == ""
