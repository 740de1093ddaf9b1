"""The fields of the argument classes a project parses its configs with.

A project often extends the upstream schema: alignment-handbook's ``src/alignment/configs.py``
subclasses TRL's ``SFTConfig`` (adding ``chat_template``), and its scripts parse
``TrlParser((ScriptArguments, SFTConfig, ModelConfig))``; run_clm-style scripts parse
``HfArgumentParser((ModelArguments, DataTrainingArguments, TrainingArguments))``. A YAML or
JSON config given to such a parser may hold any field of those classes. This module finds the
classes passed to an ``HfArgumentParser`` / ``TrlParser`` anywhere in the project, follows
their bases defined in the project, and returns their field names (annotated class
attributes) — the keys the project itself defines, which are not unknown keys.

Files are parsed, never imported; only files that name a parser or a dataclass are parsed,
and each file's answer is kept while its size and modification time stay the same.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import libcst as cst

from memlint import reads

_PARSERS = re.compile(r"\b(?:HfArgumentParser|TrlParser)\b")
_DATACLASS = re.compile(r"@(?:dataclasses\.)?dataclass\b")  # HfArgumentParser takes dataclasses only
MAX_BYTES = 2 * 1024 * 1024
_SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "__pycache__", ".tox", ".memlint_cache", "site-packages"}

# path -> ((mtime_ns, size), (parser class names, {class name: (bases, fields)}))
_FILES: dict[str, tuple[tuple[int, int], tuple[frozenset[str], dict[str, tuple[tuple[str, ...], tuple[str, ...]]]]]] = {}


def project_argument_fields(root: Path) -> frozenset[str]:
    """Field names of the classes the project's code passes to an argument parser (and of
    their bases defined in the project); empty when there are none."""
    parsed: set[str] = set()
    classes: dict[str, list[tuple[tuple[str, ...], tuple[str, ...]]]] = {}
    for path in _python_files(root):
        found = _read(path)
        if found is None:
            continue
        names, defined = found
        parsed |= names
        for name, shape in defined.items():
            classes.setdefault(name, []).append(shape)
    fields: set[str] = set()
    todo, seen = list(parsed), set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for bases, own in classes.get(name, ()):
            fields.update(own)
            todo.extend(bases)
    return frozenset(fields)


def _python_files(root: Path):
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = [d for d in subdirs if d not in _SKIP_DIRS and not d.startswith(".")]
        for name in files:
            if name.endswith(".py"):
                yield os.path.join(directory, name)


def _read(path: str):
    try:
        info = os.stat(path)
    except OSError:
        return None
    stamp = (info.st_mtime_ns, info.st_size)
    kept = _FILES.get(path)
    if kept is not None and kept[0] == stamp:
        return kept[1]
    result = None
    if info.st_size <= MAX_BYTES:
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        if _PARSERS.search(text) or _DATACLASS.search(text):
            result = _scan(text)
            reads.document(path, reads.digest(text, None))
    _FILES[path] = (stamp, result)
    return result


def _scan(text: str):
    try:
        module = cst.parse_module(text)
    except Exception:  # a file that does not parse defines nothing we can read
        return None
    names: set[str] = set()
    classes: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}

    class Visitor(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            callee = node.func.attr.value if isinstance(node.func, cst.Attribute) else (
                node.func.value if isinstance(node.func, cst.Name) else "")
            if callee not in ("HfArgumentParser", "TrlParser") or not node.args:
                return
            first = node.args[0].value
            items = [e.value for e in first.elements] if isinstance(first, (cst.Tuple, cst.List)) else [first]
            for item in items:
                name = _last_name(item)
                if name:
                    names.add(name)

        def visit_ClassDef(self, node: cst.ClassDef) -> None:
            bases = tuple(n for n in (_last_name(b.value) for b in node.bases) if n)
            own = []
            for statement in node.body.body:
                if isinstance(statement, cst.SimpleStatementLine):
                    for small in statement.body:
                        if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                            own.append(small.target.value)
            classes[node.name.value] = (bases, tuple(own))

    module.visit(Visitor())
    if not names and not classes:
        return None
    return frozenset(names), classes


def _last_name(expr: cst.BaseExpression) -> str | None:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    return None
