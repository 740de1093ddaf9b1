"""A corpus of hostile files: each gets a clear diagnostic or message, and the rest of the run
is unaffected; nothing outside what was asked is read, except the configs a run references."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memlint.check.run import lint
from memlint.project.settings import Settings

GOOD_ARGS = (
    "model_name_or_path: meta-llama/Llama-3.1-8B\nper_device_train_batch_size: 8\n"
    "max_length: 4096\nbf16: true\noutput_dir: out\n"
)


def run(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "memlint", "check", "--format", "json", "--gpu", "a10g", *extra, str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project whose one good config must always be reported, whatever sits beside it."""
    (tmp_path / "args.yaml").write_text(GOOD_ARGS)
    return tmp_path


def codes_by_file(result: subprocess.CompletedProcess) -> dict[str, set[str]]:
    assert result.returncode in (0, 1), result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    out: dict[str, set[str]] = {}
    for d in json.loads(result.stdout):
        out.setdefault(Path(d["filename"]).name, set()).add(d["code"])
    return out


def test_invalid_utf8_nul_bytes_and_binary_named_py(project: Path):
    (project / "latin1.yaml").write_bytes("base_model: caf\xe9\n".encode("latin-1"))
    (project / "nul.json").write_bytes(b'{"zero_optimization": {"stage": 2}}\x00\x00')
    (project / "model.py").write_bytes(bytes(range(256)) * 64)  # a binary checkpoint named .py
    found = codes_by_file(run(project))
    assert found["args.yaml"] == {"MEM001"}
    assert "SYN002" in found["latin1.yaml"]
    assert "SYN002" in found["nul.json"]
    assert "SYN002" in found["model.py"]


def test_huge_file_is_refused_quickly(project: Path):
    big = project / "huge.json"
    with big.open("w") as handle:
        handle.write('{"zero_optimization": {"stage": 3}, "pad": "')
        handle.write("x" * (20 * 1024 * 1024))
        handle.write('"}')
    started = time.perf_counter()
    found = codes_by_file(run(project))
    assert time.perf_counter() - started < 60
    assert "SYN002" in found["huge.json"]
    assert found["args.yaml"] == {"MEM001"}


def test_deep_nesting(project: Path):
    (project / "deep.json").write_text("[" * 10_000 + "]" * 10_000)
    (project / "deep.yaml").write_text("a:\n" + "".join("  " * i + "b:\n" for i in range(1, 3000)))
    (project / "deep.py").write_text("import torch\nx = " + "(" * 5000 + "1" + ")" * 5000 + "\n")
    found = codes_by_file(run(project))
    assert found["args.yaml"] == {"MEM001"}


def test_yaml_alias_bomb(project: Path):
    bomb = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, 12):
        prev = chr(ord("a") + i - 1)
        cur = chr(ord("a") + i)
        bomb.append(f"{cur}: &{cur} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]")
    (project / "bomb.yaml").write_text("\n".join(bomb) + "\n")
    started = time.perf_counter()
    found = codes_by_file(run(project))
    assert time.perf_counter() - started < 60
    assert found["args.yaml"] == {"MEM001"}


@pytest.mark.skipif(os.name != "posix", reason="symlinks and FIFOs")
def test_symlink_loops_dev_zero_and_fifo(project: Path):
    (project / "loop_a").symlink_to(project / "loop_b")
    (project / "loop_b").symlink_to(project / "loop_a")
    (project / "zero.json").symlink_to("/dev/zero")
    os.mkfifo(project / "pipe.yaml")
    sub = project / "sub"
    sub.mkdir()
    (sub / "up").symlink_to(project, target_is_directory=True)  # a directory loop
    started = time.perf_counter()
    found = codes_by_file(run(project))
    assert time.perf_counter() - started < 60
    assert found["args.yaml"] == {"MEM001"}  # reported once, the loop walked once
    assert "SYN002" in found.get("zero.json", set())
    assert "SYN002" in found.get("pipe.yaml", set())


def test_a_gitignore_line_git_cannot_use_is_left_out(project: Path):
    # a trailing backslash (a Windows habit) is no pattern git can use; pathspec 1.x refuses it
    (project / ".gitignore").write_text("tmp\\\noutputs/\n")
    outputs = project / "outputs"
    outputs.mkdir()
    (outputs / "args.yaml").write_text(GOOD_ARGS)
    found = codes_by_file(run(project))
    assert found["args.yaml"] == {"MEM001"}
    assert "outputs/args.yaml" not in found  # the usable patterns still apply


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads everything")
def test_unreadable_file(project: Path):
    secret = project / "ds_config.json"
    secret.write_text('{"zero_optimization": {"stage": 2}}')
    secret.chmod(0)
    try:
        found = codes_by_file(run(project))
    finally:
        secret.chmod(stat.S_IRUSR | stat.S_IWUSR)
    assert "SYN002" in found["ds_config.json"]


def test_not_python_named_py_and_syntax_error(project: Path):
    (project / "notes.py").write_text("import torch\nThis is a README, not Python: it has {braces and 'quotes.\n")
    found = codes_by_file(run(project))
    assert found["notes.py"] == {"SYN001"}
    assert found["args.yaml"] == {"MEM001"}


def test_syntax_newer_than_the_interpreter_is_no_syntax_error(project: Path):
    # lerobot requires Python 3.12 and writes PEP 695 aliases and generics; memlint may run on 3.11,
    # whose parser refuses them while libcst reads them
    (project / "pipeline.py").write_text(
        "from typing import Any\n\nimport torch\n\ntype FeatureDict = dict[str, dict[str, Any]]\n\n\n"
        "class Backtrackable[T]:\n    def __init__(self, items: list[T]) -> None:\n        self.items = items\n\n\n"
        "def step(model: torch.nn.Module, optimizer, batch: FeatureDict) -> float:\n"
        "    loss = model(**batch).loss\n    loss.backward()\n    optimizer.step()\n    optimizer.zero_grad()\n"
        "    return loss.item()\n")
    (project / "broken.py").write_text("import torch\n\ndef f():\n    return torch.randint(,3)\n")
    # a Python 3.12 f-string (PEP 701) may hold a backslash: NJUxlj/Travel-Agent's src/ui/mindmap.py
    (project / "mindmap.py").write_text(
        "import logging\n\nimport torch\n\nlogger = logging.getLogger(__name__)\n\n\n"
        "def finish(content: str) -> str:\n    content = content.strip()\n"
        "    logger.info(f\"mind map done, {content.count('\\n') + 1} lines\")\n    return content\n")
    (project / "unclosed.py").write_text("import torch\n\nprint(f\"{torch.__version__\")\n")
    found = codes_by_file(run(project))
    assert "pipeline.py" not in found
    assert "mindmap.py" not in found
    assert found["broken.py"] == {"SYN001"}
    assert found["unclosed.py"] == {"SYN001"}  # an f-string no release parses


def test_referenced_config_outside_the_project_is_read_but_nothing_else(tmp_path: Path):
    outside = tmp_path / "shared"
    outside.mkdir()
    (outside / "ds_zero2.json").write_text('{"zero_optimization": {"stage": 2}, "bf16": {"enabled": true}}')
    (outside / "unrelated.json").write_text("{ not json")
    project = tmp_path / "project"
    project.mkdir()
    (project / "memlint.toml").write_text('gpu = "h100"\n')
    (project / "args.yaml").write_text(GOOD_ARGS + "deepspeed: ../shared/ds_zero2.json\n")
    result = lint([project], Settings(root=project, gpu="h100"))
    files = {Path(f).name for f in result.files}
    assert "unrelated.json" not in files  # never asked for, never read
    assert not result.internal_errors


def test_malformed_settings_file_is_a_usage_error(tmp_path: Path):
    (tmp_path / "memlint.toml").write_text('gpu = "a100\n')
    (tmp_path / "args.yaml").write_text(GOOD_ARGS)
    result = subprocess.run([sys.executable, "-m", "memlint", "check", str(tmp_path)],
                            capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert result.returncode == 2
    assert "memlint.toml" in result.stderr and "Traceback" not in result.stderr


def test_empty_file_list_exits_zero(tmp_path: Path):
    result = subprocess.run([sys.executable, "-m", "memlint", "check", "--force-exclude"],
                            capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert result.returncode == 0, result.stderr


@pytest.mark.skipif(os.name != "posix", reason="symlinks and FIFOs")
def test_a_hostile_tree_beside_a_real_project_costs_the_project_none_of_its_findings(tmp_path: Path):
    """Every finding of the project alone is reported with the hostile files beside it; each
    hostile file gets its own clear finding or none, never a traceback. (The time, under 60 s
    on this tree, is measured by ``bench/hostile_check_speed.py``.)"""
    from hostile_tree import write_hostile_files, write_project

    def findings(root: Path) -> tuple[int, dict[str, set[tuple]]]:
        result = run(root)
        assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
        out: dict[str, set[tuple]] = {}
        for d in json.loads(result.stdout):
            name = d["filename"]  # relative to the project, where it runs (a device link: absolute)
            name = Path(os.path.relpath(name, root) if os.path.isabs(name) else name).as_posix()
            out.setdefault(name, set()).add((d["code"], d["location"]["row"], d["message"]))
        return result.returncode, out

    alone = write_project(tmp_path / "alone")
    code, expected = findings(alone)
    assert code == 1
    assert {name: {c for c, _, _ in found} for name, found in expected.items()} == {
        "train.py": {"MEM001"}, "ds_config.json": {"CFG002"}, "configs/sft.yaml": {"MEM001"},
        "loops/train_amp.py": {"AMP004"}}

    hostile = write_project(tmp_path / "hostile")
    write_hostile_files(hostile)
    code, found = findings(hostile)
    assert code == 1
    assert {name: found[name] for name in expected} == expected
    codes = {name.removeprefix("hostile/"): {c for c, _, _ in f} for name, f in found.items() if name not in expected}
    assert codes == {
        "ds_huge.json": {"CFG002", "MEM003"},  # the value is not a sane integer; no launcher uses it
        "generated_table.py": {"SYN002"},  # 400,000 lines: generated code
        "model.py": {"SYN002"},  # binary
        "zero.json": {"SYN002"}, "pipe.yaml": {"SYN002"},  # a device and a FIFO: not read
    }  # the symlink loop is not walked; bomb.yaml and deep.json are no configs: refused by the
    # loader's budgets, quietly
    [(_, row, message)] = [f for f in found["hostile/ds_huge.json"] if f[0] == "CFG002"]
    assert row == 2 and "(5,000 digits) is not a sane integer" in message
