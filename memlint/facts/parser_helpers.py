"""The argument classes a project hands to its parser through a helper function.

A project often builds its parser in one helper and passes the class in: ms-swift's
``parse_args(class_type, argv)`` runs ``HfArgumentParser([class_type])``, and each pipeline
calls ``parse_args(self.args_class, argv)`` with ``args_class = SftArguments`` (or
``MegatronRLHFArguments``) on its class; a Ray driver calls ``parse_args_from_dict(
MegatronRLHFArguments, cfg)``, which hands its own ``class_type`` on. The parser call alone
names no class. This module follows such helpers: a function whose parameter reaches a parser
call (or another helper) is a helper, and the classes are the ones its callers pass at that
position: a class name, or an attribute (``self.args_class``) whose class-body assignments
name the classes.

Only files whose text calls a helper (or assigns the attribute) are parsed, by ``ast``:
nothing is compiled or run, and each file's answer is kept while its size and modification
time stay the same.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

from memlint.documents import reads
from memlint.facts.stamped_files import python_module, stamped

# what one argument of a call is: ("class", name), ("attribute", name) or ("parameter", function, index)
_Argument = tuple[str, ...]
# a file's calls: (callee, position, the argument there), and its class-body assignments: name -> values
_Calls = tuple[tuple[str, int, _Argument], ...]
_Assigned = dict[str, frozenset[str]]
# path -> ((mtime_ns, size), (names it calls, names it assigns in a block, its digest)), and its parse
_FILES: dict[str, tuple[tuple[int, int], tuple[frozenset[str], frozenset[str], str] | None]] = {}
_SCANS: dict[str, tuple[_Calls, _Assigned]] = {}


def caller_position(function: ast.FunctionDef | ast.AsyncFunctionDef, parameter: str) -> int | None:
    """The position at which callers pass ``parameter`` of ``function`` (a method's ``self`` or
    ``cls`` is not passed); None when it is not one of its positional parameters."""
    parameters = [a.arg for a in [*function.args.posonlyargs, *function.args.args]]
    if parameter not in parameters:
        return None
    index = parameters.index(parameter)
    return index - 1 if parameters[0] in ("self", "cls") and index > 0 else index


def passed_classes(files: Iterable[str], helpers: dict[str, int]) -> set[str]:
    """The class names the project passes to ``helpers`` (function name -> the position of its
    parameter that reaches a parser), following helpers that hand their own parameter on."""
    helpers = dict(helpers)
    indexed = [(path, found) for path in files if (found := _index(path)) is not None]
    classes: set[str] = set()
    attributes: set[str] = set()
    done: set[tuple[str, int]] = set()
    while todo := {(name, index) for name, index in helpers.items()} - done:
        done |= todo
        wanted = dict(todo)
        for path, (called, _, _) in indexed:
            if called.isdisjoint(wanted):
                continue
            for callee, position, argument in _scanned(path)[0]:
                if wanted.get(callee) != position:
                    continue
                if argument[0] == "class":
                    classes.add(argument[1])
                elif argument[0] == "attribute":
                    attributes.add(argument[1])
                elif argument[0] == "parameter" and argument[1] not in helpers:
                    helpers[argument[1]] = int(argument[2])
    for path, (_, assigned, _) in indexed:
        if not assigned.isdisjoint(attributes):
            for attribute in attributes:
                classes.update(_scanned(path)[1].get(attribute, ()))
    return classes


_CALLED = re.compile(r"\b(\w+)\s*\(")
_ASSIGNED = re.compile(r"^[ \t]+(\w+)\s*[:=]", re.M)


def _index(path: str) -> tuple[frozenset[str], frozenset[str], str] | None:
    """The names a file calls and the names it assigns in an indented block (a class body's
    ``args_class = SftArguments``), and its digest; the file is parsed only when one of them
    is wanted (its parse is dropped when the file changes)."""
    def derive(text: str) -> tuple[frozenset[str], frozenset[str], str]:
        _SCANS.pop(path, None)
        return frozenset(_CALLED.findall(text)), frozenset(_ASSIGNED.findall(text)), reads.digest(text, None)

    return stamped(_FILES, path, derive)


def _scanned(path: str) -> tuple[_Calls, _Assigned]:
    """The calls and class-body assignments of an indexed file (parsed on first asking)."""
    kept = _SCANS.get(path)
    if kept is None:
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        kept = _SCANS[path] = _scan(text) or ((), {})
    indexed = _FILES.get(path)
    if indexed is not None and indexed[1] is not None:
        reads.document(path, indexed[1][2])
    return kept


def _scan(text: str) -> tuple[_Calls, _Assigned] | None:
    module = python_module(text)
    if module is None:
        return None
    calls: list[tuple[str, int, _Argument]] = []
    assigned: dict[str, set[str]] = {}
    _visit(module, None, calls, assigned)
    return tuple(calls), {name: frozenset(values) for name, values in assigned.items()}


def _visit(node: ast.AST, function: ast.FunctionDef | ast.AsyncFunctionDef | None,
           calls: list[tuple[str, int, _Argument]], assigned: dict[str, set[str]]) -> None:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            _visit(child, child, calls, assigned)
            continue
        if isinstance(child, ast.ClassDef):
            for statement in child.body:
                target, value = _class_assignment(statement)
                if target is not None and isinstance(value, ast.Name):
                    assigned.setdefault(target, set()).add(value.id)
        elif isinstance(child, ast.Call):
            callee = child.func.attr if isinstance(child.func, ast.Attribute) else (
                child.func.id if isinstance(child.func, ast.Name) else None)
            if callee is not None:
                for position, argument in enumerate(child.args):
                    described = _argument(argument, function)
                    if described is not None:
                        calls.append((callee, position, described))
        _visit(child, function, calls, assigned)


def _class_assignment(statement: ast.stmt) -> tuple[str | None, ast.expr | None]:
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
        return statement.targets[0].id, statement.value
    if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
        return statement.target.id, statement.value
    return None, None


def _argument(argument: ast.expr, function: ast.FunctionDef | ast.AsyncFunctionDef | None) -> _Argument | None:
    if isinstance(argument, ast.Name):
        position = caller_position(function, argument.id) if function is not None else None
        if position is not None and function is not None:
            return ("parameter", function.name, str(position))
        return ("class", argument.id)
    if isinstance(argument, ast.Attribute) and isinstance(argument.value, ast.Name) \
            and argument.value.id in ("self", "cls"):
        return ("attribute", argument.attr)
    return None

