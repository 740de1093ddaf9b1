"""A method's new version made from its previous one by parsing again only the statements of its
body that an edit changed.

An edit inside a class reparses the members it touched (``python_class_units``), but a real
trainer's methods are long: Accelerate's ``_prepare_deepspeed`` is 277 lines, and libcst's parse
and record of it were ~60 ms of an edit of one integer. So when the edit stays among the body
statements of one method, the lines from the first touched statement (with the blank lines and
comments above it, which libcst gives to it) to the next untouched one are parsed inside a
stand-in ``class _:`` / ``def _():`` header at the class's and the method's indentation, with the
next statement's leading lines and a ``pass`` at the statements' indentation after them (what
follows decides which block libcst gives the lines between to, as for a class's members). The new
statements take the place of the old in a copy of the method; the untouched statements' nodes
are reused, their positions moved down by the lines the edit added.

The edit is parsed in the innermost block whose statements hold it with one of them left below,
or in a nested block whose last statements hold it: then the block's trailing lines are parsed
with them, and what follows the block (its owner's ``else:``/``elif``/``except``, or the next
statement of the block around it; TRL's ``if is_peft_model(...):`` holds one ``with``) is read
as a ``pass`` after the stand-in's block, with its leading lines, at its indentation. A method's
last statement, its header, or lines libcst would read differently around the stand-in leave the
method to be parsed whole by the caller. The stand-in's blocks are all ``def``s: libcst reads a
block's statements alike whatever statement owns it.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from itertools import islice
from operator import itemgetter
from typing import Any, cast

import libcst as cst
from libcst.metadata import CodePosition, CodeRange

from memlint.python.block_runs import Piece, bounds, deeper_comment, first_line, leading, moved
from memlint.python.tree import record, subtree
from memlint.python.units import Unit, parses_of

# the stand-in: a class, then a ``def`` for each block the changed statements are in
CLASS_HEADER = "class _:\n"
BLOCK_HEADER = "def _():\n"
# statements whose body is an indented block of statements that libcst reads alike in any of them
_OWNERS = (cst.FunctionDef, cst.If, cst.For, cst.While, cst.With, cst.Try, cst.ClassDef)


@dataclass
class _Level:
    """A block the edit is inside: its owner statement, its statements, where each begins (with
    the lines above it), the first statement the edit touched and the next one it left."""

    owner: Any
    statements: list[cst.BaseStatement]
    firsts: list[int]
    first: int
    after: int
    indent: str = ""  # of its statements
    new: list[cst.BaseStatement] | None = None  # what takes the place of the touched statements
    end: int = 0  # the first line after the touched statements: the next one's, or the follower's
    # when the touched statements are the block's last: what follows the block, at the owner's indentation
    follower: Any = None  # a clause (``Else``, ``If``, ``ExceptHandler``, ``Finally``) or a statement


def derive_method(old: Unit, a: int, member_bounds: list[int], old_lines: list[str], new_lines: list[str],
                  lo: int, hi: int) -> Piece | None:
    """Member ``a`` of ``old``'s class (a method) with the statements that the old lines
    ``lo``..``hi`` (the unit's, 1-based; ``hi < lo``: lines inserted) hold parsed again, in the
    innermost block that holds them; None when the edit is not inside its body's statements or
    anything is unusual."""
    block = cast(cst.IndentedBlock, cast(cst.ClassDef, old.statement).body)
    func = block.body[a]
    run = list(islice(old.positions.items(), member_bounds[a], member_bounds[a + 1]))
    positions = dict(run)
    class_indent = block.indent if block.indent is not None else old.module.default_indent
    chain = _levels(func, positions, old_lines, lo, hi, class_indent)
    if not chain:
        return None
    level = chain[-1]
    statements, firsts, c, d = level.statements, level.firsts, level.first, level.after
    follower = level.follower
    delta = len(new_lines) - len(old_lines)
    start, end = firsts[c], level.end
    region = "".join(new_lines[start - 1:end - 1 + delta])
    next_one = follower if follower is not None else statements[d]
    # the follower sits at the owner's indentation: the statements' of the block around it
    closing_indent = chain[-2].indent if follower is not None else level.indent
    following = "".join(old_lines[end - 1:end - 1 + len(leading(next_one))]) + closing_indent + "pass\n"
    header = CLASS_HEADER + "".join(
        (chain[k - 1].indent if k else class_indent) + BLOCK_HEADER for k in range(len(chain)))
    wrapper_text = header + region + following
    try:
        wrapper = cst.parse_module(wrapper_text)
    except (cst.ParserSyntaxError, RecursionError, MemoryError):
        return None
    found_blocks = _stand_in_block(wrapper, old, block, chain)
    if found_blocks is None:
        return None
    stand_in, closing = found_blocks
    if not stand_in.body:
        return None
    new_statements = list(stand_in.body)
    if closing is None:
        closing = new_statements.pop()
    if (type(closing) is not cst.SimpleStatementLine or len(closing.body) != 1
            or type(closing.body[0]) is not cst.Pass or len(leading(closing)) != len(leading(next_one))):
        return None
    if follower is not None and not new_statements:
        return None
    # a comment above the first statement after the one above the edit, indented deeper than
    # the statements, would be that one's (libcst gives it to the block it follows)
    after_above = new_statements[0] if new_statements else statements[d]
    if c > 0 and any(deeper_comment(line, len(level.indent)) for line in leading(after_above)):
        return None
    try:
        recorded = record(wrapper, first_line=start - header.count("\n"))
    except (RecursionError, KeyError):
        return None
    if recorded.code != wrapper_text:
        return None
    # the new statements' nodes, up to the closing ``pass`` or the block's own position; when they
    # are the block's last, its trailing lines' nodes (recorded after the block's position) too
    stand_in_statements = [*new_statements, closing] if follower is None else new_statements
    follow = [first_line(s, recorded.positions) for s in stand_in_statements[1:]]
    starts = bounds(recorded.positions, stand_in, stand_in_statements, follow)
    new_run = list(islice(recorded.positions.items(), starts[0], starts[-2] if follower is None else starts[-1]))
    new_footer = set(_below(stand_in.footer)) if follower is not None else set()
    footer_run = [(node, found) for node, found in recorded.positions.items() if node in new_footer]
    old_footer = set(_below(level.owner.body.footer)) if follower is not None else set()

    # the new blocks and their owners, from the innermost out
    replaced: dict[cst.CSTNode, cst.CSTNode] = {}
    inner: list[cst.BaseStatement] = new_statements
    for found in reversed(chain):
        body = found.owner.body
        new_body = body.with_changes(body=[*found.statements[:found.first], *inner, *found.statements[found.after:]])
        if found.follower is not None:  # its trailing lines were parsed with its last statements
            new_body = new_body.with_changes(footer=stand_in.footer)
        new_owner = found.owner.with_changes(body=new_body)
        replaced[body], replaced[found.owner] = new_body, new_owner
        found.new, inner = inner, [new_owner]
    new_func = cast(cst.BaseStatement, replaced[func])

    # the method's run: the nodes above the changed statements as they were, the new ones, then
    # those below moved down; the blocks and owners around them (recorded after their
    # statements) keep their start and end lower
    places = bounds(positions, level.owner.body, statements, firsts[1:])
    spliced = run[:places[c]]
    if any(node in replaced for node, _ in spliced):
        return None  # a block's or an owner's position recorded above its statements (not expected)
    spliced += new_run
    innermost = level.owner.body
    # a block whose last statements were parsed again ends where the stand-in's does, as does
    # its owner when the block is its last part
    block_end = positions[innermost].end if follower is not None else None
    for node, found_at in run[places[d]:]:
        if node in old_footer:
            continue
        new_node = replaced.get(node)
        if new_node is not None:
            begin = found_at.start
            if node is innermost and c == 0:  # a block starts where its first statement does
                begin = dict(new_run)[new_statements[0]].start if new_statements else moved(
                    positions[statements[d]], delta).start
            end_at = CodePosition(found_at.end.line + delta, found_at.end.column)
            if block_end is not None and found_at.end == block_end:
                end_at = recorded.positions[stand_in].end
            spliced.append((new_node, CodeRange(begin, end_at)))
            if node is innermost:
                spliced += footer_run
        else:
            spliced.append((node, moved(found_at, delta) if delta else found_at))

    # children: the replaced statements', blocks' and owners' go; the new ones' come
    shape = old.shape
    stand_in_shape = recorded.shape
    registered = {node: stand_in_shape[node] for node in subtree(new_statements, stand_in_shape)}
    for found in chain:
        body = found.owner.body
        children = shape[body]
        first = next((n for n, child in enumerate(children) if child is found.statements[found.first]), None)
        count = found.after - found.first
        if first is None or children[first:first + count] != found.statements[found.first:found.after]:
            return None
        registered[replaced[body]] = [*children[:first], *(found.new or ()), *children[first + count:]]
        registered[replaced[found.owner]] = [replaced.get(child, child) for child in shape[found.owner]]
    gone = [*replaced, *subtree(statements[c:d], shape)]  # (a block's trailing lines are no syntax nodes)
    owned = [*(node for node, _ in new_run), *new_footer, *replaced.values()]
    # the earlier parses the method's other nodes come from (a node is its parse's while alive)
    parses = parses_of(map(itemgetter(0), spliced))
    return Piece([new_func], spliced, [0], registered, registered, wrapper, owned, gone=gone, parses=tuple(parses))


def _levels(func: cst.BaseStatement, positions: dict[cst.CSTNode, CodeRange], old_lines: list[str], lo: int,
            hi: int, class_indent: str) -> list[_Level]:
    """The blocks, from the method's body in, whose statements hold the old lines ``lo``..``hi``
    with a statement below them untouched; the last is where they are parsed again."""
    chain: list[_Level] = []
    owner: Any = func
    outer = class_indent
    while type(owner) in _OWNERS and type(owner.body) is cst.IndentedBlock:
        statements = list(owner.body.body)
        firsts = [first_line(statement, positions) for statement in statements]
        c = bisect_right(firsts, lo) - 1
        d = max(bisect_right(firsts, hi), c + 1)
        if c < 0:
            break  # the owner's header: parsed one level up
        follower = None
        if d < len(statements):
            end = firsts[d]
        else:
            # its last statements (the block's trailing lines follow them): what follows the block
            # is read after the stand-in; the method's own (a member of the class) is not
            follower = _follower(owner, chain[-1]) if chain else None
            if follower is None:
                break
            end = first_line(follower, positions)
            if hi >= end:
                break
        own = positions[statements[d if follower is None else c]].start
        indent = old_lines[own.line - 1][:own.column]
        if indent.strip(" ") or not indent.startswith(outer) or len(indent) <= len(outer):
            break
        chain.append(_Level(owner, statements, firsts, c, d, indent, end=end, follower=follower))
        if d != c + 1 or follower is not None:
            break
        owner, outer = statements[c], indent
    return chain


def _below(roots: Any) -> list[cst.CSTNode]:
    """``roots`` and the nodes below them (a block's trailing lines: no syntax nodes, so not in
    a recorded shape)."""
    found: list[cst.CSTNode] = []
    stack = list(roots)
    while stack:
        node = stack.pop()
        found.append(node)
        stack.extend(node.children)
    return found


def _follower(owner: Any, around: _Level) -> Any:
    """What follows ``owner``'s body: its next clause, or else the next statement of the block
    around it (``around``, whose statements hold the owner with one left below it)."""
    following: Any = None
    if type(owner) is cst.Try:
        following = owner.handlers[0] if owner.handlers else owner.orelse or owner.finalbody
    elif type(owner) in (cst.If, cst.For, cst.While):
        following = owner.orelse
    if following is None and around.after < len(around.statements):
        following = around.statements[around.after]
    return following


def _stand_in_block(wrapper: cst.Module, old: Unit, block: cst.IndentedBlock,
                    chain: list[_Level]) -> tuple[cst.IndentedBlock, cst.BaseStatement | None] | None:
    """The innermost block of the stand-in, when the stand-in reads as the real class does (the
    same indentation at each level, one statement in each block around the changed ones, no
    lines left over outside the statements), and the closing ``pass`` when it follows that
    block (the changed statements are their block's last) rather than ending it."""
    if (len(wrapper.body) != 1 or wrapper.header or wrapper.footer or wrapper.default_indent != old.module.default_indent
            or wrapper.default_newline != "\n"):
        return None
    stand_in: Any = wrapper.body[0]
    expected: list[str | None] = [block.indent, *(found.owner.body.indent for found in chain)]
    closing = None
    last = chain[-1].follower is not None
    for depth, indent in enumerate(expected):
        innermost = depth == len(expected) - 1
        if (type(stand_in) not in (cst.ClassDef, cst.FunctionDef) or type(stand_in.body) is not cst.IndentedBlock
                or stand_in.body.indent != indent or (stand_in.body.footer and not (innermost and last))):
            return None
        if innermost:
            return cast(cst.IndentedBlock, stand_in.body), closing
        statements = stand_in.body.body
        if last and depth == len(expected) - 2:  # the block around the innermost: it, then the closing ``pass``
            if len(statements) != 2:
                return None
            closing = statements[1]
        elif len(statements) != 1:
            return None
        stand_in = statements[0]
    return None
