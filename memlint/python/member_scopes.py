"""A class's scope visit made from its previous version's by visiting only the members an edit replaced.

In real trainer code the top-level statement is one class of thousands of lines, and an edit
inside one of its methods made the class a new unit (``python_class_units``), which libcst's
scope visitor walked whole and whose every name use was linked again (~150 ms on TRL's
``grpo_trainer.py``). What a visit of a method records depends on the class scope only at class
level (its decorators, defaults and annotations are evaluated there, and its name is bound
there, at the class scope's assignment count when it is met); the names of the class scope are
hidden from the bodies of its methods. So when the members the edit replaced and the ones that
replace them are all ``def``s or ``class``es, and the new ones advance the class scope's count
as the old ones did (every later member's order numbers stand), the old visit is taken over:
the replaced members' scopes, assignments and name uses are taken out, the new members visited
into the class scope alone (with the ``typing`` bindings above the class, as ``_visit`` does),
and only their uses, and the class-level uses of a name the class scope bound or binds now
through them, are linked again. Anything else (another member kind, a ``global`` statement, a
string annotation, the class moved among the module's assignments) visits the class whole.

The kept visit's answers (``UnitScopes.kept``) are kept but for the replaced members' and those
that read a name the class scope binds anew (an answer reads inside its class, outside its own
member, only through the class scope's names: ``Names._read``) or the command-line options an
``add_argument`` of the replaced or new members changes; the join then drops those that read
what the replaced and new members use at module level (``UnitScopes.changed``). Its qualified
names are kept but for the replaced members' and those whose first part the class scope rebinds.
"""

from __future__ import annotations

from typing import Any, cast

import libcst as cst
from libcst.helpers import get_full_name_for_node
from libcst.metadata import ExpressionContextProvider, ScopeProvider
from libcst.metadata.scope_provider import (
    Access,
    AnnotationScope,
    BaseAssignment,
    ClassScope,
    DeferredAccess,
    GlobalScope,
    LocalScope,
    Scope,
)

from memlint.python.unit_scopes import (
    ARGPARSE,
    UnitScopes,
    _deferred,
    _drop_accesses,
    _Join,
    _Patch,
    _Use,
    forget_visit,
    in_class,
    uses_of,
    visit_of,
)
from memlint.python.tree import subtree
from memlint.python.units import Unit

_MEMBERS = (cst.FunctionDef, cst.ClassDef)
_ARGPARSE_CALLS = ("add_argument", "set_defaults")
_EMPTIED = GlobalScope()  # what a taken-over visit's stand-in becomes (``_empty`` clears it)


def visit_members(unit: Unit, join: _Join, base: int, typing_bindings: frozenset, visitor_class: type,
                  contexts: dict, above: dict[str, list[BaseAssignment]], typing_names: set[str],
                  patch: _Patch, fresh: list[tuple[UnitScopes, int, Access]],
                  units: set[int]) -> tuple[UnitScopes, list[DeferredAccess]] | None:
    """The visit of ``unit`` (a class made from an earlier version's unit, ``Unit.origin``)
    made from that version's visit, and the accesses ``infer_accesses`` must link for it; None
    when the class must be visited whole. ``join``: the previous join, whose module scope the
    caller patches; ``base``: the module-level assignments above the class."""
    origin = unit.origin
    old = origin.unit() if origin is not None else None
    if origin is None or old is None or id(old) in units:
        return None
    before = visit_of(old)
    if (before is None or before.attached_to is not join or before.base != base
            or before.typing_bindings != typing_bindings or len(before.statement_scopes) != 1):
        return None
    statement = old.statement
    scope = before.statement_scopes[0]
    members = list(statement.body.body)  # type: ignore[attr-defined]
    removed, added = origin.removed, origin.added
    if (type(statement) is not cst.ClassDef or statement.type_parameters is not None
            or type(scope) is not ClassScope
            or not all(type(m) in _MEMBERS for m in (*removed, *added))):
        return None
    final = scope._assignment_count
    start, end = _count_span(scope, members, removed)
    if start is None or end is None:
        return None
    gone = set(subtree(removed, old.shape))
    if any(bound.node in gone for bound in before.bound):  # ``global x`` written in a replaced member
        return None
    made = _visit_added(unit, scope, added, start, visitor_class, contexts, above, typing_names)
    if made is None or scope._assignment_count != end:
        return None
    scope._assignment_count = final
    return _taken_over(before, old, unit, scope, gone, *made, patch, fresh)


def _count_span(scope: ClassScope, members: list[cst.BaseStatement],
                removed: tuple[cst.BaseStatement, ...]) -> tuple[int | None, int | None]:
    """The class scope's assignment count when the visit met the first replaced member, and
    when it met the member after the last (the count at its end for the last member): a
    ``def`` or ``class`` records its name at the count it meets it at."""
    if not removed:
        return None, 0
    first = members.index(removed[0]) if removed[0] in members else -1
    if first < 0:
        return None, 0
    after = first + len(removed)
    if members[first:after] != list(removed):
        return None, 0
    start = _met_at(scope, members[first])
    if after == len(members):
        return start, scope._assignment_count
    following = members[after]
    if type(following) not in _MEMBERS:
        return None, 0
    return start, _met_at(scope, following)


def _met_at(scope: ClassScope, member: cst.BaseStatement) -> int | None:
    name = member.name.value  # type: ignore[attr-defined]
    return next((a._index for a in scope._assignments.get(name, ()) if getattr(a, "node", None) is member), None)


def _visit_added(unit: Unit, scope: ClassScope, added: tuple[cst.BaseStatement, ...], start: int,
                 visitor_class: type, contexts: dict, above: dict[str, list[BaseAssignment]],
                 typing_names: set[str]
                 ) -> tuple[dict[cst.CSTNode, Scope], list[LocalScope], list[DeferredAccess],
                            dict[cst.CSTNode, list[cst.CSTNode]]] | None:
    """Visit the new members in the class scope, as libcst's ``visit_ClassDef`` visits its body
    (the class scope's parent a stand-in for the module holding the ``typing`` bindings above the
    class, as ``_visit`` gives a whole statement). None when a visit reaches beyond the class:
    a module-level binding (``global``), a string annotation parsed."""
    provider = ScopeProvider()
    provider.metadata = {ExpressionContextProvider: contexts}
    visitor = visitor_class(provider)
    stand_in: GlobalScope = visitor.scope
    copied = 0
    for name in typing_names:
        found = above.get(name)
        if found:
            stand_in._assignments[name] = set(found)
            copied += len(found)
    parent, globals_ = scope.parent, scope.globals
    scope.parent, scope.globals = stand_in, stand_in
    scope._assignment_count = start
    try:
        visitor.scope = scope
        for member in added:
            member.visit(visitor)
    finally:
        scope.parent, scope.globals = parent, globals_
    node_scopes = cast("dict[cst.CSTNode, Scope]", provider._computed)  # a provider's results: a scope per node
    new_scopes: list[Any] = list({s for s in node_scopes.values() if s is not scope})
    uses: list[DeferredAccess] = visitor._ScopeVisitor__deferred_accesses
    if (stand_in in new_scopes
            or sum(len(found) for found in stand_in._assignments.values()) != copied
            or any(d.access.scope is stand_in for d in uses)
            or any(target is stand_in for s in new_scopes for target in s._scope_overwrites.values())):
        return None
    for found in new_scopes:
        found.globals = globals_
    return node_scopes, new_scopes, uses, visitor.strings


def _taken_over(before: UnitScopes, old: Unit, unit: Unit, scope: ClassScope, gone: set[cst.CSTNode],
                visited: dict[cst.CSTNode, Scope],
                new_scopes: list[LocalScope], deferred_uses: list[DeferredAccess],
                strings: dict[cst.CSTNode, list[cst.CSTNode]], patch: _Patch,
                fresh: list[tuple[UnitScopes, int, Access]]) -> tuple[UnitScopes, list[DeferredAccess]]:
    """The new visit: ``before`` with the replaced members' part taken out and the new
    members' put in; ``before`` is left empty (the join drops it)."""
    origin = unit.origin
    assert origin is not None
    # the string annotations of the replaced members: the nodes they parsed into go too
    string_nodes = dict(before.string_nodes)
    for node in [node for node in string_nodes if node in gone]:
        parsed = string_nodes.pop(node, ())
        gone.update(parsed)
        for inner in parsed:  # a string inside the string
            string_nodes.pop(inner, None)
    string_nodes.update(strings)
    statement, new_statement = old.statement, unit.statement
    gone_scopes = [s for s in before.scopes if s.node in gone]
    gone_scope_set: set[Any] = set(gone_scopes)
    # the class scope's assignments of the replaced members out; what names it rebinds
    rebound: set[str] = set()
    table: Any = scope._assignments
    for name in list(table):
        found = table[name]
        stale = {a for a in found if a.node in gone}
        if stale:
            found -= stale
            rebound.add(name)
            if not found:
                del table[name]
    added_nodes = visited.keys()
    rebound.update(name for name, found in table.items() if any(a.node in added_nodes for a in found))
    heads = {name.split(".", 1)[0] for name in rebound}

    # the uses: the replaced members' go, those a class-level rebinding may change are linked again
    uses: list[_Use] = []
    local: dict[int, Access] = {}
    relinked: dict[int, Access] = {}
    unlink_local: list[tuple[int, Access]] = []
    unlink_outside: list[tuple[int, Access]] = []
    again: list[int] = []
    gone_names: set[str] = set()  # of the replaced members' uses
    for number, use in enumerate(before.uses):
        access = before.local.get(number)
        outside = access is None
        if outside:
            access = before.relinked.get(number)
        if use.node in gone or use.enclosing_string_annotation in gone:
            if use.node in gone:
                gone_names.add(use.node.value)
            if access is not None:
                (unlink_outside if outside else unlink_local).append((number, access))
            continue
        renumbered = len(uses)
        uses.append(use)
        if use.node.value in heads and (use.scope is scope or (
                type(use.scope) is AnnotationScope and use.scope.parent is scope) or (
                outside and access is not None and use.scope.parent is scope)):
            # the last: a use in a kept method that precedes an assignment of its name there,
            # which libcst also hands to the class scope's assignments of the name (``_early``)
            if access is not None:
                (unlink_outside if outside else unlink_local).append((number, access))
            again.append(renumbered)
        elif access is not None:
            (relinked if outside else local)[renumbered] = access
    _unlink_accesses(before, unlink_local, gone_scope_set)
    if unlink_outside:
        _unlink_early(table, before, unlink_outside)
        # reaching the module or the builtins: out of their records too (``_Patch.unlink``)
        patch.unlink(before, unlink_outside, scopes={a.scope for _, a in unlink_outside} - gone_scope_set)
    first_new = len(uses)
    for deferred in deferred_uses:
        access = deferred.access
        uses.append(_Use(cast(cst.Name, access.node), access.scope, access.is_annotation, access.is_type_hint, access._index,
                         deferred.enclosing_attribute, deferred.enclosing_string_annotation))

    # what the edit changed for the answers kept outside the replaced members: the names the
    # class binds (its own), the uses of names in the replaced and the new members, and the
    # command-line options when either holds an ``add_argument``/``set_defaults`` call
    added_tree = subtree(origin.added, unit.shape)
    changed: set[str] = {b.name for b in before.bound}
    changed.update(map(uses_of, gone_names))
    changed.update(uses_of(use.node.value) for use in uses[first_new:])
    argparse = _calls_argparse(gone) or _calls_argparse(added_tree)
    if argparse:
        changed.add(ARGPARSE)

    node_scopes = dict(before.node_scopes)
    for node in gone:
        node_scopes.pop(node, None)
    node_scopes.pop(statement, None)
    node_scopes[new_statement] = before.module_scope
    node_scopes.update(visited)
    scopes = [s for s in before.scopes if s not in gone_scope_set] + new_scopes
    assignments = [a for a in before.assignments if a.scope not in gone_scope_set and getattr(a, "node", None) not in gone]
    assignments += [a for s in new_scopes for found in s._assignments.values() for a in found]
    assignments += [a for found in table.values() for a in found if a.node in added_nodes]
    bound = [b if b.node is not statement else type(b)(b.name, new_statement, b.index, b.as_name)
             for b in before.bound]
    visit = UnitScopes(
        module_scope=before.module_scope,
        node_scopes=node_scopes,
        scopes=scopes,
        assignments=assignments,
        top=before.top,
        overwrites=[(s, name) for s, name in before.overwrites if s not in gone_scope_set],
        bound=bound,
        uses=uses,
        count=before.count,
        typing_bindings=before.typing_bindings,
        statement_scopes=before.statement_scopes,
        strings=[node for node in before.strings if node not in gone] + [n for found in strings.values() for n in found],
        string_nodes=string_nodes,
        attached_to=before.attached_to,
        local=local,
        relinked=relinked,
        module_assignments=before.module_assignments,
        qualified={node: found for node, found in before.qualified.items()
                   if found[1] not in heads and node not in gone},
        base=before.base,
        kept=_kept_answers(before.kept, gone, rebound, argparse),
        changed=frozenset(changed),
        dotted=before.dotted,  # of the kept uses in ``local``; the new ones are linked at the join
    )
    for assignment, b in zip(visit.module_assignments, visit.bound):
        if b.node is new_statement:
            assignment.node = new_statement  # type: ignore[attr-defined]
    # the earlier visit, emptied: the join drops it and empties what is left of it
    before.scopes = gone_scopes
    before.module_scope = _EMPTIED
    before.bound, before.module_assignments, before.uses = [], [], []
    before.local, before.relinked, before.kept, before.qualified = {}, {}, {}, {}
    before.changed = frozenset()  # what it held is the new visit's now (``changed``)
    forget_visit(old)
    module_scope = patch.module_scope
    numbers = [*again, *range(first_new, len(uses))]
    return visit, [_deferred(visit, number, module_scope, visit.base, fresh) for number in numbers]


def _kept_answers(kept: dict[object, tuple[object, frozenset[str]]], gone: set[cst.CSTNode], rebound: set[str],
                  argparse: bool) -> dict[object, tuple[object, frozenset[str]]]:
    """The earlier visit's kept answers (``UnitScopes.kept``) that the edit cannot change: those
    about nodes of the members it kept that read no name the class scope binds anew (an
    answer reads inside its class, outside its own member, only through the class scope's
    names, ``Names._read``), nor the command-line options when the edit changed an
    ``add_argument`` call. What they read at module level the join checks (``_forget_changed``)."""
    stale = {in_class(name) for name in rebound}
    if argparse:
        stale.add(ARGPARSE)
    out = {}
    for key, found in kept.items():
        node = key[0] if type(key) is tuple else key
        if node not in gone and found[1].isdisjoint(stale):
            out[key] = found
    return out


def _calls_argparse(nodes) -> bool:
    """Does any of ``nodes`` call ``.add_argument`` or ``.set_defaults`` (what
    ``Options.argparse_options`` reads)?"""
    return any(type(node) is cst.Attribute and node.attr.value in _ARGPARSE_CALLS for node in nodes)


def _unlink_early(table: Any, visit: UnitScopes, uses: list[tuple[int, Access]]) -> None:
    """Take accesses linked outside the class out of the class scope's assignments of their
    name: libcst's ``Assignment.record_accesses`` hands a use that precedes an assignment in a
    method (``if steps is None: steps = 1``) to the scope above's assignments of the name, the
    class scope's included, which the use does not list among its referents."""
    for number, access in uses:
        names: list[str | None] = [visit.uses[number].node.value]
        if type(access.node) is cst.Attribute:  # linked by a dotted name
            names.append(get_full_name_for_node(access.node))
        for name in names:
            for assignment in table.get(name, ()):
                assignment._BaseAssignment__accesses.discard(access)


def _unlink_accesses(visit: UnitScopes, uses: list[tuple[int, Access]], gone: set[Scope]) -> None:
    """Take accesses linked inside the class out of the assignments they refer to and of their
    scopes' records (those of a scope that goes with its member are left to go with it)."""
    if not uses:
        return
    accesses = {access for _, access in uses}
    for access in accesses:
        assignment: Any
        for assignment in access.referents:
            assignment._BaseAssignment__accesses.discard(access)
    kept = {access.scope for access in accesses} - gone
    _drop_accesses(kept, accesses)
