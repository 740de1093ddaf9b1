"""``memlint check --fix``: apply fixes, re-check, repeat until nothing changes.

A file is only written when it has applicable fixes, the fixed text still parses (a fix
that would break the file is dropped, the file left alone), and through an atomic replace
that keeps the file's mode, line endings and byte-order mark. A file that cannot be written
(read-only, in a read-only directory, a full disk) is reported on stderr and keeps its
findings; the run goes on. A second ``--fix`` run changes nothing.
"""

from __future__ import annotations

import codecs
import sys
from collections import defaultdict
from pathlib import Path

from memlint.check.run import LintResult, lint
from memlint.documents import failures
from memlint.documents.reading import decode, syntax_of
from memlint.lint.apply_fixes import apply_edits, write_atomically
from memlint.model.diagnostics import Applicability, Diagnostic, Edit
from memlint.project.settings import Settings

MAX_PASSES = 4


def _read(path: Path) -> tuple[str, bool] | None:
    """The text as linting decoded it (the ranges of the edits count in it) and whether the
    file starts with a byte-order mark; None when it cannot be read as such."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    text, problem = decode(data, str(path))
    return None if problem else (text, data.startswith(codecs.BOM_UTF8))


def _still_parses(path: str, text: str) -> bool:
    syntax = syntax_of(path)
    if syntax == "python":
        from memlint.python.source import PythonSyntaxError, parse

        return not isinstance(parse(text), PythonSyntaxError)
    if syntax in ("json", "yaml"):
        from memlint.documents.structured import load

        return load(text, syntax).ok
    return True


def fix_files(
    result: LintResult, settings: Settings, paths: list[Path], force_exclude: bool, unsafe: bool,
    overrides=None, jobs: int | None = None, cache_dir: Path | None = None,
) -> list[Diagnostic]:
    """Apply fixes until the files stop changing; return the diagnostics that remain."""
    diagnostics = result.diagnostics
    refused: set[Path] = set()  # files that could not be written: reported once, left alone
    failed: dict[Path, Diagnostic] = {}  # files memlint failed to fix (memlint.documents.failures): left alone
    for _ in range(MAX_PASSES):
        edits: dict[str, list[Edit]] = defaultdict(list)
        for d in diagnostics:
            if d.fix is None or (d.fix.applicability != Applicability.SAFE and not unsafe):
                continue
            for edit in d.fix.edits:
                edits[str(Path(edit.path).resolve())].append(edit)
        changed = False
        for path, file_edits in edits.items():
            target = Path(path)
            source = _read(target)
            if source is None or target in refused or target in failed:
                continue
            original, bom = source
            try:
                fixed = apply_edits(original, file_edits)
                if fixed == original or not _still_parses(path, fixed):
                    continue
            except Exception as error:  # the file keeps its findings, the others are fixed
                shown = file_edits[0].path
                failures.note("fixing", shown, error)
                found = failures.diagnostic(shown, failures.describe("applying fixes to it", error), settings)
                if found is not None:
                    failed[target] = found
                continue
            try:
                write_atomically(target, fixed, bom=bom)
            except OSError as error:
                refused.add(target)
                shown = file_edits[0].path
                print(f"memlint: error: cannot write fixes to {shown}: {error.strerror or error}", file=sys.stderr)
                continue
            changed = True
        if not changed:
            break
        diagnostics = lint(paths, settings, force_exclude=force_exclude, overrides=overrides, jobs=jobs,
                           cache_dir=cache_dir).diagnostics
    return _with_failures(diagnostics, failed)


def _with_failures(diagnostics: list[Diagnostic], failed: dict[Path, Diagnostic]) -> list[Diagnostic]:
    """Each failure first among its file's diagnostics (they come grouped by file)."""
    out = list(diagnostics)
    for target, failure in failed.items():
        same = [i for i, d in enumerate(out) if Path(d.path).resolve() == target]
        out.insert(same[0] if same else len(out), failure)
    return out
