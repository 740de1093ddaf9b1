"""A dict a script fills from its own parsed command line, each entry under its option's name.

Scripts that keep their settings in a YAML file often let the command line override some of
them through such a dict (rmarnold/llm-training-pipeline's ``cli_overrides``)::

    overrides = {}
    for key in ["base_model", "per_device_train_batch_size", ...]:
        value = getattr(args, key)
        if value is not None:
            overrides[key] = value
    ...
    SFTConfig(per_device_train_batch_size=overrides.get("per_device_train_batch_size", config[...]))

or ``{k: v for k, v in vars(args).items() if v is not None}``. An entry read from it is the
option of that name, and where the dict keeps only the options a launch passes, the fallback
``.get`` gives otherwise: a value the option replaces. Without this, memlint took the keyword for
one it could not read and judged the library's default (micro-batch 8) that no one chose.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import libcst as cst

from memlint.python.value_types import MISSING, CallValue, Found, Namespace, OptionEntries

if TYPE_CHECKING:
    from memlint.python.values import Values


def copied_by_loop(values: "Values", key: cst.BaseExpression, value: cst.BaseExpression) -> OptionEntries | None:
    """What ``d[key] = value`` copies when it runs in a loop over the options: ``for key in
    [...]`` with ``value`` read as ``getattr(args, key)``, or ``for key, value in
    vars(args).items()``. None for any other item assignment."""
    if type(key) is not cst.Name:
        return None
    loop, guarded = _enclosing_loop(values, key, key.value)
    if loop is None:
        return None
    target = loop.target
    if type(target) is cst.Name:
        keys = values.evaluate(loop.iter)
        if keys is None or not isinstance(keys.value, tuple) or not all(isinstance(k, str) for k in keys.value):
            return None
        if not _reads_option(values, value, key.value):
            return None
        return OptionEntries(keys.value, guarded)
    if type(target) is cst.Tuple and _items_of_options(values, loop.iter) and _pair(target) == (key.value, _name(value)):
        return OptionEntries(None, guarded)
    return None


def copied_by_comprehension(values: "Values", expr: cst.DictComp) -> OptionEntries | None:
    """``{k: v for k, v in vars(args).items() if v is not None}``: every option, or only those
    passed when the comprehension keeps the values that are set."""
    comp = expr.for_in
    if comp.inner_for_in is not None or type(comp.target) is not cst.Tuple:
        return None
    if _pair(comp.target) != (_name(expr.key), _name(expr.value)) or not _items_of_options(values, comp.iter):
        return None
    return OptionEntries(None, bool(comp.ifs))


def copied_entry(values: "Values", copied: OptionEntries, key: str, fallback: Found | None) -> Found | None:
    """The entry ``key`` of a dict holding ``copied``: the option of that name, or where the
    dict holds only passed options and this one has no default, ``fallback`` replaced by the
    option (``fallback`` None: a subscript, which fails unless the option is passed). None when
    ``key`` is not among the copied options."""
    if copied.keys is not None and key not in copied.keys:
        return None
    option = values.options.argparse_value(key)
    if option is None:
        return None
    if not copied.passed_only or not option.known or option.value is not None:
        return option
    if fallback is None or not fallback.known or isinstance(fallback.value, CallValue):
        return Found(MISSING, None, option.options, option.note)
    return replace(fallback, options=tuple(dict.fromkeys(option.options + fallback.options)))


def _enclosing_loop(values: "Values", node: cst.CSTNode, key: str) -> tuple[cst.For | None, bool]:
    """The ``for`` loop of this function that binds ``key``, and whether ``node`` runs under an
    ``if`` inside it (``if value is not None:``: only the options that are set)."""
    guarded = False
    current = values.parent(node)
    while current is not None and type(current) not in (cst.FunctionDef, cst.ClassDef, cst.Module):
        if type(current) is cst.If:
            guarded = True
        elif type(current) is cst.For:
            target = current.target
            if (type(target) is cst.Name and target.value == key) or (type(target) is cst.Tuple
                                                                      and key in _pair(target)):
                return current, guarded
        current = values.parent(current)
    return None, False


def _reads_option(values: "Values", value: cst.BaseExpression, key: str) -> bool:
    """``value`` is ``getattr(args, key)``, directly or through a name assigned once from it."""
    if type(value) is cst.Name:
        definitions = values.definitions(value)
        if len(definitions) != 1 or not hasattr(definitions[0], "expr"):
            return False
        value = definitions[0].expr
    if type(value) is not cst.Call or "builtins.getattr" not in values.qualified(value.func):
        return False
    args = [a for a in value.args if a.keyword is None and not a.star]
    if len(args) < 2 or type(args[1].value) is not cst.Name or args[1].value.value != key:
        return False
    namespace = values.evaluate(args[0].value)
    return namespace is not None and isinstance(namespace.value, Namespace)


def _items_of_options(values: "Values", expr: cst.BaseExpression) -> bool:
    """``vars(args).items()`` or ``args.__dict__.items()`` over a parsed command line."""
    if type(expr) is not cst.Call or type(expr.func) is not cst.Attribute or expr.func.attr.value != "items":
        return False
    owner = expr.func.value
    if type(owner) is cst.Call and "builtins.vars" in values.qualified(owner.func) and len(owner.args) == 1:
        owner = owner.args[0].value
    elif type(owner) is cst.Attribute and owner.attr.value == "__dict__":
        owner = owner.value
    else:
        return False
    namespace = values.evaluate(owner)
    return namespace is not None and isinstance(namespace.value, Namespace)


def _pair(target: cst.Tuple) -> tuple[str, str] | tuple[()]:
    names = [e.value for e in target.elements]
    if len(names) != 2 or not all(type(n) is cst.Name for n in names):
        return ()
    return (names[0].value, names[1].value)  # type: ignore[attr-defined]


def _name(expr: cst.BaseExpression) -> str | None:
    return expr.value if type(expr) is cst.Name else None
