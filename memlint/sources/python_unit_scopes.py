"""libcst's scope analysis of a module joined from units, each top-level statement visited once.

``ScopeProvider`` visits the whole module, then links every name use to the assignments it can
refer to (``ScopeVisitor.infer_accesses``). After an edit of one statement of a large script,
the visit of the others would give what it gave before: what a visit of a statement depends on
outside it is only the module-level names bound above it, and of those only the ones that
decide whether a call or a subscript is ``typing``'s (``typing.cast("T", x)``, ``List["T"]``:
libcst reads their strings as annotations). So each unit's visit is kept with the unit: the
scopes it made, each node's scope, the module-level assignments and the name uses it recorded.
A join makes a new module scope, gives it the units' module-level assignments (their order
numbers moved by the assignments above), points the units' scopes at it and runs libcst's own
``infer_accesses`` over the name uses whose links can change: those that reach the module
scope or the builtins. A use that a join linked to its own statement's scopes alone (a
function's local variable, a parameter) keeps its links at the next join: libcst's lookup for
it stopped in those scopes before the module's, so nothing outside the statement entered it,
except a dotted module-level name (``import a.b``) that a longer attribute would have preferred
(checked at each join). That is most of a training script's uses.

A unit's visit is kept only while the ``typing`` bindings above it are the ones it was visited
with (``_typing_bindings``); otherwise it is visited again. The scopes of a module's earlier
version are re-pointed at the new module scope, so they are valid until a later version of the
same document is analysed (memlint analyses a document's versions one after another).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Iterator, Mapping, Sequence

import libcst as cst
from libcst.helpers import get_full_name_for_node
from libcst.metadata import ExpressionContextProvider, Scope, ScopeProvider
from libcst.metadata.scope_provider import (
    Access,
    Assignment,
    BaseAssignment,
    DeferredAccess,
    GlobalScope,
    ImportAssignment,
    LocalScope,
    _gen_dotted_names,
)

from memlint.sources.python_units import Unit, unit_of

_TYPING_MODULES = ("typing", "typing_extensions")


@dataclass(frozen=True)
class _Use:
    """A name use the visit recorded, to be made into a fresh ``Access`` at each join."""

    node: cst.Name
    scope: Scope
    is_annotation: bool
    is_type_hint: bool
    index: int  # the scope's assignment count when the use was met (the unit's own, for the module scope)
    enclosing_attribute: cst.Attribute | None
    enclosing_string_annotation: cst.BaseString | None


@dataclass(frozen=True)
class _Bound:
    """A module-level assignment the unit made (``global`` writes in its functions included)."""

    name: str
    node: cst.CSTNode
    index: int  # counted from the unit's start
    as_name: cst.CSTNode | None  # for imports


@dataclass(eq=False)
class UnitScopes:
    """One unit's visit. ``module_scope`` stands for the module's scope in what it recorded."""

    module_scope: GlobalScope
    node_scopes: dict[cst.CSTNode, Scope]
    scopes: list[LocalScope]
    assignments: list[BaseAssignment]  # of the local scopes, whose uses are linked again at each join
    top: list[LocalScope]  # scopes whose parent is the module's
    overwrites: list[tuple[LocalScope, str]]  # ``global x`` in those scopes
    bound: list[_Bound]
    uses: list[_Use]
    count: int  # module-level assignments the unit counts
    typing_bindings: frozenset  # the ``typing`` bindings above the unit when it was visited
    statement_scopes: list[LocalScope]  # the scopes of the statement itself (a top-level def's)
    # nodes with a scope that are not the unit's: those of the string annotations libcst parses
    strings: list[cst.CSTNode]
    attached_to: GlobalScope | None = None  # the module scope of the last join
    # after a join: the uses linked to the unit's own scopes alone (by index in ``uses``), kept
    # linked at the next join, and the other uses' accesses, which that join unlinks
    local: dict[int, Access] = field(default_factory=dict)
    relinked: set[Access] = field(default_factory=set)
    # the qualified names asked of its nodes (``ScopeMap.qualified_names``), each with the first
    # part of the node's dotted name, and the module-level order number its uses started at
    qualified: dict[cst.CSTNode, tuple[frozenset[str], str]] = field(default_factory=dict)
    base: int = 0
    # answers other layers worked out about its nodes (``ScopeMap.kept``), each with what it
    # depends on outside the unit: a name's module-level binding, or its uses (``uses_of``)
    kept: dict[object, tuple[object, frozenset[str]]] = field(default_factory=dict)


_VISITS: "weakref.WeakKeyDictionary[Unit, UnitScopes]" = weakref.WeakKeyDictionary()

# What an answer kept with a unit (``ScopeMap.kept``) can depend on outside the unit: what the
# module binds to a name (the name itself), every use of a name (``uses_of``), or anything at
# all (``ANYTHING``: a whole-module scan, never kept).
ANYTHING = "*"


def uses_of(name: str) -> str:
    """The dependency on where a name is used (a function's call sites, ``cfg[k] = v``)."""
    return "uses:" + name


class ScopeMap(Mapping[cst.CSTNode, "Scope | None"]):
    """Each node's scope, what ``MetadataWrapper(module).resolve(ScopeProvider)`` maps it to,
    read from the units' visits."""

    def __init__(self, module_scope: GlobalScope, own: dict[cst.CSTNode, Scope],
                 visits: dict[Unit, UnitScopes], hidden: set[cst.CSTNode]) -> None:
        self.module_scope = module_scope
        self._own = own  # the module and the statements the join rebuilt
        self._visits = visits
        self._hidden = hidden  # statements the join replaced

    def get(self, node: object, default=None):  # type: ignore[override]
        found = self._own.get(node)
        if found is not None:
            return found
        visit = self._visits.get(unit_of(node))
        if visit is None or node in self._hidden:
            return default
        found = visit.node_scopes.get(node, default)
        return self.module_scope if found is visit.module_scope else found

    def __getitem__(self, node: cst.CSTNode) -> Scope | None:
        missing = object()
        found = self.get(node, missing)
        if found is missing:
            raise KeyError(node)
        return found

    def __contains__(self, node: object) -> bool:
        return self.get(node, self) is not self

    def __iter__(self) -> Iterator[cst.CSTNode]:
        yield from self._own
        for visit in self._visits.values():
            yield from (node for node in visit.node_scopes
                        if node not in self._hidden and node not in self._own and node is not None)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def every_scope(self) -> set[Scope]:
        return {self.module_scope, *(s for visit in self._visits.values() for s in visit.scopes)}

    def kept(self, node: object) -> dict[object, tuple[object, frozenset[str]]] | None:
        """Where another layer keeps its answers about ``node`` across joins, each with its
        dependencies outside the node's unit (a name bound or used at module level): a join
        drops those that the statements it replaced or added may change. None for a node of no
        kept unit (a statement the join rebuilt, a module parsed whole)."""
        visit = None if node in self._hidden else self._visits.get(unit_of(node))
        return visit.kept if visit is not None and visit.attached_to is self.module_scope else None

    def linked_locally(self) -> set[int]:
        """The ids of the accesses linked to their own statement's scopes alone: what they
        refer to changes only with that statement (the others may change with any binding of
        their name at module level)."""
        return {id(access) for visit in self._visits.values() for access in visit.local.values()}

    def qualified_names(self, node: cst.CSTNode) -> frozenset[str]:
        """What libcst's scope answers for ``node`` (``Scope.get_qualified_names_for``), kept
        with the node's unit across joins until a join changes what the module binds to the
        first part of its dotted name or moves the unit among the module's assignments."""
        visit = None if node in self._hidden else self._visits.get(unit_of(node))
        kept = visit.qualified.get(node) if visit is not None else None
        if kept is not None:
            return kept[0]
        scope = self.get(node)
        names = frozenset(q.name for q in scope.get_qualified_names_for(node)) if scope is not None else frozenset()
        full = get_full_name_for_node(node) if visit is not None else None
        if full is not None:
            visit.qualified[node] = (names, full.split(".", 1)[0])
        return names


def scopes_of_units(module: cst.Module, units: Sequence[Unit],
                    visitor_class: type, contexts_of) -> ScopeMap:
    """The scopes of ``module``, joined from ``units`` (one per statement of its body).
    ``visitor_class``: the scope visitor (``python_scopes._Scopes``); ``contexts_of(unit)``: the
    unit's expression contexts."""
    module_scope = GlobalScope()
    own: dict[cst.CSTNode, Scope] = {module: module_scope}
    hidden: set[cst.CSTNode] = set()
    visits: dict[Unit, UnitScopes] = {}
    deferred: list[DeferredAccess] = []
    fresh: list[tuple[UnitScopes, int, Access]] = []  # the accesses made for this join's linking
    base = 0
    typing_names: set[str] = set()
    superseded: set[GlobalScope] = set()
    asked: dict[GlobalScope, list[UnitScopes]] = {}  # kept visits with qualified names, by their last join
    moved: list[UnitScopes] = []  # kept visits with more or fewer module-level assignments above them
    for unit, statement in zip(units, module.body):
        above = _typing_bindings(module_scope, typing_names)
        visit = _VISITS.get(unit)
        if visit is None or visit.typing_bindings != above:
            visit = _VISITS[unit] = _visit(unit, visitor_class, contexts_of(unit), module_scope, typing_names, above)
        visits[unit] = visit
        if visit.attached_to is not None:
            superseded.add(visit.attached_to)
            if visit.base != base:  # its module-level uses moved among the assignments
                visit.qualified.clear()
                moved.append(visit)
            elif visit.qualified:
                asked.setdefault(visit.attached_to, []).append(visit)
        visit.attached_to = module_scope
        visit.base = base
        if statement is not unit.statement:
            own[statement] = module_scope
            hidden.add(unit.statement)
        for node in visit.strings:
            found = visit.node_scopes[node]
            own[node] = module_scope if found is visit.module_scope else found
        deferred += _attach(visit, unit.statement, statement, module_scope, base, fresh)
        typing_names.update(bound.name for bound in visit.bound if _is_typing_import(bound))
        base += visit.count
    module_scope._assignment_count = base
    deferred += _unkeep_shadowed(visits.values(), module_scope, fresh)
    linker = visitor_class(ScopeProvider())
    linker._ScopeVisitor__deferred_accesses = deferred
    linker.infer_accesses()
    _sort_linked(fresh, module_scope)
    for previous, kept in asked.items():
        _forget_rebound(kept, previous, module_scope)
    _forget_changed(visits.values(), moved, superseded, module_scope)
    for previous in superseded:
        _empty(previous)
    _JOINED[module_scope] = list(visits.values())
    return ScopeMap(module_scope, own, visits, hidden)


# the units' visits each module scope was joined from: when a later join supersedes it, the
# visits it does not keep (the statements an edit replaced) are emptied with it
_JOINED: "weakref.WeakKeyDictionary[GlobalScope, list[UnitScopes]]" = weakref.WeakKeyDictionary()


def _empty(module_scope: GlobalScope) -> None:
    """Unlink the scopes of a version this join supersedes. libcst links each access and the
    assignments it may refer to both ways, and the module scope and its builtins scope refer to
    each other: left linked, every version of an edited document (its accesses, assignments,
    nodes) would wait for the cycle collector, which walks all of it on its way. The kept units'
    scopes point at the new module scope by now and were linked again."""
    dropped = [visit for visit in _JOINED.pop(module_scope, ()) if visit.attached_to is module_scope]
    scopes = [module_scope, module_scope.parent]
    for visit in dropped:  # the replaced statements' scopes, and the module scope their visit stood in for
        scopes += [*visit.scopes, visit.module_scope, visit.module_scope.parent]
    for scope in scopes:
        for found in scope._assignments.values():
            for assignment in found:
                assignment._BaseAssignment__accesses.clear()
        scope._assignments.clear()
        scope._accesses_by_name.clear()
        scope._accesses_by_node.clear()


def _visit(unit: Unit, visitor_class: type, contexts, module_scope: GlobalScope, typing_names: set[str],
           typing_bindings: frozenset) -> UnitScopes:
    provider = ScopeProvider()
    provider.metadata = {ExpressionContextProvider: contexts}
    visitor = visitor_class(provider)
    stand_in: GlobalScope = visitor.scope
    # what the module bound above the unit to the names the visit's questions (is ``cast``
    # typing's?) can answer ``typing`` for: only a name a ``typing`` import binds can
    above: set[int] = set()
    for name in typing_names:
        found = module_scope._assignments.get(name)
        if found:
            stand_in._assignments[name] = set(found)
            above.update(id(a) for a in found)
    unit.statement.visit(visitor)
    node_scopes = provider._computed
    scopes = list({s for s in node_scopes.values() if s is not None and s is not stand_in})
    bound = [
        _Bound(a.name, a.node, a._index, getattr(a, "as_name", None))
        for found in stand_in._assignments.values() for a in found if id(a) not in above
    ]
    uses = [
        _Use(d.access.node, d.access.scope, d.access.is_annotation, d.access.is_type_hint, d.access._index,
             d.enclosing_attribute, d.enclosing_string_annotation)
        for d in visitor._ScopeVisitor__deferred_accesses
    ]
    return UnitScopes(
        module_scope=stand_in,
        node_scopes=node_scopes,
        scopes=scopes,
        assignments=[a for s in scopes for found in s._assignments.values() for a in found],
        top=[s for s in scopes if s.parent is stand_in],
        overwrites=[(s, name) for s in scopes for name, target in s._scope_overwrites.items() if target is stand_in],
        bound=bound,
        uses=uses,
        count=stand_in._assignment_count,
        typing_bindings=typing_bindings,
        statement_scopes=[s for s in scopes if s.node is unit.statement],
        strings=_foreign_nodes(unit, visitor, node_scopes),
    )


def _foreign_nodes(unit: Unit, visitor, node_scopes: dict[cst.CSTNode, Scope]) -> list[cst.CSTNode]:
    """The nodes the visit gave a scope that are not the unit's: those of the string
    annotations libcst parsed, if it parsed any (most visits do not)."""
    if not visitor.read_strings:
        return []
    return [node for node in node_scopes if unit_of(node) is not unit]


def _attach(visit: UnitScopes, visited: cst.CSTNode, statement: cst.CSTNode, module_scope: GlobalScope,
            base: int, fresh: list[tuple[UnitScopes, int, Access]]) -> list[DeferredAccess]:
    """Point the unit's scopes at ``module_scope``, give it the unit's module-level assignments
    (their order numbers moved by ``base``, the module-level assignments above the unit) and
    return fresh accesses for the unit's name uses that ``infer_accesses`` must link: all of
    them on a visit's first join, afterwards those the last join did not link locally.
    ``statement``: the node the module holds for the ``visited`` one (a copy when the join
    rebuilt it); a top-level ``def``'s or ``class``'s scope and name assignment name it."""
    for scope in visit.top:
        scope.parent = module_scope
    for scope in visit.statement_scopes:
        scope.node = statement
    for scope in visit.scopes:
        scope.globals = module_scope
    for scope, name in visit.overwrites:
        scope._scope_overwrites[name] = module_scope
    if visit.relinked:
        _unlink(visit, visit.relinked)
        visit.relinked = set()
    for bound in visit.bound:
        if bound.as_name is not None:
            assignment: BaseAssignment = ImportAssignment(bound.name, module_scope, bound.node, bound.index + base,
                                                          bound.as_name)
        else:
            node = statement if bound.node is visited else bound.node
            assignment = Assignment(bound.name, module_scope, node, bound.index + base)
        module_scope._assignments[bound.name].add(assignment)
    local = visit.local
    return [_deferred(visit, number, module_scope, base, fresh)
            for number in range(len(visit.uses)) if number not in local]


def _deferred(visit: UnitScopes, number: int, module_scope: GlobalScope, base: int,
              fresh: list[tuple[UnitScopes, int, Access]]) -> DeferredAccess:
    """A fresh access for use ``number`` of the visit, for ``infer_accesses`` to link."""
    use = visit.uses[number]
    at_module_level = use.scope is visit.module_scope
    access = Access(use.node, module_scope if at_module_level else use.scope, use.is_annotation, use.is_type_hint)
    access._Access__index = use.index + base if at_module_level else use.index
    fresh.append((visit, number, access))
    return DeferredAccess(access, use.enclosing_attribute, use.enclosing_string_annotation)


def _unlink(visit: UnitScopes, accesses: set[Access]) -> None:
    """Take ``accesses`` out of the unit's scopes and assignments (the module's go with its scope)."""
    for scope in visit.scopes:
        for table in (scope._accesses_by_name, scope._accesses_by_node):
            for key in [key for key, found in table.items() if not found.isdisjoint(accesses)]:
                found = table[key]
                found -= accesses
                if not found:
                    del table[key]
    for assignment in visit.assignments:
        recorded = assignment._BaseAssignment__accesses
        if not recorded.isdisjoint(accesses):
            recorded -= accesses


def _unkeep_shadowed(visits, module_scope: GlobalScope,
                     fresh: list[tuple[UnitScopes, int, Access]]) -> list[DeferredAccess]:
    """Kept uses under an attribute whose dotted name the module now binds (``import a.b``
    with a local ``a`` used as ``a.b.c``): libcst links such a use to the longer name, so it
    is linked again. Rare: most modules bind no dotted name."""
    dotted = {name for name in module_scope._assignments if "." in name}
    if not dotted:
        return []
    out = []
    for visit in visits:
        shadowed = {number: access for number, access in visit.local.items()
                    if visit.uses[number].enclosing_attribute is not None
                    and any(name in dotted for name, _ in _gen_dotted_names(visit.uses[number].enclosing_attribute))}
        if shadowed:
            _unlink(visit, set(shadowed.values()))
            for number in shadowed:
                del visit.local[number]
                out.append(_deferred(visit, number, module_scope, 0, fresh))  # local uses: no module index
    return out


def _forget_rebound(visits: list[UnitScopes], before: GlobalScope, after: GlobalScope) -> None:
    """Drop the visits' kept qualified names whose first part the module binds differently
    now: another assignment, import or order (compared before ``before`` is emptied); only the
    names whose first part a kept answer has are compared."""
    heads = {head for visit in visits for _, head in visit.qualified.values()}

    def bindings(scope: GlobalScope) -> dict[str, frozenset]:
        return {name: frozenset((type(a), id(getattr(a, "node", None)), id(getattr(a, "as_name", None)), a._index)
                                for a in found)
                for name, found in scope._assignments.items() if found and name.split(".", 1)[0] in heads}

    old, new = bindings(before), bindings(after)
    changed = {name.split(".", 1)[0] for name in old.keys() | new.keys() if old.get(name) != new.get(name)}
    if not changed:
        return
    for visit in visits:
        for node in [node for node, (_, head) in visit.qualified.items() if head in changed]:
            del visit.qualified[node]


def _forget_changed(visits, moved: list[UnitScopes], superseded: set[GlobalScope], module_scope: GlobalScope) -> None:
    """Drop the kept visits' kept answers (``UnitScopes.kept``) that depend on a name the join's
    changed statements bind at module level, or on the uses of a name they use. Changed: those
    it replaced, those it added, and those that moved among the module's assignments (a use
    at module level refers to the assignments above it only) or among the other kept
    statements; the moved ones' own answers go too. A change that binds a dotted name (``import a.b``) relinks local uses too
    (``_unkeep_shadowed``): all answers go then, as they do when the kept visits come from
    different joins (a version that was never analysed in between)."""
    for visit in moved:
        visit.kept.clear()
    kept = [visit for visit in visits if visit.kept and visit.attached_to is module_scope]
    if not kept:
        return
    if len(superseded) != 1:
        for visit in kept:
            visit.kept.clear()
        return
    previous = next(iter(superseded))
    before = _JOINED.get(previous, ())
    place = {id(visit): number for number, visit in enumerate(before)}
    changed = [visit for visit in before if visit.attached_to is previous]  # replaced
    changed += [visit for visit in visits if id(visit) not in place]  # added
    changed += moved
    # kept statements that changed places with others (``a; b`` -> ``b; a``): which call site
    # of a function comes first, for one, depends on their order
    last = -1
    for visit in visits:
        number = place.get(id(visit))
        if number is None:
            continue
        if number < last:
            visit.kept.clear()
            changed.append(visit)
        last = max(last, number)
    names: set[str] = set()
    for visit in changed:
        names.update(bound.name for bound in visit.bound)
        names.update(uses_of(use.node.value) for use in visit.uses)
    if any("." in name for name in names):
        for visit in kept:
            visit.kept.clear()
        return
    for visit in kept:
        store = visit.kept
        for key in [key for key, (_, depends) in store.items() if not depends.isdisjoint(names)]:
            del store[key]


def _sort_linked(fresh: list[tuple[UnitScopes, int, Access]], module_scope: GlobalScope) -> None:
    """After ``infer_accesses``: keep the accesses it linked to their unit's scopes alone for
    the next join; remember the others, which the next join unlinks and links again.

    Linked alone means: every assignment the use may refer to is in the unit's scopes, and no
    assignment of its name in its own scope comes after it (libcst hands a use that precedes an
    assignment in its scope, ``x = x + 1``, to the same name in the scopes above, the module's
    included, even when an earlier assignment already binds it)."""
    outside = (module_scope, module_scope.parent)
    for visit, number, access in fresh:
        referents = access.referents
        scope = access.scope
        if (referents and scope not in outside and visit.uses[number].enclosing_string_annotation is None
                and all(assignment.scope not in outside for assignment in referents)):
            name = next(iter(referents)).name
            index = access._index
            if all(assignment._index < index for assignment in scope._assignments.get(name, ())):
                visit.local[number] = access
                continue
        visit.relinked.add(access)


def _is_typing_import(bound: _Bound) -> bool:
    node = bound.node
    if type(node) is cst.ImportFrom:
        module = node.module
        name = get_full_name_for_node(module) if module is not None and not node.relative else None
    elif type(node) is cst.Import:  # the module of the alias that binds the name
        name = next((get_full_name_for_node(alias.name) for alias in node.names
                     if (alias.asname.name if alias.asname is not None else alias.name) is bound.as_name), None)
    else:
        return False
    return name is not None and name.split(".")[0] in _TYPING_MODULES


def _typing_bindings(module_scope: GlobalScope, typing_names: set[str]) -> frozenset:
    """The module-level bindings of the names a ``typing`` import binds, as the visit of the
    next statement would see them: which assignments, in what order."""
    return frozenset(
        (name, frozenset((type(a).__name__, id(a.node)) for a in module_scope._assignments.get(name, ())))
        for name in typing_names
    )
