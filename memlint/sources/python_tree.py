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

import libcst as cst
from libcst.metadata import CodeRange
from libcst.metadata.position_provider import PositionProvider, PositionProvidingCodegenState

# Nodes that only format the code; everything inside one is formatting too.
FORMATTING = frozenset({
    cst.SimpleWhitespace, cst.ParenthesizedWhitespace, cst.TrailingWhitespace, cst.Newline,
    cst.EmptyLine, cst.Comment, cst.Comma, cst.Dot, cst.Colon, cst.Semicolon, cst.AssignEqual,
    cst.LeftParen, cst.RightParen, cst.LeftSquareBracket, cst.RightSquareBracket,
    cst.LeftCurlyBrace, cst.RightCurlyBrace,
})


@dataclass
class Tree:
    positions: dict[cst.CSTNode, CodeRange]
    children: dict[cst.CSTNode, list[cst.CSTNode]]
    parents: dict[cst.CSTNode, cst.CSTNode]


class _Recorder(PositionProvidingCodegenState):
    """libcst's position-recording codegen state, also noting the tree's shape and leaving
    formatting nodes out."""

    # a subclass of a slotted dataclass without fields of its own: a plain __init__ keeps it simple
    def __init__(self, module: cst.Module, provider: PositionProvider) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline,
                         provider=provider)
        self.shape: dict[cst.CSTNode, list[cst.CSTNode]] = {}
        self.open: list[cst.CSTNode] = []

    def before_codegen(self, node: cst.CSTNode) -> None:
        super().before_codegen(node)
        if type(node) in FORMATTING:
            return
        if self.open:
            self.shape[self.open[-1]].append(node)
        self.shape[node] = []
        self.open.append(node)

    def after_codegen(self, node: cst.CSTNode) -> None:
        # every node's position: a statement's range may end at its closing parenthesis
        super().after_codegen(node)
        if type(node) not in FORMATTING:
            self.open.pop()


def tree_of(module: cst.Module) -> Tree:
    provider = PositionProvider()
    recorder = _Recorder(module, provider)
    module._codegen(recorder)
    children = recorder.shape
    # parents in the order a depth-first walk from the root meets them (what memlint always used)
    parents: dict[cst.CSTNode, cst.CSTNode] = {}
    stack: list[cst.CSTNode] = [module]
    while stack:
        node = stack.pop()
        for child in children.get(node, ()):
            parents[child] = node
            stack.append(child)
    tree = Tree(provider._computed, children, parents)
    _register(tree)
    return tree


# The children of the nodes of every module whose tree was built, by id(): helpers that walk
# nodes (``children``) use them instead of ``node.children``. The lists hold every node alive, so
# an id cannot be reused while its entry exists; entries go with their tree.
_CHILDREN: dict[int, list[cst.CSTNode]] = {}


def _register(tree: Tree) -> None:
    keys = [id(node) for node in tree.children]
    for node, found in tree.children.items():
        _CHILDREN[id(node)] = found
    weakref.finalize(tree, _forget, keys)


def _forget(keys: list[int]) -> None:
    for key in keys:
        _CHILDREN.pop(key, None)


def children(node: cst.CSTNode) -> list[cst.CSTNode] | tuple[cst.CSTNode, ...]:
    """A node's children: the syntax nodes among ``node.children``, from the built tree (a
    node of no built tree: all of ``node.children``)."""
    known = _CHILDREN.get(id(node))
    return known if known is not None else node.children
