"""A class's unit made from its previous version by parsing again only the members an edit changed.

In real trainer code the top-level statement is the whole class (TRL's ``GRPOTrainer``: 1,800
of the module's lines), so reparsing the edited top-level statement (``python_units``) reparses
and records the class on every keystroke. Here an edit that stays inside the class's body is
parsed as the members it touches: the lines from the first touched member (with the blank lines
and comments above it, which libcst gives to it) to the next untouched one are parsed inside a
stand-in ``class _:`` header, and the new members take the place of the old in a copy of the
class; the untouched members' nodes, positions and children are reused as they are, moved down
by the lines the edit added.

libcst gives the lines between two members to one or the other by what follows them (a comment
indented deeper than the next member belongs to the block above it), so the stand-in reproduces
what follows the changed members: the next member's own leading lines and a statement at its
indentation, or the class's trailing lines; what libcst makes of those must be what it made of
them before, and the lines above the changed members may hold no comment indented deeper than
the members (it would belong to the member above). Anything else (the class header or its
trailing lines edited, another indentation, a syntax error) gives None: the class is parsed
whole, as before.
"""

from __future__ import annotations

import weakref
from bisect import bisect_right
from itertools import islice
from typing import Iterable, Iterator, cast

import libcst as cst
from libcst.metadata import CodePosition, CodeRange

from memlint.python.method_units import derive_method
from memlint.python.statement_index import kept_part
from memlint.python.block_runs import bounds as _bounds
from memlint.python.block_runs import deeper_comment as _deeper_comment
from memlint.python.block_runs import first_line as _first_line
from memlint.python.block_runs import leading as _leading
from memlint.python.block_runs import moved as _moved
from memlint.python.block_runs import Piece
from memlint.python.tree import Record, parents_of, record, register, subtree
from memlint.python.units import Origin, Parse, Unit, parses_of

STAND_IN = "class _:\n"  # one line above the changed members


def derive_unit(old: Unit, text: str) -> Unit | None:
    """The unit of ``text`` (a new version of ``old``'s text, a top-level class) made from
    ``old`` with only the changed members parsed; None when the edit is not inside its body."""
    statement = old.statement
    if type(statement) is not cst.ClassDef or type(statement.body) is not cst.IndentedBlock:
        return None
    block = statement.body
    members = list(block.body)
    if not members or "\r" in text:
        return None
    positions = old.positions
    firsts = [_first_line(member, positions) for member in members]
    old_lines = old.text.splitlines(keepends=True)
    new_lines = text.splitlines(keepends=True)
    tail = _tail_line(old, block, len(old_lines))
    # the changed lines: old lines lo..hi (1-based, hi < lo for a pure insertion)
    common = min(len(old_lines), len(new_lines))
    prefix = 0
    while prefix < common and old_lines[prefix] == new_lines[prefix]:
        prefix += 1
    suffix = 0
    while suffix < common - prefix and old_lines[-1 - suffix] == new_lines[-1 - suffix]:
        suffix += 1
    if prefix == len(old_lines) == len(new_lines):
        return None  # the same text (the caller reuses the unit)
    lo, hi = prefix + 1, len(old_lines) - suffix
    if lo < firsts[0] or hi >= tail or lo > tail:
        return None  # the class header or its trailing lines changed
    a = bisect_right(firsts, lo) - 1
    b = max(bisect_right(firsts, hi), a + 1)
    if b == a + 1 and type(members[a]) is cst.FunctionDef:  # inside one method: its statements alone
        if old.bounds is None:
            old.bounds = _bounds(positions, block, members, firsts[1:])
        piece = derive_method(old, a, old.bounds, old_lines, new_lines, lo, hi)
        if piece is not None:
            return _rebuilt(old, text, members, a, b, piece, len(new_lines) - len(old_lines))
    made = _derive_between(old, text, members, firsts, old_lines, new_lines, tail, a, b)
    if made is None and hi < lo and a > 0 and lo == firsts[a]:
        # lines added where a member's own lines begin may end the member above instead
        # (a statement typed at the end of a method's body): parse that one again
        made = _derive_between(old, text, members, firsts, old_lines, new_lines, tail, a - 1, a)
    return made


def _derive_between(old: Unit, text: str, members: list[cst.BaseStatement], firsts: list[int],
                    old_lines: list[str], new_lines: list[str], tail: int, a: int, b: int) -> Unit | None:
    """The new unit with members ``a``..``b`` (and the lines the edit put among them) parsed
    again; None when libcst would read the lines around them differently in the whole class."""
    statement = cast(cst.ClassDef, old.statement)
    block = cast(cst.IndentedBlock, statement.body)
    start, end = firsts[a], firsts[b] if b < len(members) else tail
    delta = len(new_lines) - len(old_lines)
    region = "".join(new_lines[start - 1:end - 1 + delta])
    body_indent = block.indent if block.indent is not None else old.module.default_indent
    if b < len(members):  # what follows: the next member's leading lines, then a statement at its indent
        following = "".join(old_lines[end - 1:end - 1 + len(_leading(members[b]))]) + body_indent + "pass\n"
    else:  # the class's trailing lines, to the end of the unit
        following = "".join(old_lines[tail - 1:])
    wrapper_text = STAND_IN + region + following
    try:
        wrapper = cst.parse_module(wrapper_text)
    except (cst.ParserSyntaxError, RecursionError, MemoryError):
        return None
    if (len(wrapper.body) != 1 or wrapper.header or wrapper.default_indent != old.module.default_indent
            or wrapper.default_newline != "\n"):
        return None
    stand_in = wrapper.body[0]
    if type(stand_in) is not cst.ClassDef or type(stand_in.body) is not cst.IndentedBlock \
            or stand_in.body.indent != block.indent:
        return None
    wrapper_block = stand_in.body
    new_members = list(wrapper_block.body)
    closing = None
    if b < len(members):
        closing = new_members.pop() if new_members else None
        if (type(closing) is not cst.SimpleStatementLine or len(closing.body) != 1
                or type(closing.body[0]) is not cst.Pass
                or len(_leading(closing)) != len(_leading(members[b]))
                or wrapper_block.footer or wrapper.footer):
            return None
    elif not (_same_lines(wrapper_block.footer, block.footer) and _same_lines(wrapper.footer, old.module.footer)
              and wrapper.has_trailing_newline == old.module.has_trailing_newline):
        return None
    # the first member after the member above the edit: a comment above it indented deeper
    # than it is would be the member above's (libcst gives it to the block it follows)
    after_above = new_members[0] if new_members else members[b] if b < len(members) else None
    if a > 0 and after_above is not None and any(
            _deeper_comment(line, len(body_indent)) for line in _leading(after_above)):
        return None
    if not members[:a] + new_members + members[b:]:
        return None
    try:  # the stand-in's lines numbered as the unit's: its header one line above the region
        recorded = record(wrapper, first_line=start - STAND_IN.count("\n"))
    except (RecursionError, KeyError):
        return None
    if recorded.code != wrapper_text:
        return None
    return _rebuilt(old, text, members, a, b, _stand_in_piece(new_members, closing, wrapper, recorded), delta)


def _stand_in_piece(new_members: list[cst.BaseStatement], closing: cst.BaseStatement | None, wrapper: cst.Module,
                    recorded: Record) -> Piece:
    """The new members as the stand-in's record has them: their run of its positions."""
    wrapper_positions, wrapper_shape = recorded.positions, recorded.shape
    wrapper_block = cast(cst.IndentedBlock, cast(cst.ClassDef, wrapper.body[0]).body)
    starts = [0]
    if new_members:
        if closing is not None:
            follow = [_first_line(m, wrapper_positions) for m in [*new_members[1:], closing]]
            starts = _bounds(wrapper_positions, wrapper_block, [*new_members, closing], follow)[:-1]
        else:
            follow = [_first_line(m, wrapper_positions) for m in new_members[1:]]
            starts = _bounds(wrapper_positions, wrapper_block, new_members, follow)
    run = list(islice(wrapper_positions.items(), starts[0], starts[-1]))
    shape = {node: wrapper_shape[node] for node in subtree(new_members, wrapper_shape)}
    return Piece(new_members, run, [place - starts[0] for place in starts[:-1]], shape, shape, wrapper,
                 [node for node, _ in run])


def _rebuilt(old: Unit, text: str, members: list[cst.BaseStatement], a: int, b: int, piece: Piece,
             delta: int) -> Unit:
    """The new unit: the old class with members ``a``..``b`` replaced by the piece's (whose
    positions count the unit's lines); the old positions of what follows them moved down by
    ``delta`` lines."""
    statement = cast(cst.ClassDef, old.statement)
    block = cast(cst.IndentedBlock, statement.body)
    new_members = piece.members
    every = [*members[:a], *new_members, *members[b:]]
    new_block = block.with_changes(body=every)
    new_class = statement.with_changes(body=new_block)
    new_module = old.module.with_changes(body=[new_class])
    replaced = {block: new_block, statement: new_class, old.module: new_module}

    # positions, in libcst's order: a member's nodes come together
    old_positions = old.positions
    bounds = old.bounds or _bounds(old_positions, block, members, [_first_line(m, old_positions) for m in members[1:]])
    positions: dict[cst.CSTNode, CodeRange] = dict(islice(old_positions.items(), bounds[a]))
    positions.update(piece.run)
    cut_to = bounds[b]
    if not delta:  # nothing moves down: what follows the new members up to the block is as it was
        positions.update(islice(old_positions.items(), cut_to, bounds[-1]))
        cut_to = bounds[-1]  # the block's own place: it, the class and the module come after their nodes
    last_old, last_new = old_positions[members[-1]].end, None
    for node, found in islice(old_positions.items(), cut_to, None):
        new_node = replaced.get(node)
        if new_node is None:
            positions[node] = _moved(found, delta) if delta else found
            continue
        if new_node is new_block:
            end = positions[every[-1]].end
            found = CodeRange(positions[every[0]].start, end)
        elif found.end == last_old and b == len(members):
            last_new = last_new or positions[every[-1]].end
            found = CodeRange(found.start, last_new)
        elif delta:
            found = CodeRange(found.start, CodePosition(found.end.line + delta, found.end.column))
        positions[new_node] = found

    # children: the old ones but the replaced members', the new members', the rebuilt nodes'
    shape = dict(old.shape)  # a mapping only: its order is not used
    for node in piece.gone if piece.gone is not None else subtree(members[a:b], old.shape):
        del shape[node]
    for node, new_node in replaced.items():
        shape[new_node] = shape.pop(node)
    shape[new_module] = [new_class]
    shape[new_class] = [new_block if child is block else child for child in old.shape[statement]]
    shape[new_block] = list(every)
    shape.update(piece.shape)
    # the new bounds: the old ones, the new members' from the piece's, the rest moved along
    shift = len(piece.run) - (bounds[b] - bounds[a])
    new_bounds = [*bounds[:a], *(bounds[a] + place for place in piece.starts), *(place + shift for place in bounds[b:])]
    # the parses a kept member's nodes come from beyond its own (a method some of whose
    # statements an edit parsed again, ``python_method_units``)
    every_set = set(every)
    member_parses = {m: found for m, found in (old.member_parses or {}).items() if m in every_set}
    parents, sizes = _spliced_parents(old, members, a, b, new_members, new_class, new_block, shape)
    unit = Unit(text, new_module, positions, shape, parents, old.has_block,
                origin=Origin(weakref.ref(old), tuple(members[a:b]), tuple(new_members), block, kept_part(old),
                              old.member_typed),
                bounds=new_bounds, sizes=sizes, member_parses=member_parses)
    # the nodes it shares with the old unit are registered with the parses they come from
    kept = [*every, block.header, statement.name, *statement.decorators, *block.footer, *old.module.footer]
    shared = {id(p): p for p in parses_of(kept)}
    shared.update((id(p), p) for found in member_parses.values() for p in found)
    shared.update((id(p), p) for p in piece.parses)
    if new_members:
        fresh = Parse(piece.module)
        register(fresh, piece.registered)
        fresh.own(piece.owned)
        if piece.parses:  # a method made by a statement's edit: its nodes come from these too
            member_parses[new_members[0]] = (*piece.parses, fresh)
        fresh.used_by(unit)
    for parse in shared.values():
        parse.used_by(unit, shared=True)
    rebuilt = Parse(new_module)
    register(rebuilt, {node: shape[node] for node in (new_module, new_class, new_block)})
    rebuilt.own((new_module, new_class, new_block))
    rebuilt.used_by(unit)
    return unit


def _spliced_parents(old: Unit, members: list[cst.BaseStatement], a: int, b: int,
                     new_members: list[cst.BaseStatement], new_class: cst.ClassDef, new_block: cst.IndentedBlock,
                     shape: dict[cst.CSTNode, list[cst.CSTNode]]) -> tuple[dict[cst.CSTNode, cst.CSTNode], list[int] | None]:
    """``parents_of(new_class, shape)``, in its order, made from the old class's: that walk
    lists the class's children, then the block's (the members), then each member's nodes, from
    the last member to the first, then the nodes of the class's other children (its bases,
    decorators). So the kept members' nodes are copied from the old dictionary as they come, the
    replaced members' skipped and the new members' walked; each member's count of nodes (the
    unit's ``sizes``) says where one ends. Also the new sizes (None: walked whole)."""
    statement = cast(cst.ClassDef, old.statement)
    block = cast(cst.IndentedBlock, statement.body)
    old_children, new_children = old.shape.get(statement) or [], shape.get(new_class) or []
    if (not old_children or old_children[-1] is not block or new_children[-1] is not new_block
            or len(old.shape.get(block, ())) != len(members) or len(old_children) != len(new_children)):
        return parents_of(new_class, shape), None
    sizes = old.sizes if old.sizes is not None else [len(parents_of(m, old.shape)) for m in members]
    every = shape[new_block]
    parents: dict[cst.CSTNode, cst.CSTNode] = dict.fromkeys(new_children, new_class)
    parents.update(dict.fromkeys(every, new_block))
    remaining = iter(old.parents.items())
    _skip(remaining, len(old_children) + len(members))
    for size in reversed(sizes[b:]):
        parents.update(islice(remaining, size))
    added = []
    for member in reversed(new_members):
        own = parents_of(member, shape)
        added.append(len(own))
        parents.update(own)
    _skip(remaining, sum(sizes[a:b]))
    for size in reversed(sizes[:a]):
        parents.update(islice(remaining, size))
    parents.update(remaining)  # the class's other children's nodes
    return parents, [*sizes[:a], *reversed(added), *sizes[b:]]


def _skip(items: Iterator, count: int) -> None:
    next(islice(items, count, count), None)


def _tail_line(old: Unit, block: cst.IndentedBlock, count: int) -> int:
    """The first of the class's trailing lines (its block's footer, the unit's footer)."""
    for lines in (block.footer, old.module.footer):
        if lines:
            return old.positions[lines[0]].start.line
    return count + 1


def _same_lines(ours: Iterable[cst.EmptyLine], theirs: Iterable[cst.EmptyLine]) -> bool:
    ours, theirs = list(ours), list(theirs)
    return len(ours) == len(theirs) and all(x.deep_equals(y) for x, y in zip(ours, theirs))
