"""Shared by the config tests."""

from __future__ import annotations

from pathlib import Path

from memlint.model.diagnostics import Diagnostic


def write_files(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def spans(diagnostics: list[Diagnostic]) -> list[tuple[str, int, int, int, int]]:
    """(code, line, column, end line, end column) of each diagnostic, in order."""
    return [(d.code, d.range.start.line, d.range.start.column, d.range.end.line, d.range.end.column)
            for d in diagnostics]
