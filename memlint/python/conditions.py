"""The conditions a statement runs under, and the options that decide them.

``if args.use_lora: model = get_peft_model(model, config)`` runs only when ``--use_lora`` is
passed; ``if __name__ == "__main__":`` always runs; ``if torch.cuda.is_available():`` is unknown
(and counts as running). A condition inside a helper function extends to the one place that
calls it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import libcst as cst

from memlint.python import option_formulas

if TYPE_CHECKING:
    from memlint.python.values import Values

_SCALAR = (int, float, str, bool, type(None))


@dataclass(frozen=True)
class Guard:
    """A condition a statement runs under. ``active`` is its static truth (None: unknown);
    ``options`` the command-line options that decide it; ``negated`` when the statement runs
    while the option is off."""

    active: bool | None
    options: tuple[str, ...] = ()
    negated: bool = False
    node: cst.CSTNode | None = None
    # ``args.train_mode == 'qlora'``: the value the option must have (None: its truth decides)
    equals: str | None = None
    # ``args.bits == 4``: a numeric comparison a launch redoes with its own values
    # (``memlint.python.option_formulas``); ``options`` are those it reads
    formula: tuple | None = None

    @property
    def blocks(self) -> bool:
        """Does the statement not run by default (off, or decided by an option of unknown value)?"""
        return self.active is False or (self.active is None and bool(self.options))


def guards(values: "Values", node: cst.CSTNode, depth: int = 0) -> list[Guard]:
    """The conditions ``node`` runs under: enclosing ``if`` statements and conditional
    expressions, and those around the one call of its enclosing function."""
    out: list[Guard] = []
    child, current = node, values.parent(node)
    while current is not None and not isinstance(current, cst.Module):
        if isinstance(current, (cst.If, cst.IfExp)):
            if child is current.body:
                out.append(guard(values, current.test, negated=False))
            elif child is current.orelse:
                out.append(guard(values, current.test, negated=True))
        elif isinstance(current, cst.FunctionDef):
            out.extend(_at_its_one_call(values, current, depth, guards))
            break
        elif isinstance(current, (cst.Lambda, cst.ClassDef)):
            break
        child, current = current, values.parent(current)
    return out


def early_exits(values: "Values", node: cst.CSTNode, depth: int = 0) -> list[Guard]:
    """The tests of the early exits before ``node`` (``if args.debug_tokenization:
    debug_tokenization(args); return`` at the top of ``main``), negated: ``node`` runs only when
    each is false. Through the one call of its enclosing function, as ``guards`` goes."""
    out: list[Guard] = []
    child, current = node, values.parent(node)
    while current is not None:
        if isinstance(current, (cst.IndentedBlock, cst.Module)):
            for statement in current.body:
                if statement is child:
                    break
                if isinstance(statement, cst.If) and statement.orelse is None and _exits(statement.body):
                    out.append(guard(values, statement.test, negated=True))
        if isinstance(current, cst.FunctionDef):
            out.extend(_at_its_one_call(values, current, depth, early_exits))
            break
        if isinstance(current, (cst.Module, cst.ClassDef, cst.Lambda)):
            break
        child, current = current, values.parent(current)
    return out


def _at_its_one_call(values: "Values", function: cst.FunctionDef, depth: int, walk) -> list[Guard]:
    """What ``walk`` (``guards``, ``early_exits``) finds at the one call of a plain function,
    followed four calls deep at most; nothing for a method or a function called elsewhere too."""
    if depth < 4 and not values.is_method(function):
        calls = values.call_sites(function)
        if len(calls) == 1:
            return walk(values, calls[0], depth + 1)
    return []


def _exits(body: cst.BaseSuite) -> bool:
    """Does the block end by leaving its function or the program (``return``, ``raise``,
    ``sys.exit()``)?"""
    if type(body) is not cst.IndentedBlock or not body.body:
        return False
    last = body.body[-1]
    if type(last) is not cst.SimpleStatementLine or not last.body:
        return False
    small = last.body[-1]
    if type(small) is cst.Return or type(small) is cst.Raise:
        return True
    if type(small) is cst.Expr and type(small.value) is cst.Call:
        func = small.value.func
        name = func.attr.value if type(func) is cst.Attribute else func.value if type(func) is cst.Name else ""
        return name in ("exit", "quit", "_exit")
    return False


def guard(values: "Values", test: cst.BaseExpression, negated: bool) -> Guard:
    """A condition's static truth and the option that decides it (``args.use_lora``,
    ``not args.no_ckpt``, ``args.lora_dim > 0``, ``args.x is not None``)."""
    found = values.evaluate(test)
    active = None
    if found is not None and found.known and isinstance(found.value, _SCALAR):
        active = bool(found.value) != negated
    compared = equality(values, test)
    if compared is not None:
        options, literal, unequal = compared
        return Guard(active, options, negated != unequal, test, literal)
    options, flipped = deciding_options(values, test)
    if not options and found is not None and found.formula is not None and not option_formulas.is_number(found.formula):
        return Guard(active, option_formulas.options_of(found.formula), negated, test, formula=found.formula)
    return Guard(active, options, negated != flipped, test)


def equality(values: "Values", test: cst.BaseExpression) -> tuple[tuple[str, ...], str, bool] | None:
    """``args.train_mode == 'qlora'`` (or ``!=``): the options compared, the text they are compared
    with, and whether the test is ``!=``. None for any other test."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    target = test.comparisons[0]
    if type(target.operator) not in (cst.Equal, cst.NotEqual):
        return None
    right = values.evaluate(target.comparator)
    if right is None or not right.known or not isinstance(right.value, str) or not right.value \
            or ":" in right.value or "=" in right.value:
        return None
    left = values.evaluate(test.left) if isinstance(test.left, (cst.Name, cst.Attribute, cst.Subscript)) else None
    options = left.options if left is not None else ()
    if left is None and type(test.left) is cst.Attribute and type(test.left.value) is cst.Name and \
            values.options.parses_dataclasses():
        # ``args.train_mode`` where ``args`` came back from ``parse_json_file``: a field of the
        # dataclasses the script parses, set by its command line (or arguments file)
        options = (test.left.attr.value,)
    if not options:
        return None
    return options, right.value, type(target.operator) is cst.NotEqual


def deciding_options(values: "Values", test: cst.BaseExpression) -> tuple[tuple[str, ...], bool]:
    """Options whose truth decides ``test``, and whether the test is their negation."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        options, flipped = deciding_options(values, test.expression)
        return options, not flipped
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        right = values.evaluate(target.comparator)
        if right is None or not right.known:
            return (), False
        op, value = type(target.operator), right.value
        options, flipped = deciding_options(values, test.left)
        if not options:
            return (), False
        if (op in (cst.GreaterThan, cst.NotEqual) and value == 0) or (op is cst.GreaterThanEqual and value == 1):
            return options, flipped
        if op is cst.IsNot and value is None:
            return options, flipped
        if (op is cst.Equal and value in (0, False)) or (op is cst.Is and value is None):
            return options, not flipped
        return (), False
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
        # ``if args.lora or args.qlora:``: runs when either is on, each option alone decides it
        either, either_flipped = deciding_options(values, test.left)
        other, other_flipped = deciding_options(values, test.right)
        if either and other and not either_flipped and not other_flipped:
            return either + other, False
        return (), False
    if isinstance(test, (cst.Name, cst.Attribute, cst.Subscript)):
        found = values.evaluate(test)
        if found is not None and found.options:
            return found.options, False
    return (), False
