"""The keys of a tool's config class in one release, read from the release's wheel with ``ast``.

A schema is generated from one installed release; a project may pin another. To judge a key
against the release a project pins, memlint keeps, per tool, which sampled releases read each
key (and each value of an enum-typed key) and which of them marked it deprecated. This module
reads one wheel: it parses the package's files named by a ``Source`` (nothing is imported, so
any release works with any Python), finds the config class and its bases by name, and returns
their fields.

* A field is an annotated class attribute (dataclass or pydantic), minus ``ClassVar``,
  private names and ``field(init=False)``; a pydantic ``Field(alias=...)`` is read under its
  alias, as the tool reads the YAML.
* A field is deprecated when its help text starts with "deprecated" (Transformers' convention,
  the one ``schemas/_generators/dataclass_schema.py`` applies) or its ``Field`` says
  ``deprecated=`` / ``json_schema_extra={"deprecated": True}``.
* A field annotated with an enum defined in the same files (``optim: OptimizerNames | str``)
  takes the enum's string values.
* A field's annotation is kept as written (``scale_rewards: bool`` in TRL 0.18, ``str`` in 1.16):
  a value of the type the pinned release declares is no error there.
* A ``Source`` may also read keys that are not fields: the command-line options a section's keys
  become (``options``: Accelerate copies ``fsdp_config``'s keys onto ``accelerate launch``'s
  ``--fsdp_*`` options), and the old keys a loader converts (``legacy``: Accelerate's
  ``if "dynamo_backend" in config_dict:`` turns the old key into ``dynamo_config``; such a key
  is deprecated where it is not also a field).
"""

from __future__ import annotations

import ast
import re
import subprocess
import warnings
import zipfile
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Source:
    """Where one schema's class lives in a tool's wheel."""

    schema: str  # memlint schema name the history is for
    cls: str  # the config class
    files: tuple[str, ...]  # regexes of wheel paths to parse (bases are looked up among them)
    extra_classes: tuple[str, ...] = ()  # regexes of class names merged in (Axolotl's plugin args)
    extra_files: tuple[str, ...] = ()  # where those live
    options: str | None = None  # regex of ``add_argument("--name")`` names read as keys
    legacy: str | None = None  # name of the dict a loader tests for old keys (``"k" in config_dict``)


@dataclass
class Release:
    keys: set[str] = field(default_factory=set)
    deprecated: set[str] = field(default_factory=set)
    values: dict[str, set[str]] = field(default_factory=dict)
    types: dict[str, str] = field(default_factory=dict)  # key -> its annotation, as written


_ENUM_BASES = {"Enum", "ExplicitEnum", "StrEnum"}


@dataclass
class _Class:
    bases: tuple[str, ...]
    node: ast.ClassDef


class WheelFiles:
    """The package files of a release's wheel."""

    def __init__(self, wheel: Path) -> None:
        self.archive = zipfile.ZipFile(wheel)

    def names(self) -> list[str]:
        return self.archive.namelist()

    def read(self, name: str) -> bytes:
        return self.archive.read(name)


class GitFiles:
    """The package files of a release's tag in a git directory (``src/`` layout stripped, so
    the names are the wheel's)."""

    def __init__(self, git_dir: Path, tag: str) -> None:
        self.git_dir, self.tag = str(git_dir), tag
        listing = subprocess.run(["git", "--git-dir", self.git_dir, "ls-tree", "-r", "--name-only", tag],
                                 capture_output=True, text=True, check=True).stdout.split("\n")
        self._paths = {p.removeprefix("src/"): p for p in listing if p}

    def names(self) -> list[str]:
        return list(self._paths)

    def read(self, name: str) -> bytes:
        return subprocess.run(["git", "--git-dir", self.git_dir, "show", f"{self.tag}:{self._paths[name]}"],
                              capture_output=True, check=True).stdout


def read_release(files: WheelFiles | GitFiles, source: Source) -> Release:
    """The fields of ``source.cls`` (and its bases found in the parsed files) in one release."""
    classes: dict[str, list[_Class]] = {}
    options: set[str] = set()
    legacy: set[str] = set()  # old keys the loader converts to the new format
    names = [n for n in files.names() if n.endswith(".py")]
    wanted = [n for n in names if any(re.search(p, n) for p in source.files + source.extra_files)]
    for name in wanted:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(files.read(name))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = tuple(_last_name(b) for b in node.bases if _last_name(b))
                classes.setdefault(node.name, []).append(_Class(bases, node))
            elif source.options and isinstance(node, ast.Call) and _last_name(node.func) == "add_argument":
                named = [_constant(a) for a in node.args]
                for option in named:
                    if isinstance(option, str) and re.fullmatch(rf"--({source.options})", option):
                        options.add(option[2:])
            elif source.legacy and isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(
                    node.ops[0], ast.In) and _last_name(node.comparators[0]) == source.legacy:
                if isinstance(_constant(node.left), str):
                    legacy.add(_constant(node.left))
    enums = {name: _enum_values(found[0].node) for name, found in classes.items()
             if any(set(c.bases) & _ENUM_BASES for c in found)}
    release = Release(keys=set(options))
    roots = [source.cls] + sorted(n for n in classes if any(re.fullmatch(p, n) for p in source.extra_classes))
    todo, seen = list(roots), set()
    while todo:
        name = todo.pop()
        if name in seen or name in enums:
            continue
        seen.add(name)
        for found in classes.get(name, ()):
            _read_fields(found.node, enums, release)
            todo.extend(found.bases)
    # a converted key is read, in a format the release no longer writes: deprecated (unless it is
    # still a field of its own)
    release.deprecated |= legacy - release.keys
    release.keys |= legacy
    return release


def _read_fields(node: ast.ClassDef, enums: dict[str, list[str]], release: Release) -> None:
    for statement in node.body:
        if not (isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)):
            continue
        name = statement.target.id
        annotation = ast.unparse(statement.annotation)
        if name.startswith("_") or "ClassVar" in annotation or name == "model_config":
            continue
        call = statement.value if isinstance(statement.value, ast.Call) else None
        keywords = {k.arg: k.value for k in call.keywords if k.arg} if call is not None else {}
        if _constant(keywords.get("init")) is False:
            continue
        alias = _constant(keywords.get("alias")) or _constant(keywords.get("validation_alias"))
        key = alias if isinstance(alias, str) else name
        release.keys.add(key)
        release.types.setdefault(key, annotation)  # a subclass's own annotation first (its bases after)
        if _deprecated(keywords):
            release.deprecated.add(key)
        for enum in re.findall(r"\b\w+\b", annotation):
            if enum in enums:
                release.values.setdefault(key, set()).update(enums[enum])


def _deprecated(keywords: dict[str, ast.expr]) -> bool:
    if "deprecated" in keywords and _constant(keywords["deprecated"]) not in (None, False):
        return True
    extra = keywords.get("json_schema_extra")
    if isinstance(extra, ast.Dict):
        for k, v in zip(extra.keys, extra.values):
            if _constant(k) == "deprecated" and _constant(v) is True:
                return True
    metadata = keywords.get("metadata")
    if isinstance(metadata, ast.Dict):
        for k, v in zip(metadata.keys, metadata.values):
            if _constant(k) == "help":
                text = _text(v)
                if re.match(r"^\W*deprecated\b", text, flags=re.I):
                    return True
    return False


def _enum_values(node: ast.ClassDef) -> list[str]:
    values = []
    for statement in node.body:
        if isinstance(statement, ast.Assign) and isinstance(_constant(statement.value), str):
            values.append(_constant(statement.value))
    return values


def _constant(node: ast.expr | None):
    return node.value if isinstance(node, ast.Constant) else None


def _text(node: ast.expr) -> str:
    """The literal text of a help string (implicit concatenation, ``+``, f-string pieces)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp):
        return _text(node.left) + _text(node.right)
    if isinstance(node, ast.JoinedStr):
        return "".join(_text(v) for v in node.values if isinstance(v, ast.Constant))
    return ""


def _last_name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript):  # Generic[T]
        return _last_name(node.value)
    return ""
