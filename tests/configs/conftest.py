"""Helpers for the config tests: a throwaway project on disk, linted like `memlint check` does."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest

from memlint.lint.engine import Linter, expand
from memlint.model.diagnostics import Diagnostic
from memlint.project.settings import Settings, parse

from .helpers import write_files


@pytest.fixture
def lint(tmp_path: Path) -> Callable[..., list[Diagnostic]]:
    """``lint(files, path, select=("CFG",), **settings)``: the diagnostics of ``path``."""

    def run(files: dict[str, str], path: str, select: tuple[str, ...] = ("CFG",), **table) -> list[Diagnostic]:
        write_files(tmp_path, files)
        settings = parse({k.replace("_", "-"): v for k, v in table.items()}, tmp_path / "memlint.toml") if table \
            else Settings(root=tmp_path)
        settings = settings.with_overrides(select=select, cache=False)
        linter = Linter(settings)
        main = tmp_path / path
        diagnostics: list[Diagnostic] = []
        for target in expand([main], settings, linter.project):
            if linter.project.key(target) == linter.project.key(main):
                diagnostics = linter.lint_path(target)
        assert not linter.internal_errors, linter.internal_errors
        return diagnostics

    return run

