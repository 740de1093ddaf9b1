"""Python type annotations -> JSON Schema, for the dataclass-based configs.

Transformers, TRL, LLaMA-Factory and Accelerate describe their config files with plain
dataclasses, so the field annotations are the source of truth for value types. Only the shapes
those packages actually use are handled; anything else becomes ``{}`` (accept anything) with an
``x-memlint-python-type`` note, so the schema never rejects a value the tool would accept.
"""

from __future__ import annotations

import dataclasses
import enum
import pathlib
import types
import typing
from typing import Any

from .common import json_default

_SIMPLE = {bool: "boolean", int: "integer", float: "number", str: "string"}
NoneType = type(None)


def enum_values(cls: type[enum.Enum]) -> list:
    """The spellings a config file uses for an enum member: its value, or its name when the value
    has no JSON form (e.g. a ``torch.dtype``)."""
    values = []
    for member in cls:
        ok, value = json_default(member.value)
        value = value if ok and not isinstance(value, (list, dict)) else member.name
        if value not in values:
            values.append(value)
    return values


def is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType)


def schema_for(tp: Any) -> dict:
    """JSON Schema for one annotation (already resolved with ``typing.get_type_hints``)."""
    if tp is Any or tp is object:
        return {}
    if tp is NoneType or tp is None:
        return {"type": "null"}
    if tp in _SIMPLE:
        return {"type": _SIMPLE[tp]}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return {"enum": enum_values(tp)}
    if isinstance(tp, type) and issubclass(tp, pathlib.PurePath):
        return {"type": "string"}
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Literal:
        return _literal(args)
    if origin is typing.Annotated:
        return schema_for(args[0])
    if is_union(tp):
        return _union(args)
    if origin in (list, tuple, set, frozenset, typing.Sequence) or tp in (list, tuple, set):
        item_types = [a for a in args if a is not Ellipsis]
        if origin is tuple and len(item_types) > 1 and Ellipsis not in args:
            return {"type": "array", "prefixItems": [schema_for(a) for a in item_types]}
        return {"type": "array", "items": schema_for(item_types[0])} if item_types else {"type": "array"}
    if origin in (dict, typing.Mapping) or tp is dict:
        if len(args) == 2 and args[1] is not Any:
            return {"type": "object", "additionalProperties": schema_for(args[1])}
        return {"type": "object"}
    return {"x-memlint-python-type": _qualname(tp)}


def _qualname(tp: Any) -> str:
    if isinstance(tp, type):
        return f"{tp.__module__}.{tp.__qualname__}"
    return repr(tp)


def _literal(values: tuple) -> dict:
    out = []
    for value in values:
        ok, json_value = json_default(value)
        out.append(json_value if ok else repr(value))
    return {"enum": out}


def _union(members: tuple) -> dict:
    """``Optional``/``Union``/``X | Y``.

    A union of an enum and ``str`` is how Hugging Face dataclasses spell "one of these names":
    ``__post_init__`` converts the string with ``SomeEnum(value)`` and raises on anything else,
    so it becomes the enum (plus ``null`` when optional).
    """
    enums = [m for m in members if isinstance(m, type) and issubclass(m, enum.Enum)]
    if enums and str in members:
        members = tuple(m for m in members if m is not str)
    branches: list[dict] = []
    for member in members:
        branch = schema_for(member)
        if branch not in branches:
            branches.append(branch)
    return merge_branches(branches)


def merge_branches(branches: list[dict]) -> dict:
    """Collapse ``anyOf`` branches that differ only by ``type``/``enum`` into one schema."""
    if any(b == {} or "x-memlint-python-type" in b for b in branches):
        notes = [b["x-memlint-python-type"] for b in branches if "x-memlint-python-type" in b]
        return {"x-memlint-python-type": " | ".join(notes)} if notes else {}
    if all(set(b) == {"type"} for b in branches):
        names = []
        for b in branches:
            for name in b["type"] if isinstance(b["type"], list) else [b["type"]]:
                if name not in names:
                    names.append(name)
        return {"type": names[0] if len(names) == 1 else names}
    enum_branches = [b for b in branches if set(b) == {"enum"}]
    if enum_branches and all(set(b) == {"enum"} or b == {"type": "null"} for b in branches):
        values: list = []
        for b in enum_branches:
            values += [v for v in b["enum"] if v not in values]
        if {"type": "null"} in branches and None not in values:
            values.append(None)
        return {"enum": values}
    return {"anyOf": branches}


def field_default(f: dataclasses.Field) -> tuple[bool, Any]:
    """``(True, value)`` for a field whose default can be written in JSON."""
    if f.default is not dataclasses.MISSING:
        return json_default(f.default)
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return json_default(f.default_factory())  # type: ignore[misc]
    return False, None


def has_default(f: dataclasses.Field) -> bool:
    return f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING  # type: ignore[misc]
