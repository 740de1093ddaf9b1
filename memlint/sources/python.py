"""Python source through libcst: the tree, positions, qualified names. Never imported or run.

``parse`` returns a :class:`PythonSource` whose metadata (positions, qualified names, parents,
scopes) is computed once, on first use, for all rules and extractors that share it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import libcst as cst
from libcst import metadata

from memlint.diagnostics import Position, Range


@dataclass(frozen=True)
class PythonSyntaxError:
    message: str
    range: Range


class PythonSource:
    """A parsed module and lazily computed libcst metadata."""

    def __init__(self, module: cst.Module, text: str) -> None:
        self.module = module
        self.text = text

    @functools.cached_property
    def wrapper(self) -> metadata.MetadataWrapper:
        # unsafe_skip_copy: the module is ours alone and never mutated, so skip deepcopy
        return metadata.MetadataWrapper(self.module, unsafe_skip_copy=True)

    # Each kind of metadata is computed on first use only (the wrapper keeps what it computed,
    # so qualified names reuse the scopes): a 2,000-line script costs ~0.4 s for positions,
    # ~0.5 s for scopes and ~0.9 s more for qualified names.

    @functools.cached_property
    def positions(self):
        return self.wrapper.resolve(metadata.PositionProvider)

    @functools.cached_property
    def parents(self) -> dict[cst.CSTNode, cst.CSTNode]:
        """Each node's parent, from one walk of the tree (what ParentNodeProvider gives, at a
        fraction of its cost)."""
        out: dict[cst.CSTNode, cst.CSTNode] = {}
        stack: list[cst.CSTNode] = [self.module]
        while stack:
            node = stack.pop()
            for child in node.children:
                out[child] = node
                stack.append(child)
        return out

    @functools.cached_property
    def scopes(self):
        return self.wrapper.resolve(metadata.ScopeProvider)

    @functools.cached_property
    def _qualified(self):
        return self.wrapper.resolve(metadata.QualifiedNameProvider)

    def range_of(self, node: cst.CSTNode) -> Range:
        code_range = self.positions[node]
        return Range(
            Position(code_range.start.line, code_range.start.column),
            Position(code_range.end.line, code_range.end.column),
        )

    def qualified_names(self, node: cst.CSTNode) -> set[str]:
        """Fully qualified names a name/attribute/call refers to, through imports and aliases
        (``from transformers import TrainingArguments as TA`` -> ``transformers.TrainingArguments``)."""
        target = node.func if isinstance(node, cst.Call) else node
        names = self._qualified.get(target, set())
        if callable(names):  # libcst computes qualified names lazily (a LazyValue per node)
            names = names()
        return {q.name for q in names}

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.parents.get(node)

    def code_of(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    def imports_any(self, *prefixes: str) -> bool:
        """Does the module import any of these packages (cheap, syntax only)?"""
        for statement in self.module.body:
            for small in getattr(statement, "body", ()):
                if isinstance(small, cst.Import):
                    for alias in small.names:
                        name = self.code_of(alias.name)
                        if any(name == p or name.startswith(p + ".") for p in prefixes):
                            return True
                elif isinstance(small, cst.ImportFrom) and small.module is not None:
                    name = self.code_of(small.module)
                    if any(name == p or name.startswith(p + ".") for p in prefixes):
                        return True
        return False


def _python_error(text: str) -> PythonSyntaxError | None:
    """CPython's own description of a syntax error ("expected ':'", at the right column).

    ``ast.parse`` only parses (nothing is compiled to bytecode or run). It may reject syntax
    newer than this interpreter that libcst accepts; then it returns None.
    """
    import ast
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except SyntaxError as error:
        line = max(error.lineno or 1, 1)
        column = max((error.offset or 1) - 1, 0)
        end_line = max(error.end_lineno or line, line)
        end_column = max((error.end_offset or error.offset or 1) - 1, column + 1) if end_line == line else max(
            (error.end_offset or 1) - 1, 0)
        return PythonSyntaxError(error.msg, Range(Position(line, column), Position(end_line, end_column)))
    except (RecursionError, MemoryError, ValueError):
        return None
    return None


def parse(text: str) -> PythonSource | PythonSyntaxError:
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError as error:
        better = _python_error(text)
        if better is not None:
            return better
        line = max(error.raw_line, 1)
        column = max(error.raw_column, 0)
        return PythonSyntaxError(error.message, Range(Position(line, column), Position(line, column + 1)))
    except (RecursionError, MemoryError):
        return PythonSyntaxError("too deeply nested to parse", Range.file_start())
    return PythonSource(module, text)
