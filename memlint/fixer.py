"""``memlint check --fix``: apply fixes, re-check, repeat until nothing changes.

A file is only written when it has applicable fixes, the fixed text still parses (a fix
that would break the file is dropped, the file left alone), and through an atomic replace
that keeps the file's mode. A second ``--fix`` run changes nothing.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from memlint.diagnostics import Diagnostic, Edit
from memlint.documents import syntax_of
from memlint.engine import LintResult, lint
from memlint.fix import apply_edits, write_atomically
from memlint.settings import Settings

MAX_PASSES = 4


def _still_parses(path: str, text: str) -> bool:
    syntax = syntax_of(path)
    if syntax == "python":
        from memlint.sources.python import PythonSyntaxError, parse

        return not isinstance(parse(text), PythonSyntaxError)
    if syntax in ("json", "yaml"):
        from memlint.sources.structured import load

        return load(text, syntax).ok
    return True


def fix_files(
    result: LintResult, settings: Settings, paths: list[Path], force_exclude: bool, unsafe: bool,
    overrides=None, jobs: int | None = None, cache_dir: Path | None = None,
) -> list[Diagnostic]:
    """Apply fixes until the files stop changing; return the diagnostics that remain."""
    diagnostics = result.diagnostics
    for _ in range(MAX_PASSES):
        edits: dict[str, list[Edit]] = defaultdict(list)
        for d in diagnostics:
            if d.fix is None or (d.fix.applicability != "safe" and not unsafe):
                continue
            for edit in d.fix.edits:
                edits[str(Path(edit.path).resolve())].append(edit)
        changed = False
        for path, file_edits in edits.items():
            target = Path(path)
            try:
                original = target.read_text("utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            fixed = apply_edits(original, file_edits)
            if fixed == original or not _still_parses(path, fixed):
                continue
            write_atomically(target, fixed)
            changed = True
        if not changed:
            break
        diagnostics = lint(paths, settings, force_exclude=force_exclude, overrides=overrides, jobs=jobs,
                           cache_dir=cache_dir).diagnostics
    return diagnostics
