"""Positions of a module's nodes worked out one top-level statement at a time, when asked.

A cold ``memlint check`` reads the positions of few nodes: those it reports, the values its
facts remember, the names it puts in source order. Regenerating a whole module's code to
record every node's position (``memlint.python.tree``) was a third of the cost of each module
it kept. Here a node's position is recorded with those of the top-level statement it is in:
that statement's code alone is regenerated, its first line known from CPython's tree (which
the syntax check built anyway), its column 0. Ranges are libcst's ``PositionProvider``'s;
``tests/python/test_shape.py`` compares every node's on real modules.

Source order without positions (``order_of``): a walk of the syntax children, parent first,
meets nodes in the order of their starts, but for a decorated function or class, whose range
starts at ``def``/``class`` after its decorators.
"""

from __future__ import annotations

import ast
from typing import Callable, Iterator, Mapping, Sequence

import libcst as cst
from libcst.metadata import CodePosition, CodeRange
from libcst.metadata.position_provider import PositionProvider

from memlint.python.shape import shape_of
from memlint.python.tree import Tree, _Recorder, parents_of, record, register


class _StatementRecorder(_Recorder):
    """The position pass of ``_Recorder`` for one statement, its lines counted from ``line``."""

    def __init__(self, module: cst.Module, provider: PositionProvider, line: int) -> None:
        super().__init__(module, provider)
        self.line = line

    def before_codegen(self, node: cst.CSTNode) -> None:
        self.starts.append((self.line, self.column))

    def after_codegen(self, node: cst.CSTNode) -> None:
        line, column = self.starts.pop()
        if node not in self.computed:
            self.computed[node] = CodeRange(CodePosition(line, column), CodePosition(self.line, self.column))


def _firsts(body: list[ast.stmt]) -> list[tuple[int, list[ast.stmt]]]:
    """The first line of each of libcst's statements of a block (its first decorator's when
    decorated), with CPython's statements it holds: statements that share a line are one."""
    found: list[tuple[int, list[ast.stmt]]] = []
    end = 0
    for statement in body:
        decorators = getattr(statement, "decorator_list", ())
        first = min([statement.lineno, *(d.lineno for d in decorators)])
        if first > end:
            found.append((first, []))
        found[-1][1].append(statement)
        end = max(end, statement.end_lineno or statement.lineno)
    return found


Lines = list[tuple[int, "Lines | None"]]
_DEFINITIONS = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def first_lines(tree: ast.Module) -> Lines:
    """For each top-level statement of libcst's: its first line, and for a class or function
    the same of the statements of its body, at every depth (the members of a 3,000-line trainer
    class, the statements of its 300-line methods, are recorded one at a time)."""
    return _lines_of(tree.body)


def _lines_of(body: list[ast.stmt]) -> Lines:
    out: Lines = []
    for first, statements in _firsts(body):
        only = statements[0] if len(statements) == 1 else None
        out.append((first, _lines_of(only.body) if isinstance(only, _DEFINITIONS) else None))
    return out


class StatementPositions(Mapping[cst.CSTNode, CodeRange]):
    """``positions`` of a :class:`~memlint.python.tree.Tree` recorded per statement on first
    use: a top-level one, or one in the body of a class or function at any depth. ``whole``: every node's, for
    what is in no statement (the module, the formatting nodes, which have no parent) and for a
    module whose statements and CPython's lines do not pair up."""

    def __init__(self, module: cst.Module, parents: Mapping[cst.CSTNode, cst.CSTNode], lines: Lines | None,
                 whole: Callable[[], Mapping[cst.CSTNode, CodeRange]]) -> None:
        self.module = module
        self.parents = parents
        self.whole = whole
        self.computed: dict[cst.CSTNode, CodeRange] = {}
        self.done: set[cst.CSTNode] = set()
        self.everything: Mapping[cst.CSTNode, CodeRange] | None = None
        # each statement that can be recorded alone -> its first line and the indentation of
        # the blocks it is in
        self.places: dict[cst.CSTNode, tuple[int, tuple[str, ...]]] | None = None
        if lines is not None and len(lines) == len(module.body):
            self.places = {}
            self._place(module.body, lines, ())

    def _place(self, statements: Sequence[cst.CSTNode], lines: Lines, indents: tuple[str, ...]) -> None:
        places = self.places
        assert places is not None
        for statement, (first, members) in zip(statements, lines):
            places[statement] = (first, indents)
            block = getattr(statement, "body", None)
            if members is not None and type(block) is cst.IndentedBlock and len(block.body) == len(members):
                indent = self.module.default_indent if block.indent is None else block.indent
                self._place(block.body, members, (*indents, indent))

    def _statement(self, node: cst.CSTNode) -> cst.CSTNode | None:
        places, parents = self.places or {}, self.parents
        while node not in places:
            parent = parents.get(node)
            if parent is None:
                return None
            node = parent
        return node

    def _record(self, statement: cst.CSTNode) -> None:
        """Regenerate one statement's code from the line where it starts: its first line
        (decorators included) less the comments and blank lines above it that it holds."""
        self.done.add(statement)
        first, indents = self.places[statement]  # type: ignore[index]
        provider = PositionProvider()
        provider._computed = self.computed  # type: ignore[assignment]
        recorder = _StatementRecorder(self.module, provider, first - len(getattr(statement, "leading_lines", ())))
        for indent in indents:
            recorder.increase_indent(indent)
        statement._codegen(recorder)

    def _everything(self) -> Mapping[cst.CSTNode, CodeRange]:
        if self.everything is None:
            self.everything = self.whole()
        return self.everything

    def get(self, node: cst.CSTNode, default=None):
        found = self.computed.get(node)
        if found is not None:
            return found
        if self.everything is None and self.places is not None:
            at = self._statement(node)
            if at is not None:
                if at not in self.done:
                    self._record(at)
                return self.computed.get(node, default)
        return self._everything().get(node, default)

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        found = self.get(node)
        if found is None:
            raise KeyError(node)
        return found

    def __contains__(self, node: object) -> bool:
        return self.get(node) is not None  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[cst.CSTNode]:
        return iter(self._everything())

    def __len__(self) -> int:
        return len(self._everything())


def order_of(module: cst.Module, shape: Mapping[cst.CSTNode, list[cst.CSTNode]]) -> dict[cst.CSTNode, int]:
    """Each syntax node's rank in source order: sorting by it sorts by where nodes start
    (ties: an enclosing node first)."""
    order: dict[cst.CSTNode, int] = {}
    stack: list[cst.CSTNode] = [module]
    decorated = (cst.FunctionDef, cst.ClassDef)
    while stack:
        node = stack.pop()
        if type(node) in decorated and node.decorators and node not in order:  # type: ignore[attr-defined]
            children = shape.get(node, ())
            decorators = [c for c in children if type(c) is cst.Decorator]
            # the decorators, then the definition (its range starts at ``def``), then the rest
            stack.extend(reversed([c for c in children if type(c) is not cst.Decorator]))
            stack.append(_Marker(node))  # type: ignore[arg-type]
            stack.extend(reversed(decorators))
            continue
        if type(node) is _Marker:
            order[node.node] = len(order)
            continue
        order[node] = len(order)
        stack.extend(reversed(shape.get(node, ())))
    return order


class _Marker:
    """Where a decorated definition's own rank is taken, after its decorators."""

    __slots__ = ("node",)

    def __init__(self, node: cst.CSTNode) -> None:
        self.node = node


def tree_by_statement(module: cst.Module, lines: Lines | None) -> Tree:
    """A module's :class:`Tree` whose positions are recorded per statement when asked, its
    parents and children read from the nodes' fields (``memlint.python.shape``)."""
    shape = shape_of(module)
    parents = parents_of(module, shape)
    tree = Tree(StatementPositions(module, parents, lines, lambda: record(module).positions), parents, shape)
    register(tree, shape)
    return tree
