"""Which Python modules can matter to ``memlint check``, decided from CPython's ``ast``.

A cold run over real repositories spends most of its time in libcst (the parse, positions,
scopes) on library and model code that defines no training run: a ``LlamaAttention`` module
imports torch and says ``dropout`` but never calls ``backward()``, builds no optimizer, no
trainer, no checkpointing. CPython parses a module anyway (its syntax verdict comes first,
``memlint.python.source``); this module reads the names that tree uses, and each rule and each
fact extractor says, as a regular expression over those names, what a module must name for it
to find anything there (``Rule.python_needs``, ``extractor(needs=...)``). A module no one needs
is set aside: no libcst, no scopes, no facts. A textual test cannot do this: 510 of 595 ML
modules of the benchmark tree contain one of the words in a comment, a docstring or a message.

The names are what the code refers to, not what its prose says: identifiers (``Name``), the
attribute names (``.backward``), imported names as written in the import (``from
torch.utils.checkpoint import checkpoint as ckpt`` names ``checkpoint``: an alias cannot hide
it), keyword argument names (``bf16=True``), the names of functions and classes, and string
constants that could be a name, a dtype or a path (``"bfloat16"``, ``"ds_config.json"``: no
space in them; not docstrings or messages).
"""

from __future__ import annotations

import ast
import re
from typing import Iterable

# a string constant that can name something: a dtype, a key, a file; prose has spaces
_WORD_LIKE = re.compile(r"[\w./\-]{1,200}")


def names_used(tree: ast.AST) -> str:
    """The names a module uses, one a line (what the needs' patterns search, ``re.MULTILINE``)."""
    return survey(tree, names=True)[1] or ""


def survey(tree: ast.AST, deepest: int | None = None, names: bool = True) -> tuple[int, str | None]:
    """The depth of CPython's tree and (with ``names``) the names it uses, in one walk: a cold
    ``check`` needs both of every module (the depth guards libcst's parser), and two walks with
    ``ast.iter_child_nodes``'s generators cost as much as the parse. Level by level, so no node
    carries its depth; stops as soon as the depth passes ``deepest`` (names None then)."""
    found: set[str] = set()
    add = found.add
    naming, contexts = _NAMING, _CONTEXTS
    depth = 0
    level: list[ast.AST] = [tree]
    while level:
        depth += 1
        if deepest is not None and depth > deepest:
            return depth, None
        below: list[ast.AST] = []
        push = below.append
        # a name's, attribute's... load/store context is a node without fields or names (a
        # third of the nodes): not walked, only counted as the level below it
        context_below = False
        for node in level:
            if names and type(node) in naming:
                _name_of(node, found, add)
            for field in node._fields:
                value = getattr(node, field, None)
                if isinstance(value, ast.AST):
                    if type(value) in contexts:
                        context_below = True
                    else:
                        push(value)
                elif type(value) is list:
                    below += [item for item in value if isinstance(item, ast.AST)]
        if not below and context_below:  # the deepest level holds contexts alone
            depth += 1
            if deepest is not None and depth > deepest:
                return depth, None
        level = below
    return depth, "\n".join(found) if names else None


def _name_of(node: ast.AST, found: set[str], add) -> None:
    """What one node names (``names_used``): identifiers, attributes, name-like strings,
    keywords, imports as written, definitions and parameters."""
    kind = type(node)
    if kind is ast.Name:
        add(node.id)  # type: ignore[attr-defined]
    elif kind is ast.Attribute:
        add(node.attr)  # type: ignore[attr-defined]
    elif kind is ast.Constant:
        value = node.value  # type: ignore[attr-defined]
        if type(value) is str and _WORD_LIKE.fullmatch(value):
            add(value)
    elif kind is ast.keyword:
        if node.arg:  # type: ignore[attr-defined]
            add(node.arg)  # type: ignore[attr-defined]
    elif kind is ast.alias:
        found.update(node.name.split("."))  # type: ignore[attr-defined]
        if node.asname:  # type: ignore[attr-defined]
            add(node.asname)  # type: ignore[attr-defined]
    elif kind is ast.ImportFrom:
        if node.module:  # type: ignore[attr-defined]
            found.update(node.module.split("."))  # type: ignore[attr-defined]
    elif kind in _DEFINITIONS:
        add(node.name)  # type: ignore[attr-defined]
    elif kind is ast.arg:
        add(node.arg)  # type: ignore[attr-defined]


_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
# the node classes ``_name_of`` reads a name from (the others name nothing: no call for them)
_NAMING = frozenset({ast.Name, ast.Attribute, ast.Constant, ast.keyword, ast.alias, ast.ImportFrom, ast.arg,
                     *_DEFINITIONS})
_CONTEXTS = frozenset({ast.Load, ast.Store, ast.Del})  # ``expr_context``: no fields


class Needs:
    """What any of several readers (rules, extractors) needs a module to name; ``None`` from
    :meth:`of` when one of them needs every module."""

    def __init__(self, needs: Iterable[tuple[str, ...]]) -> None:
        self.needs = sorted(set(needs))
        self._compiled = [[re.compile(p, re.MULTILINE) for p in need] for need in self.needs]

    @classmethod
    def of(cls, needs: Iterable[str | tuple[str, ...] | None]) -> "Needs | None":
        """Each reader's need: a pattern ("": every module), several that must all match, or
        None (it reads no module tree)."""
        kept: list[tuple[str, ...]] = []
        for need in needs:
            if need is None:
                continue
            patterns = (need,) if isinstance(need, str) else tuple(need)
            if not patterns or "" in patterns:
                return None
            kept.append(patterns)
        return cls(kept)

    def wanted(self, tree: ast.AST | str) -> bool:
        """Does any reader need this module (its tree, or the names it uses: ``names_used``)?"""
        if not self._compiled:
            return False
        names = tree if isinstance(tree, str) else names_used(tree)
        return any(all(p.search(names) for p in need) for need in self._compiled)
