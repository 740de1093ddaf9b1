"""The options a project's own model code tests to load the model quantized.

A project's arguments class may declare a switch that only its model-building code reads:
LMFlow's ``ModelArguments.use_qlora`` is tested in ``src/lmflow/models/hf_model_mixin.py``
(``if model_args.use_qlora:`` then, under ``if model_args.quant_bit == 8`` / ``elif ... == 4``,
``BitsAndBytesConfig(**{"load_in_4bit": True, ...})``), three modules below
``examples/finetune.py``, which parses ``--use_qlora`` and hands ``model_args`` to
``AutoModel.get_model``. The Trainer never reads the switch, so a launch's ``--use_qlora 1``
says nothing to memlint unless the test that reads it is found.

This module finds, in the modules given (the caller walks the script's project imports), every
``if <args>.<option>:`` (or ``== True``/``== 1``) whose body builds a ``BitsAndBytesConfig``,
and what its body loads: 4-bit (NF4 unless a literal ``bnb_4bit_quant_type`` says ``fp4``) or
8-bit, with the inner tests of other options of the same object that choose between them
(``quant_bit == 4``). ``quantization`` then evaluates those tests against the run's option
values (the launch's, else the arguments classes' defaults); a branch that cannot be decided
gives no fact. Modules are read with ``ast``, never imported.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from typing import Iterable

from memlint.model.diagnostics import Range
from memlint.model.provenance import Location

_TRUE = ("1", "true", "yes", "y", "on")
_FALSE = ("0", "false", "no", "n", "off", "none", "")


@dataclass(frozen=True)
class Guard:
    """``<args>.option`` (``equals`` None: truthy) or ``<args>.option == equals``; ``negated`` on
    the ``else`` side."""

    option: str
    equals: str | None
    negated: bool = False


@dataclass(frozen=True)
class Switch:
    """An option whose truth makes the model code load ``quantization`` when ``guards`` hold."""

    option: str
    quantization: str  # "nf4", "fp4", "int8"
    guards: tuple[Guard, ...]
    where: Location  # the ``if`` that tests the option


def switches(modules: Iterable[tuple[str, str]]) -> list[Switch]:
    """Every quantization switch of the modules ``(path, text)`` (only texts that name
    ``BitsAndBytesConfig`` are parsed)."""
    return [switch for path, text in modules if "BitsAndBytesConfig" in text for switch in _switches_of(path, text)]


@functools.lru_cache(maxsize=32)
def _switches_of(path: str, text: str) -> tuple[Switch, ...]:
    """One module's switches, parsed once per text: the scripts of a project import the same
    model code (TRL's eight scripts each reach ``trl/trainer/utils.py``)."""
    out: list[Switch] = []
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return ()
    for node in ast.walk(tree):
        if type(node) is not ast.If:
            continue
        guard = _guard(node.test)
        if guard is None or guard.equals is not None:
            continue
        holder = _holder(node.test)
        where = Location(path, Range.of(node.lineno, node.col_offset, node.test.end_lineno or node.lineno,
                                        node.test.end_col_offset or node.col_offset))
        for quantization, guards in _loads(node.body, holder, ()):
            out.append(Switch(guard.option, quantization, guards, where))
    return tuple(out)


def quantization(found: list[Switch], values: dict[str, str]) -> tuple[Switch, str] | None:
    """The switch that is on for these option values (option -> command-line text) and the
    quantization it loads; None when none is on, or the branches it chooses between cannot be
    told apart."""
    on = [s for s in found if _truthy(values.get(s.option))]
    decided = [s for s in on if all(_holds(g, values) is True for g in s.guards)]
    if decided:
        return decided[0], decided[0].quantization
    possible = [s for s in on if all(_holds(g, values) is not False for g in s.guards)]
    if possible and len({s.quantization for s in possible}) == 1:
        return possible[0], possible[0].quantization
    return None


def _truthy(value: str | None) -> bool:
    return value is not None and value.strip().lower() in _TRUE


def _holds(guard: Guard, values: dict[str, str]) -> bool | None:
    value = values.get(guard.option)
    if value is None:
        return None
    text = value.strip().lower()
    if guard.equals is None:
        result = text in _TRUE if text in _TRUE + _FALSE else None
    else:
        result = text == guard.equals.lower()
    if result is None:
        return None
    return not result if guard.negated else result


def _holder(test: ast.expr) -> str | None:
    """``model_args`` of ``model_args.use_qlora`` (or ``self.model_args``)."""
    target = test.left if type(test) is ast.Compare else test
    return ast.unparse(target.value) if type(target) is ast.Attribute else None


def _guard(test: ast.expr) -> Guard | None:
    """``args.option`` or ``args.option == <literal>`` -> a Guard."""
    if type(test) is ast.Attribute:
        return Guard(test.attr, None)
    if (type(test) is ast.Compare and len(test.ops) == 1 and type(test.ops[0]) is ast.Eq
            and type(test.left) is ast.Attribute and type(test.comparators[0]) is ast.Constant):
        value = test.comparators[0].value
        if value is True:
            return Guard(test.left.attr, None)
        if isinstance(value, (int, str)) and not isinstance(value, bool):
            return Guard(test.left.attr, str(value))
    return None


def _loads(body: list[ast.stmt], holder: str | None, guards: tuple[Guard, ...]) -> list[tuple[str, tuple[Guard, ...]]]:
    """What ``body`` loads, with the tests of ``holder``'s options that choose each load."""
    out: list[tuple[str, tuple[Guard, ...]]] = []
    plain: list[ast.stmt] = []
    for statement in body:
        if type(statement) is ast.If:
            guard = _guard(statement.test)
            if guard is not None and _holder(statement.test) == holder:
                out.extend(_loads(statement.body, holder, guards + (guard,)))
                negated = Guard(guard.option, guard.equals, True)
                out.extend(_loads(statement.orelse, holder, guards + (negated,)))
            continue  # a test of anything else is another switch (or none): not this one's load
        plain.append(statement)
    loaded = _loaded(plain)
    if loaded is not None:
        out.append((loaded, guards))
    return out


def _loaded(statements: list[ast.stmt]) -> str | None:
    """``nf4``/``fp4``/``int8`` when the statements turn a 4-bit or 8-bit load on (a keyword of a
    call or a key of a dict literal set to True), else None."""
    flags: dict[str, object] = {}
    for statement in statements:
        for node in ast.walk(statement):
            if type(node) is ast.keyword and node.arg is not None and type(node.value) is ast.Constant:
                flags.setdefault(node.arg, node.value.value)
            elif type(node) is ast.Dict:
                for key, value in zip(node.keys, node.values):
                    if type(key) is ast.Constant and isinstance(key.value, str) and type(value) is ast.Constant:
                        flags.setdefault(key.value, value.value)
    if flags.get("load_in_4bit") is True:
        return "fp4" if flags.get("bnb_4bit_quant_type") == "fp4" else "nf4"
    if flags.get("load_in_8bit") is True:
        return "int8"
    return None
