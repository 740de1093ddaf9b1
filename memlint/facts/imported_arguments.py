"""The defaults of argument dataclasses a script imports from its own project.

``from myproj.arguments import ModelArguments, DataArguments`` then
``HfArgumentParser((ModelArguments, DataArguments, TrainingArguments))``: the script states
nothing about ``model_args.model_name_or_path`` or ``data_args.max_seq_length`` itself -- their
defaults are written in another module. Those defaults are what a launch without the option
gets, so they are read as the command line the script would get by default: each field's literal
default, keyed by its option name and located in the module that writes it. The caller applies
them through the script's own bindings, below anything a launcher or a config states.

The modules are read with ``ast`` (never imported); only literal defaults count
(``= 4096``, ``= field(default="Qwen/Qwen2.5-0.5B")``), and a field's own class wins over its
bases defined in the same module.
"""

from __future__ import annotations

import ast
import re
import warnings
from typing import Callable

from memlint.model.diagnostics import Range
from memlint.model.provenance import Location, Sourced

# ``from pkg.mod import A, B as C`` / ``from pkg.mod import (A, B)``
_IMPORT = re.compile(r"^[ \t]*from[ \t]+([A-Za-z_][\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)", re.M)
_SCALARS = (bool, int, float, str)

# a module name -> (its path, its text), or None when it is not a file of the project
ModuleSource = Callable[[str], "tuple[str, str] | None"]


def imported_names(text: str) -> list[tuple[str, str, str]]:
    """Every ``from module import name as alias`` of a module's text: (module, name, alias)."""
    out: list[tuple[str, str, str]] = []
    for module, names in _IMPORT.findall(text):
        for written in names.strip().strip("()").split(","):
            words = written.split("#")[0].split()
            if words and words[0].isidentifier():
                alias = words[2] if len(words) == 3 and words[1] == "as" and words[2].isidentifier() else words[0]
                out.append((module, words[0], alias))
    return out


def imported_defaults(text: str, module_source: ModuleSource) -> dict[str, Sourced[str]]:
    """Option name -> the default an imported project dataclass gives it, as command-line text."""
    out: dict[str, Sourced[str]] = {}
    by_module: dict[str, list[str]] = {}
    for module, name, _ in imported_names(text):
        by_module.setdefault(module, []).append(name)
    for module, imported in by_module.items():
        classes = [n for n in imported if n[:1].isupper()]
        if not classes:
            continue
        found = module_source(module)
        if found is None:
            continue
        path, source = found
        for name, fact in _field_defaults(path, source, set(classes)).items():
            out.setdefault(name, fact)
    return out


def imported_constants(constants: dict[str, tuple[str, str]], module_source: ModuleSource) -> dict[str, Sourced[str]]:
    """Option name -> the module-level literal its default names (``default=DEFAULT_INPUT_MODEL``
    with ``from .consts import DEFAULT_INPUT_MODEL`` and ``DEFAULT_INPUT_MODEL =
    "EleutherAI/pythia-6.9b"`` in ``consts.py``), as command-line text."""
    out: dict[str, Sourced[str]] = {}
    for option, (module, name) in constants.items():
        found = module_source(module)
        tree = _tree(found[1]) if found is not None else None
        if found is None or tree is None:
            continue
        for statement in tree.body:
            if isinstance(statement, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name
                                                         for t in statement.targets):
                value = _literal(statement.value)
                if value is not None:  # the last assignment wins, as it does when imported
                    out[option] = Sourced(str(value.value), _location(found[0], value), f"{name} from {module}")
    return out


def _tree(source: str) -> ast.Module | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return None


def _location(path: str, value: ast.expr) -> Location:
    return Location(path, Range.of(value.lineno, value.col_offset, value.end_lineno or value.lineno,
                                   value.end_col_offset or value.col_offset))


def _field_defaults(path: str, source: str, wanted: set[str]) -> dict[str, Sourced[str]]:
    tree = _tree(source)
    if tree is None:
        return {}
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    out: dict[str, Sourced[str]] = {}
    todo = [name for name in wanted if name in classes and _is_dataclass(classes[name])]
    seen: set[str] = set()
    while todo:
        name = todo.pop(0)
        if name in seen:
            continue
        seen.add(name)
        node = classes[name]
        for statement in node.body:
            if not (isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)):
                continue
            value = _literal(statement.value)
            if value is not None and statement.target.id not in out:
                out[statement.target.id] = Sourced(str(value.value), _location(path, value),
                                                   f"default of {name}.{statement.target.id}")
        todo.extend(b.id for b in node.bases if isinstance(b, ast.Name) and b.id in classes)
    return out


def _is_dataclass(node: ast.ClassDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if (isinstance(target, ast.Name) and target.id == "dataclass") or (
                isinstance(target, ast.Attribute) and target.attr == "dataclass"):
            return True
    return False


def _literal(value: ast.expr | None) -> ast.Constant | None:
    """``4096`` or ``field(default=4096, metadata=...)``: the literal default, if any."""
    if isinstance(value, ast.Call) and getattr(value.func, "id", getattr(value.func, "attr", "")) == "field":
        value = next((k.value for k in value.keywords if k.arg == "default"), None)
    if isinstance(value, ast.Constant) and isinstance(value.value, _SCALARS):
        return value
    return None
