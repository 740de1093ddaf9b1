"""Positions, parents and children of every node of a libcst module, from one pass.

libcst's ``PositionProvider`` regenerates the module's code and notes where each node starts
and ends. The same regeneration enters every node, parent before children, so it can also note
each node's parent and children at almost no extra cost -- where ``node.children`` would rebuild
each node through libcst's visitor machinery (tens of microseconds a node: the largest single
cost of analysing a script after the parse itself).

Children come in libcst's own order (that of ``node.children``). The regeneration meets them in
source order, which differs only in where a few nodes keep their whitespace (``AsName``,
``Del``, ``ParamSlash``, ``MatchMapping``); those few ask libcst.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import CodeRange
from libcst.metadata.position_provider import PositionProvider, PositionProvidingCodegenState

# nodes whose codegen order of children differs from ``node.children`` (whitespace only)
_OWN_ORDER = (cst.AsName, cst.Del, cst.ParamSlash, cst.MatchMapping)


@dataclass
class Tree:
    positions: dict[cst.CSTNode, CodeRange]
    children: dict[cst.CSTNode, list[cst.CSTNode]]
    parents: dict[cst.CSTNode, cst.CSTNode]


class _Recorder(PositionProvidingCodegenState):
    """libcst's position-recording codegen state, also noting the tree's shape."""

    # a subclass of a slotted dataclass without fields of its own: a plain __init__ keeps it simple
    def __init__(self, module: cst.Module, provider: PositionProvider) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline,
                         provider=provider)
        self.shape: dict[cst.CSTNode, list[cst.CSTNode]] = {}
        self.open: list[cst.CSTNode] = []

    def before_codegen(self, node: cst.CSTNode) -> None:
        if self.open:
            self.shape[self.open[-1]].append(node)
        self.shape[node] = []
        self.open.append(node)
        super().before_codegen(node)

    def after_codegen(self, node: cst.CSTNode) -> None:
        super().after_codegen(node)
        self.open.pop()


def tree_of(module: cst.Module) -> Tree:
    provider = PositionProvider()
    recorder = _Recorder(module, provider)
    module._codegen(recorder)
    children = recorder.shape
    for node, found in children.items():
        if isinstance(node, _OWN_ORDER):
            children[node] = list(node.children)
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
    """``node.children``, from the built tree when there is one."""
    known = _CHILDREN.get(id(node))
    return known if known is not None else node.children
