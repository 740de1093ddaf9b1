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


def test_each_fast_constructor_takes_what_the_dataclass_takes() -> None:
    """The native parser calls a node class with its fields by name: the replacement takes the
    same parameters, in the same order, with the same defaults (a default factory's marker
    aside), and every class the parser builds has one."""
    import inspect

    from memlint.python import unvalidated

    builders = unvalidated._builders()
    concrete = [cls for cls in unvalidated._node_classes() if not inspect.isabstract(cls)]
    assert concrete and all(cls in builders for cls in concrete)
    for cls, (fast, original) in builders.items():
        mine, theirs = inspect.signature(fast).parameters, inspect.signature(original).parameters
        assert list(mine) == list(theirs), cls
        for name, parameter in theirs.items():
            if parameter.default is not inspect.Parameter.empty and repr(parameter.default) != "<factory>":
                assert mine[name].default is parameter.default, (cls, name)


def test_a_node_built_fast_is_the_node_libcst_builds() -> None:
    """Every field where libcst's constructor puts it, defaults and default factories included."""
    from memlint.python import unvalidated

    fast, _ = unvalidated._builders()[cst.Call]
    node = cst.Call.__new__(cst.Call)
    fast(node, func=cst.Name("f"))
    assert node.deep_equals(cst.Call(func=cst.Name("f")))
    assert node.args == () and node.lpar == () and node.whitespace_after_func.deep_equals(cst.SimpleWhitespace(""))
    module = cst.Module.__new__(cst.Module)
    unvalidated._builders()[cst.Module][0](module, [])
    assert module.deep_equals(cst.Module([]))


def test_the_constructors_come_back_after_a_parse_and_after_an_error() -> None:
    from memlint.python import unvalidated

    originals = {cls: original for cls, (_, original) in unvalidated._builders().items()}
    parse_module("x = f(1)\n")
    with pytest.raises(cst.ParserSyntaxError):
        parse_module("def f(:\n    pass\n")
    assert all(cls.__dict__["__init__"] is original for cls, original in originals.items())
