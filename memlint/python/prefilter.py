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

A reader that recognises calls only by their callee (``loss.backward()``, ``checkpoint(...)``,
an optimizer class called) declares a :class:`Called` pattern: it is asked only of the names
calls are made through (``UsedNames.called``), so a module that defines ``def backward(ctx,
grad)`` or passes ``checkpoint=...`` as a keyword, and calls neither, is set aside for it.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Callable, Iterable, Union

# a string constant that can name something: a dtype, a key, a file; prose has spaces
_WORD_LIKE = re.compile(r"[\w./\-]{1,200}")


def names_used(tree: ast.AST) -> str:
    """The names a module uses, one a line (what the needs' patterns search, ``re.MULTILINE``)."""
    found = survey(tree, names=True)[1]
    return found.text if found is not None else ""


@dataclass(frozen=True)
class Called:
    """A need's pattern that only a name a call is made through can meet (``UsedNames.called``):
    for a reader that acts on calls it recognises by their callee alone, by the callee's own
    names (``method_name``) or by the qualified names libcst gives it (``calls_named``), which
    are made of the callee's names and what the import binding its first name writes."""

    pattern: str


Pattern = Union[str, Called]  # a need's pattern: over every name the code uses, or over called names only


@dataclass
class UsedNames:
    """The names a module's code uses (``text``: every reader's prefilter), kept per top-level
    statement so that the extractor can ask only those of the code outside the classes the module
    defines and never uses (``outside_unused_classes``): a library module's ``Trainer`` subclass
    or engine class, whose training another file runs (``facts.script._only_in_unused_classes``)."""

    statements: list[set[str]]  # each top-level statement's names, what its imports bind left out
    imports: list[list[tuple[str, list[str]]]]  # each statement's imports: (name bound, names written)
    classes: dict[int, str]  # a top-level class that could be unused: its statement's index -> its name
    # the names the module's calls are made through: each callee's names as libcst's
    # ``get_full_name_for_node`` reads them (``a.b(x).c[0].d()``: a, b, c, d)
    callees: set[str]

    @cached_property
    def called(self) -> str:
        """The names a callee's qualified names can be made of, one a line: the callees' names,
        and what each import writes whose bound name is one of them (``from
        torch.utils.checkpoint import checkpoint as ckpt`` and ``ckpt(...)``; a star import's
        always). A subset of ``text``."""
        found = set(self.callees)
        for imports in self.imports:
            for bound, written in imports:
                if bound == "*" or bound in self.callees:
                    found.update(written)
        return "\n".join(found)

    @cached_property
    def text(self) -> str:
        found = set().union(*self.statements)
        for imports in self.imports:
            for _bound, written in imports:
                found.update(written)
        return "\n".join(found)

    @cached_property
    def outside_unused_classes(self) -> str:
        """The names of the statements that are not unused classes, an import's only where those
        statements use what it binds. A class is unused when no other top-level statement names
        it (a superset of ``_only_in_unused_classes``' test, which counts ``Name`` nodes): the
        code outside it can reach what it holds only through its name."""
        class_names = set(self.classes.values())
        everywhere: dict[str, int] = {}
        for index, statement in enumerate(self.statements):
            named = class_names & statement  # the smaller set is walked
            for bound, written in self.imports[index]:
                named |= class_names & {bound, *written}
            for name in named:
                everywhere[name] = everywhere.get(name, 0) + 1
        unused = {index for index, name in self.classes.items() if everywhere.get(name, 0) <= 1}
        kept = [index for index in range(len(self.statements)) if index not in unused]
        found = set().union(*(self.statements[index] for index in kept))
        for index in kept:
            for bound, written in self.imports[index]:
                if bound == "*" or bound in found:
                    found.update(written)
        return "\n".join(found)


def survey(tree: ast.AST, deepest: int | None = None, names: bool = True) -> tuple[int, UsedNames | None]:
    """The depth of CPython's tree and (with ``names``) the names it uses, in one walk: a cold
    ``check`` needs both of every module (the depth guards libcst's parser), and two walks with
    ``ast.iter_child_nodes``'s generators cost as much as the parse. Level by level, so no node
    carries its depth, and a module's top-level statements one by one (``UsedNames``); stops as
    soon as the depth passes ``deepest`` (names None then)."""
    statements: list[ast.AST] = list(tree.body) if isinstance(tree, ast.Module) else [tree]
    extra: list[ast.AST] = list(tree.type_ignores) if isinstance(tree, ast.Module) else []
    start = 2 if type(tree) is ast.Module else 1
    depth = 1 if type(tree) is ast.Module else 0
    found: list[set[str]] = []
    imports: list[list[tuple[str, list[str]]]] = []
    classes: dict[int, str] = {}
    callees: set[str] = set()
    for index, statement in enumerate(statements + extra):
        names_here: set[str] = set()
        imports_here: list[tuple[str, list[str]]] = []
        reached, binds = _walk(statement, start, deepest, names_here if names else None, imports_here, callees)
        depth = max(depth, reached)
        if deepest is not None and depth > deepest:
            return depth, None
        if not names or index >= len(statements):
            continue
        found.append(names_here)
        imports.append(imports_here)
        if type(statement) is ast.ClassDef and not binds and "add_argument" not in names_here:
            classes[index] = statement.name
    return depth, UsedNames(found, imports, classes, callees) if names else None


def _walk(root: ast.AST, depth: int, deepest: int | None, found: set[str] | None,
          imports: list[tuple[str, list[str]]], callees: set[str]) -> tuple[int, bool]:
    """One statement's walk (``survey``): the deepest level it reaches (counted from ``depth``)
    and whether it declares a name ``global``. Its names go to ``found`` (unless None), what its
    imports bind and write to ``imports``, its calls' callee names to ``callees``."""
    add = found.add if found is not None else None
    naming, contexts = _NAMING, _CONTEXTS
    level: list[ast.AST] = [root]
    declares_global = False
    while True:
        if deepest is not None and depth > deepest:
            return depth, declares_global
        below: list[ast.AST] = []
        push = below.append
        # a name's, attribute's... load/store context is a node without fields or names (a
        # third of the nodes): not walked, only counted as the level below it
        context_below = False
        for node in level:
            if found is not None and type(node) in naming:
                kind = type(node)
                if kind is ast.Import or kind is ast.ImportFrom:
                    imports.extend(_bindings(node))  # type: ignore[arg-type]
                elif kind is ast.Global:
                    declares_global = True
                elif kind is ast.Call:
                    _callee_names(node.func, callees)  # type: ignore[attr-defined]
                else:
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
        if not below:
            if context_below:  # the deepest level holds contexts alone
                depth += 1
            return depth, declares_global
        depth += 1
        level = below


def _bindings(node: ast.Import | ast.ImportFrom) -> list[tuple[str, list[str]]]:
    """Each alias of an import: the name it binds and the names it writes (``_name_of``'s for
    the alias and, for ``from m import``, the module's)."""
    module = node.module.split(".") if type(node) is ast.ImportFrom and node.module else []
    out = []
    for alias in node.names:
        written = [*alias.name.split("."), *module]
        if alias.asname:
            written.append(alias.asname)
        out.append((alias.asname or alias.name.split(".")[0], written))
    return out


def _callee_names(func: ast.AST, callees: set[str]) -> None:
    """The names of a callee as libcst's ``get_full_name_for_node`` joins them into the name
    whose first part its scopes resolve: through attributes, calls and subscripts to a name."""
    while True:
        kind = type(func)
        if kind is ast.Attribute:
            callees.add(func.attr)  # type: ignore[attr-defined]
            func = func.value  # type: ignore[attr-defined]
        elif kind is ast.Call:
            func = func.func  # type: ignore[attr-defined]
        elif kind is ast.Subscript:
            func = func.value  # type: ignore[attr-defined]
        else:
            if kind is ast.Name:
                callees.add(func.id)  # type: ignore[attr-defined]
            return


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
# the node classes ``survey`` reads a name from (the others name nothing: no call for them); it
# reads imports (``_bindings``), ``global`` and calls' callees (``_callee_names``) itself, ``_name_of`` the others
_NAMING = frozenset({ast.Name, ast.Attribute, ast.Constant, ast.keyword, ast.Import, ast.ImportFrom, ast.arg,
                     ast.Global, ast.Call, *_DEFINITIONS})
_CONTEXTS = frozenset({ast.Load, ast.Store, ast.Del})  # ``expr_context``: no fields


class Needs:
    """What any of several readers (rules, extractors) needs a module to name; ``None`` from
    :meth:`of` when one of them needs every module. ``outside``: needs asked only of the names
    outside the classes the module never uses (``UsedNames.outside_unused_classes``: the Python
    fact extractor's). A :class:`Called` pattern is asked of the names calls are made through."""

    def __init__(self, needs: Iterable[tuple[Pattern, ...]], outside: Iterable[tuple[Pattern, ...]] = ()) -> None:
        self.needs = sorted(set(needs), key=repr)
        self.outside = sorted(set(outside), key=repr)
        self._compiled = [_compiled(need) for need in self.needs]
        self._compiled_outside = [_compiled(need) for need in self.outside]

    @classmethod
    def of(cls, needs: Iterable[Pattern | tuple[Pattern, ...] | None],
           outside: Iterable[Pattern | tuple[Pattern, ...] | None] = ()) -> "Needs | None":
        """Each reader's need: a pattern ("": every module), several that must all match, or
        None (it reads no module tree)."""
        kept: list[tuple[Pattern, ...]] = []
        kept_outside: list[tuple[Pattern, ...]] = []
        for need, into in [*((n, kept) for n in needs), *((n, kept_outside) for n in outside)]:
            if need is None:
                continue
            patterns = (need,) if isinstance(need, (str, Called)) else tuple(need)
            if not patterns or any(_text_of(p) == "" for p in patterns):
                return None
            into.append(patterns)
        return cls(kept, kept_outside)

    def wanted(self, tree: ast.AST | str | UsedNames) -> bool:
        """Does any reader need this module (its tree, or the names it uses: ``survey``)?"""
        if not self._compiled and not self._compiled_outside:
            return False
        names = survey(tree)[1] if isinstance(tree, ast.AST) else tree
        text = names.text if isinstance(names, UsedNames) else names or ""
        # a string of names has no called names apart: its names stand for them (a superset)
        called = (lambda: names.called) if isinstance(names, UsedNames) else (lambda: text)
        if _meets(self._compiled, text, called):
            return True
        if not _meets(self._compiled_outside, text, called):
            return False  # nor then in a part of the module
        # only then worth working out; a string of names has no parts
        return not isinstance(names, UsedNames) or _meets(self._compiled_outside, names.outside_unused_classes, called)


_Compiled = list[tuple[re.Pattern[str], bool]]  # a need's patterns, each with whether only called names count


def _text_of(pattern: Pattern) -> str:
    return pattern.pattern if isinstance(pattern, Called) else pattern


def _compiled(need: tuple[Pattern, ...]) -> _Compiled:
    return [(re.compile(_text_of(p), re.MULTILINE), isinstance(p, Called)) for p in need]


def _meets(needs: list[_Compiled], text: str, called: Callable[[], str]) -> bool:
    """Does ``text`` (names, one a line) meet one of the needs (all of its patterns)? A
    :class:`Called` pattern must meet ``called()`` too, asked first: the module's called names,
    fewer than its names, and not all of them in ``text`` where that is a part of the module's
    (``outside_unused_classes``)."""
    return any(all((not only or p.search(called())) and p.search(text) for p, only in need) for need in needs)
