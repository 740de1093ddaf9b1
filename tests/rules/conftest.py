"""Linting a realistic script with one rule, and fixing it the way ``memlint check --fix`` does."""

from __future__ import annotations

import textwrap
from typing import Callable

import pytest

from memlint.lint.apply_fixes import apply_edits
from memlint.lint.rule_examples import run_example
from memlint.model.diagnostics import Diagnostic
from memlint.python.source import PythonSyntaxError, parse
from memlint.rules import all_rules
from memlint.rules.base import Example


def _lint(code: str, source: str, path: str = "train.py", **example) -> list[Diagnostic]:
    rule = all_rules()[code]
    return run_example(rule, Example(textwrap.dedent(source), path=path, **example)).diagnostics


def _fix(code: str, source: str, path: str = "train.py", unsafe: bool = False, **example) -> str:
    """Apply the rule's fixes, then check what ``--fix`` promises: the result parses, re-checks
    clean, and fixing it again changes nothing."""
    text = textwrap.dedent(source)
    diagnostics = _lint(code, text, path, **example)
    edits = [e for d in diagnostics if d.fix and (unsafe or d.fix.applicability == "safe") for e in d.fix.edits]
    assert edits, "the rule offered no fix"
    fixed = apply_edits(text, edits)
    assert not isinstance(parse(fixed), PythonSyntaxError), fixed
    remaining = _lint(code, fixed, path, **example)
    assert remaining == [], [f"{d.range.start.line}: {d.message}" for d in remaining]
    again = [e for d in remaining if d.fix for e in d.fix.edits]
    assert apply_edits(fixed, again) == fixed
    return fixed


@pytest.fixture
def lint() -> Callable[..., list[Diagnostic]]:
    return _lint


@pytest.fixture
def fix() -> Callable[..., str]:
    return _fix


@pytest.fixture
def where() -> Callable[[list[Diagnostic]], list[tuple[int, int, int, int]]]:
    """Diagnostics as (line, column, end line, end column), sorted."""

    def spans(diagnostics: list[Diagnostic]) -> list[tuple[int, int, int, int]]:
        return sorted(
            (d.range.start.line, d.range.start.column, d.range.end.line, d.range.end.column) for d in diagnostics
        )

    return spans
