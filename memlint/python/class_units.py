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
from typing import Iterable, Iterator, Sequence, cast

import libcst as cst
from libcst.metadata import CodePosition, CodeRange

from memlint.python.statement_index import kept_part
from memlint.python.tree import parents_of, record, register, subtree
from memlint.python.units import Origin, Parse, Unit, parse_of

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
    return _rebuilt(old, text, members, a, b, new_members, closing, wrapper, recorded.positions,
                    recorded.shape, delta)


def _rebuilt(old: Unit, text: str, members: list[cst.BaseStatement], a: int, b: int,
             new_members: list[cst.BaseStatement], closing: cst.BaseStatement | None,
             wrapper_module: cst.Module,
             wrapper_positions: dict[cst.CSTNode, CodeRange], wrapper_shape: dict[cst.CSTNode, list[cst.CSTNode]],
             delta: int) -> Unit:
    """The new unit: the old class with members ``a``..``b`` replaced by ``new_members`` (whose
    positions the stand-in's record numbered as the unit's lines); the old positions of what
    follows them moved down by ``delta`` lines."""
    statement = cast(cst.ClassDef, old.statement)
    block = cast(cst.IndentedBlock, statement.body)
    every = [*members[:a], *new_members, *members[b:]]
    wrapper_block = cast(cst.IndentedBlock, cast(cst.ClassDef, wrapper_module.body[0]).body)
    new_block = block.with_changes(body=every)
    new_class = statement.with_changes(body=new_block)
    new_module = old.module.with_changes(body=[new_class])
    replaced = {block: new_block, statement: new_class, old.module: new_module}

    # positions, in libcst's order: a member's nodes come together
    old_positions = old.positions
    bounds = old.bounds or _bounds(old_positions, block, members, [_first_line(m, old_positions) for m in members[1:]])
    positions: dict[cst.CSTNode, CodeRange] = dict(islice(old_positions.items(), bounds[a]))
    wrapper_bounds = [0]
    if new_members:
        if closing is not None:
            follow = [_first_line(m, wrapper_positions) for m in [*new_members[1:], closing]]
            wrapper_bounds = _bounds(wrapper_positions, wrapper_block, [*new_members, closing], follow)[:-1]
        else:
            follow = [_first_line(m, wrapper_positions) for m in new_members[1:]]
            wrapper_bounds = _bounds(wrapper_positions, wrapper_block, new_members, follow)
        positions.update(islice(wrapper_positions.items(), wrapper_bounds[0], wrapper_bounds[-1]))
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
    for node in subtree(members[a:b], old.shape):
        del shape[node]
    for node, new_node in replaced.items():
        shape[new_node] = shape.pop(node)
    shape[new_module] = [new_class]
    shape[new_class] = [new_block if child is block else child for child in old.shape[statement]]
    shape[new_block] = list(every)
    added = {node: wrapper_shape[node] for node in subtree(new_members, wrapper_shape)}
    shape.update(added)
    # the new bounds: the old ones, the new members' from the stand-in's, the rest moved along
    shift = wrapper_bounds[-1] - wrapper_bounds[0] - (bounds[b] - bounds[a])
    new_bounds = [*bounds[:a], *(bounds[a] + place - wrapper_bounds[0] for place in wrapper_bounds[:-1]),
                  *(place + shift for place in bounds[b:])]
    parents, sizes = _spliced_parents(old, members, a, b, new_members, new_class, new_block, shape)
    unit = Unit(text, new_module, positions, shape, parents, old.has_block,
                origin=Origin(weakref.ref(old), tuple(members[a:b]), tuple(new_members), block, kept_part(old)),
                bounds=new_bounds, sizes=sizes)
    # the nodes it shares with the old unit are registered with the parses they come from
    kept = [*every, block.header, statement.name, *statement.decorators, *block.footer, *old.module.footer]
    for parse in {id(p): p for p in map(parse_of, kept) if p is not None}.values():
        parse.used_by(unit, shared=True)
    if new_members:
        fresh = Parse(wrapper_module)
        register(fresh, added)
        fresh.own(islice(wrapper_positions, wrapper_bounds[0], wrapper_bounds[-1]))
        fresh.used_by(unit)
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


def _first_line(member: cst.BaseStatement, positions: dict[cst.CSTNode, CodeRange]) -> int:
    """The first line of a member with the blank lines and comments above it, which are its."""
    lines = [positions[member].start.line]
    for node in (*_leading(member)[:1], *getattr(member, "decorators", ())[:1]):
        lines.append(positions[node].start.line)
    return min(lines)


def _leading(member: cst.BaseStatement) -> Sequence[cst.EmptyLine]:
    return getattr(member, "leading_lines", ())


def _tail_line(old: Unit, block: cst.IndentedBlock, count: int) -> int:
    """The first of the class's trailing lines (its block's footer, the unit's footer)."""
    for lines in (block.footer, old.module.footer):
        if lines:
            return old.positions[lines[0]].start.line
    return count + 1


def _same_lines(ours: Iterable[cst.EmptyLine], theirs: Iterable[cst.EmptyLine]) -> bool:
    ours, theirs = list(ours), list(theirs)
    return len(ours) == len(theirs) and all(x.deep_equals(y) for x, y in zip(ours, theirs))


def _deeper_comment(line: cst.EmptyLine, members_column: int) -> bool:
    if line.comment is None:
        return False
    return (members_column if line.indent else 0) + len(line.whitespace.value) > members_column


def _bounds(positions: dict[cst.CSTNode, CodeRange], block: cst.IndentedBlock, members: list[cst.BaseStatement],
            firsts: list[int]) -> list[int]:
    """Where each member's nodes begin in the order of ``positions``, and where the last one's
    end. libcst records a member's own position before its trailing whitespace, so a member's
    nodes end where the next one's lines begin (``firsts``: the first line of each member but
    the first), the last one's where the block's own position is recorded (after its members)."""
    places = _places(positions, [block.header, *members, block])
    keys = list(positions.values())
    bounds = [places[0] + 1]
    for number, first in enumerate(firsts, start=1):
        place = places[number] + 1
        while keys[place].start.line < first:
            place += 1
        bounds.append(place)
    bounds.append(places[-1])
    return bounds


def _places(positions: dict[cst.CSTNode, CodeRange], wanted: list[cst.CSTNode]) -> list[int]:
    """Where each of ``wanted`` is in the order of ``positions``."""
    want = {node: number for number, node in enumerate(wanted)}
    places = [0] * len(wanted)
    left = len(wanted)
    for place, node in enumerate(positions):
        number = want.get(node)
        if number is not None:
            places[number] = place
            left -= 1
            if not left:
                break
    return places


def _moved(found: CodeRange, lines: int) -> CodeRange:
    return CodeRange(CodePosition(found.start.line + lines, found.start.column),
                     CodePosition(found.end.line + lines, found.end.column))
