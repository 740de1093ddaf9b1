"""One pass over a module that the training-code rules share: its functions, where each node
sits (its function, its position), and every assignment by name.

Built once per parsed module (:func:`index_for`) and dropped with it.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Iterator

import libcst as cst

from memlint.rules._python_helpers.syntax import dotted, iter_nodes, method_name, receiver
from memlint.sources.python import PythonSource

Flow = cst.Module | cst.FunctionDef  # a body that runs top to bottom

_NO_GRAD = {
    "torch.no_grad",
    "torch.inference_mode",
    "torch.autograd.no_grad",
    "torch.autograd.grad_mode.no_grad",
    "torch.autograd.grad_mode.inference_mode",
}


@dataclass(frozen=True)
class Definition:
    """``name = value`` (or ``name /= value``...) somewhere in a flow."""

    name: str  # "loss", or "args.max_train_steps" for attribute targets
    statement: cst.CSTNode  # the Assign / AugAssign / AnnAssign / For / WithItem / NamedExpr
    value: cst.BaseExpression | None  # what was assigned (None when unknown: unpacking, loops)
    flow: Flow
    augmented: cst.BaseAugOp | None = None  # the operator of ``name op= value``
    whole_value: cst.BaseExpression | None = None  # for ``a, b = f()``: ``f()``


@dataclass
class ModuleIndex:
    py: PythonSource
    functions: dict[str, list[cst.FunctionDef]] = field(default_factory=dict)
    classes: dict[str, cst.ClassDef] = field(default_factory=dict)
    flows: list[Flow] = field(default_factory=list)
    definitions: dict[int, dict[str, list[Definition]]] = field(default_factory=dict)  # id(flow) -> name -> defs
    cache: dict[str, object] = field(default_factory=dict)  # results other helpers compute once

    # ------------------------------------------------------------------ positions

    def start(self, node: cst.CSTNode) -> tuple[int, int]:
        position = self.py.range_of(node).start
        return (position.line, position.column)

    def end(self, node: cst.CSTNode) -> tuple[int, int]:
        position = self.py.range_of(node).end
        return (position.line, position.column)

    def before(self, a: cst.CSTNode, b: cst.CSTNode) -> bool:
        return self.start(a) < self.start(b)

    def contains(self, outer: cst.CSTNode, inner: cst.CSTNode) -> bool:
        return self.start(outer) <= self.start(inner) and self.end(inner) <= self.end(outer)

    # ------------------------------------------------------------------ structure

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.py.parent(node)

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        current = self.parent(node)
        while current is not None:
            yield current
            current = self.parent(current)

    def flow_of(self, node: cst.CSTNode) -> Flow:
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef):
                return ancestor
        return self.py.module

    def statement_of(self, node: cst.CSTNode) -> cst.CSTNode:
        """The statement line (simple or compound) that holds ``node``."""
        current: cst.CSTNode = node
        for ancestor in self.ancestors(node):
            if isinstance(current, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                return current
            current = ancestor
        return current

    def class_of(self, node: cst.CSTNode) -> cst.ClassDef | None:
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, cst.ClassDef):
                return ancestor
        return None

    def qualified(self, node: cst.CSTNode) -> set[str]:
        try:
            return self.py.qualified_names(node)
        except KeyError:  # a node the metadata does not cover
            return set()

    def calls_named(self, call: cst.Call, *names: str) -> bool:
        """Does ``call`` call one of these fully qualified names (through imports and aliases)?"""
        qualified = self.qualified(call)
        return any(q in names for q in qualified)

    def under_no_grad(self, node: cst.CSTNode) -> bool:
        """Inside ``with torch.no_grad()`` / ``inference_mode()`` / ``set_grad_enabled(False)``
        or a function decorated with ``@torch.no_grad()``?"""
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, cst.With):
                for item in ancestor.items:
                    if self._disables_grad(item.item):
                        return True
            if isinstance(ancestor, cst.FunctionDef):
                for decorator in ancestor.decorators:
                    if self._disables_grad(decorator.decorator):
                        return True
        return False

    def _disables_grad(self, expr: cst.BaseExpression) -> bool:
        target = expr.func if isinstance(expr, cst.Call) else expr
        names = self.qualified(target) or {dotted(target) or ""}  # unresolved: as written
        if names & _NO_GRAD:
            return True
        if isinstance(expr, cst.Call) and names & {"torch.set_grad_enabled", "torch.autograd.set_grad_enabled"}:
            from memlint.rules._python_helpers.syntax import argument, is_false

            return is_false(argument(expr, 0, "mode"))
        return False

    # ------------------------------------------------------------------ helpers

    def helper_for(self, call: cst.Call) -> cst.FunctionDef | None:
        """The function of this module that ``call`` runs: ``train_step(...)`` or
        ``self.train_step(...)`` (a method of the caller's class)."""
        func = call.func
        if isinstance(func, cst.Name):
            candidates = [f for f in self.functions.get(func.value, []) if not self._is_method(f)]
            return candidates[0] if candidates else None
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value in ("self", "cls"):
            owner = self.class_of(call)
            name = func.attr.value
            if owner is not None:
                for statement in owner.body.body:
                    if isinstance(statement, cst.FunctionDef) and statement.name.value == name:
                        return statement
        return None

    def _is_method(self, function: cst.FunctionDef) -> bool:
        parent = self.parent(function)
        grand = self.parent(parent) if parent is not None else None
        return isinstance(grand, cst.ClassDef)

    def callers_of(self, function: cst.FunctionDef) -> list[cst.Call]:
        out = []
        for flow in self.flows:
            for node in iter_nodes(flow if isinstance(flow, cst.Module) else flow.body):
                if isinstance(node, cst.Call) and self.helper_for(node) is function:
                    out.append(node)
        return out

    # ------------------------------------------------------------------ assignments

    def definitions_of(self, name: str, flow: Flow) -> list[Definition]:
        return self.definitions.get(id(flow), {}).get(name, [])

    def reaching(self, name: str, at: cst.CSTNode) -> list[Definition]:
        """Definitions of ``name`` in the flow of ``at`` written before it, nearest last; falls
        back to the module's definitions for a name the function does not bind."""
        flow = self.flow_of(at)
        position = self.start(at)
        found = [d for d in self.definitions_of(name, flow) if self.start(d.statement) < position]
        if not found and not isinstance(flow, cst.Module) and not self._is_parameter(name, flow):
            found = list(self.definitions_of(name, self.py.module))
        return found

    def all_definitions(self, name: str, at: cst.CSTNode) -> list[Definition]:
        """Every definition of ``name`` in the flow of ``at`` (wherever written), or the module's."""
        flow = self.flow_of(at)
        found = list(self.definitions_of(name, flow))
        if not found and not isinstance(flow, cst.Module) and not self._is_parameter(name, flow):
            found = list(self.definitions_of(name, self.py.module))
        return found

    def _is_parameter(self, name: str, flow: cst.FunctionDef) -> bool:
        params = flow.params
        every = [*params.posonly_params, *params.params, *params.kwonly_params]
        if isinstance(params.star_arg, cst.Param):
            every.append(params.star_arg)
        if params.star_kwarg is not None:
            every.append(params.star_kwarg)
        return any(p.name.value == name for p in every)

    def parameter_default(self, name: str, flow: Flow) -> cst.BaseExpression | None:
        if isinstance(flow, cst.Module):
            return None
        params = flow.params
        for p in [*params.posonly_params, *params.params, *params.kwonly_params]:
            if p.name.value == name:
                return p.default
        return None


def _targets(target: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(target, (cst.Tuple, cst.List)):
        out = []
        for element in target.elements:
            out.extend(_targets(element.value))
        return out
    return [target]


def _build(py: PythonSource) -> ModuleIndex:
    index = ModuleIndex(py)
    module = py.module
    index.flows.append(module)
    for node in iter_nodes(module, enter_defs=True):
        if isinstance(node, cst.FunctionDef):
            index.functions.setdefault(node.name.value, []).append(node)
            index.flows.append(node)
        elif isinstance(node, cst.ClassDef):
            index.classes.setdefault(node.name.value, node)
    for flow in index.flows:
        table: dict[str, list[Definition]] = {}
        body = flow if isinstance(flow, cst.Module) else flow.body
        for node in iter_nodes(body):
            for definition in _definitions_in(node, flow):
                table.setdefault(definition.name, []).append(definition)
        index.definitions[id(flow)] = table
    return index


def _definitions_in(node: cst.CSTNode, flow: Flow) -> Iterator[Definition]:
    if isinstance(node, cst.Assign):
        for target in node.targets:
            names = _targets(target.target)
            single = len(names) == 1 and not isinstance(target.target, (cst.Tuple, cst.List))
            values: list[cst.BaseExpression | None]
            if single:
                values = [node.value]
            elif isinstance(node.value, (cst.Tuple, cst.List)) and len(node.value.elements) == len(names):
                values = [e.value for e in node.value.elements]
            else:
                values = [None] * len(names)
            for name_node, value in zip(names, values):
                name = dotted(name_node)
                if name:
                    yield Definition(name, node, value, flow, whole_value=node.value)
    elif isinstance(node, cst.AnnAssign) and node.value is not None:
        name = dotted(node.target)
        if name:
            yield Definition(name, node, node.value, flow, whole_value=node.value)
    elif isinstance(node, cst.AugAssign):
        name = dotted(node.target)
        if name:
            yield Definition(name, node, node.value, flow, augmented=node.operator)
    elif isinstance(node, (cst.For, cst.CompFor)):
        for name_node in _targets(node.target):
            name = dotted(name_node)
            if name:
                yield Definition(name, node, None, flow, whole_value=node.iter)
    elif isinstance(node, cst.WithItem) and node.asname is not None:
        for name_node in _targets(node.asname.name):
            name = dotted(name_node)
            if name:
                yield Definition(name, node, None, flow, whole_value=node.item)
    elif isinstance(node, cst.NamedExpr):
        name = dotted(node.target)
        if name:
            yield Definition(name, node, node.value, flow, whole_value=node.value)
    elif isinstance(node, cst.Call) and method_name(node) in ("div_", "mul_") and dotted(receiver(node)):
        # ``loss.div_(accum)`` rebinds nothing but changes the value in place
        yield Definition(dotted(receiver(node)) or "", node, node, flow)


_INDEXES: "weakref.WeakKeyDictionary[PythonSource, ModuleIndex]" = weakref.WeakKeyDictionary()


def index_for(py: PythonSource) -> ModuleIndex:
    """The shared index of a parsed module (built on first use)."""
    index = _INDEXES.get(py)
    if index is None:
        index = _build(py)
        _INDEXES[py] = index
    return index
