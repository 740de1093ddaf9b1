"""Positions, parents and children of the syntax nodes of a libcst module, from one pass.

libcst's ``PositionProvider`` regenerates the module's code and notes where each node starts
and ends. The same regeneration enters every node, parent before children, so it can also note
each node's parent and children at almost no extra cost -- where ``node.children`` would rebuild
each node through libcst's visitor machinery (tens of microseconds a node: the largest single
cost of analysing a script after the parse itself).

Only syntax nodes are recorded: not the whitespace, comments, commas, dots, brackets and ``=``
signs libcst keeps to reproduce the code exactly (``FORMATTING``). They are six nodes in ten,
and nothing memlint asks about code -- names, calls, values, statements -- is one of them, so
every walk over the recorded children is shorter. Positions are libcst's ``PositionProvider``
ranges (of every node); children are ``node.children`` in libcst's order, without the
formatting nodes.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Iterable, Mapping

import libcst as cst
from libcst.metadata import CodePosition, CodeRange
from libcst.metadata.position_provider import PositionProvider, PositionProvidingCodegenState

from memlint.python import node_identity  # noqa: F401 -- before any node is put in a dictionary

# Nodes that only format the code; everything inside one is formatting too.
FORMATTING = frozenset({
    cst.SimpleWhitespace, cst.ParenthesizedWhitespace, cst.TrailingWhitespace, cst.Newline,
    cst.EmptyLine, cst.Comment, cst.Comma, cst.Dot, cst.Colon, cst.Semicolon, cst.AssignEqual,
    cst.LeftParen, cst.RightParen, cst.LeftSquareBracket, cst.RightSquareBracket,
    cst.LeftCurlyBrace, cst.RightCurlyBrace,
})


@dataclass(eq=False)
class Tree:
    positions: Mapping[cst.CSTNode, CodeRange]  # of every node, formatting included
    parents: dict[cst.CSTNode, cst.CSTNode]  # of every syntax node but the root
    # the children of every syntax node, kept where positions are worked out when asked
    # (``memlint.python.positions``): source order then comes from the shape
    shape: Mapping[cst.CSTNode, list[cst.CSTNode]] | None = None


class _Recorder(PositionProvidingCodegenState):
    """libcst's position-recording codegen state, also noting the tree's shape and leaving
    formatting nodes out.

    The methods libcst calls for every node and token are redone here with the same results
    and less work (a tuple for a start, a newline test before a regular-expression split, a
    class instead of a generator for each syntactic position): libcst's own made the position
    pass ten times the cost of generating the code. The analysis tests compare every position
    with ``PositionProvider``'s."""

    # a subclass of a slotted dataclass without fields of its own: a plain __init__ keeps it simple
    def __init__(self, module: cst.Module, provider: PositionProvider, first_line: int = 1) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline,
                         provider=provider)
        self.line = first_line
        self.computed = provider._computed
        self.starts: list[tuple[int, int]] = []
        self.shape: dict[cst.CSTNode, list[cst.CSTNode]] = {}
        self.open: list[cst.CSTNode] = []

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        if "\n" in value or "\r" in value:
            self._update_position(value)
        else:
            self.column += len(value)

    def before_codegen(self, node: cst.CSTNode) -> None:
        self.starts.append((self.line, self.column))
        if type(node) in FORMATTING:
            return
        if self.open:
            self.shape[self.open[-1]].append(node)
        self.shape[node] = []
        self.open.append(node)

    def after_codegen(self, node: cst.CSTNode) -> None:
        # every node's position: a statement's range may end at its closing parenthesis
        line, column = self.starts.pop()
        if node not in self.computed:  # a syntactic position recorded inside it wins
            self.computed[node] = CodeRange(CodePosition(line, column), CodePosition(self.line, self.column))
        if type(node) not in FORMATTING:
            self.open.pop()

    def record_syntactic_position(self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None,
                                  end_node: cst.CSTNode | None = None) -> "_SyntacticPosition":
        return _SyntacticPosition(self, node, start_node, end_node)


class _SyntacticPosition:
    """``PositionProvidingCodegenState.record_syntactic_position`` as a plain context manager."""

    __slots__ = ("state", "node", "start_node", "end_node", "line", "column")

    def __init__(self, state: _Recorder, node: cst.CSTNode, start_node: cst.CSTNode | None,
                 end_node: cst.CSTNode | None) -> None:
        self.state, self.node, self.start_node, self.end_node = state, node, start_node, end_node

    def __enter__(self) -> None:
        self.line, self.column = self.state.line, self.state.column

    def __exit__(self, *_: object) -> None:
        state = self.state
        computed = state.computed
        start = computed[self.start_node].start if self.start_node is not None else CodePosition(self.line, self.column)
        end = computed[self.end_node].end if self.end_node is not None else CodePosition(state.line, state.column)
        computed[self.node] = CodeRange(start, end)


@dataclass(eq=False)
class Record:
    positions: dict[cst.CSTNode, CodeRange]  # of every node
    shape: dict[cst.CSTNode, list[cst.CSTNode]]  # the children of every syntax node
    code: str  # the code the pass generated: ``module.code``


def record(module: cst.Module, first_line: int = 1) -> Record:
    """Every node's position and every syntax node's children, from one codegen pass;
    ``first_line``: the line number the module's first line has (a piece of a larger text
    counts its lines as that text does, and no position is made twice)."""
    provider = PositionProvider()
    recorder = _Recorder(module, provider, first_line)
    module._codegen(recorder)
    return Record(provider._computed, recorder.shape, "".join(recorder.tokens))


def parents_of(root: cst.CSTNode, shape: Mapping[cst.CSTNode, list[cst.CSTNode]]) -> dict[cst.CSTNode, cst.CSTNode]:
    """Each node's parent, in the order a depth-first walk from the root meets them (the order
    memlint always used: extractors that list nodes by walking this dict see them so)."""
    parents: dict[cst.CSTNode, cst.CSTNode] = {}
    stack: list[cst.CSTNode] = [root]
    while stack:
        node = stack.pop()
        for child in shape.get(node, ()):
            parents[child] = node
            stack.append(child)
    return parents


def subtree(roots: Iterable[cst.CSTNode], shape: Mapping[cst.CSTNode, list[cst.CSTNode]]) -> list[cst.CSTNode]:
    """The nodes below ``roots`` (included), read from a recorded ``shape``."""
    found: list[cst.CSTNode] = []
    stack = list(roots)
    while stack:
        node = stack.pop()
        found.append(node)
        stack.extend(shape.get(node, ()))
    return found


def tree_of(module: cst.Module) -> Tree:
    recorded = record(module)
    tree = Tree(recorded.positions, parents_of(module, recorded.shape))
    register(tree, recorded.shape)
    return tree


# The children of the nodes of every module whose tree was built, by id(): helpers that walk
# nodes (``children``) use them instead of ``node.children``. The lists hold every node alive, so
# an id cannot be reused while its entry exists; entries go with their owner. A node registered
# by several owners (a class's untouched members, shared by the versions of its unit) is counted
# in ``_HELD``, and its entry goes with the last of them.
_CHILDREN: dict[int, list[cst.CSTNode]] = {}
_HELD: dict[int, int] = {}  # owners beyond the first, for the nodes that have any


def register(owner: object, shape: Mapping[cst.CSTNode, list[cst.CSTNode]]) -> None:
    """Make ``children`` answer from ``shape`` until ``owner`` (which keeps the nodes alive) goes."""
    keys = [id(node) for node in shape]
    known, held = _CHILDREN, _HELD
    for key, found in zip(keys, shape.values()):
        if key in known:
            held[key] = held.get(key, 0) + 1
        known[key] = found
    weakref.finalize(owner, _forget, keys)


def _forget(keys: list[int]) -> None:
    known, held = _CHILDREN, _HELD
    for key in keys:
        others = held.get(key)
        if others is None:
            known.pop(key, None)
        elif others > 1:
            held[key] = others - 1
        else:
            del held[key]


def children(node: cst.CSTNode) -> list[cst.CSTNode] | tuple[cst.CSTNode, ...]:
    """A node's children: the syntax nodes among ``node.children``, from the built tree (a
    node of no built tree: all of ``node.children``)."""
    known = _CHILDREN.get(id(node))
    return known if known is not None else node.children
