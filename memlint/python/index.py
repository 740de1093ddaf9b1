"""One pass over a module that the training-code rules share: its functions, where each node
sits (its function, its position), and every assignment by name.

Built once per parsed module (:func:`index_for`) and dropped with it.
"""

from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass, field
from typing import Iterator, cast

import libcst as cst
from libcst.helpers import get_full_name_for_node

from memlint.python.source import PythonSource
from memlint.python.statement_index import (
    StatementPart,
    flow_calls,
    function_table,
    module_calls,
    part_of,
    part_of_whole,
)
from memlint.python.syntax import dotted, iter_nodes, method_name, receiver

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
    augmented: cst.BaseAugOp | None = None  # the operator of ``name op= value``
    whole_value: cst.BaseExpression | None = None  # for ``a, b = f()``: ``f()``
    position: int | None = None  # for ``a, b = f()``: where the name sits in the tuple


@dataclass
class ModuleIndex:
    """One pass over a training script that the rules share: its functions and classes, the
    flows (module body and each function) with their definitions, the qualified names of calls.
    Built from per-statement parts, so an edit re-indexes only the statements it changed."""

    # weak: the index is kept on its source (``PythonSource.derived``); a strong reference back
    # would make each version of an edited document a cycle, freed only by the cycle collector
    # after its objects sat in the collector's generations (docs/latency.md)
    source: "weakref.ref[PythonSource]"
    functions: dict[str, list[cst.FunctionDef]] = field(default_factory=dict)
    classes: dict[str, cst.ClassDef] = field(default_factory=dict)
    flows: list[Flow] = field(default_factory=list)
    definitions: dict[int, dict[str, list[Definition]]] = field(default_factory=dict)  # id(flow) -> name -> defs
    cache: dict[object, object] = field(default_factory=dict)
    _qualified: dict[cst.CSTNode, frozenset[str]] = field(default_factory=dict, repr=False)  # results other helpers compute once

    parts: list[tuple[cst.BaseStatement, StatementPart]] = field(default_factory=list, repr=False)
    _part_of_function: dict[int, tuple[cst.BaseStatement, StatementPart]] = field(default_factory=dict, repr=False)

    @property
    def py(self) -> PythonSource:
        source = self.source()
        assert source is not None, "an index is reached through its source"
        return source

    @property
    def nodes(self) -> list[cst.CSTNode]:
        """Every node of the module, functions and classes included, in source order."""
        return self.once("nodes", self._nodes)

    def _nodes(self) -> list[cst.CSTNode]:
        out: list[cst.CSTNode] = [self.py.module]
        for statement, part in self.parts:
            out.append(statement)
            out += part.below
        return out

    @property
    def calls(self) -> list[cst.Call]:
        """Every call of the module, in source order."""
        return self.nodes_of(cst.Call)

    def nodes_of(self, *kinds: type[cst.CSTNode]) -> list:
        """The module's nodes of these node classes (concrete ones: the test is ``type(node)``,
        not a walk of ``isinstance`` calls per rule), in source order; computed once."""
        return self.once(("nodes_of", kinds), lambda: self._nodes_of(kinds))

    def _nodes_of(self, kinds: tuple[type[cst.CSTNode], ...]) -> list:
        out: list[cst.CSTNode] = [self.py.module] if cst.Module in kinds else []
        for statement, part in self.parts:
            if type(statement) in kinds:
                out.append(statement)
            out += part.nodes_of(kinds)
        return out

    def once(self, key: object, compute):
        """``compute()`` the first time ``key`` is asked for, the stored result after."""
        if key not in self.cache:
            self.cache[key] = compute()
        return self.cache[key]

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

    def conditions(self, node: cst.CSTNode) -> set[tuple[str, bool]]:
        """What the enclosing ``if``s of its function require for ``node`` to run, as
        (condition as written, truth): ``if a and not b:`` gives {("a", True), ("b", False)},
        ``if not (a or b):`` gives {("a", False), ("b", False)}, the ``else`` of ``if a:`` gives
        {("a", False)}."""
        out: set[tuple[str, bool]] = set()
        previous: cst.CSTNode = node
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
                break
            if isinstance(ancestor, cst.If):
                atoms = self._atoms(ancestor.test)
                if previous is ancestor.body:
                    out |= atoms
                elif previous is ancestor.orelse and len(atoms) == 1:
                    ((text, truth),) = atoms
                    out.add((text, not truth))
            previous = ancestor
        return out

    def _atoms(self, test: cst.BaseExpression) -> set[tuple[str, bool]]:
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
            out: set[tuple[str, bool]] = set()
            pending: list[cst.BaseExpression] = [test]
            while pending:  # a and b and c ... nests to the left: flatten without recursion
                current = pending.pop()
                if isinstance(current, cst.BooleanOperation) and isinstance(current.operator, cst.And):
                    pending += [current.left, current.right]
                else:
                    out |= self._atoms(current)
            return out
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            if isinstance(test.expression, cst.BooleanOperation) and isinstance(test.expression.operator, cst.Or):
                return self._none_of(test.expression)  # not (a or b): neither a nor b
            inner = self._atoms(test.expression)  # not (a and b) says nothing about a alone
            return {(text, not truth) for text, truth in inner} if len(inner) == 1 else set()
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            (target,) = test.comparisons
            positive = {cst.NotEqual: "==", cst.IsNot: "is", cst.NotIn: "in"}
            negative = type(target.operator) in positive
            operator = positive.get(type(target.operator), None) or self.py.code_of(target.operator).strip()
            left, right = (self.py.code_of(n).strip("() ") for n in (test.left, target.comparator))
            text = f"{left} {operator} {right}"
            return {(text, not negative)}
        return {(self.py.code_of(test).strip("() "), True)}

    def _none_of(self, test: cst.BooleanOperation) -> set[tuple[str, bool]]:
        """``not (a or b or c)``: each of a, b and c is false (a disjunct that is itself an
        ``and`` says nothing alone and is left out)."""
        out: set[tuple[str, bool]] = set()
        pending: list[cst.BaseExpression] = [test]
        while pending:
            current = pending.pop()
            if isinstance(current, cst.BooleanOperation) and isinstance(current.operator, cst.Or):
                pending += [current.left, current.right]
                continue
            inner = self._atoms(current)
            if len(inner) == 1:
                ((text, truth),) = inner
                out.add((text, not truth))
        return out

    def branch_conditions(self, test_of: cst.If, branch: str) -> set[tuple[str, bool]]:
        """What taking one branch of an ``if`` requires, as :meth:`conditions` writes it: the
        body of ``if a and not b:`` gives {("a", True), ("b", False)}, the ``else`` of ``if a:``
        gives {("a", False)}; any other branch (``after-continue``) says nothing."""
        atoms = self._atoms(test_of.test)
        if branch == "body":
            return atoms
        if branch == "orelse" and len(atoms) == 1:
            ((text, truth),) = atoms
            return {(text, not truth)}
        return set()

    def exclusive(self, a: cst.CSTNode, b: cst.CSTNode) -> bool:
        """Can ``a`` and ``b`` never both run (``if x:`` around one, ``if not x:`` around the other)?"""
        mine = self.conditions(a)
        return any((text, not truth) in mine for text, truth in self.conditions(b))

    def qualified(self, node: cst.CSTNode) -> frozenset[str]:
        """What ``node`` (a name, an attribute, a call's callee) refers to through imports and
        aliases; asked once per node (the rules ask about the same calls again and again)."""
        known = self._qualified.get(node)
        if known is None:
            try:
                known = frozenset(self.py.qualified_names(node))
            except KeyError:  # a node the metadata does not cover
                known = frozenset()
            self._qualified[node] = known
        return known

    def calls_named(self, call: cst.Call, *names: str) -> bool:
        """Does ``call`` call one of these fully qualified names (through imports and aliases)?"""
        func = call.func
        if not could_be_named(func, names) or not self.could_come_from(func, _packages_of(names)):
            return False
        if type(func) is cst.Name and not self._could_end_in(cast(cst.Name, func).value, _last_parts(names)):
            return False
        qualified = self.qualified(call)
        return any(q in names for q in qualified)

    def could_come_from(self, node: cst.CSTNode, packages: frozenset[str]) -> bool:
        """Can ``node``'s qualified names (``qualified``) start with one of these packages
        (``torch``, ``deepspeed``)? libcst names a dotted name by what binds its first part: an
        import (any module path), a builtin (``builtins.``), or an assignment or definition,
        prefixed with the scopes around it (``train.<locals>.x``, a class's name; nothing at
        module level). So a name bound by no import and not called like the package (``self``,
        a parameter, ``len``) cannot, unless a class or function of the module is called like
        it. Spares the scope lookup of most calls in the rules' passes over every call."""
        root = _first_name(node)
        if root is None:
            return False
        if root in packages or root in self.imported_names:
            return True
        return self.once(("defines one of", packages),
                         lambda: any(p in self.classes or p in self.functions for p in packages))

    def _could_end_in(self, name: str, last_parts: frozenset[str]) -> bool:
        """Can a plain name's qualified names end in one of ``last_parts``? They end in the name
        itself (an import of it, a builtin, an assignment or definition), or, where an import
        binds it as an alias (``from torch.autograd import backward as bw``), in what it
        imports."""
        return name in last_parts or not last_parts.isdisjoint(self._imports()[1].get(name, ()))

    @property
    def imported_names(self) -> frozenset[str]:
        """The names the module's imports bind, in any scope (a method's lazy ``import
        deepspeed`` too): an alias, else the first part of the module path."""
        return self._imports()[0]

    def _imports(self) -> tuple[frozenset[str], dict[str, set[str]]]:
        """``imported_names``, and for each alias the last parts of what it imports."""
        def compute() -> tuple[frozenset[str], dict[str, set[str]]]:
            bound: set[str] = set()
            aliased: dict[str, set[str]] = {}
            for alias in self.nodes_of(cst.ImportAlias):
                full = get_full_name_for_node(alias.name) or ""
                if alias.asname is not None and type(alias.asname.name) is cst.Name:
                    name = cast(cst.Name, alias.asname.name).value
                    aliased.setdefault(name, set()).add(full.rsplit(".", 1)[-1])
                else:
                    name = full.split(".", 1)[0]
                bound.add(name)
            return frozenset(bound), aliased

        return self.once("imports", compute)

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
            from memlint.python.syntax import argument, is_false

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
            if owner is not None:
                return self._methods_of(owner).get(func.attr.value)
        return None

    def overrides_of(self, method: cst.FunctionDef) -> list[cst.FunctionDef]:
        """The methods of the module's subclasses (at any depth) of ``method``'s class that
        override it: what ``self.method(...)`` runs on an instance of one of them."""
        owner = self.class_of(method)
        if owner is None:
            return []
        found: list[cst.FunctionDef] = []
        below = {owner.name.value}
        changed = True
        while changed:
            changed = False
            for name, cls in self.classes.items():
                if name in below:
                    continue
                bases = {text.rsplit(".", 1)[-1] for arg in cls.bases if (text := dotted(arg.value))}
                if bases & below:
                    below.add(name)
                    changed = True
                    own = self._methods_of(cls).get(method.name.value)
                    if own is not None and self.class_of(own) is cls:
                        found.append(own)
        return found

    def _methods_of(self, owner: cst.ClassDef) -> dict[str, cst.FunctionDef]:
        """A class's methods by name (the first of a name), once per class: asked of every
        ``self.x()`` call, of which a trainer class makes hundreds among a hundred methods."""
        def table() -> dict[str, cst.FunctionDef]:
            methods: dict[str, cst.FunctionDef] = {}
            for statement in owner.body.body:
                if isinstance(statement, cst.FunctionDef):
                    methods.setdefault(statement.name.value, statement)
            return methods

        return self.once(("methods", id(owner)), table)

    def _is_method(self, function: cst.FunctionDef) -> bool:
        parent = self.parent(function)
        grand = self.parent(parent) if parent is not None else None
        return isinstance(grand, cst.ClassDef)

    def callees(self, flow: Flow, depth: int = 2) -> set[int]:
        """ids of the module's functions ``flow`` runs, directly or through ``depth`` levels."""
        return self.once(f"callees:{id(flow)}:{depth}", lambda: self._reach(flow, depth))

    def _reach(self, flow: Flow, depth: int) -> set[int]:
        return _reached(self.once("callees", self._direct_callees), {id(flow)}, depth)

    def runners_of(self, functions: set[int], depth: int = 2) -> set[int]:
        """ids of the flows that run one of ``functions`` (ids), directly or through ``depth``
        levels: the flows whose ``callees(flow, depth)`` meet them, found by one walk of the calls
        backwards rather than one walk forwards per flow of the module."""
        callers = self.once("callers", self._direct_callers)
        return _reached(callers, functions, depth)

    def _direct_callers(self) -> dict[int, set[int]]:
        out: dict[int, set[int]] = {}
        for caller, called in self.once("callees", self._direct_callees).items():
            for function in called:
                out.setdefault(function, set()).add(caller)
        return out

    def _direct_callees(self) -> dict[int, set[int]]:
        out: dict[int, set[int]] = {}
        for flow in self.flows:
            for node in self.calls_of_flow(flow):
                helper = self.helper_for(node)
                if helper is not None:
                    out.setdefault(id(flow), set()).add(id(helper))
        return out

    def calls_of_flow(self, flow: Flow) -> list[cst.Call]:
        """The calls a flow makes itself (not those of the functions, classes and lambdas it
        defines), in source order; kept with the statement that holds the flow."""
        if isinstance(flow, cst.Module):
            return [call for _, part in self.parts for call in module_calls(part)]
        statement, part = self._part_holding(flow)
        return flow_calls(part, flow, flow is statement)

    def _part_holding(self, function: cst.FunctionDef) -> tuple[cst.BaseStatement, StatementPart]:
        if not self._part_of_function:
            for statement, part in self.parts:
                if type(statement) is cst.FunctionDef:
                    self._part_of_function[id(statement)] = (statement, part)
                for node in part.nodes_of(_DEFINES):
                    if type(node) is cst.FunctionDef:
                        self._part_of_function[id(node)] = (statement, part)
        return self._part_of_function[id(function)]

    def connected(self, a: Flow, b: Flow) -> bool:
        """Do two flows take part in the same run: the same, module level, one calling the
        other, or both called from a third (``main()`` calling ``build()`` and ``train()``)?"""
        if a is b or isinstance(a, cst.Module) or isinstance(b, cst.Module):
            return True
        if id(b) in self.callees(a) or id(a) in self.callees(b):
            return True
        return any({id(a), id(b)} <= self.callees(m) for m in self.flows)

    # ------------------------------------------------------------------ assignments

    def definitions_of(self, name: str, flow: Flow) -> list[Definition]:
        return self.definitions.get(id(flow), {}).get(name, [])

    def reaching(self, name: str, at: cst.CSTNode) -> list[Definition]:
        """Definitions of ``name`` in the flow of ``at`` written before it, nearest last; for a
        name the function does not bind, those of the functions it is nested in (a closure:
        torchtitan-style ``loss_fn = ...`` in ``main``, read by its inner ``training_step``),
        else the module's."""
        flow = self.flow_of(at)
        found = []
        written = self.definitions_of(name, flow)
        if written:
            found = [d for d in written if self._starts_before(d.statement, at)
                     and not self._on_another_branch(d.statement, at, flow)]
        if not found and not isinstance(flow, cst.Module) and not self._is_parameter(name, flow):
            found = self._enclosing_definitions(name, flow)
        return found

    def _enclosing_definitions(self, name: str, inner: cst.FunctionDef) -> list[Definition]:
        """The definitions a nested function sees of a name it reads but does not bind: the
        nearest enclosing function's that binds it (those written before the nested ``def``,
        else all: it may be called later), else the module's."""
        outer = self.flow_of(inner)
        while not isinstance(outer, cst.Module):
            written = self.definitions_of(name, outer)
            if written:
                return [d for d in written if self._starts_before(d.statement, inner)] or list(written)
            if self._is_parameter(name, outer):
                return []
            outer = self.flow_of(outer)
        return list(self.definitions_of(name, self.py.module))

    def _starts_before(self, statement: cst.CSTNode, at: cst.CSTNode) -> bool:
        """``start(statement) < start(at)``. Where the module was parsed whole (``memlint
        check``), from the nodes' source order (``PythonSource.place``), which sorts by where
        nodes start, an enclosing node first on a tie: without regenerating the code of each
        statement compared for its positions (most of what ``reaching`` cost on a trainer
        module). A tie is a node that starts where a node enclosing it starts; only a
        statement led by its keyword (``for``) is known not to share its start with anything
        inside it, so for ``at`` inside any other, the positions decide."""
        py = self.py
        if not py.by_statement:  # the editor's units: positions kept per unit
            return self.start(statement) < self.start(at)
        if type(statement) not in _KEYWORD_LED and any(a is statement for a in self.ancestors(at)):
            return self.start(statement) < self.start(at)
        return py.place(statement) < py.place(at)

    def _on_another_branch(self, statement: cst.CSTNode, at: cst.CSTNode, flow: Flow) -> bool:
        """Is ``statement`` written in one branch of an ``if``/``elif``/``else`` and ``at`` in
        another, with no loop around that ``if`` (whose next pass could carry the value over)?
        HF Trainer's ``elif self.deepspeed: loss = self.deepspeed.backward(loss)`` never reaches
        the ``else: loss.backward()`` beside it."""
        branch_of_at: dict[int, cst.CSTNode] = {}
        child: cst.CSTNode = at
        for ancestor in self.ancestors(at):
            if ancestor is flow:
                break
            if isinstance(ancestor, cst.If):
                branch_of_at[id(ancestor)] = child
            child = ancestor
        child = statement
        for ancestor in self.ancestors(statement):
            if ancestor is flow:
                return False
            branch = branch_of_at.get(id(ancestor))
            if branch is not None:
                assert isinstance(ancestor, cst.If)
                arms = (ancestor.body, ancestor.orelse)
                if branch is child or branch not in arms or child not in arms:
                    return False
                for outer in self.ancestors(ancestor):
                    if outer is flow:
                        return True
                    if isinstance(outer, (cst.For, cst.While)):
                        return False
                return True
            child = ancestor
        return False

    def all_definitions(self, name: str, at: cst.CSTNode) -> list[Definition]:
        """Every definition of ``name`` in the flow of ``at`` (wherever written), or the module's."""
        flow = self.flow_of(at)
        found = list(self.definitions_of(name, flow))
        if not found and not isinstance(flow, cst.Module) and not self._is_parameter(name, flow):
            found = list(self.definitions_of(name, self.py.module))
        return found

    def is_parameter(self, name: str, flow: cst.FunctionDef) -> bool:
        """Is ``name`` a parameter of the function ``flow``?"""
        return self._is_parameter(name, flow)

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

    def passed_arguments(self, name: str, flow: Flow) -> tuple[list[cst.BaseExpression], bool]:
        """What this module's calls of the function ``flow`` pass for its parameter ``name``, and
        whether some call leaves it to the default (or none is found). ml-4m's ``train_one_epoch(
        ..., dtype: torch.dtype = torch.float16)`` is called with ``dtype=dtype``, the
        ``--dtype`` option's bfloat16: the default runs only where a call omits it. A call that
        unpacks ``*args``/``**kwargs`` may pass it: its value is then unknown (a name bound to
        nothing stands for it in the list)."""
        if isinstance(flow, cst.Module):
            return [], True
        passed: list[cst.BaseExpression] = []
        omitted = False
        calls = self.calls_of(flow)
        for call in calls:
            value, unpacked = self.passed_at(flow, call, name)
            if value is not None:
                passed.append(value)
            elif unpacked:
                passed.append(cst.Name("__unknown__"))
            else:
                omitted = True
        return passed, omitted or not calls

    def passed_at(self, function: cst.FunctionDef, call: cst.Call,
                  name: str) -> tuple[cst.BaseExpression | None, bool]:
        """What ``call`` passes for ``function``'s parameter ``name`` (by keyword or position; a
        method's ``self`` is not counted), and whether the call unpacks ``*args``/``**kwargs``,
        which may pass it too."""
        params = function.params
        positional = [p.name.value for p in [*params.posonly_params, *params.params]]
        if positional and positional[0] in ("self", "cls") and self._is_method(function):
            positional = positional[1:]
        value: cst.BaseExpression | None = None
        unpacked = False
        for place, arg in enumerate(call.args):
            if arg.star:
                unpacked = True
            elif arg.keyword is not None and arg.keyword.value == name:
                value = arg.value
            elif arg.keyword is None and place < len(positional) and positional[place] == name:
                value = arg.value
        return value, unpacked

    def calls_of(self, function: cst.FunctionDef) -> list[cst.Call]:
        """This module's calls that run ``function``, in source order."""
        return self.once("calls of each function", self._calls_of_functions).get(id(function), [])

    def _calls_of_functions(self) -> dict[int, list[cst.Call]]:
        """id of each function of the module -> the module's calls that run it, in source order."""
        out: dict[int, list[cst.Call]] = {}
        for call in self.calls:
            helper = self.helper_for(call)
            if helper is not None:
                out.setdefault(id(helper), []).append(call)
        return out


def _reached(edges: dict[int, set[int]], start: set[int], depth: int) -> set[int]:
    """What ``start`` reaches along ``edges`` in 1 to ``depth`` steps (a start node only through
    a cycle), by levels: each node at its shortest distance."""
    reached: set[int] = set()
    frontier = start
    for _ in range(depth):
        frontier = {c for f in frontier for c in edges.get(f, ())} - reached
        reached |= frontier
    return reached


def could_be_named(node: cst.CSTNode, names: tuple[str, ...] | frozenset[str]) -> bool:
    """Can ``node``'s qualified names include one of ``names`` (none of them ``builtins.``)? An
    attribute ``a.b.c`` resolves to ``<what a or a.b is>.c``: libcst replaces the part it finds
    bound and keeps the rest, so only a name ending in ``.c`` can match, and most attributes
    need no resolving at all. (A builtin's attribute resolves to the builtin itself, which is
    why ``builtins.`` names are left out.) A plain name can be any import's alias."""
    if type(node) is not cst.Attribute:
        return True
    return node.attr.value in _last_parts(names)


@functools.cache
def _last_parts(names: tuple[str, ...] | frozenset[str]) -> frozenset[str]:
    """The last parts of these dotted names (``backward`` of ``torch.autograd.backward``); the
    rules ask with a few fixed tuples, so each is computed once."""
    return frozenset(n.rsplit(".", 1)[-1] for n in names)


@functools.cache
def _packages_of(names: tuple[str, ...]) -> frozenset[str]:
    """The first parts of these dotted names (``torch`` of ``torch.autograd.backward``)."""
    return frozenset(n.split(".", 1)[0] for n in names)


def _first_name(node: cst.CSTNode) -> str | None:
    """The first part of libcst's dotted name of ``node`` (``get_full_name_for_node``: through
    attributes, a call's callee, a subscript's value); None when no name is there (``"".join``:
    libcst names at most a builtin)."""
    while True:
        kind = type(node)
        if kind is cst.Name:
            return node.value  # type: ignore[attr-defined]
        if kind is cst.Attribute or kind is cst.Subscript:
            node = node.value  # type: ignore[attr-defined]
        elif kind is cst.Call:
            node = node.func  # type: ignore[attr-defined]
        else:
            return None


def _targets(target: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(target, (cst.Tuple, cst.List)):
        out = []
        for element in target.elements:
            out.extend(_targets(element.value))
        return out
    return [target]


def _build(py: PythonSource) -> ModuleIndex:
    index = ModuleIndex(weakref.ref(py))
    module = py.module
    index.parts = _parts(py)
    index.flows.append(module)
    module_table: dict[str, list[Definition]] = {}
    for statement, part in index.parts:
        for definition in _module_definitions(statement, part):
            module_table.setdefault(definition.name, []).append(definition)
        defines = part.nodes_of(_DEFINES)
        if type(statement) in _DEFINES:
            defines = [statement, *defines]
        for node in defines:
            if type(node) is cst.FunctionDef:  # both are final classes
                index.functions.setdefault(node.name.value, []).append(node)
                index.flows.append(node)
                if node is statement:
                    if part.own_table is None:
                        part.own_table = _table(node)
                    table = part.own_table
                else:
                    table = function_table(part, node, functools.partial(_table, node))
                index.definitions[id(node)] = table
            elif type(node) is cst.ClassDef:  # the other kind _DEFINES holds
                index.classes.setdefault(node.name.value, node)
    index.definitions[id(module)] = module_table
    return index


_DEFINES = (cst.FunctionDef, cst.ClassDef)


def _parts(py: PythonSource) -> list[tuple[cst.BaseStatement, StatementPart]]:
    """Each top-level statement with its part: kept with its unit when the module was parsed
    in units (an edit recomputes the parts of the statements it changed), else computed."""
    body = py.module.body
    if len(py.units) == len(body):
        return [(statement, part_of(unit, statement)) for unit, statement in zip(py.units, body)]
    return [(statement, part_of_whole(statement)) for statement in body]


def _module_definitions(statement: cst.BaseStatement, part: StatementPart) -> list[Definition]:
    """What a top-level statement defines at module level (a top-level ``for`` loop's target
    names the current statement node, so it is not kept)."""
    if part.module_definitions is None:
        part.module_definitions = [d for node in part.module_level for d in _definitions_in(node)]
    return [*_definitions_in(statement), *part.module_definitions]


def _table(function: cst.FunctionDef) -> dict[str, list[Definition]]:
    table: dict[str, list[Definition]] = {}
    for node in iter_nodes(function.body):
        for definition in _definitions_in(node):
            table.setdefault(definition.name, []).append(definition)
    return table


# the node types that bind a name (``_definitions_in``): most nodes are none of them, and a type
# test beats the chain of ``isinstance`` checks (libcst's classes are ABCs: each check is a call)
_BINDING_TYPES = frozenset({cst.Assign, cst.AnnAssign, cst.AugAssign, cst.For, cst.CompFor, cst.WithItem,
                            cst.NamedExpr, cst.Call})


# statements that start with their own keyword: nothing inside one starts where it starts
_KEYWORD_LED = (cst.For, cst.CompFor)


def _definitions_in(node: cst.CSTNode) -> Iterator[Definition]:
    if type(node) not in _BINDING_TYPES:
        return
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
            for position, (name_node, value) in enumerate(zip(names, values, strict=True)):
                name = dotted(name_node)
                if name:
                    yield Definition(
                        name, node, value, whole_value=node.value, position=None if single else position
                    )
    elif isinstance(node, cst.AnnAssign) and node.value is not None:
        name = dotted(node.target)
        if name:
            yield Definition(name, node, node.value, whole_value=node.value)
    elif isinstance(node, cst.AugAssign):
        name = dotted(node.target)
        if name:
            yield Definition(name, node, node.value, augmented=node.operator)
    elif isinstance(node, (cst.For, cst.CompFor)):
        for name_node in _targets(node.target):
            name = dotted(name_node)
            if name:
                yield Definition(name, node, None, whole_value=node.iter)
    elif isinstance(node, cst.WithItem) and node.asname is not None:
        for name_node in _targets(node.asname.name):
            name = dotted(name_node)
            if name:
                yield Definition(name, node, None, whole_value=node.item)
    elif isinstance(node, cst.NamedExpr):
        name = dotted(node.target)
        if name:
            yield Definition(name, node, node.value, whole_value=node.value)
    elif isinstance(node, cst.Call) and method_name(node) in ("div_", "mul_") and dotted(receiver(node)):
        # ``loss.div_(accum)`` rebinds nothing but changes the value in place
        yield Definition(dotted(receiver(node)) or "", node, node)




# kept on the source, not in a weak dictionary keyed by it: the index holds the source, so a
# dictionary entry would keep every version of an edited document alive
_INDEX = "rules.module_index"
_TOO_DEEP: "weakref.WeakSet[PythonSource]" = weakref.WeakSet()


def index_for(py: PythonSource | None) -> ModuleIndex | None:
    """The shared index of a parsed module (built on first use); None when there is no tree
    or libcst cannot compute its metadata (code nested thousands deep): the rules then have
    nothing to say about the file rather than failing on it."""
    if py is None or py in _TOO_DEEP:
        return None
    index = cast("ModuleIndex | None", py.derived.get(_INDEX))  # what _build put there
    if index is None:
        try:
            # libcst's metadata visitors recurse: deep code exhausts the stack, or (seen with
            # 1500-term `and` chains) fails with a KeyError
            _ = (py.parents, py.positions)
        except (RecursionError, KeyError):
            _TOO_DEEP.add(py)
            return None
        index = _build(py)
        py.derived[_INDEX] = index
    return index
