"""Arithmetic over launch options, kept so that a launch can redo it.

A script often derives a value from its options instead of reading one (alpaca-lora's
``gradient_accumulation_steps = batch_size // micro_batch_size`` over ``fire.Fire(train)``
parameters, ``per_device_train_batch_size=args.batch_size // world_size``). The value reader
works that out from the defaults; the formula beside it (``Found.formula``) says how, so that a
launch passing ``--micro_batch_size 8`` gets the value its own options give, not the defaults'.

A formula is a nested tuple: ``("option", (names...), default)`` for an option (``default``
None when the script gives none), ``("env", NAME, default)`` for a variable a launcher sets
(``WORLD_SIZE``; ``default`` what the script falls back to when it is unset), ``("number", value)`` for a constant, and ``(operator, operand, ...)`` for
``+ - * / // %``, ``min``, ``max``, ``int``, ``float`` and ``neg``; comparisons (``== != < <= > >=``)
and ``("if", test, then, otherwise)`` for a value a condition reassigns (alpaca-lora's ``if ddp:
gradient_accumulation_steps = gradient_accumulation_steps // world_size``). Only numbers take part.
"""

from __future__ import annotations

import json
import math
import operator
from typing import Any, Callable

Formula = tuple

# the launcher-set environment variables a formula may read, and the launch fact each one is
ENVIRONMENT = {"WORLD_SIZE": "world_size", "LOCAL_WORLD_SIZE": "gpus_per_node"}


def launcher_sets(name: str) -> bool:
    """A variable each process of a distributed launch gets from its launcher (torchrun, SLURM,
    MPI, Accelerate): what a script falls back to without it is not what a launched run reads."""
    return name in ENVIRONMENT or name in _LAUNCHER_SET or name.startswith(_LAUNCHER_PREFIXES)


_LAUNCHER_SET = frozenset({"RANK", "LOCAL_RANK", "NODE_RANK", "GROUP_RANK", "ROLE_RANK", "MASTER_ADDR",
                           "MASTER_PORT", "CUDA_VISIBLE_DEVICES"})
_LAUNCHER_PREFIXES = ("SLURM_", "OMPI_", "PMI_", "PMIX_", "ACCELERATE_", "TORCHELASTIC_", "MV2_")

_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "//": operator.floordiv,
    "%": operator.mod,
}
_UNARY: dict[str, Callable[[Any], Any]] = {"int": int, "float": float, "neg": operator.neg}
_CHOICE: dict[str, Callable[..., Any]] = {"min": min, "max": max}
_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}
# how ``describe`` writes each operator, and how tightly it binds (for parentheses)
_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2, "//": 2, "%": 2, **{op: 0 for op in _COMPARE}}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def number_in(value: Any) -> int | float | None:
    """A number as a script or a command line writes it (``4``, ``"4"``, ``"1e-4"``), else None."""
    if _number(value):
        return value
    if isinstance(value, str):
        for kind in (int, float):
            try:
                parsed = kind(value.strip())
            except ValueError:
                continue
            return parsed if _number(parsed) else None
    return None


def operand(value: Any, options: tuple[str, ...], formula: Formula | None, known: bool) -> Formula | None:
    """One operand as a formula: its own formula, an option (with its default when that is a
    number), or a constant; None when it is none of them (a string, an unknown value)."""
    if formula is not None:
        return formula
    if options:
        if known and not _number(value):
            return None
        return ("option", tuple(options), value if known else None)
    return ("number", value) if known and _number(value) else None


def combine(op: str, operands: list[Formula | None]) -> Formula | None:
    """``op`` over ``operands``, or None unless every operand is a formula and one reads an
    option or a launcher's variable (arithmetic over constants alone needs no launch to redo it)."""
    if any(o is None for o in operands) or not any(_varies(o) for o in operands if o is not None):
        return None
    return (op, *operands)


def _varies(formula: Formula) -> bool:
    return formula[0] in ("option", "env") or (formula[0] != "number" and any(
        isinstance(o, tuple) and _varies(o) for o in formula[1:]))


def is_number(formula: Formula) -> bool:
    """Does the formula give a number (not a comparison's truth), a value a fact can take?"""
    return formula[0] not in _COMPARE


def options_of(formula: Formula) -> tuple[str, ...]:
    """Every option name the formula reads (each option's aliases included), in order."""
    if formula[0] == "option":
        return tuple(formula[1])
    if formula[0] in ("number", "env"):
        return ()
    names: list[str] = []
    for part in formula[1:]:
        names += [n for n in options_of(part) if n not in names]
    return tuple(names)


def variables_of(formula: Formula) -> frozenset[str]:
    """The environment variables the formula reads."""
    if formula[0] == "env":
        return frozenset((formula[1],))
    if formula[0] in ("number", "option"):
        return frozenset()
    return frozenset().union(*(variables_of(part) for part in formula[1:]))


def encode(formula: Formula) -> str:
    """The formula as compact text, for a binding string (``RunFacts.cli_bindings``)."""
    return json.dumps(formula, separators=(",", ":"))


def decode(text: str) -> Formula | None:
    try:
        loaded = json.loads(text)
    except ValueError:
        return None
    return _as_tuple(loaded) if isinstance(loaded, list) and loaded else None


def _as_tuple(value: Any) -> Any:
    return tuple(_as_tuple(v) for v in value) if isinstance(value, list) else value


def compute(formula: Formula, option: Callable[[tuple[str, ...]], Any],
            environment: Callable[[str, Any], Any]) -> Any:
    """The formula's value with ``option(names)`` for each option (None: not passed, so its
    default) and ``environment(name, default)`` for each variable; None when some part is
    unknown or the arithmetic fails (a division by zero)."""
    try:
        value = _compute(formula, option, environment)
    except (ArithmeticError, TypeError, ValueError, IndexError):
        return None
    return value if _number(value) else None


def holds(formula: Formula, option: Callable[[tuple[str, ...]], Any],
          environment: Callable[[str, Any], Any]) -> bool | None:
    """Whether a comparison (``bits == 4``) holds for these option values (as ``compute``);
    None when it is no comparison or some part is unknown."""
    if is_number(formula):
        return None
    try:
        value = _compute(formula, option, environment)
    except (ArithmeticError, TypeError, ValueError, IndexError):
        return None
    return value if isinstance(value, bool) else None


def _compute(formula: Formula, option: Callable, environment: Callable) -> Any:
    kind = formula[0]
    if kind == "number":
        return formula[1]
    if kind == "option":
        given = option(formula[1])
        value = formula[2] if given is None else given
    elif kind == "env":
        value = environment(formula[1], formula[2])
    elif kind == "if":
        test = _compute(formula[1], option, environment)
        return None if test is None else _compute(formula[2] if test else formula[3], option, environment)
    else:
        parts = [_compute(part, option, environment) for part in formula[1:]]
        if any(not _number(p) for p in parts):
            return None
        if kind in _COMPARE and len(parts) == 2:
            return _COMPARE[kind](*parts)
        if kind in _BINARY and len(parts) == 2:
            value = _BINARY[kind](*parts)
        elif kind in _UNARY and len(parts) == 1:
            value = _UNARY[kind](*parts)
        elif kind in _CHOICE and parts:
            value = _CHOICE[kind](parts)
        else:
            return None
    return value if _number(value) else None


def describe(formula: Formula, outer: int = 0) -> str:
    """The formula as Python-like text, for a fact's note (``batch_size // micro_batch_size``)."""
    kind = formula[0]
    if kind == "number":
        return repr(formula[1])
    if kind == "option":
        return max(formula[1], key=len) if formula[1] else "?"
    if kind == "env":
        return formula[1]
    if kind in ("int", "float"):  # the conversion of an option or a variable says nothing new
        return describe(formula[1], outer)
    if kind == "if":
        text = f"{describe(formula[2], 1)} if {describe(formula[1])} else {describe(formula[3], 1)}"
        return f"({text})" if outer else text
    if kind in _PRECEDENCE and len(formula) == 3:
        own = _PRECEDENCE[kind]
        text = f"{describe(formula[1], own)} {kind} {describe(formula[2], own + 1)}"
        return f"({text})" if own < outer else text
    if kind == "neg":
        return f"-{describe(formula[1], 3)}"
    return f"{kind}({', '.join(describe(part) for part in formula[1:])})"
