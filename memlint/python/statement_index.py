"""What the rules' module index holds about one top-level statement, kept across edits.

The language server lints a script again after every edit, and an edit changes one top-level
statement. ``ModuleIndex`` (every node in source order, each function's assignments by name)
would walk the whole module each time; here each top-level statement's part is computed once
and kept with the statement's parsed unit (``python_units``), whose nodes an edit elsewhere
leaves as they were. The index joins the parts in source order.

The statement node itself is not kept: the join gives a unit's statement a new node when the
lines above it move over to it (its children stay the same). The parts hold what lies below
the statement, and what depends on the statement node is computed from the current one.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, cast

import libcst as cst

from memlint.python.syntax import DEFERRED, iter_nodes

Table = dict[str, list]  # a flow's definitions by name (``index.Definition``)


@dataclass(eq=False)
class StatementPart:
    """One top-level statement's share of the index: ``below`` are the nodes under the
    statement (every node, functions and classes entered) in source order; ``module_level`` the
    nodes under it that run at module level (``iter_nodes`` without entering definitions)."""

    below: list[cst.CSTNode]
    module_level: list[cst.CSTNode]
    of_kinds: dict[tuple[type, ...], list[cst.CSTNode]] = field(default_factory=dict)
    # the definitions of each function below the statement, by function
    tables: dict[cst.FunctionDef, Table] = field(default_factory=dict)
    module_definitions: list | None = None  # of the module flow, from ``module_level``
    own_table: Table | None = None  # the statement's own, when it is a function
    # the calls the statement makes at module level, as a function, and each function below it
    module_calls: list[cst.Call] | None = None
    own_calls: list[cst.Call] | None = None
    function_calls: dict[cst.FunctionDef, list[cst.Call]] = field(default_factory=dict)

    def nodes_of(self, kinds: tuple[type, ...]) -> list[cst.CSTNode]:
        found = self.of_kinds.get(kinds)
        if found is None:
            found = self.of_kinds[kinds] = [n for n in self.below if type(n) in kinds]
        return found


# kept with the unit (weakly: a unit no version of the document uses any more takes its part with it)
_PARTS: "weakref.WeakKeyDictionary[object, StatementPart]" = weakref.WeakKeyDictionary()


def part_of(unit: object, statement: cst.BaseStatement) -> StatementPart:
    """The part of ``statement`` (the node the module holds for ``unit``'s statement)."""
    part = _PARTS.get(unit)
    if part is None:
        part = _PARTS[unit] = _member_part(unit) or _part(statement)
    return part


def kept_part(unit: object) -> StatementPart | None:
    """The unit's part, if one was computed."""
    return _PARTS.get(unit)


def _member_part(unit: object) -> StatementPart | None:
    """A class made from an earlier version of it (``Unit.origin``, ``python_class_units``):
    that version's part with the replaced members' nodes swapped for the new ones' (a member's
    nodes come together in source order) and its functions' tables and calls kept but for the
    replaced members' functions. None when there is no such part to start from."""
    origin: Any = getattr(unit, "origin", None)
    part = origin.index_part if origin is not None else None
    if type(part) is not StatementPart or not origin.removed or part.module_level:
        return None
    old_block, new_block = origin.block, cast(Any, unit).statement.body
    below = part.below
    members = list(old_block.body)
    removed = origin.removed
    # where the replaced members' nodes end: at the next member, or the block's trailing lines
    # (the replaced nodes themselves may have left the children registry with their version)
    first = next((number for number, member in enumerate(members) if member is removed[0]), None)
    if first is None:
        return None
    after = first + len(removed)
    following = members[after] if after < len(members) else (old_block.footer[0] if old_block.footer else None)
    try:
        start = below.index(removed[0])
        at_block = below.index(old_block, 0, start)
        end = below.index(following, start) if following is not None else len(below)
    except ValueError:
        return None
    gone = below[start:end]
    added = [node for member in origin.added for node in iter_nodes(member, enter_defs=True)]
    spliced = [*below[:at_block], new_block, *below[at_block + 1:start], *added, *below[end:]]
    dropped = set(gone)
    return StatementPart(
        spliced, [],
        of_kinds=_spliced_kinds(part, dropped, added, old_block),
        tables={function: table for function, table in part.tables.items() if function not in dropped},
        module_definitions=part.module_definitions,
        function_calls={function: calls for function, calls in part.function_calls.items() if function not in dropped},
    )


def _spliced_kinds(part: StatementPart, dropped: set[cst.CSTNode], added: list[cst.CSTNode],
                   old_block: cst.CSTNode) -> dict[tuple[type, ...], list[cst.CSTNode]]:
    """The earlier part's nodes of each asked-for kinds with the replaced members' swapped for
    the new ones' (a filter of the spliced nodes would walk the whole class again: trainer.py's
    ~100,000 nodes per kinds asked). The replaced ones are a run of each list (they are a run of
    the nodes); a list with none of them is the same when the new ones have none either (TRL's
    imports inside one method: an edit of another). A list with the replaced block, or with none
    of the replaced nodes but some new ones (where they go is not known here), is left to be
    filtered."""
    out: dict[tuple[type, ...], list[cst.CSTNode]] = {}
    for kinds, found in part.of_kinds.items():
        if type(old_block) in kinds:
            continue
        first = next((number for number, node in enumerate(found) if node in dropped), None)
        if first is None:
            if not any(type(node) in kinds for node in added):
                out[kinds] = list(found)
            continue
        last = first
        while last < len(found) and found[last] in dropped:
            last += 1
        out[kinds] = [*found[:first], *(node for node in added if type(node) in kinds), *found[last:]]
    return out


def part_of_whole(statement: cst.BaseStatement) -> StatementPart:
    """The part of a statement of a module parsed whole (kept with nothing: computed once per index)."""
    return _part(statement)


def _part(statement: cst.BaseStatement) -> StatementPart:
    below = list(iter_nodes(statement, enter_defs=True))[1:]
    # a walk of the module's top level (``iter_nodes(module)``) does not enter a ``def`` or a
    # ``class`` at all
    module_level = [] if type(statement) in DEFERRED else list(iter_nodes(statement))[1:]
    return StatementPart(below, module_level)


def function_table(part: StatementPart, function: cst.FunctionDef, compute: Callable[[], Table]) -> Table:
    """A function's definitions below the statement, computed once per part."""
    table = part.tables.get(function)
    if table is None:
        table = part.tables[function] = compute()
    return table


def flow_calls(part: StatementPart, function: cst.FunctionDef, is_statement: bool) -> list[cst.Call]:
    """The calls ``function`` makes itself (``iter_nodes(function.body)``'s): the statement's
    own (``is_statement``) or a function's below it."""
    if is_statement:
        if part.own_calls is None:
            part.own_calls = _calls(iter_nodes(function.body))
        return part.own_calls
    found = part.function_calls.get(function)
    if found is None:
        found = part.function_calls[function] = _calls(iter_nodes(function.body))
    return found


def module_calls(part: StatementPart) -> list[cst.Call]:
    """The calls the statement makes at module level (``iter_nodes(module)``'s)."""
    if part.module_calls is None:
        part.module_calls = _calls(part.module_level)
    return part.module_calls


def _calls(nodes) -> list[cst.Call]:
    return [node for node in nodes if type(node) is cst.Call]
