"""libcst's scope analysis, walked over the recorded tree: the same scopes, a fraction of the cost.

``MetadataWrapper.resolve(ScopeProvider)`` spends most of its time in libcst's traversal, not
in the analysis: ``node.visit(visitor)`` rebuilds every node it enters (constructing and
validating a copy that a read-only visitor throws away), and the wrapper walks the whole module
once more for the expression contexts the scopes depend on. Here libcst's own visitors
(``ExpressionContextVisitor``, ``ScopeVisitor``) run unchanged, but each node hands its
children to the visitor from the lists ``python_tree`` recorded, so no node is rebuilt. The
visitors see the same nodes, in the same order, with the same visit and leave calls; the
scopes, assignments and accesses are libcst's.
"""

from __future__ import annotations

import re
import types
from itertools import islice
from typing import TYPE_CHECKING, Callable, Mapping, Sequence, cast

import libcst as cst
from libcst.metadata import ExpressionContext, ExpressionContextProvider, Scope, ScopeProvider
from libcst.metadata.expression_context_provider import ExpressionContextVisitor
from libcst.metadata.scope_provider import _ASSIGNMENT_LIKE_NODES, ScopeVisitor

from memlint.python.member_scopes import visit_members
from memlint.python.tree import children
from memlint.python.unit_scopes import scopes_of_units

if TYPE_CHECKING:
    from memlint.python.units import Unit

_Contexts = dict[cst.CSTNode, ExpressionContext]  # what ExpressionContextProvider computes


class _WalksRecordedChildren:
    """A visitor mix-in: visit a node's children here and tell libcst not to.

    ``CSTNode.visit`` calls ``on_visit``, visits the children (rebuilding the node) when it
    returns True, then calls ``on_leave``. Visiting them inside ``on_visit`` and returning
    False keeps that order without the rebuild. Field-level hooks (``visit_<Node>_<field>``)
    are not called; the two visitors below define none that can run (``ScopeVisitor``'s
    ``ClassDef_bases`` hooks sit under a ``visit_ClassDef`` that returns False).

    ``on_visit`` and ``on_leave`` do what ``CSTVisitor``'s do -- call ``visit_<Node>`` /
    ``leave_<Node>`` if the visitor has one -- with the method found once per visitor class and
    node type instead of by name on every node, and libcst's empty stubs not called at all.
    """

    _visits: dict[type, Callable | None]  # node type -> ``_hook(cls, "visit_", type)``, per class
    _leaves: dict[type, Callable | None]

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        cls._visits, cls._leaves = {}, {}

    def on_visit(self, node: cst.CSTNode) -> bool:
        kind = type(node)
        visits = self._visits
        if kind in visits:  # met on every node: one look-up, no call, once the type is known
            visit = visits[kind]
        else:
            visit = visits[kind] = _hook(type(self), "visit_", kind)
        if visit is None or visit(self, node) is not False:
            for child in children(node):
                # what ``child.visit(self)`` does for a visitor that changes nothing
                self.on_visit(child)
                self.on_leave(child)
        return False

    def on_leave(self, original_node: cst.CSTNode) -> None:
        kind = type(original_node)
        leaves = self._leaves
        if kind in leaves:
            leave = leaves[kind]
        else:
            leave = leaves[kind] = _hook(type(self), "leave_", kind)
        if leave is not None:
            leave(self, original_node)


_HOOKS: dict[tuple[type, str, type], Callable | None] = {}


def _hook(visitor: type, prefix: str, kind: type) -> Callable | None:
    """The visitor class's ``visit_<Node>`` / ``leave_<Node>`` function; None for none or for
    libcst's do-nothing stub."""
    key = (visitor, prefix, kind)
    try:
        return _HOOKS[key]
    except KeyError:
        found = getattr(visitor, prefix + kind.__name__, None)
        if found is not None and getattr(found, "_is_no_op", False):
            found = None
        _HOOKS[key] = found
        return found


class _ExpressionContexts(_WalksRecordedChildren, ExpressionContextVisitor):
    """libcst's expression-context visitor. Its ``visit_Assign``, ``visit_Attribute``,
    ``visit_Subscript``... start a fresh ``ExpressionContextVisitor`` for a target or a value
    (``node.target.visit(ExpressionContextVisitor(provider, STORE))``); those fresh visitors
    would walk their subtrees with libcst's rebuilding traversal (half the cost of the scopes).
    The methods below are libcst's own code, run with that name bound to this class."""


def _nested_visitors_of(cls: type) -> None:
    namespace: dict[str, object] = {}
    for name, function in vars(ExpressionContextVisitor).items():
        if name.startswith("visit_") and isinstance(function, types.FunctionType):
            if not namespace:
                namespace.update(function.__globals__, ExpressionContextVisitor=cls)
            setattr(cls, name, types.FunctionType(function.__code__, namespace, name, function.__defaults__,
                                                  function.__closure__))


_nested_visitors_of(_ExpressionContexts)


class _Scopes(_WalksRecordedChildren, ScopeVisitor):
    def __init__(self, provider: ScopeProvider, typing_calls: bool = True) -> None:
        super().__init__(provider)
        self._scopes = provider._computed  # what ``provider.set_metadata`` writes to
        self.read_strings = False  # parsed a string annotation (whose nodes then have scopes too)
        # the nodes each string annotation parsed into (a class's members visited alone take
        # theirs out: ``python_member_scopes``)
        self.strings: dict[cst.CSTNode, list[cst.CSTNode]] = {}
        # ``typing_calls`` False: the module's text names none of ``_TYPING_CALLS`` (``visit_Call``)
        self.typing_calls = typing_calls or not all(hasattr(self, name) for name in _CALL_STACKS)
        self.in_string = 0  # inside a string annotation's parsed text (whose words the text may not show)

    def visit_Call(self, node: cst.Call) -> bool | None:
        """libcst's ``visit_Call`` asks every call's qualified names (a search through the scopes
        and the imports), to tell ``typing``'s ``NewType``, ``TypeVar`` and ``cast``, whose
        arguments are type hints. Each such name ends in the word as written in the module,
        in the call or in the import that binds it (``from typing import cast as c``), so where
        the text has none of the words no call is one of them: what libcst then does is push
        its two stacks and visit the children. Inside a string annotation, libcst's own."""
        if self.typing_calls or self.in_string:
            return super().visit_Call(node)
        for name in _CALL_STACKS:
            getattr(self, name).append(None if name.endswith("attribute_stack") else False)
        return True

    def _handle_string_annotation(self, node: cst.SimpleString | cst.ConcatenatedString) -> bool:
        before = len(self._scopes)
        self.in_string += 1
        try:
            handled = super()._handle_string_annotation(node)
        finally:
            self.in_string -= 1
        if handled:
            self.read_strings = True
            self.strings[node] = list(islice(self._scopes, before, None))  # the parsed nodes, met last
        return handled

    def on_leave(self, original_node: cst.CSTNode) -> None:
        """``ScopeVisitor.on_leave``, its ``isinstance`` test against a tuple of twelve ABCs (up
        to twelve Python-level calls, on every node) answered once per node type."""
        self._scopes[original_node] = self.scope
        kind = type(original_node)
        plan = _LEAVE_PLAN.get(kind)
        if plan is None:
            plan = _LEAVE_PLAN[kind] = (issubclass(kind, _ASSIGNMENT_LIKE_NODES),
                                        _hook(type(self), "leave_", kind))
        assigns, leave = plan
        if assigns:
            self.scope._assignment_count += 1
        if leave is not None:
            leave(self, original_node)


_LEAVE_PLAN: dict[type, tuple[bool, Callable | None]] = {}  # for _Scopes only

# what libcst's ``ScopeVisitor.visit_Call`` pushes on every call (``leave_Call`` pops them); a
# libcst without them is left to its own ``visit_Call``
_CALL_STACKS = ("_ScopeVisitor__top_level_attribute_stack", "_ScopeVisitor__in_type_hint_stack")
# the names libcst's ``visit_Call`` looks for: ``typing.NewType``, ``typing.TypeVar``, ``typing.cast``
_TYPING_CALLS = re.compile(r"\b(?:NewType|TypeVar|cast)\b")


def expression_contexts_of(module: cst.Module, units: Sequence[Unit] = ()) -> dict[cst.CSTNode, ExpressionContext]:
    """What ``MetadataWrapper(module).resolve(ExpressionContextProvider)`` returns.

    A name's context (load, store, del) is decided inside its top-level statement: libcst's
    visitor meets each statement of the module with the same load-context visitor. So when the
    module was joined from ``units`` (``python_units``), each unit's contexts are computed once,
    kept with the unit, and an edit computes only those of the statements it changed."""
    if not units:
        contexts = ExpressionContextProvider()
        module.visit(_ExpressionContexts(contexts, ExpressionContext.LOAD))
        return cast(_Contexts, contexts._computed)  # a provider's results: a context per node
    out: dict[cst.CSTNode, ExpressionContext] = {}
    for unit in units:
        out.update(_unit_contexts(unit))
    return out


def _unit_contexts(unit: Unit) -> dict[cst.CSTNode, ExpressionContext]:
    if unit.contexts is None:
        unit.contexts = _member_contexts(unit)
    if unit.contexts is None:
        contexts = ExpressionContextProvider()
        unit.statement.visit(_ExpressionContexts(contexts, ExpressionContext.LOAD))
        unit.contexts = cast(_Contexts, contexts._computed)
    return unit.contexts


def _member_contexts(unit: Unit) -> dict[cst.CSTNode, ExpressionContext] | None:
    """A class made from an earlier version (``Unit.origin``): that version's contexts, less
    the replaced members' and with the new ones' (each member of a class body is met with the
    same load-context visitor, as a top-level statement is)."""
    origin = unit.origin
    if origin is None:
        return None
    old = origin.unit()
    if old is None or old.contexts is None:
        return None
    out = dict(old.contexts)
    stack: list[cst.CSTNode] = list(origin.removed)
    while stack:
        node = stack.pop()
        out.pop(node, None)
        stack.extend(old.shape.get(node, ()))
    out.pop(old.statement, None)
    contexts = ExpressionContextProvider()
    visitor = _ExpressionContexts(contexts, ExpressionContext.LOAD)
    for member in origin.added:
        member.visit(visitor)
    out.update(cast(_Contexts, contexts._computed))
    return out


def scopes_of(module: cst.Module, units: Sequence[Unit] = (), text: str | None = None) -> Mapping[cst.CSTNode, Scope | None]:
    """What ``MetadataWrapper(module).resolve(ScopeProvider)`` returns; ``units``: the units the
    module was joined from, if it was (each unit is then visited once and kept:
    ``python_unit_scopes``); ``text``: the module's text, where the caller has it (a text that
    names none of typing's special calls spares asking every call's names: ``_Scopes.visit_Call``)."""
    if units and len(units) == len(module.body):
        return scopes_of_units(module, units, _Scopes, _unit_contexts, visit_members)
    provider = ScopeProvider()
    provider.metadata = {ExpressionContextProvider: expression_contexts_of(module, units)}
    visitor = _Scopes(provider, typing_calls=text is None or _TYPING_CALLS.search(text) is not None)
    module.visit(visitor)
    visitor.infer_accesses()
    return cast("Mapping[cst.CSTNode, Scope | None]", provider._computed)  # a provider's results: a scope per node
