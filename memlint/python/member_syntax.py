"""CPython's verdict and the syntax depth of a top-level class edited inside its body, from the
members the edit touched.

Before libcst reads a module, CPython parses it (its error messages are the ones users know) and
the depth of its syntax tree is measured (libcst overflows on pathological nesting). After an
edit only the changed top-level statements are parsed again (``python_source``), but in trainer
code that statement is a class of thousands of lines: TRL's ``GRPOTrainer`` took ~35 ms of an
edit for the two, transformers' ``Trainer`` ~100 ms. So a class's tree is kept summarised per
member (``ClassSyntax``: each group of body statements' lines and depth), and an edit that stays
inside the body is checked as the lines from the first touched member to the next untouched one,
parsed inside a one-line ``class _:`` with a ``pass`` at the members' indentation after them.

Why that verdict is the whole class's: the earlier version parsed, and the lines above and below
the region are its members as they were, each a whole statement beginning a line at the members'
indentation. CPython's parser reads statements of a class body alike whatever stands around them
(what depends on context, ``return`` outside a function and the like, is the compiler's, not
``ast.parse``'s), so the class parses when the region does followed by a statement at the
members' indentation: nothing of the region is left open (a bracket, a backslash, a block that
wants a body), and its statements begin at the members' indentation (checked: the stand-in's own
header would accept any). When the region does not parse, or anything is unusual (tabs or form
feeds, lines outside the members), the caller parses the whole text as before, so an error's
message and place are always CPython's on the whole text.
"""

from __future__ import annotations

import ast
import warnings
from bisect import bisect_right
from dataclasses import dataclass

STAND_IN = "class _:\n"


def tree_depth(tree: ast.AST, limit: int) -> int:
    """The depth of a syntax tree, without recursion (stops once past ``limit``)."""
    deepest = 0
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                return deepest
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


@dataclass(frozen=True)
class ClassSyntax:
    """A top-level class's syntax tree, summarised per member; lines count from its unit's first."""

    header: int  # the deepest of its decorators, bases and keywords (0: none)
    indent: str  # its members' indentation
    # each group of body statements (those sharing a line are one): first line (a decorator's,
    # if it has one), last line, depth
    members: tuple[tuple[int, int, int], ...]

    @property
    def depth(self) -> int:
        """``tree_depth`` of the class statement."""
        return 1 + max(self.header, *(depth for _, _, depth in self.members))


def summarise(statement: ast.stmt, unit_text: str, first_line: int, limit: int) -> ClassSyntax | None:
    """The summary of a class statement parsed from a text in which its unit ``unit_text``
    begins at line ``first_line``; None for anything else, or a class this module does not check
    per member (one-line bodies, tabs or form feeds in the indentation)."""
    if type(statement) is not ast.ClassDef or "\t" in unit_text or "\f" in unit_text:
        return None
    shift = first_line - 1
    header = max((tree_depth(child, limit) for field in ("decorator_list", "bases", "keywords")
                  for child in getattr(statement, field)), default=0)
    for field in ("type_params",):  # 3.12: ``class A[T]:``
        header = max([header, *(tree_depth(child, limit) for child in getattr(statement, field, ()))])
    members = _groups(statement.body, shift, limit)
    lines = unit_text.split("\n")
    if not members or members[0][0] <= _header_end(statement) - shift or members[0][0] > len(lines):
        return None  # ``class A: x = 1`` (the body on the header's line)
    line = lines[members[0][0] - 1]
    indent = line[: len(line) - len(line.lstrip(" "))]
    if not indent:
        return None
    return ClassSyntax(header, indent, tuple(members))


def _header_end(statement: ast.ClassDef) -> int:
    """The last line of the class's header (its bases may span several)."""
    ends = [statement.lineno]
    for child in statement.bases:
        ends.append(child.end_lineno or child.lineno)
    for keyword in statement.keywords:
        ends.append(keyword.end_lineno or keyword.lineno)
    return max(ends)


def _groups(body: list[ast.stmt], shift: int, limit: int) -> list[tuple[int, int, int]]:
    groups: list[tuple[int, int, int]] = []
    for statement in body:
        first = min([statement.lineno, *(d.lineno for d in getattr(statement, "decorator_list", ()))]) - shift
        last = (statement.end_lineno or statement.lineno) - shift
        depth = tree_depth(statement, limit)
        if groups and first <= groups[-1][1]:  # on the line of the one before (``a = 1; b = 2``)
            start, end, deepest = groups[-1]
            groups[-1] = (start, max(end, last), max(deepest, depth))
        else:
            groups.append((first, last, depth))
    return groups


def edited_class(old: ClassSyntax, old_text: str, new_text: str, limit: int) -> ClassSyntax | None:
    """The summary of ``new_text``, a new version of the class unit ``old_text`` (summarised
    ``old``), when the edit stays among its members and the lines it touched parse (then the
    whole new text parses too: see the module's docstring); None: check the whole text."""
    if "\t" in new_text or "\f" in new_text or "\r" in new_text:
        return None
    old_lines, new_lines = old_text.split("\n"), new_text.split("\n")
    common = min(len(old_lines), len(new_lines))
    prefix = 0
    while prefix < common and old_lines[prefix] == new_lines[prefix]:
        prefix += 1
    if prefix == len(old_lines) == len(new_lines):
        return old
    suffix = 0
    while suffix < common - prefix and old_lines[-1 - suffix] == new_lines[-1 - suffix]:
        suffix += 1
    lo, hi = prefix + 1, len(old_lines) - suffix  # old lines lo..hi changed (hi < lo: lines added)
    firsts = [first for first, _, _ in old.members]
    if lo < firsts[0]:
        return None  # the header, or the lines between it and the first member
    a = bisect_right(firsts, lo) - 1
    b = max(bisect_right(firsts, hi), a + 1)
    delta = len(new_lines) - len(old_lines)
    start = firsts[a]
    if b < len(firsts):  # the region ends where the next untouched member begins
        region = new_lines[start - 1:firsts[b] - 1 + delta]
        following = old.indent + "pass\n"
    else:  # to the end of the unit: the class's trailing lines
        region = new_lines[start - 1:]
        following = ""
    if not region:
        return None
    region_text = "\n".join(region) + ("\n" if b < len(firsts) else "")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(STAND_IN + region_text + following)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if len(tree.body) != 1 or type(tree.body[0]) is not ast.ClassDef:
        return None
    body = tree.body[0].body
    if b < len(firsts):
        body = body[:-1]  # the ``pass``
    shift = 1 - (start - 1)  # stand-in line n is the unit's line n - shift
    added = _groups(body, shift, limit)
    for first, _, _ in added:
        line = new_lines[first - 1]
        if not line.startswith(old.indent) or line[len(old.indent):len(old.indent) + 1] in (" ", ""):
            return None  # not at the members' indentation: the stand-in's header would take it
    members = [*old.members[:a], *added, *((f + delta, l + delta, d) for f, l, d in old.members[b:])]
    if not members:
        return None
    return ClassSyntax(old.header, old.indent, tuple(members))
