"""``memlint check --fix`` never loses data: for every rule that offers a fix, on a realistic
project, the file is replaced atomically (a temporary file in the same directory, then
``os.replace``; nothing left behind), keeps its mode, line endings and byte-order mark; nothing
is written without ``--fix``, on a syntax error, or into a read-only file or directory (which
is reported, not a crash); the fixed file parses and re-checks without the finding; a second
``--fix`` changes nothing. A property runs the same cycle on generated training loops.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import stat
import tempfile
from pathlib import Path
from unittest import mock

import pytest
import yaml
from fix_cases import CASES, FixCase
from hypothesis import given, settings
from robustness_checks import assert_sound, check_tree, time_limit, working_directory, write_tree
from robustness_inputs import fixable_scripts

from memlint.cli.main import main

UNSAFE = [c for c in CASES if c.unsafe]
ids = [case.name for case in CASES]


def make_project(tree: Path, case: FixCase) -> Path:
    write_tree(tree, {"memlint.toml": case.settings, **case.files})
    return tree / case.target


def run_check(tree: Path, *flags: str) -> tuple[int, str, str]:
    """``memlint check --output-format json [flags] .`` in ``tree``: (exit code, stdout, stderr)."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with working_directory(tree), contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr), \
            time_limit(60):
        code = main(["check", "--no-cache", "--output-format", "json", *flags, "."])
    return code, stdout.getvalue(), stderr.getvalue()


def findings(stdout: str, code: str, target: str) -> list[dict]:
    return [d for d in json.loads(stdout) if d["code"] == code and d["filename"] == target]


def assert_parses(path: Path) -> None:
    data = path.read_bytes().decode("utf-8-sig")
    if path.suffix == ".py":
        ast.parse(data)
    elif path.suffix == ".json":
        json.loads(data)
    else:
        yaml.safe_load(data)


def snapshot(tree: Path) -> dict[str, tuple[bytes, int, int]]:
    """Every file's bytes, mode and modification time (nanoseconds)."""
    out = {}
    for path in sorted(tree.rglob("*")):
        if path.is_file():
            info = path.stat()
            out[path.relative_to(tree).as_posix()] = (path.read_bytes(), stat.S_IMODE(info.st_mode), info.st_mtime_ns)
    return out


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return tmp_path


# ---------------------------------------------------------------------------- the fix itself


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_fix_rechecks_clean_and_a_second_fix_changes_nothing(tree: Path, case: FixCase):
    target = make_project(tree, case)
    before = target.read_bytes()
    _, report, _ = run_check(tree, *case.flags)
    assert findings(report, case.code, case.target), f"the project does not trigger {case.code}"
    exit_code, _, stderr = run_check(tree, *case.fix_flags(), *case.flags)
    assert exit_code in (0, 1) and stderr == "", stderr
    fixed = target.read_bytes()
    assert fixed != before, "nothing was fixed"
    assert_parses(target)
    _, report, _ = run_check(tree, *case.flags)
    assert findings(report, case.code, case.target) == [], f"{case.code} is still reported after --fix"
    run_check(tree, *case.fix_flags(), *case.flags)
    assert target.read_bytes() == fixed, "a second --fix changed the file"


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_without_fix_nothing_is_written(tree: Path, case: FixCase):
    make_project(tree, case)
    before = snapshot(tree)
    assert run_check(tree, *case.flags)[0] in (0, 1)  # AMP004 is info: exit 0
    exit_code, _, stderr = run_check(tree, "--unsafe-fixes", *case.flags)
    assert exit_code == 2 and "--unsafe-fixes needs --fix" in stderr
    assert snapshot(tree) == before


@pytest.mark.parametrize("case", UNSAFE, ids=[c.name for c in UNSAFE])
def test_unsafe_fixes_wait_for_unsafe_fixes(tree: Path, case: FixCase):
    target = make_project(tree, case)
    before = target.read_bytes()
    run_check(tree, "--fix", *case.flags)
    assert target.read_bytes() == before


# ---------------------------------------------------------------------------- how it is written


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_the_file_is_replaced_atomically_and_nothing_is_left_behind(tree: Path, case: FixCase):
    target = make_project(tree, case)
    names_before = sorted(p.name for p in tree.rglob("*"))
    inode_before = target.stat().st_ino
    real_replace = os.replace
    replaced: list[tuple[str, str]] = []

    def observed_replace(source, destination, *args, **kwargs):
        replaced.append((os.fspath(source), os.fspath(destination)))
        assert Path(source).read_bytes() != b"", "the temporary file is complete before it replaces the target"
        return real_replace(source, destination, *args, **kwargs)

    with mock.patch("os.replace", observed_replace):
        run_check(tree, *case.fix_flags(), *case.flags)
    assert replaced, "the file was not written through os.replace"
    for source, destination in replaced:
        assert Path(destination).resolve() == target.resolve()
        assert Path(source).parent.resolve() == target.parent.resolve(), "the temporary file is in the same directory"
    assert target.stat().st_ino != inode_before, "the file was rewritten in place, not replaced"
    assert sorted(p.name for p in tree.rglob("*")) == names_before, "a temporary file was left behind"


@pytest.mark.parametrize("mode", [0o755, 0o600, 0o640])
@pytest.mark.parametrize("case", CASES[:2] + CASES[5:6], ids=[c.name for c in CASES[:2] + CASES[5:6]])
def test_the_file_mode_is_kept(tree: Path, case: FixCase, mode: int):
    target = make_project(tree, case)
    target.chmod(mode)
    before = target.read_bytes()
    run_check(tree, *case.fix_flags(), *case.flags)
    assert target.read_bytes() != before
    assert stat.S_IMODE(target.stat().st_mode) == mode


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_crlf_line_endings_are_kept(tree: Path, case: FixCase):
    target = make_project(tree, case)
    target.write_bytes(target.read_bytes().replace(b"\n", b"\r\n"))
    run_check(tree, *case.fix_flags(), *case.flags)
    fixed = target.read_bytes()
    assert fixed.count(b"\n") == fixed.count(b"\r\n"), "a bare \\n in a CRLF file"
    _, report, _ = run_check(tree, *case.flags)
    assert findings(report, case.code, case.target) == []
    assert_parses(target)


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_a_byte_order_mark_is_kept_and_edits_on_the_first_line_land_right(tree: Path, case: FixCase):
    target = make_project(tree, case)
    original = target.read_bytes()
    target.write_bytes(b"\xef\xbb\xbf" + original)
    run_check(tree, *case.fix_flags(), *case.flags)
    fixed = target.read_bytes()
    assert fixed.startswith(b"\xef\xbb\xbf") and not fixed.startswith(b"\xef\xbb\xbf" * 2)
    # the same fix as without the mark
    plain = tree / "plain"
    plain.mkdir()
    write_tree(plain, {"memlint.toml": case.settings, **case.files})
    run_check(plain, *case.fix_flags(), *case.flags)
    assert fixed[3:] == (plain / case.target).read_bytes()


@pytest.mark.skipif(os.name != "posix", reason="symlinks")
def test_a_symlinked_script_is_fixed_through_the_link(tree: Path):
    case = CASES[0]
    write_tree(tree, {"memlint.toml": case.settings, "shared/train.py": case.files["train.py"]})
    (tree / "train.py").symlink_to("shared/train.py")
    run_check(tree, *case.fix_flags())
    assert (tree / "train.py").is_symlink(), "the link was replaced by a copy"
    assert "(loss / args.grad_accum).backward()" in (tree / "shared/train.py").read_text()


def test_latin1_encoded_file_is_not_rewritten(tree: Path):
    # not UTF-8: memlint reports it unreadable and fixes nothing (no silent re-encoding)
    case = CASES[0]
    target = make_project(tree, case)
    target.write_bytes(target.read_bytes().replace(b'"""Fine-tune', "# Réglage fin\n\"\"\"Fine-tune".encode("latin-1")))
    before = snapshot(tree)
    run_check(tree, *case.fix_flags())
    assert snapshot(tree) == before


# ---------------------------------------------------------------------------- when nothing may be written


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_nothing_is_written_when_the_file_has_a_syntax_error(tree: Path, case: FixCase):
    target = make_project(tree, case)
    broken = {".py": "\ndef broken(:\n", ".json": "\n}", ".yml": "\nsequence_len: [1024\n"}[target.suffix]
    target.write_text(target.read_text() + broken)
    before = snapshot(tree)
    exit_code, report, stderr = run_check(tree, *case.fix_flags(), *case.flags)
    assert exit_code == 1 and "Traceback" not in stderr
    assert snapshot(tree) == before
    codes = {d["code"] for d in json.loads(report) if d["filename"] == case.target}
    assert codes & {"SYN001", "CFG006"}, codes


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes everywhere")
def test_a_read_only_directory_is_reported_not_a_crash(tree: Path):
    case = CASES[0]
    target = make_project(tree, case)
    before = target.read_bytes()
    tree.chmod(0o555)
    try:
        exit_code, _, stderr = run_check(tree, *case.fix_flags())
    finally:
        tree.chmod(0o755)
    assert exit_code == 1 and target.read_bytes() == before
    assert "cannot write" in stderr and case.target in stderr and "Traceback" not in stderr


@pytest.mark.parametrize("case", CASES[:1] + CASES[5:6], ids=[c.name for c in CASES[:1] + CASES[5:6]])
def test_a_read_only_file_is_left_alone_and_reported(tree: Path, case: FixCase):
    target = make_project(tree, case)
    target.chmod(0o444)
    before = snapshot(tree)
    exit_code, report, stderr = run_check(tree, *case.fix_flags(), *case.flags)
    assert snapshot(tree) == before, "a read-only file was replaced"
    assert exit_code == 1 and "Traceback" not in stderr
    assert f"cannot write fixes to {case.target}" in stderr and "read-only" in stderr
    assert findings(report, case.code, case.target), "the unfixed finding is still reported"


def test_a_failing_write_is_reported_and_leaves_the_file_and_no_temporary(tree: Path):
    """What a read-only directory or a full disk does, also when the tests run as root."""
    case = CASES[0]
    target = make_project(tree, case)
    before = snapshot(tree)

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    with mock.patch("os.replace", disk_full):
        exit_code, report, stderr = run_check(tree, *case.fix_flags())
    assert snapshot(tree) == before
    assert exit_code == 1 and "Traceback" not in stderr
    assert f"cannot write fixes to {case.target}: No space left on device" in stderr
    assert findings(report, case.code, case.target)


def test_a_read_only_directory_as_root_too(tree: Path):
    case = CASES[0]
    target = make_project(tree, case)
    before = target.read_bytes()

    def permission_denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(target.parent))

    with mock.patch("tempfile.mkstemp", permission_denied):
        exit_code, _, stderr = run_check(tree, *case.fix_flags())
    assert exit_code == 1 and target.read_bytes() == before
    assert f"cannot write fixes to {case.target}: Permission denied" in stderr


# ---------------------------------------------------------------------------- generated loops


@settings(max_examples=max(5, settings.default.max_examples // 2))
@given(fixable_scripts())
def test_generated_loops_fix_reparse_recheck_and_stay_fixed(script):
    with tempfile.TemporaryDirectory(prefix="memlint-fix-") as directory:
        tree = Path(directory)
        write_tree(tree, {"memlint.toml": 'gpu = "a100-80gb"\n', "train.py": script})
        target = tree / "train.py"
        first = check_tree(tree)
        fixable = [d for d in first.diagnostics if d.fix is not None and d.fix.applicability == "safe"]
        assert fixable, "the generator promises a fixable finding"
        _, _, stderr = run_check(tree, "--fix")
        assert stderr == "", stderr
        fixed = target.read_bytes()
        ast.parse(fixed.decode("utf-8"))
        after = check_tree(tree)
        assert_sound(after)
        left = [f"{d.code} {d.range.start.line}: {d.message}" for d in after.diagnostics
                if d.fix is not None and d.fix.applicability == "safe"]
        assert left == [], f"--fix left fixable findings:\n{fixed.decode()}"
        assert len(after.diagnostics) < len(first.diagnostics)
        run_check(tree, "--fix")
        assert target.read_bytes() == fixed, "a second --fix changed the file"
