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

    @functools.cached_property
    def _resolved(self) -> dict:
        return self.wrapper.resolve_many(
            [
                metadata.PositionProvider,
                metadata.QualifiedNameProvider,
                metadata.ParentNodeProvider,
                metadata.ScopeProvider,
            ]
        )

    @property
    def positions(self):
        return self._resolved[metadata.PositionProvider]

    @property
    def parents(self):
        return self._resolved[metadata.ParentNodeProvider]

    @property
    def scopes(self):
        return self._resolved[metadata.ScopeProvider]

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
        names = self._resolved[metadata.QualifiedNameProvider].get(target, set())
        if callable(names):  # libcst >= 1.1 computes qualified names lazily (LazyValue)
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


def parse(text: str) -> PythonSource | PythonSyntaxError:
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError as error:
        line = max(error.raw_line, 1)
        column = max(error.raw_column, 0)
        message = str(error).splitlines()[0] if str(error) else "syntax error"
        return PythonSyntaxError(message, Range(Position(line, column), Position(line, column + 1)))
    except (RecursionError, MemoryError):
        return PythonSyntaxError("too deeply nested to parse", Range.file_start())
    return PythonSource(module, text)
