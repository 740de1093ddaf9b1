"""``memlint check examples/`` -- the README's first command -- shows every rule memlint has,
and the examples' README says truthfully which rules each project triggers."""

from __future__ import annotations

import re
from collections import defaultdict

import pytest

from cli_testing import REPO, memlint
from memlint.rules import all_rules


@pytest.fixture(scope="module")
def findings() -> list[dict]:
    result = memlint(REPO, "check", "examples/", "--output-format", "json")
    assert result.code == 1  # the examples run out of memory, among other things
    return result.json()


def test_the_examples_show_every_rule(findings):
    shown = {f["code"] for f in findings}
    assert shown == set(all_rules())


def test_the_examples_readme_lists_what_each_project_triggers(findings):
    by_folder: dict[str, set[str]] = defaultdict(set)
    for finding in findings:
        by_folder[finding["filename"].split("/")[1]].add(finding["code"])
    table = (REPO / "examples/README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([\w.-]+)/` \|[^|]*\|([^|]*)\|$", table, re.M)
    assert {folder for folder, _ in rows} == set(by_folder)
    for folder, said in rows:
        assert set(re.findall(r"`([A-Z]{3}\d{3})`", said)) == by_folder[folder], folder
