"""libcst's scope analysis of a module joined from units, each top-level statement visited once.

``ScopeProvider`` visits the whole module, then links every name use to the assignments it can
refer to (``ScopeVisitor.infer_accesses``). After an edit of one statement of a large script,
the visit of the others would give what it gave before: what a visit of a statement depends on
outside it is only the module-level names bound above it, and of those only the ones that
decide whether a call or a subscript is ``typing``'s (``typing.cast("T", x)``, ``List["T"]``:
libcst reads their strings as annotations). So each unit's visit is kept with the unit: the
scopes it made, each node's scope, the module-level assignments and the name uses it recorded.
The first join makes a module scope, gives it the units' module-level assignments (their order
numbers moved by the assignments above), points the units' scopes at it and runs libcst's own
``infer_accesses`` over the name uses. A use that a join linked to its own statement's scopes
alone (a function's local variable, a parameter) keeps its links at the next join: libcst's
lookup for it stopped in those scopes before the module's, so nothing outside the statement
entered it, except a dotted module-level name (``import a.b``) that a longer attribute would
have preferred (checked at each join). That is most of a training script's uses. The next
join of the same document keeps the module scope too and patches it (``_Patch``): the
module-level assignments of the statements the edit replaced, and of those it moved among the
module's assignments, are taken out and the new statements' put in; the uses that reach the
module scope or the builtins are linked again only where the patch rebound their name. An
edit inside a function rebinds the function's name alone.

A unit's visit is kept only while the ``typing`` bindings above it are the ones it was visited
with (``_typing_bindings``); otherwise it is visited again. The scopes of a module's earlier
version are the later version's, patched, so they are valid until a later version of the same
document is analysed (memlint analyses a document's versions one after another).
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

from memlint.python.units import Unit, unit_among, units_of

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
    attached_to: "_Join | None" = None  # the last join
    # after a join: the uses linked to the unit's own scopes alone (by index in ``uses``), kept
    # linked at the next join, and the other uses' accesses (reaching the module scope or the
    # builtins), which a join links again when what the module binds to their name changed
    local: dict[int, Access] = field(default_factory=dict)
    relinked: dict[int, Access] = field(default_factory=dict)
    # the assignments the last join gave the module scope for ``bound``, one each
    module_assignments: list[BaseAssignment] = field(default_factory=list)
    # the qualified names asked of its nodes (``ScopeMap.qualified_names``), each with the first
    # part of the node's dotted name, and the module-level order number its uses started at
    qualified: dict[cst.CSTNode, tuple[frozenset[str], str]] = field(default_factory=dict)
    base: int = 0
    # answers other layers worked out about its nodes (``ScopeMap.kept``), each with what it
    # depends on outside the unit: a name's module-level binding, or its uses (``uses_of``)
    kept: dict[object, tuple[object, frozenset[str]]] = field(default_factory=dict)
    # each string annotation the visit parsed: the nodes it parsed into (``strings``' owners)
    string_nodes: dict[cst.CSTNode, list[cst.CSTNode]] = field(default_factory=dict)
    # a visit taken over from an earlier version's (``python_member_scopes``): what its edit
    # changed for the kept answers (``_forget_changed``), the replaced and new members' alone
    changed: frozenset[str] | None = None
    # the module's dotted names (``import a.b``) when ``local`` was last checked against them or
    # linked (``_unkeep_shadowed``); None: never
    dotted: frozenset[str] | None = None


_VISITS: "weakref.WeakKeyDictionary[Unit, UnitScopes]" = weakref.WeakKeyDictionary()


def visit_of(unit: Unit) -> "UnitScopes | None":
    """The unit's kept visit, if it has one."""
    return _VISITS.get(unit)


def forget_visit(unit: Unit) -> None:
    """Drop the unit's kept visit (taken over by a later version's, ``python_member_scopes``)."""
    _VISITS.pop(unit, None)


@dataclass(eq=False)
class _Join:
    """One join: the module scope and the visits joined into it, in order (emptied when the
    next join supersedes it, so that visits and joins form no cycle)."""

    module_scope: GlobalScope
    visits: list[UnitScopes]

# What an answer kept with a unit (``ScopeMap.kept``) can depend on outside the unit: what the
# module binds to a name (the name itself), every use of a name (``uses_of``), or anything at
# all (``ANYTHING``: a whole-module scan, never kept).
ANYTHING = "*"
# every ``add_argument``/``set_defaults`` call of the module (``Options.argparse_options``):
# changed by any statement replaced, and by a member edit only when it holds such a call
ARGPARSE = "argparse:"


def in_class(name: str) -> str:
    """The dependency on what a class scope binds to a name (a class-level use met it): its
    members' edit drops it only when one of them binds that name (``python_member_scopes``)."""
    return "class:" + name


def uses_of(name: str) -> str:
    """The dependency on where a name is used (a function's call sites, ``cfg[k] = v``)."""
    return "uses:" + name


class ScopeMap(Mapping[cst.CSTNode, "Scope | None"]):
    """Each node's scope, what ``MetadataWrapper(module).resolve(ScopeProvider)`` maps it to,
    read from the units' visits."""

    def __init__(self, join: _Join, own: dict[cst.CSTNode, Scope],
                 visits: dict[Unit, UnitScopes], hidden: set[cst.CSTNode]) -> None:
        self._join = join
        self.module_scope = join.module_scope
        self._own = own  # the module and the statements the join rebuilt
        self._visits = visits
        self._hidden = hidden  # statements the join replaced

    def get(self, node: object, default=None):  # type: ignore[override]
        found = self._own.get(node)
        if found is not None:
            return found
        visit = self._visits.get(unit_among(node, self._visits))
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
        visit = None if node in self._hidden else self._visits.get(unit_among(node, self._visits))
        return visit.kept if visit is not None and visit.attached_to is self._join else None

    def linked_locally(self) -> set[int]:
        """The ids of the accesses linked to their own statement's scopes alone: what they
        refer to changes only with that statement (the others may change with any binding of
        their name at module level)."""
        return {id(access) for visit in self._visits.values() for access in visit.local.values()}

    def qualified_names(self, node: cst.CSTNode) -> frozenset[str]:
        """What libcst's scope answers for ``node`` (``Scope.get_qualified_names_for``), kept
        with the node's unit across joins until a join changes what the module binds to the
        first part of its dotted name or moves the unit among the module's assignments."""
        visit = None if node in self._hidden else self._visits.get(unit_among(node, self._visits))
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
                    visitor_class: type, contexts_of, members=None) -> ScopeMap:
    """The scopes of ``module``, joined from ``units`` (one per statement of its body).
    ``visitor_class``: the scope visitor (``python_scopes._Scopes``); ``contexts_of(unit)``: the
    unit's expression contexts.

    When every kept visit comes from one earlier join (the language server's case), that
    join's module scope is kept and patched (``_Patch``): the module-level assignments of the
    statements the edit replaced, and of those that moved among the module's assignments, are
    taken out, the new ones put in, and only the uses whose name the patch rebinds are linked
    again. Otherwise (a first analysis; units from several earlier joins) a new module scope
    gets every statement's assignments and every use that reaches it is linked.
    ``members``: makes the visit of a class from its earlier version's by visiting only the
    members an edit replaced (``python_member_scopes.visit_members``), when the module scope
    is patched.
    """
    joins = {visit.attached_to for visit in map(_VISITS.get, units) if visit is not None} - {None}
    previous = next(iter(joins)) if len(joins) == 1 else None
    module_scope = previous.module_scope if previous is not None else GlobalScope()
    patch = _Patch(module_scope) if previous is not None else None
    own: dict[cst.CSTNode, Scope] = {module: module_scope}
    hidden: set[cst.CSTNode] = set()
    visits: dict[Unit, UnitScopes] = {}
    deferred: list[DeferredAccess] = []
    fresh: list[tuple[UnitScopes, int, Access]] = []  # the accesses made for this join's linking
    base = 0
    typing_names: set[str] = set()
    above: dict[str, list[BaseAssignment]] = {}  # the module-level assignments of the statements above
    moved: list[UnitScopes] = []  # kept visits with more or fewer module-level assignments above them
    in_place: list[UnitScopes] = []  # kept visits whose links stand (when the module scope is patched)
    # without a patch: kept visits with qualified names, by their last join (``_forget_rebound``)
    asked: dict[_Join, list[UnitScopes]] = {}
    for unit, statement in zip(units, module.body):
        bindings = _typing_bindings(above, typing_names)
        visit = _VISITS.get(unit)
        if visit is None and patch is not None and members is not None and unit.origin is not None:
            made = members(unit, previous, base, bindings, visitor_class, contexts_of(unit), above, typing_names,
                           patch, fresh, {id(u) for u in units})
            if made is not None:
                visit, more = made
                _VISITS[unit] = visit
                deferred += more
        if visit is None or visit.typing_bindings != bindings:
            visit = _VISITS[unit] = _visit(unit, visitor_class, contexts_of(unit), above, typing_names, bindings)
        visits[unit] = visit
        if visit.attached_to is not None:
            if visit.base != base:  # its module-level uses moved among the assignments
                visit.qualified.clear()
                moved.append(visit)
            elif patch is None and visit.qualified:
                asked.setdefault(visit.attached_to, []).append(visit)
        if statement is not unit.statement:
            own[statement] = module_scope
            hidden.add(unit.statement)
        for node in visit.strings:
            found = visit.node_scopes[node]
            own[node] = module_scope if found is visit.module_scope else found
        if patch is not None and visit.attached_to is previous and visit.base == base:
            _renamed(visit, unit.statement, statement)
            in_place.append(visit)
        else:
            if patch is not None and visit.attached_to is previous:
                patch.take_out(visit)
            deferred += _attach(visit, unit.statement, statement, module_scope, base, fresh, patch)
        visit.base = base
        for bound, assignment in zip(visit.bound, visit.module_assignments):
            above.setdefault(bound.name, []).append(assignment)
        typing_names.update(bound.name for bound in visit.bound if _is_typing_import(bound))
        base += visit.count
    module_scope._assignment_count = base
    join = _Join(module_scope, list(visits.values()))
    joined = {id(visit) for visit in join.visits}
    earlier = list(joins)
    dropped = [visit for old in earlier for visit in old.visits if id(visit) not in joined]
    if patch is not None:
        for visit in dropped:
            patch.take_out(visit)
        deferred += patch.relink_rebound(in_place, fresh)
        patch.finish()
    deferred += _unkeep_shadowed(join.visits, module_scope, fresh)
    linker = visitor_class(ScopeProvider())
    linker._ScopeVisitor__deferred_accesses = deferred
    linker.infer_accesses()
    _sort_linked(fresh, module_scope)
    if patch is not None:
        _forget_qualified(in_place, patch.heads)
    else:
        for old, kept in asked.items():
            _forget_rebound(kept, old.module_scope, module_scope)
    _forget_changed(join.visits, moved, previous, dropped)
    for old in earlier:
        old.visits = []
    for visit in join.visits:
        visit.attached_to = join
        visit.changed = None
    _empty(dropped, [] if patch is not None else [old.module_scope for old in earlier])
    return ScopeMap(join, own, visits, hidden)


class _Patch:
    """The changes a join makes to the module scope it keeps: the assignments it takes out and
    puts in, by name, and the accesses it unlinks (taken out of the module scope's records in
    one pass, ``finish``)."""

    def __init__(self, module_scope: GlobalScope) -> None:
        self.module_scope = module_scope
        self.rebound: set[str] = set()  # names whose module-level assignments changed
        self.unlinked: set[Access] = set()

    @property
    def heads(self) -> set[str]:
        """The first parts of the rebound names (``import a.b`` rebinds what ``a.b.c`` is)."""
        return {name.split(".", 1)[0] for name in self.rebound}

    def take_out(self, visit: UnitScopes) -> None:
        """Take a replaced or moved statement's assignments and name uses out of the module."""
        table = self.module_scope._assignments
        for bound, assignment in zip(visit.bound, visit.module_assignments):
            found = table.get(bound.name)
            if found is not None:
                found.discard(assignment)
                if not found:
                    del table[bound.name]
            assignment._BaseAssignment__accesses.clear()
            self.rebound.add(bound.name)
        visit.module_assignments = []
        self.unlink(visit, list(visit.relinked.items()))
        visit.relinked = {}

    def put_in(self, visit: UnitScopes) -> None:
        self.rebound.update(bound.name for bound in visit.bound)

    def unlink(self, visit: UnitScopes, uses: list[tuple[int, Access]], scopes: "set[Scope] | None" = None) -> None:
        """Take the visit's accesses for these uses out of every assignment that recorded them:
        those they refer to, and the module's and builtins' of their name, which libcst also
        gives a use that precedes an assignment in its own scope (``x = x + 1``). ``scopes``:
        the visit's scopes that recorded them, when known (else all are searched)."""
        if not uses:
            return
        tables = (self.module_scope._assignments, self.module_scope.parent._assignments)
        for number, access in uses:
            for assignment in access.referents:
                assignment._BaseAssignment__accesses.discard(access)
            names = [visit.uses[number].node.value]
            if type(access.node) is cst.Attribute:  # linked by a dotted name (``import a.b``)
                names.append(get_full_name_for_node(access.node))
            for table in tables:
                for name in names:
                    for assignment in table.get(name, ()):
                        assignment._BaseAssignment__accesses.discard(access)
        accesses = {access for _, access in uses}
        self.unlinked |= accesses
        if scopes is None:
            _unlink(visit, accesses)
        else:  # the assignments recorded them as referents, done above
            _drop_accesses(scopes, accesses)

    def relink_rebound(self, in_place: list[UnitScopes], fresh: list[tuple[UnitScopes, int, Access]]) -> list[DeferredAccess]:
        """Fresh accesses for the kept statements' uses of a rebound name (after every
        ``take_out``: the rebound names are all known then)."""
        heads = self.heads
        if not heads:
            return []
        out = []
        for visit in in_place:
            numbers = [number for number in visit.relinked if visit.uses[number].node.value in heads]
            if numbers:
                self.unlink(visit, [(number, visit.relinked.pop(number)) for number in numbers])
                out += [_deferred(visit, number, self.module_scope, visit.base, fresh) for number in numbers]
        return out

    def finish(self) -> None:
        """Take the unlinked accesses out of the module scope's records of its uses."""
        if self.unlinked:
            _drop_accesses([self.module_scope], self.unlinked)


def _drop_accesses(scopes, accesses: set[Access]) -> None:
    for scope in scopes:
        for table in (scope._accesses_by_name, scope._accesses_by_node):
            for key in [key for key, found in table.items() if not found.isdisjoint(accesses)]:
                found = table[key]
                found -= accesses
                if not found:
                    del table[key]


def _empty(dropped: list[UnitScopes], module_scopes: list[GlobalScope]) -> None:
    """Unlink the scopes a join leaves behind: the replaced statements' scopes (and the module
    scope their visit stood in for) and, when the join made a new module scope, the earlier
    ones. libcst links each access and the assignments it may refer to both ways, and a module
    scope and its builtins scope refer to each other: left linked, every version of an edited
    document (its accesses, assignments, nodes) would wait for the cycle collector, which walks
    all of it on its way. The kept units' scopes point at the join's module scope by now."""
    scopes = [scope for module_scope in module_scopes for scope in (module_scope, module_scope.parent)]
    for visit in dropped:
        scopes += [*visit.scopes, visit.module_scope, visit.module_scope.parent]
        visit.local = {}
        visit.relinked = {}
    for scope in scopes:
        for found in scope._assignments.values():
            for assignment in found:
                if assignment.scope is scope:  # not the module's ``typing`` imports a visit was given
                    assignment._BaseAssignment__accesses.clear()
        scope._assignments.clear()
        scope._accesses_by_name.clear()
        scope._accesses_by_node.clear()


def _visit(unit: Unit, visitor_class: type, contexts, above: dict[str, list[BaseAssignment]],
           typing_names: set[str], typing_bindings: frozenset) -> UnitScopes:
    provider = ScopeProvider()
    provider.metadata = {ExpressionContextProvider: contexts}
    visitor = visitor_class(provider)
    stand_in: GlobalScope = visitor.scope
    # what the module bound above the unit to the names the visit's questions (is ``cast``
    # typing's?) can answer ``typing`` for: only a name a ``typing`` import binds can
    copied: set[int] = set()
    for name in typing_names:
        found = above.get(name)
        if found:
            stand_in._assignments[name] = set(found)
            copied.update(id(a) for a in found)
    unit.statement.visit(visitor)
    node_scopes = provider._computed
    scopes = list({s for s in node_scopes.values() if s is not None and s is not stand_in})
    bound = [
        _Bound(a.name, a.node, a._index, getattr(a, "as_name", None))
        for found in stand_in._assignments.values() for a in found if id(a) not in copied
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
        string_nodes=getattr(visitor, "strings", {}),
    )


def _foreign_nodes(unit: Unit, visitor, node_scopes: dict[cst.CSTNode, Scope]) -> list[cst.CSTNode]:
    """The nodes the visit gave a scope that are not the unit's: those of the string
    annotations libcst parsed, if it parsed any (most visits do not)."""
    if not visitor.read_strings:
        return []
    return [node for node in node_scopes if unit not in units_of(node)]


def _attach(visit: UnitScopes, visited: cst.CSTNode, statement: cst.CSTNode, module_scope: GlobalScope,
            base: int, fresh: list[tuple[UnitScopes, int, Access]], patch: "_Patch | None") -> list[DeferredAccess]:
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
    if visit.relinked:  # linked into an earlier module scope, which goes
        _unlink(visit, set(visit.relinked.values()))
        visit.relinked = {}
    visit.module_assignments = []
    for bound in visit.bound:
        if bound.as_name is not None:
            assignment: BaseAssignment = ImportAssignment(bound.name, module_scope, bound.node, bound.index + base,
                                                          bound.as_name)
        else:
            node = statement if bound.node is visited else bound.node
            assignment = Assignment(bound.name, module_scope, node, bound.index + base)
        module_scope._assignments[bound.name].add(assignment)
        visit.module_assignments.append(assignment)
    if patch is not None:
        patch.put_in(visit)
    local = visit.local
    return [_deferred(visit, number, module_scope, base, fresh)
            for number in range(len(visit.uses)) if number not in local]


def _renamed(visit: UnitScopes, visited: cst.CSTNode, statement: cst.CSTNode) -> None:
    """A kept visit whose links stand: only the node the module holds for its statement may be
    new (a copy, when the lines above it changed), which its scope and name assignment name."""
    for scope in visit.statement_scopes:
        scope.node = statement
    for bound, assignment in zip(visit.bound, visit.module_assignments):
        if bound.node is visited:
            assignment.node = statement


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
    """Take ``accesses`` out of the unit's own scopes and assignments."""
    _drop_accesses(visit.scopes, accesses)
    for assignment in visit.assignments:
        recorded = assignment._BaseAssignment__accesses
        if not recorded.isdisjoint(accesses):
            recorded -= accesses


def _unkeep_shadowed(visits, module_scope: GlobalScope,
                     fresh: list[tuple[UnitScopes, int, Access]]) -> list[DeferredAccess]:
    """Kept uses under an attribute whose dotted name the module now binds (``import a.b``
    with a local ``a`` used as ``a.b.c``): libcst links such a use to the longer name, so it
    is linked again. Rare: most modules bind no dotted name. A visit whose uses were checked
    against (or linked with) these names or more at an earlier join is not checked again: TRL's
    ``grpo_trainer.py`` binds one, and its class's thousands of uses were 3 ms of each edit."""
    dotted = frozenset(name for name in module_scope._assignments if "." in name)
    out = []
    for visit in visits:
        checked, visit.dotted = visit.dotted, dotted  # the uses linked at this join are linked with them
        if not dotted or (checked is not None and dotted <= checked):
            continue
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


def _forget_changed(visits: list[UnitScopes], moved: list[UnitScopes], previous: _Join | None,
                    dropped: list[UnitScopes]) -> None:
    """Drop the kept visits' kept answers (``UnitScopes.kept``) that depend on a name the join's
    changed statements bind at module level, or on the uses of a name they use. Changed: those
    it replaced, those it added, and those that moved among the module's assignments (a use
    at module level refers to the assignments above it only) or among the other kept
    statements; the moved ones' own answers go too. A change that binds a dotted name
    (``import a.b``) relinks local uses too (``_unkeep_shadowed``): all answers go then, as
    they do when the kept visits come from several joins (versions never analysed between).
    Before ``previous`` is emptied."""
    for visit in moved:
        visit.kept.clear()
    kept = [visit for visit in visits if visit.kept]
    if not kept:
        return
    if previous is None:
        for visit in kept:
            visit.kept.clear()
        return
    place = {id(visit): number for number, visit in enumerate(previous.visits)}
    changed = [*dropped, *moved, *(visit for visit in visits if id(visit) not in place)]
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
        if visit.changed is not None:  # taken over: its replaced and new members' part alone
            names.update(visit.changed)
            continue
        names.add(ARGPARSE)
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


def _forget_qualified(visits: list[UnitScopes], heads: set[str]) -> None:
    """Drop the visits' kept qualified names whose first part a patch of the module scope
    rebound (``_Patch.heads``)."""
    if not heads:
        return
    for visit in visits:
        if visit.qualified:
            for node in [node for node, (_, head) in visit.qualified.items() if head in heads]:
                del visit.qualified[node]


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
        visit.relinked[number] = access


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


def _typing_bindings(above: dict[str, list[BaseAssignment]], typing_names: set[str]) -> frozenset:
    """The module-level bindings of the names a ``typing`` import binds, as the visit of the
    next statement would see them: which assignments, in what order."""
    return frozenset(
        (name, frozenset((type(a).__name__, id(a.node)) for a in above.get(name, ())))
        for name in typing_names
    )
