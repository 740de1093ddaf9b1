"""Whatever one document makes memlint raise stays with that document, in every stage.

Each test injects a failure into one stage — reading, facts, estimate, rules, output, fix —
for one file of a realistic project (the "victim", marked by a comment), and checks what a
user sees: the victim gets one SYN002 saying memlint failed on it and asking for a report,
every other file gets exactly the findings it gets without the failure, and the exit code is
the findings' (1 here; never 2, which is for usage errors). ``memlint check`` runs in this
process (so the injected failure is in place), on one process and on two worker processes
(forked: they inherit the failure).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import memlint.check.fix_loop
import memlint.check.run
import memlint.documents.structured
import memlint.facts.extract
import memlint.lint.context
import memlint.output.json_format
from memlint.cli.errors import EXIT_FINDINGS, EXIT_OK
from memlint.cli.main import main
from memlint.rules.mem001_out_of_memory import OutOfMemory

MARK = "# memlint-test: fail here"

AMP_SCRIPT = """\
import torch
{mark}

model = build_model().cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
scaler = torch.cuda.amp.GradScaler()

for x, y in loader:
    with torch.cuda.amp.autocast(dtype=torch.float16):
        loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
"""

PROJECT = {
    # a TRL run that does not fit an A10G (MEM001)
    "args.yaml": "model_name_or_path: meta-llama/Llama-3.1-8B\nper_device_train_batch_size: 8\n"
                 "max_length: 4096\nbf16: true\noutput_dir: out\n",
    # a DeepSpeed config with a ZeRO stage that does not exist (CFG002); nothing uses it, so it
    # carries the project's one note on unused configs (MEM003)
    "ds_config.json": '{\n  "train_micro_batch_size_per_gpu": 2,\n  "zero_optimization": {"stage": 4}\n}\n',
    # a hand-written AMP loop with the deprecated torch.cuda.amp spellings (AMP004, fixable)
    "train_amp.py": AMP_SCRIPT.format(mark=""),
    # the victim: another TRL run (MEM001 too), and another AMP loop
    "victim.yaml": f"{MARK}\nmodel_name_or_path: Qwen/Qwen2.5-7B\nper_device_train_batch_size: 7\n"
                   "max_length: 4096\nbf16: true\noutput_dir: out\n",
    "victim_amp.py": AMP_SCRIPT.format(mark=MARK),
}
VICTIMS = ("victim.yaml", "victim_amp.py")


def _write(root: Path) -> Path:
    for name, text in PROJECT.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def _check(root: Path, capsys, *extra: str) -> tuple[int, dict[str, list[dict]]]:
    """Exit code and findings by file name; what was said on stderr is kept in ``_check.err``."""
    code = main(["check", "--format", "json", "--gpu", "a10g", "--no-cache", *extra, str(root)])
    out, _check.err = capsys.readouterr()
    by_file: dict[str, list[dict]] = {}
    for finding in json.loads(out):
        name = Path(finding.pop("filename")).name  # each test has its own directory
        by_file.setdefault(name, []).append(finding)
    return code, by_file


def _failed(findings: list[dict], stage: str) -> list[dict]:
    return [f for f in findings if f["code"] == "SYN002" and f"memlint failed on this file while {stage}" in f["message"]]


@pytest.fixture(params=[1, 2], ids=["one-process", "workers"])
def jobs(request, monkeypatch) -> str:
    if request.param > 1:
        monkeypatch.setattr(memlint.check.run, "PARALLEL_MIN_FILES", 1)  # workers even for five files
    return str(request.param)


@pytest.fixture
def baseline(tmp_path_factory, capsys) -> dict[str, list[dict]]:
    """The project's findings when nothing fails."""
    code, found = _check(_write(tmp_path_factory.mktemp("baseline")), capsys, "--jobs", "1")
    assert code == EXIT_FINDINGS
    assert {f["code"] for f in found["args.yaml"]} == {"MEM001"}
    assert {f["code"] for f in found["ds_config.json"]} == {"CFG002", "MEM003"}
    assert {f["code"] for f in found["train_amp.py"]} == {"AMP004"}
    return found


def _raise(*_args, **_kwargs):
    raise RuntimeError("injected failure")


def inject_parse(monkeypatch) -> None:
    original = memlint.documents.structured.load

    def load(text: str, syntax: str):
        return _raise() if MARK in text else original(text, syntax)

    monkeypatch.setattr(memlint.documents.structured, "load", load)


def inject_facts(monkeypatch) -> None:
    original = memlint.facts.extract.extract

    def extract(parsed):
        return _raise() if MARK in parsed.text else original(parsed)

    monkeypatch.setattr(memlint.facts.extract, "extract", extract)


def inject_estimate(monkeypatch) -> None:
    original = memlint.lint.context.estimate_training

    def estimate_training(arch, setup, capacity):
        return _raise() if "qwen" in arch.name.lower() else original(arch, setup, capacity)

    memlint.lint.context._cached_budget.cache_clear()
    memlint.lint.context._cached_suggestions.cache_clear()
    monkeypatch.setattr(memlint.lint.context, "estimate_training", estimate_training)


def inject_rule(monkeypatch) -> None:
    original = OutOfMemory.check

    def check(self, ctx):
        if MARK in ctx.parsed.text:
            _raise()
        yield from original(self, ctx)

    monkeypatch.setattr(OutOfMemory, "check", check)


STAGES = {
    "parse": (inject_parse, "reading it", ("victim.yaml",)),
    "facts": (inject_facts, "extracting its facts", VICTIMS),
    "estimate": (inject_estimate, "running rule MEM001, running rule MEM002", ("victim.yaml",)),
    "rules": (inject_rule, "running rule MEM001", ("victim.yaml",)),
}


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_a_failure_costs_one_document_its_findings_not_the_run(stage, jobs, baseline, tmp_path, monkeypatch, capsys):
    inject, said, victims = STAGES[stage]
    inject(monkeypatch)
    try:
        code, found = _check(_write(tmp_path), capsys, "--jobs", jobs)
    finally:
        memlint.lint.context._cached_budget.cache_clear()
    assert code == EXIT_FINDINGS
    for name in baseline:
        if name in victims:
            [failure] = _failed(found[name], said)
            assert "please report it" in failure["message"] and "RuntimeError: injected failure" in failure["message"]
            assert failure["location"] == {"row": 1, "column": 1}
        else:
            assert found.get(name) == baseline[name], name
    assert "Traceback" not in _check.err
    if jobs == "1":  # (a forked worker's stderr is its own copy of pytest's capture)
        assert "internal error" in _check.err


def test_a_failure_while_writing_the_report_costs_that_file_only(baseline, tmp_path, monkeypatch, capsys):
    original = memlint.output.json_format.format_json

    def format_json(diagnostics, ctx):
        if any("victim.yaml" in d.path and d.code != "SYN002" for d in diagnostics):
            _raise()
        return original(diagnostics, ctx)

    monkeypatch.setattr(memlint.output.json_format, "format_json", format_json)
    code, found = _check(_write(tmp_path), capsys, "--jobs", "1")
    assert code == EXIT_FINDINGS
    [failure] = found["victim.yaml"]
    assert _failed([failure], "writing its findings")
    assert {name: found[name] for name in found if name != "victim.yaml"} == {
        name: baseline[name] for name in baseline if name != "victim.yaml"}


def test_a_failure_while_fixing_leaves_that_file_alone_and_fixes_the_others(tmp_path, monkeypatch, capsys):
    original = memlint.check.fix_loop.apply_edits

    def apply_edits(text, edits):
        return _raise() if MARK in text else original(text, edits)

    monkeypatch.setattr(memlint.check.fix_loop, "apply_edits", apply_edits)
    root = _write(tmp_path)
    code, found = _check(root, capsys, "--fix", "--jobs", "1")
    assert code == EXIT_FINDINGS
    assert "torch.amp.GradScaler(\"cuda\")" in (root / "train_amp.py").read_text()  # fixed
    assert "train_amp.py" not in found
    assert (root / "victim_amp.py").read_text() == PROJECT["victim_amp.py"]  # left alone
    assert _failed(found["victim_amp.py"], "applying fixes to it")
    assert {f["code"] for f in found["victim_amp.py"]} == {"SYN002", "AMP004"}
    assert {f["code"] for f in found["ds_config.json"]} == {"CFG002", "MEM003"}


def test_the_exit_code_is_the_findings_a_failure_is_a_warning(tmp_path, monkeypatch, capsys):
    """A clean project with one file memlint fails on: the failure is a warning finding
    (exit 1 by default, 0 with --fail-on error), never a usage error (2)."""
    (tmp_path / "train_amp.py").write_text(AMP_SCRIPT.format(mark=MARK).replace("torch.cuda.amp.", "torch.amp."))
    inject_facts(monkeypatch)
    code, found = _check(tmp_path, capsys, "--jobs", "1")
    assert code == EXIT_FINDINGS and [f["code"] for f in found["train_amp.py"]] == ["SYN002"]
    code, _ = _check(tmp_path, capsys, "--jobs", "1", "--fail-on", "error")
    assert code == EXIT_OK
    code, found = _check(tmp_path, capsys, "--jobs", "1", "--ignore", "SYN002")
    assert code == EXIT_OK and found == {}


# ----------------------------------------------------------------------------- language server


@pytest.mark.parametrize("stage", ["parse", "facts", "rules"])
def test_the_language_server_reports_a_failure_on_the_document_and_lints_the_others(stage, tmp_path, monkeypatch):
    from memlint.lsp.session import Session

    inject, said, victims = STAGES[stage]
    root = _write(tmp_path)
    (root / "memlint.toml").write_text('gpu = "a10g"\n')
    inject(monkeypatch)
    session = Session([root])
    for name in ("victim.yaml", "args.yaml", "ds_config.json"):
        session.set_text(root / name, PROJECT[name])
    outcome = session.lint(root / "victim.yaml")
    [failure] = [d for d in outcome.diagnostics if d.code == "SYN002"]
    assert f"while {said}" in failure.message and outcome.internal_errors
    assert [d.code for d in session.lint(root / "args.yaml").diagnostics] == ["MEM001"]
    assert [d.code for d in session.lint(root / "ds_config.json").diagnostics] == ["MEM003", "CFG002"]
    session.estimates(root / "victim.yaml")  # hover and hints: nothing, not an exception
