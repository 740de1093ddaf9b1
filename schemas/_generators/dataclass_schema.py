"""A dataclass -> a closed JSON object schema.

``HfArgumentParser.parse_dict``/``parse_yaml_file`` (Transformers, TRL, LLaMA-Factory) and
Accelerate's config loader build the dataclass from the file's keys and raise on keys that are
not fields, so unknown keys are errors here too (``additionalProperties: false``).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
import textwrap
import typing

from .common import ANNOTATION_KEYS
from .python_types import field_default, has_default, schema_for

_JSON_TYPE = {
    "str": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "dict": "object",
    "list": "array",
}

_ALIAS_OF = re.compile(r"alias (?:of|for) `([A-Za-z0-9_]+)`")


def field_schema(f: dataclasses.Field, annotation: typing.Any) -> dict:
    """Schema for one field: the annotation's type, ``metadata["choices"]``, help text, default.

    A help text that starts with "Deprecated" marks the field deprecated (that is how
    Transformers documents its deprecated aliases); "alias of `new`" names the replacement.
    """
    schema = schema_for(annotation)
    choices = f.metadata.get("choices") if f.metadata else None
    if choices:
        values = [c.value if hasattr(c, "value") else c for c in choices]
        if schema.get("type") == "null" or None in schema.get("enum", []) or "null" in schema.get("type", []):
            values = values + [None]
        schema = {"enum": values}
    help_text = (f.metadata or {}).get("help")
    if help_text:
        schema["description"] = " ".join(str(help_text).split())
        if schema["description"].lower().startswith("deprecated"):
            schema["deprecated"] = True
            match = _ALIAS_OF.search(schema["description"])
            if match:
                schema["x-memlint-replaced-by"] = match.group(1)
    ok, default = field_default(f)
    if ok:
        schema["default"] = default
    return schema


def dataclass_properties(cls: type) -> tuple[dict[str, dict], list[str]]:
    """``(properties, required)`` for every ``init`` field of ``cls``, in declaration order."""
    hints = typing.get_type_hints(cls)
    widened = post_init_types(cls)
    properties: dict[str, dict] = {}
    required: list[str] = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        properties[f.name] = widen(field_schema(f, hints.get(f.name, typing.Any)), widened.get(f.name, []))
        if not has_default(f):
            required.append(f.name)
    return properties, required


def post_init_types(cls: type) -> dict[str, list[str]]:
    """JSON types the class's own code accepts beyond the annotation.

    Annotations sometimes lag the code: TRL's ``loss_type: list[str]`` also takes one string
    (``if isinstance(self.loss_type, str): self.loss_type = [self.loss_type]``), and
    Transformers' ``fsdp: str | None`` is set to ``True`` once resolved (and ``fsdp=True`` is what
    its help recommends). ``isinstance(self.x, T)`` tests and ``self.x = <literal>`` assignments
    in the methods of every dataclass in the MRO widen the field, so the schema never rejects a
    value the tool converts.
    """
    found: dict[str, list[str]] = {}
    for klass in cls.__mro__:
        if klass is object or not dataclasses.is_dataclass(klass):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        for node in ast.walk(tree):
            for name, type_name in _isinstance_tests(node) + _literal_assignments(node):
                if type_name in _JSON_TYPE and _JSON_TYPE[type_name] not in found.setdefault(name, []):
                    found[name].append(_JSON_TYPE[type_name])
    return found


def _self_attribute(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def _isinstance_tests(node: ast.AST) -> list[tuple[str, str]]:
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "isinstance"):
        return []
    if len(node.args) != 2 or _self_attribute(node.args[0]) is None:
        return []
    kinds = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
    return [(_self_attribute(node.args[0]), k.id) for k in kinds if isinstance(k, ast.Name)]


def _literal_assignments(node: ast.AST) -> list[tuple[str, str]]:
    if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Constant) or node.value.value is None:
        return []
    return [(_self_attribute(t), type(node.value.value).__name__) for t in node.targets if _self_attribute(t)]


def widen(schema: dict, json_types: list[str]) -> dict:
    """Let ``schema`` also accept ``json_types`` (annotations stay on the outside)."""
    inner = {k: v for k, v in schema.items() if k not in ANNOTATION_KEYS and not k.startswith("x-")}
    accepted = _types(inner) + [t for branch in inner.get("anyOf", []) for t in _types(branch)]
    missing = [t for t in json_types if t not in accepted and not (t == "integer" and "number" in accepted)]
    if not missing or inner == {}:
        return schema
    if set(inner) == {"type"}:
        merged = _types(inner) + missing
        return {**schema, "type": merged[0] if len(merged) == 1 else merged}
    extra = {"type": missing[0] if len(missing) == 1 else missing}
    outer = {k: v for k, v in schema.items() if k not in inner}
    if set(inner) == {"anyOf"}:
        return {**outer, "anyOf": inner["anyOf"] + [extra]}
    return {**outer, "anyOf": [inner, extra]}


def _types(schema: dict) -> list[str]:
    """JSON types ``schema`` accepts at least one value of (an enum of strings counts as "string":
    ``isinstance(self.x, str)`` before ``SomeEnum(self.x)`` is the enum's own spelling)."""
    kind = schema.get("type", [])
    kinds = list(kind) if isinstance(kind, list) else [kind]
    names = {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null"}
    for value in schema.get("enum", []):
        if names.get(type(value)) and names[type(value)] not in kinds:
            kinds.append(names[type(value)])
    return kinds


def object_schema(properties: dict[str, dict], required: list[str] | tuple = ()) -> dict:
    schema: dict = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = list(required)
    return schema


def dataclass_schema(*classes: type) -> dict:
    """One closed object schema for the union of several dataclasses' fields.

    Used for tools that fill several dataclasses from one file (LLaMA-Factory's YAML). A field
    defined twice keeps its first definition, as ``HfArgumentParser`` would have refused the
    duplicate anyway.
    """
    properties: dict[str, dict] = {}
    required: list[str] = []
    for cls in classes:
        props, req = dataclass_properties(cls)
        for name, schema in props.items():
            properties.setdefault(name, schema)
        required += [r for r in req if r not in required]
    return object_schema(properties, required)
