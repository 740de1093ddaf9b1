"""A helper's condition read at the call that runs it.

``def loss_step(batch, mixed_precision=False): if mixed_precision: with autocast(): ...`` is
called by one loop with ``mixed_precision=True`` and by another with
``mixed_precision=mixed_precision``, a parameter of that loop's own function whose one caller
passes ``False``. Read over every caller the test is unknown; read at one call, with each
parameter bound to what that call passes (its default where the call leaves it out, and a
parameter passed on from the caller's own parameters bound through the call before it), it
is known. :func:`truth_at` answers only where the answer depends on such a binding: any other
test keeps the module-wide reading it has everywhere else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import libcst as cst

from memlint.python.references import NOT_PASSED, Parameter
from memlint.python.values import Values, module_values

if TYPE_CHECKING:
    from memlint.python.index import ModuleIndex
    from memlint.python.loops import Event

_SCALAR = (int, float, str, bool, type(None))
_NOT_KNOWN = object()
_UNKNOWN = (_NOT_KNOWN, False)  # (value, read through a call's binding)


def truth_at(values: "Values", index: "ModuleIndex", test: cst.BaseExpression,
             chain: Sequence[cst.Call]) -> bool | None:
    """The truth of ``test`` (written in a helper) when the helper runs through ``chain``, the
    calls that lead to it from the analysed body, outermost first; None when it is not known or
    does not depend on what those calls pass."""
    if not chain:
        return None
    value, bound = _Reader(values, index).read(test, tuple(chain))
    if not bound or value is _NOT_KNOWN:
        return None
    return bool(value)


class HelperBranches:
    """Whether a loop reaches an event (``loops.Event``) inside a helper: ``if mixed_precision:``
    in ``loss_step(..., mixed_precision=False)`` never runs at a call that passes ``False``
    (also through the caller's own parameter, bound by its caller). One per module and rule
    run; values are read only for events that a helper's ``if`` guards."""

    def __init__(self, index: "ModuleIndex") -> None:
        self.index = index
        self._values: Values | None = None
        # (test, calls) -> truth: the events of one region share their guards and calls
        self._truths: dict[tuple[int, ...], bool | None] = {}

    def skip(self, event: "Event", enabled: cst.BaseExpression | None = None) -> bool:
        """Does a helper's ``if`` around ``event`` take the other branch at the calls that lead
        there, or is ``enabled`` (of the context around it: ``autocast(enabled=use_amp)``) false there?"""
        return self.decided(event, enabled) is False

    def decided(self, event: "Event", enabled: cst.BaseExpression | None = None) -> bool | None:
        """What the calls that lead to ``event`` decide of it: False when a helper's ``if`` around
        it (or ``enabled``) is off there, True when one is on there and none is off, None when
        they decide nothing (no helper's test reads what they pass)."""
        if not event.chain:
            return None
        tests = [(g.node.test, g.branch == "body") for g in event.guards if g.branch in ("body", "orelse")]
        if enabled is not None:
            tests.append((enabled, True))
        on = None
        for test, wanted in tests:
            key = (id(test), *map(id, event.chain))
            if key not in self._truths:
                if self._values is None:
                    self._values = module_values(self.index)
                self._truths[key] = truth_at(self._values, self.index, test, event.chain)
            truth = self._truths[key]
            if truth is not None and truth != wanted:
                return False
            if truth is not None:
                on = True
        return on


class _Reader:
    def __init__(self, values: "Values", index: "ModuleIndex") -> None:
        self.values = values
        self.index = index

    def read(self, expr: cst.BaseExpression, chain: tuple[cst.Call, ...], depth: int = 0) -> tuple[Any, bool]:
        """``expr``'s value where the helper holding it runs through ``chain``, and whether a
        call's binding decided it (else the module-wide value); ``_NOT_KNOWN`` when unknown."""
        if depth > 8:
            return _UNKNOWN
        if type(expr) is cst.Name:
            return self._name(expr, chain, depth)
        if type(expr) is cst.UnaryOperation and type(expr.operator) is cst.Not:
            value, bound = self.read(expr.expression, chain, depth + 1)
            return (not value, bound) if value is not _NOT_KNOWN else _UNKNOWN
        if type(expr) is cst.BooleanOperation:
            return self._boolean(expr, chain, depth)
        return self._module_wide(expr)

    def _module_wide(self, expr: cst.BaseExpression) -> tuple[Any, bool]:
        found = self.values.evaluate(expr)
        if found is None or not found.known or found.options or not isinstance(found.value, _SCALAR):
            return _UNKNOWN  # an option's default is not what every launch runs (``--fp16``)
        return found.value, False

    def _boolean(self, expr: cst.BooleanOperation, chain: tuple[cst.Call, ...], depth: int) -> tuple[Any, bool]:
        conjunction = type(expr.operator) is cst.And
        left, left_bound = self.read(expr.left, chain, depth + 1)
        if left is not _NOT_KNOWN and bool(left) != conjunction:
            return left, left_bound  # ``False and x``, ``True or x``: the left side decides
        right, right_bound = self.read(expr.right, chain, depth + 1)
        if left is not _NOT_KNOWN and right is not _NOT_KNOWN:
            return right, left_bound or right_bound
        if right is not _NOT_KNOWN and bool(right) != conjunction:
            return right, right_bound  # ``x and False``, ``x or True``
        return _UNKNOWN

    def _name(self, name: cst.Name, chain: tuple[cst.Call, ...], depth: int) -> tuple[Any, bool]:
        definitions = self.values.definitions(name)
        if len(definitions) == 1 and isinstance(definitions[0], Parameter):
            parameter = definitions[0]
            for position in range(len(chain) - 1, -1, -1):
                call = chain[position]
                if self.index.helper_for(call) is parameter.function:
                    return self._passed(parameter, call, chain[:position], depth)
            function = parameter.function
            if type(function) is not cst.FunctionDef or self.values.is_method(function) \
                    or not self.values.call_sites(function):
                return _UNKNOWN  # its callers are elsewhere: not its default
        return self._module_wide(name)

    def _passed(self, parameter: Parameter, call: cst.Call, before: tuple[cst.Call, ...],
                depth: int) -> tuple[Any, bool]:
        """What ``call`` passes for ``parameter``, read where the caller runs (through ``before``)."""
        function = parameter.function
        if type(function) is not cst.FunctionDef:
            return _UNKNOWN
        bound_self = type(call.func) is cst.Attribute and self.values.is_method(function)
        argument = self.values.argument_for(function, parameter.param, call, bound_self=bound_self)
        if argument is NOT_PASSED:
            default = parameter.param.default
            value = self._module_wide(default)[0] if default is not None else _NOT_KNOWN
        elif isinstance(argument, cst.BaseExpression):
            value = self.read(argument, before, depth + 1)[0]
        else:
            value = _NOT_KNOWN  # hidden in ``**kwargs`` or an element of ``*args``
        return (value, True) if value is not _NOT_KNOWN else _UNKNOWN
