"""Every rule's own VALID examples stay quiet and its INVALID examples fire where they say."""

from __future__ import annotations

import pytest

from memlint.lint.rule_examples import run_example
from memlint.model.diagnostics import Applicability
from memlint.rules import all_rules

RULES = all_rules()
CASES = [
    pytest.param(rule, kind, i, example, id=f"{code}-{kind}-{i}")
    for code, rule in RULES.items()
    for kind, examples in (("VALID", rule.VALID), ("INVALID", rule.INVALID))
    for i, example in enumerate(examples)
]


def test_every_rule_has_examples():
    for code, rule in RULES.items():
        assert rule.VALID, f"{code} has no VALID example"
        assert rule.INVALID, f"{code} has no INVALID example"


@pytest.mark.parametrize("rule, kind, index, example", CASES)
def test_example(rule, kind, index, example):
    outcome = run_example(rule, example)
    if kind == "VALID":
        assert outcome.diagnostics == [], [f"{d.range.start.line}: {d.message}" for d in outcome.diagnostics]
        return
    assert outcome.diagnostics, f"{rule.code} did not fire"
    if example.lines:
        assert sorted(d.range.start.line for d in outcome.diagnostics) == sorted(example.lines), [
            f"{d.range.start.line}: {d.message}" for d in outcome.diagnostics
        ]
    for diagnostic in outcome.diagnostics:
        assert example.message in diagnostic.message
        _fix_matches_the_rule(rule, diagnostic.fix)
    if example.fixed is not None:
        assert outcome.fixed == example.fixed


def _fix_matches_the_rule(rule, fix) -> None:
    """A rule's page says which fixes it offers: none, safe ones only, or unsafe ones (which may
    be safe where the rule is certain). A fix the declaration does not allow is a bug."""
    if fix is None:
        return
    assert rule.fix_applicability is not None, f"{rule.code} offers a fix but declares none"
    assert isinstance(fix.applicability, Applicability)
    if rule.fix_applicability is Applicability.SAFE:
        assert fix.applicability is Applicability.SAFE, f"{rule.code} is declared safe but offers an unsafe fix"


def test_every_declared_fix_applicability_is_an_applicability():
    for code, rule in RULES.items():
        assert rule.fix_applicability is None or isinstance(rule.fix_applicability, Applicability), code
