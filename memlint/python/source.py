"""Python source through libcst: the tree, positions, qualified names. Never imported or run.

``parse`` returns a :class:`PythonSource` whose metadata (positions, parents and children, scopes
and the qualified names read from them) is computed once, on first use, for all rules and
extractors that share it.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from dataclasses import dataclass
from typing import Callable, Mapping

import libcst as cst
from libcst import metadata
from libcst.metadata import CodeRange

from memlint.model.diagnostics import Position, Range
from memlint.python.scopes import scopes_of
from memlint.python.class_units import derive_unit
from memlint.python.member_syntax import ClassSyntax, edited_class, summarise, tree_depth
from memlint.python.prefilter import UsedNames, survey
from memlint.python.positions import Lines, first_lines, order_of, tree_by_statement
from memlint.python.tree import Tree, tree_of
from memlint.python.unvalidated import parse_module as parse_unvalidated
from memlint.python.units import Unit, parse_in_units, unit_statements


@dataclass(frozen=True)
class PythonSyntaxError:
    message: str
    range: Range
    # "syntax": the file is not valid Python (SYN001); "too-complex": valid, but beyond what
    # memlint analyses (nesting or expression sizes no training script has; SYN002)
    kind: str = "syntax"


class PythonSource:
    """A parsed module and lazily computed libcst metadata."""

    def __init__(self, module: cst.Module, text: str, tree: Tree | None = None, units: list[Unit] = (),
                 depths: dict[str, int] | None = None, lines: Lines | None = None,
                 by_statement: bool = False, names: UsedNames | None = None) -> None:
        self.module = module
        # the names the code uses (``prefilter.survey``), where ``check``'s prefilter read
        # them: which rules and extractors can find anything here (``prefilter.Needs.match``)
        self.names = names
        self.text = text
        # ``by_statement``: positions recorded per top-level statement when asked
        # (``memlint.python.positions``), ``lines`` the first line of each (``first_lines``)
        self.lines, self.by_statement = lines, by_statement
        self.units = list(units)  # the top-level statements parsed alone (python_units)
        self.depths = depths or {}  # a unit's text -> the depth of its statements' syntax trees
        # a top-level class's unit text -> its syntax tree summarised per member (python_member_syntax)
        self.classes: dict[str, ClassSyntax] = {}
        self._typed: dict[tuple, list] = {}  # nodes_of and nodes_in_order, by node classes
        # what other layers work out from this source (the rules' index), dropped with it
        self.derived: dict[str, object] = {}
        if tree is not None:
            self.__dict__["tree"] = tree

    @functools.cached_property
    def tree(self) -> Tree:
        """Positions, parents and children of every node (one pass, on first use; given when
        the module was parsed in units)."""
        if self.by_statement:
            return tree_by_statement(self.module, self.lines)
        return tree_of(self.module)

    @property
    def positions(self) -> dict[cst.CSTNode, CodeRange]:
        """What libcst's PositionProvider gives, computed with the parents and children."""
        return self.tree.positions

    @property
    def parents(self) -> dict[cst.CSTNode, cst.CSTNode]:
        """Each node's parent (what ParentNodeProvider gives, at a fraction of its cost)."""
        return self.tree.parents

    @functools.cached_property
    def scopes(self) -> Mapping[cst.CSTNode, metadata.Scope | None]:
        """libcst's scope analysis (what ``ScopeProvider`` gives), walked over the tree's
        recorded children."""
        self.tree  # noqa: B018 -- the children the walk reads
        return scopes_of(self.module, self.units, self.text)

    def nodes_of(self, *kinds: type[cst.CSTNode]) -> list:
        """The module's nodes of these node classes (final ones: the test is ``type(node)``), in
        the order of ``parents``; after an edit, only the statements it changed are walked."""
        found = self._typed.get(kinds)
        if found is None:
            body = self.module.body
            if self.units and len(self.units) == len(body):
                # ``parents`` lists the top-level statements, then each unit's nodes from the last unit
                found = [s for s in body if type(s) in kinds]
                for unit in reversed(self.units):
                    found += unit.nodes_of(kinds)
            else:
                found = [node for node in self.parents if type(node) in kinds]
            self._typed[kinds] = found
        return found

    def nodes_in_order(self, *kinds: type[cst.CSTNode]) -> list:
        """``nodes_of(*kinds)`` sorted by where they start, ties in the order of ``parents``;
        after an edit, only the statements it changed are sorted (units' lines do not overlap,
        so each unit's nodes, in its own line numbers, keep their place among the others')."""
        found = self._typed.get(("in order", *kinds))
        if found is None:
            body = self.module.body
            if self.units and len(self.units) == len(body):
                found = []
                for statement, unit in zip(body, self.units):
                    if type(statement) in kinds:  # a statement starts with (before) its first node
                        found.append(statement)
                    found += unit.nodes_in_order(kinds)
            elif self.tree.shape is not None:  # positions per statement: source order without them
                order = self._order()
                found = sorted(self.nodes_of(*kinds), key=order.__getitem__)
            else:
                positions = self.positions
                found = sorted(self.nodes_of(*kinds), key=lambda n: (positions[n].start.line, positions[n].start.column))
            self._typed[("in order", *kinds)] = found
        return found

    def place(self, node: cst.CSTNode) -> tuple[int, int]:
        """A key that puts nodes in source order (ties: an enclosing node first; a node of no
        place here, such as one of a string annotation, first of all). Where positions are
        worked out per statement, their rank in the shape: no statement's code is regenerated."""
        if self.by_statement:
            rank = self._order().get(node)
            return (0, -1) if rank is None else (0, rank)
        found = self.positions.get(node)
        return (found.start.line, found.start.column) if found is not None else (0, 0)

    def _order(self) -> dict[cst.CSTNode, int]:
        order = self.derived.get("order")
        if order is None:
            order = self.derived["order"] = order_of(self.module, self.tree.shape or {})
        return order  # type: ignore[return-value]

    def every_scope(self) -> set[metadata.Scope]:
        """Every scope of the module (its own, its functions', classes', comprehensions'...)."""
        scopes = self.scopes
        every = getattr(scopes, "every_scope", None)
        return every() if every is not None else {s for s in scopes.values() if s is not None}

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
        # exactly what QualifiedNameProvider answers (it asks the node's scope the same
        # question), without its pass over every node of the module; joined scopes keep the
        # answers of unchanged statements across edits
        scopes = self.scopes
        kept = getattr(scopes, "qualified_names", None)
        if kept is not None:
            return set(kept(target))
        scope = scopes.get(target)
        if not scope:
            return set()
        return {q.name for q in scope.get_qualified_names_for(target)}

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.parents.get(node)

    def code_of(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

MAX_LINE_CHARS = 20_000  # no hand-written script has a line this long; generated code might
# Nor this many lines (transformers' largest modules have ~6,000): analysing a 400,000-line
# generated table that imports torch took 3 minutes and 3.5 GB; this many takes ~25 s
MAX_LINES = 20_000
MAX_DEPTH = 300  # syntax-tree depth; libcst's native parser overflows its stack near 2,000 and
# is super-linear on long operator chains (3,000 terms: 2 s; 10,000: a minute)


def _python_error(text: str) -> tuple[PythonSyntaxError | None, "ast.AST | None"]:
    """CPython's verdict first: its own description of a syntax error ("expected ':'", at the
    right column), or the tree, whose depth says whether libcst can be trusted with the file.

    ``ast.parse`` only parses (nothing is compiled to bytecode or run) and refuses pathological
    nesting with an error instead of crashing. It may reject syntax newer than this
    interpreter that libcst accepts; then the tree is None and libcst decides.
    """
    import ast
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text)
    except SyntaxError as error:
        if "nest" not in (error.msg or "") and _newer_syntax(text, error.msg or ""):
            return None, None  # Python 3.12's ``type X = ...`` or f-strings under an older interpreter
        line = max(error.lineno or 1, 1)
        column = max((error.offset or 1) - 1, 0)
        end_line = max(error.end_lineno or line, line)
        end_column = max((error.end_offset or error.offset or 1) - 1, column + 1) if end_line == line else max(
            (error.end_offset or 1) - 1, 0)
        return PythonSyntaxError(error.msg, Range(Position(line, column), Position(end_line, end_column))), None
    except (RecursionError, MemoryError):
        return PythonSyntaxError("nested too deeply to analyse", Range.file_start(), "too-complex"), None
    except ValueError:  # NUL bytes and the like: libcst reports them
        return None, None
    return None, tree


# PEP 695 (Python 3.12): ``type X = ...``, ``class C[T]:``, ``def f[T](...)``
_PEP_695 = re.compile(r"^[ \t]*(?:type[ \t]+\w+[ \t]*(?:\[[^\]\n]*\])?[ \t]*=|(?:class|(?:async[ \t]+)?def)[ \t]+\w+\[)",
                      re.MULTILINE)


def _newer_syntax(text: str, message: str) -> bool:
    """Is a file CPython refused written in the syntax of a newer Python release, which libcst
    parses? (lerobot requires Python 3.12 and writes PEP 695 generics; a Python 3.12 f-string may
    hold a backslash or its own quotes, PEP 701: ``f"{text.count('\\n')} lines"``; memlint may run
    on 3.11.) libcst is asked only where such syntax appears: its native parser does not survive
    the pathological nesting CPython refuses cleanly."""
    if not (_PEP_695.search(text) or (sys.version_info < (3, 12) and "f-string" in message)):
        return False
    try:
        cst.parse_module(text)
    except Exception:  # noqa: BLE001 - any failure means libcst refuses it too
        return False
    return True


def _depth(tree) -> int:
    """The depth of a syntax tree, without recursion."""
    return tree_depth(tree, MAX_DEPTH)


def _depth_in_units(cut: list[tuple[str, list]], known: dict[str, int],
                    classes: dict[str, ClassSyntax]) -> tuple[int, dict[str, int]]:
    """``_depth`` of a module cut into units (``unit_statements``), each unit's depth taken from
    ``known`` (the units of an earlier version of the text, or a class checked per member) or
    measured; and every unit's. A top-level class's unit is measured per member and its summary
    put in ``classes`` (its text -> ``ClassSyntax``; those of ``cut`` kept, the others dropped),
    for the next edit (``python_member_syntax``)."""
    depths: dict[str, int] = {}
    wanted: dict[str, ClassSyntax] = {}
    # the statements of the changed units are numbered from the first such unit's first line
    line, base = 1, None
    for chunk, statements in cut:
        depth = known.get(chunk)
        if statements and base is None:
            base = line
        if depth is None and not statements:
            depth = classes[chunk].depth  # a class checked per member (``_cut_after_edit``)
        if depth is None:
            summary = summarise(statements[0], chunk, line - (base or 1) + 1, MAX_DEPTH) \
                if len(statements) == 1 else None
            if summary is not None:
                classes[chunk] = summary
                depth = summary.depth
            else:
                depth = max(_depth(statement) for statement in statements)
        if chunk in classes:
            wanted[chunk] = classes[chunk]
        depths[chunk] = depth
        line += chunk.count("\n")
    classes.clear()
    classes.update(wanted)
    return 1 + max(depths.values()), depths


def _cut_after_edit(text: str, previous: PythonSource | None,
                    classes: dict[str, ClassSyntax]) -> list[tuple[str, list]] | None:
    """``unit_statements(text, ast.parse(text))`` for a text that shares its first and last
    units with ``previous`` (an edit changes the lines between): CPython parses only those lines.

    Top-level statements that each parse, joined at line starts, parse together: nothing of one
    statement's tokens reaches past its last line (a valid piece of Python ends neither inside
    a bracket nor with a line continuation), and each unit begins at column 0 with a statement.
    The kept units parsed before, as the whole text they were part of did. None (parse the
    whole text) unless the changed lines parse alone, hold a statement at their first line and
    end with a newline before the kept units that follow; their statements come with them, the
    kept units' with none (their depth is known). An edit inside one top-level class whose
    summary ``classes`` holds is checked as the members it touched (``python_member_syntax``):
    the class then comes with no statements, its new summary put in ``classes``.
    """
    if previous is None or not previous.units or "\r" in text:
        return None
    units, depths = previous.units, previous.depths
    kept_before, start = 0, 0
    while kept_before < len(units) and units[kept_before].text.endswith("\n") \
            and text.startswith(units[kept_before].text, start):
        start += len(units[kept_before].text)
        kept_before += 1
    kept_after, end = len(units), len(text)
    # the first unit may begin with lines above its statement, which follow another unit's once
    # a statement is put above it: it is kept only as the first
    while kept_after > max(kept_before, 1) and end - len(units[kept_after - 1].text) >= start \
            and text.endswith(units[kept_after - 1].text, start, end):
        end -= len(units[kept_after - 1].text)
        kept_after -= 1
    kept = [*units[:kept_before], *units[kept_after:]]
    if any(unit.text not in depths for unit in kept):
        return None
    middle = text[start:end]
    changed: list[tuple[str, list]] = []
    if middle:
        if kept_after < len(units) and not middle.endswith("\n"):
            return None  # the kept unit below would continue the changed lines' last line
        old = units[kept_before].text if kept_after - kept_before == 1 else None
        summary = classes.get(old) if old is not None else None
        if summary is not None and old is not None:  # an edit inside one class: its members alone
            summary = edited_class(summary, old, middle, MAX_DEPTH)
            if summary is not None:
                classes[middle] = summary
                return [*((unit.text, []) for unit in units[:kept_before]), (middle, []),
                        *((unit.text, []) for unit in units[kept_after:])]
        import warnings

        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(middle)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None  # the whole text's error (or verdict) is CPython's on the whole text
        found = unit_statements(middle, tree)
        if found is None:
            return None
        first = found[0][1][0]
        first_line = min([first.lineno, *(d.lineno for d in getattr(first, "decorator_list", ()))])
        if kept_before and first_line != 1:
            return None  # lines above the first statement belong to the kept unit above
        changed = found
    if not kept and not changed:
        return None
    return [*((unit.text, []) for unit in units[:kept_before]), *changed,
            *((unit.text, []) for unit in units[kept_after:])]


def parse(text: str, previous: PythonSource | None = None, whole: bool = False,
          wanted: "Callable[[UsedNames], bool] | None" = None) -> PythonSource | PythonSyntaxError | None:
    """The module, or why it cannot be analysed. ``previous``: the source of an earlier version
    of the same document, whose unchanged top-level statements need no parsing again.

    ``whole``: the text will not be edited (``memlint check``): it is parsed in one piece, not
    in units (``python_units``), which only an edit repays: parsing each top-level statement
    alone, recording its positions and joining the pieces costs a cold run a quarter more.
    ``wanted`` (with ``whole``): asked of the names a valid module uses; None when it says no
    (``memlint.python.prefilter``: nothing memlint reads could find anything there), before
    libcst parses it. A module that says ``nonlocal`` is always parsed: one at module level is
    a syntax error only libcst's tree shows (``memlint.documents.parsed``)."""
    lines = text.splitlines()
    if len(lines) > MAX_LINES:
        return PythonSyntaxError(f"{len(lines):,} lines: too long to analyse (generated code?)",
                                 Range.file_start(), "too-complex")
    longest = max(map(len, lines), default=0)
    if longest > MAX_LINE_CHARS:
        return PythonSyntaxError(
            f"a line of {longest:,} characters: too long to analyse (generated code?)",
            Range.file_start(), "too-complex",
        )
    classes = dict(previous.classes) if previous is not None else {}
    cut = None if whole else _cut_after_edit(text, previous, classes)
    tree = None
    if whole:
        cpython_error, tree = _python_error(text)
        if cpython_error is not None:
            return cpython_error
    elif cut is None:
        cpython_error, tree = _python_error(text)
        if cpython_error is not None:
            return cpython_error
        cut = unit_statements(text, tree) if tree is not None else None
    depths: dict[str, int] = {}
    names = None  # the names the module uses, where the prefilter asks (memlint.python.prefilter)
    if cut is not None:
        depth, depths = _depth_in_units(cut, previous.depths if previous is not None else {}, classes)
    elif whole and tree is not None:
        depth, names = survey(tree, MAX_DEPTH, names=wanted is not None)  # one walk for both
    else:
        depth = _depth(tree) if tree is not None else 0
    if depth > MAX_DEPTH:
        return PythonSyntaxError(f"nested more than {MAX_DEPTH} levels deep: too complex to analyse",
                                 Range.file_start(), "too-complex")
    if names is not None and wanted is not None and "nonlocal" not in text and not wanted(names):
        return None
    if cut is not None:
        joined = parse_in_units(text, None, previous.units if previous is not None else (),
                                texts=[chunk for chunk, _ in cut], derive=derive_unit)
        if joined is not None:
            source = PythonSource(joined.module, text, joined.tree, joined.units, depths)
            source.classes = classes
            return source
    try:
        # text CPython parsed needs none of libcst's per-node checks (``python/unvalidated.py``)
        module = parse_unvalidated(text) if whole and tree is not None else cst.parse_module(text)
    except cst.ParserSyntaxError as error:
        line = max(error.raw_line, 1)
        column = max(error.raw_column, 0)
        return PythonSyntaxError(error.message, Range(Position(line, column), Position(line, column + 1)))
    except (RecursionError, MemoryError):
        return PythonSyntaxError("nested too deeply to analyse", Range.file_start(), "too-complex")
    if whole:  # positions only where asked: CPython's lines place the statements (not with ``\r``)
        return PythonSource(module, text, lines=first_lines(tree) if tree is not None and "\r" not in text else None,
                            by_statement=True, names=names)
    return PythonSource(module, text)
