"""libcst's parse without per-node checks builds the tree the checked parse builds, and leaves
libcst checking the nodes built after it."""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
import pytest

from memlint.python import source as python_source
from memlint.python.unvalidated import parse_module

ROOT = Path(__file__).resolve().parents[2]
# real modules: the examples' scripts and memlint's own code (classes, decorators, f-strings,
# match statements, comprehensions, type annotations, several statements on a line)
MODULES = sorted([*ROOT.glob("examples/**/*.py"), *ROOT.glob("memlint/python/*.py")])


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_same_tree_as_the_checked_parse(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    try:
        ast.parse(text)
    except SyntaxError:
        pytest.skip("not Python (an example of SYN001): check parses only what CPython accepts")
    unchecked = parse_module(text)
    assert unchecked.deep_equals(cst.parse_module(text))
    assert unchecked.code == text


def test_check_parses_unchecked_and_keeps_the_tree() -> None:
    text = (ROOT / "memlint/python/source.py").read_text(encoding="utf-8")
    parsed = python_source.parse(text, whole=True)
    assert isinstance(parsed, python_source.PythonSource)
    assert parsed.module.deep_equals(cst.parse_module(text))


def test_nodes_built_afterwards_are_checked_again() -> None:
    parse_module("x = (1)\n")
    with pytest.raises(cst.CSTValidationError):
        cst.Name("not a name")  # libcst's own check: an identifier


def test_a_rejected_text_is_the_parsers_error_and_checks_come_back() -> None:
    with pytest.raises(cst.ParserSyntaxError):
        parse_module("def f(:\n    pass\n")
    with pytest.raises(cst.CSTValidationError):
        cst.Name("")
