"""What ``self.<attr>`` holds in a method, read from where the class sets it.

A trainer subclass keeps its settings on the instance: ``self.gc_chunk_size = gc_chunk_size`` in
``__init__``, built as ``GradCacheTrainer(..., gc_chunk_size=args.gc_chunk_size)``; or it reads
them from the ``TrainingArguments`` the ``Trainer`` base keeps as ``self.args``
(``self.args.gc_q_chunk_size``). An attribute the class's ``__init__`` assigns once, and no other
method reassigns, holds that value: a parameter of ``__init__`` is what the one constructor call
of the module passes (else its default; nothing where no call or several build the class).
``self.args`` of a ``Trainer`` subclass that does not set it itself is the constructor's
``args``, and where no call of this module builds the class (a trainer another module imports)
each of its attributes is the caller's option of that name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from memlint.python.library import trainer_framework
from memlint.python.references import NOT_PASSED
from memlint.python.unit_scopes import in_class
from memlint.python.value_types import MISSING, Found, Instance, Namespace

if TYPE_CHECKING:
    from memlint.python.values import Values


def self_attribute(values: "Values", expr: cst.BaseExpression) -> Found | None:
    """The value of ``self.<attr>`` or ``self.args.<field>`` at ``expr``; None for anything else
    or what the class does not set once."""
    if type(expr) is not cst.Attribute:
        return None
    cls = _own_class(values, expr.value) if type(expr.value) is cst.Name else None
    if cls is not None:
        return _assigned_once(values, cls, expr.attr.value)
    inner = expr.value
    if type(inner) is cst.Attribute and inner.attr.value == "args" and type(inner.value) is cst.Name:
        cls = _own_class(values, inner.value)
        if cls is not None and _assignments(cls, "args", values) == [] and any(
                trainer_framework(name) in ("hf-trainer", "trl") for name in values.class_names(cls)):
            return _trainer_argument(values, cls, expr.attr.value)
    return None


def assigned_attribute(values: "Values", expr: cst.Attribute, depth: int) -> Found | None:
    """``self.<attr>`` in a method of a class whose ``__init__`` sets it once (Satyabanna's
    ``self.model_name = model_name``, built as ``MedicalChatbotTrainer()``: the parameter's
    default); None for anything else. ``values.evaluate`` asks this for every ``self.<attr>``."""
    if type(expr.value) is not cst.Name:
        return None
    cls = _own_class(values, expr.value)
    return _assigned_once(values, cls, expr.attr.value, depth) if cls is not None else None


def _own_class(values: "Values", name: cst.Name) -> cst.ClassDef | None:
    """The class whose method ``name`` is the first parameter of (``self``)."""
    function = values.enclosing_function(name)
    if function is None or not values.is_method(function):
        return None
    params = list(function.params.posonly_params) + list(function.params.params)
    if not params or params[0].name.value != name.value:
        return None
    block = values.parent(function)
    cls = values.parent(block) if block is not None else None
    return cls if isinstance(cls, cst.ClassDef) else None


def _assignments(cls: cst.ClassDef, attr: str, values: "Values") -> list[tuple[cst.FunctionDef, cst.BaseExpression]]:
    """Every ``self.<attr> = value`` in the class's methods: (method, value), read once per class
    for all its attributes (a method asks for many)."""
    # the answer rests on every method of the class (one of them may set the attribute again)
    for member in cls.body.body:
        if type(member) is cst.FunctionDef:
            values.depends(in_class(member.name.value))
    kept = values.class_assignments.get(id(cls))
    if kept is None or kept[0] is not cls:
        kept = values.class_assignments[id(cls)] = (cls, _every_assignment(cls))
    return kept[1].get(attr, [])


def _every_assignment(cls: cst.ClassDef) -> dict[str, list[tuple[cst.FunctionDef, cst.BaseExpression]]]:
    out: dict[str, list[tuple[cst.FunctionDef, cst.BaseExpression]]] = {}
    for member in cls.body.body:
        if type(member) is not cst.FunctionDef:
            continue
        for statement in _statements(member):
            targets: list[cst.BaseExpression] = []
            value = None
            if type(statement) is cst.Assign:
                targets, value = [t.target for t in statement.targets], statement.value
            elif type(statement) is cst.AnnAssign and statement.value is not None:
                targets, value = [statement.target], statement.value
            for target in targets:
                if type(target) is cst.Attribute and type(target.value) is cst.Name and \
                        target.value.value == "self" and value is not None:
                    out.setdefault(target.attr.value, []).append((member, value))
    return out


def _statements(function: cst.FunctionDef) -> list[cst.BaseSmallStatement]:
    """The small statements of a method's body, in nested blocks too (not in nested defs)."""
    out: list[cst.BaseSmallStatement] = []
    pending: list[cst.CSTNode] = [function.body]
    while pending:
        node = pending.pop()
        for child in node.children:
            if isinstance(child, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                continue
            if isinstance(child, cst.BaseSmallStatement):
                out.append(child)
            elif isinstance(child, (cst.BaseSuite, cst.BaseCompoundStatement, cst.SimpleStatementLine, cst.Else,
                                    cst.ExceptHandler, cst.Finally)):
                pending.append(child)
    return out


def _assigned_once(values: "Values", cls: cst.ClassDef, attr: str, depth: int = 0) -> Found | None:
    assigned = _assignments(cls, attr, values)
    if len(assigned) != 1 or assigned[0][0].name.value != "__init__":
        return None
    init, value = assigned[0]
    if type(value) is cst.Name:
        param = next((p for p in _parameters(init) if p.name.value == value.value), None)
        if param is not None:
            return _constructor_argument(values, cls, init, param, depth)
    return values.evaluate(value, depth + 1)


def _parameters(function: cst.FunctionDef) -> list[cst.Param]:
    params = function.params
    return list(params.posonly_params) + list(params.params) + list(params.kwonly_params)


def _constructor_argument(values: "Values", cls: cst.ClassDef, init: cst.FunctionDef, param: cst.Param,
                          depth: int = 0) -> Found | None:
    """What the constructor calls of the module pass ``__init__``'s ``param`` (its default when a
    call leaves it); None when no call builds the class here, or several pass different values."""
    calls = values.call_sites(cls)
    if not calls:
        return None
    found = [_passed(values, init, param, call, depth) for call in calls]
    first = found[0]
    if len(found) == 1:
        return first
    # several calls (a training and a validation ``Dataset(path, tokenizer, max_len)``) are known
    # to pass one value only when each passes the same
    agree = first is not None and first.known and all(
        other is not None and other.known and other.value == first.value and type(other.value) is type(first.value)
        for other in found[1:])
    return first if agree else None


def _passed(values: "Values", init: cst.FunctionDef, param: cst.Param, call: cst.Call, depth: int) -> Found | None:
    argument = values.argument_for(init, param, call, bound_self=True)
    if argument is NOT_PASSED:
        return values.evaluate(param.default, depth + 1) if param.default is not None else None
    return values.evaluate(argument, depth + 1) if isinstance(argument, cst.BaseExpression) else None


def _trainer_argument(values: "Values", cls: cst.ClassDef, field: str) -> Found | None:
    """``self.args.<field>`` of a ``Trainer`` subclass: the field of the ``args`` its one
    constructor call passes; the caller's option ``field`` where this module builds none."""
    calls = values.call_sites(cls)
    if not calls:
        return Found(MISSING, None, (field,), f"--{field}")
    if len(calls) > 1:
        return None
    arguments = values.arguments(calls[0], ("model", "args"))
    given = values.evaluate(arguments.get("args")) if "args" in arguments else None
    if given is None:
        return None
    if isinstance(given.value, Instance):
        return values.options.field_value(given.value, field)
    if isinstance(given.value, Namespace):
        return values.options.argparse_value(field)
    return None
