"""Where each statement of an indented block begins in a recorded order of positions.

A class's new version (``python_class_units``) and a method's (``python_method_units``) are made
by splicing runs of an earlier record: libcst records a statement's nodes together, after the
block's header and before the block's own position, so a statement's run is found from the
first lines of the statements (with the blank lines, comments and decorators above them, which
are theirs) without walking the nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import libcst as cst
from libcst.metadata import CodePosition, CodeRange


@dataclass(eq=False)
class Piece:
    """New statements of a block, ready to splice into an earlier version's record."""

    members: list[cst.BaseStatement]
    run: list[tuple[cst.CSTNode, CodeRange]]  # their nodes' positions, in libcst's order
    starts: list[int]  # where each member's nodes begin in ``run``
    shape: dict[cst.CSTNode, list[cst.CSTNode]]  # the children of their nodes that the unit lacks
    registered: dict[cst.CSTNode, list[cst.CSTNode]]  # those of nodes new to this piece (the parse's own)
    module: cst.Module  # the stand-in parse they come from
    owned: list[cst.CSTNode]  # the nodes it made (the others of ``run`` are an earlier parse's)
    gone: list[cst.CSTNode] | None = None  # the unit's nodes they replace (None: the replaced members' all)
    parses: tuple[Any, ...] = ()  # the earlier parses some of their nodes come from (``Parse``)


def first_line(member: cst.BaseStatement, positions: dict[cst.CSTNode, CodeRange]) -> int:
    """The first line of a member with the blank lines and comments above it, which are its."""
    lines = [positions[member].start.line]
    for node in (*leading(member)[:1], *getattr(member, "decorators", ())[:1]):
        lines.append(positions[node].start.line)
    return min(lines)


def leading(member: cst.BaseStatement) -> Sequence[cst.EmptyLine]:
    return getattr(member, "leading_lines", ())


def deeper_comment(line: cst.EmptyLine, members_column: int) -> bool:
    if line.comment is None:
        return False
    return (members_column if line.indent else 0) + len(line.whitespace.value) > members_column


def bounds(positions: dict[cst.CSTNode, CodeRange], block: cst.IndentedBlock, members: list[cst.BaseStatement],
            firsts: list[int]) -> list[int]:
    """Where each member's nodes begin in the order of ``positions``, and where the last one's
    end. libcst records a member's own position before its trailing whitespace, so a member's
    nodes end where the next one's lines begin (``firsts``: the first line of each member but
    the first), the last one's where the block's own position is recorded (after its members)."""
    places = places_of(positions, [block.header, *members, block])
    keys = list(positions.values())
    bounds = [places[0] + 1]
    for number, first in enumerate(firsts, start=1):
        place = places[number] + 1
        while keys[place].start.line < first:
            place += 1
        bounds.append(place)
    bounds.append(places[-1])
    return bounds


def places_of(positions: dict[cst.CSTNode, CodeRange], wanted: list[cst.CSTNode]) -> list[int]:
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


def moved(found: CodeRange, lines: int) -> CodeRange:
    return CodeRange(CodePosition(found.start.line + lines, found.start.column),
                     CodePosition(found.end.line + lines, found.end.column))
