"""What every generated schema shares: the envelope, the byte-stable dump and the version stamp.

Kept apart from the per-tool generators so that ``--check`` and the tests compare files that
were all written the same way.
"""

from __future__ import annotations

import importlib.util
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from importlib import metadata
from pathlib import Path
from typing import Any

DRAFT = "https://json-schema.org/draft/2020-12/schema"
ID_BASE = "https://memlint.dev/schemas/"
GENERATOR = "schemas/generate.py"
SCHEMAS_DIR = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Target:
    """One tool whose schemas are generated from its installed package.

    ``modules`` are the import names that must be importable; ``build`` returns
    ``{file name: schema}`` and is only called when they all are.
    """

    name: str
    package: str
    outputs: tuple[str, ...]
    modules: tuple[str, ...]
    build: Callable[[], dict[str, dict]]
    aliases: tuple[str, ...] = field(default=())


def version_of(distribution: str) -> str:
    """Installed version of a distribution, as its metadata says ("not installed" if absent)."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def envelope(
    file_name: str,
    title: str,
    package: str,
    body: dict,
    *,
    description: str | None = None,
    also: tuple[str, ...] = (),
) -> dict:
    """Wrap a schema body with the header every memlint schema carries.

    ``also`` names other distributions the schema was derived from (their versions are
    recorded too, so that a change in any of them shows up in ``--check``).
    """
    schema = _dedupe_enums(dict(body))
    schema["$schema"] = DRAFT
    schema["$id"] = ID_BASE + file_name
    schema["title"] = title
    if description:
        schema["description"] = description
    stamp: dict[str, Any] = {"package": package, "version": version_of(package), "by": GENERATOR}
    if also:
        stamp["also"] = [{"package": name, "version": version_of(name)} for name in also]
    schema["x-memlint-generated-from"] = stamp
    return schema


def _dedupe_enums(node: Any) -> Any:
    """Enum members that are aliases (``max_stage = 3`` beside ``weights = 3``) appear once."""
    if isinstance(node, dict):
        out = {k: _dedupe_enums(v) for k, v in node.items()}
        if isinstance(out.get("enum"), list):
            unique: list = []
            for value in out["enum"]:
                if not any(value == u and type(value) is type(u) for u in unique):
                    unique.append(value)
            out["enum"] = unique
        return out
    if isinstance(node, list):
        return [_dedupe_enums(item) for item in node]
    return node


def prune_unused_defs(schema: dict) -> dict:
    """Drop ``$defs`` entries nothing refers to (any more), following references transitively."""
    defs = schema.get("$defs", {})
    reachable: set[str] = set()
    stack = [{k: v for k, v in schema.items() if k != "$defs"}]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/"):
                name = ref[len("#/$defs/") :]
                if name not in reachable and name in defs:
                    reachable.add(name)
                    stack.append(defs[name])
            stack.extend(v for k, v in node.items() if k != "$ref")
        elif isinstance(node, list):
            stack.extend(node)
    return {**schema, "$defs": {k: v for k, v in defs.items() if k in reachable}}


def dumps(schema: dict) -> str:
    """The one serialisation used for every file: sorted keys, two-space indent, final newline."""
    return json.dumps(to_json_value(schema), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


class NotJson(Exception):
    """A Python value has no JSON spelling (a callable, a torch dtype, ...)."""


def to_json_value(value: Any) -> Any:
    """Convert a Python default to JSON, or raise ``NotJson``.

    Enums become their value (the spelling a config file uses), tuples become lists,
    paths become strings. Non-finite floats have no JSON spelling.
    """
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, Enum):
        return to_json_value(value.value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise NotJson(repr(value))
        return float(value)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [to_json_value(item) for item in value]
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise NotJson(repr(key))
            out[key] = to_json_value(item)
        return out
    raise NotJson(repr(value))


def json_default(value: Any) -> tuple[bool, Any]:
    """``(True, json value)`` when ``value`` can be written as a JSON default, else ``(False, None)``."""
    try:
        return True, to_json_value(value)
    except NotJson:
        return False, None


ANNOTATION_KEYS = ("title", "description", "default", "deprecated", "examples")


def package_file(package: str, relative: str) -> Path:
    """A source file of an installed package, found without importing the package."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(package)
    return Path(list(spec.submodule_search_locations)[0]) / relative
