"""Put DeepSpeed's ``"auto"`` placeholders into a schema, at the paths an integration fills.

``hf_auto`` reads those paths from the integrations' source; this module edits the schema: the
property at each path also accepts ``"auto"`` (with a description naming who fills it), and
nothing else does.
"""

from __future__ import annotations

import ast
import copy

from .common import ANNOTATION_KEYS
from .hf_auto import AutoFill
from .pydantic_schema import resolve


def allow_auto(schema: dict, description: str) -> dict:
    """Let a property also take the string ``"auto"``; annotations stay on the outside.

    Used where an integration (the HF Trainer, Accelerate) replaces ``"auto"`` before the tool
    reads the value.
    """
    annotations = {k: schema[k] for k in ANNOTATION_KEYS if k in schema}
    inner = {k: v for k, v in schema.items() if k not in ANNOTATION_KEYS}
    auto = {"const": "auto", "description": description}
    if inner.get("anyOf"):
        branches = [b for b in inner["anyOf"] if b.get("const") != "auto"] + [auto]
        inner = {**inner, "anyOf": branches}
        return {**annotations, **inner}
    return {**annotations, "anyOf": [inner, auto] if inner else [{}, auto]}


def allow_auto_at(properties: dict, defs: dict[str, dict], fills: list[AutoFill], hf_fields: dict) -> None:
    """Accept ``"auto"`` at each path in ``fills``, and nowhere else.

    Models on the way are copied in place (not edited in ``$defs``), so the same model used
    elsewhere keeps refusing ``"auto"``. ``hf_fields`` (TrainingArguments' field schemas) types
    leaves the tool leaves untyped, from the value the integration writes there.
    """
    by_path: dict[str, list[AutoFill]] = {}
    for fill in fills:
        by_path.setdefault(fill.path, []).append(fill)
    root = {"type": "object", "properties": properties, "additionalProperties": False}
    for path, by in by_path.items():
        parent, leaf = _walk(root, path.split("."), defs)
        schema = parent["properties"][leaf]
        if schema == {}:
            schema = _value_schema(next((f.value for f in by if f.value is not None), None), hf_fields)
        names = sorted({f.by for f in by})
        sources = "; ".join(dict.fromkeys(f"{f.by}: {f.source}" for f in by))
        schema = allow_auto(schema, f"Filled in by {' and '.join(names)} ({sources}).")
        schema["x-memlint-auto-filled-by"] = names
        parent["properties"][leaf] = schema


def _walk(root: dict, steps: list[str], defs: dict[str, dict]) -> tuple[dict, str]:
    """The object schema holding the last step of ``steps``; sections on the way are inlined."""
    node = root
    for step in steps[:-1]:
        props = node.setdefault("properties", {})
        if step not in props:
            if node.get("additionalProperties") is False:
                raise LookupError(f"DeepSpeed does not read {'.'.join(steps)}")
            props[step] = {"type": "object"}
        props[step] = _inline(props[step], defs)
        node = _object_branch(props[step])
    props = node.setdefault("properties", {})
    if steps[-1] not in props:
        if node.get("additionalProperties") is False:
            raise LookupError(f"DeepSpeed does not read {'.'.join(steps)}")
        props[steps[-1]] = {}
    props[steps[-1]] = _inline(props[steps[-1]], defs)
    return node, steps[-1]


def _inline(schema: dict, defs: dict[str, dict]) -> dict:
    """Replace ``$ref``s (also inside ``anyOf``) by copies of their definitions."""
    if "$ref" in schema:
        outer = {k: v for k, v in schema.items() if k != "$ref"}
        return {**copy.deepcopy(resolve(schema, defs)), **outer}
    if "anyOf" in schema:
        return {**schema, "anyOf": [_inline(branch, defs) for branch in schema["anyOf"]]}
    return schema


def _object_branch(schema: dict) -> dict:
    """The branch of a (possibly ``Optional``) schema that describes an object."""
    for branch in schema.get("anyOf", []):
        if branch.get("type") == "object" or "properties" in branch:
            return branch
    return schema


def _value_schema(value: ast.expr | None, hf_fields: dict[str, dict]) -> dict:
    """Type of the value the integration writes, for leaves DeepSpeed leaves untyped
    (``optimizer.params.lr`` is ``args.learning_rate``: a number)."""
    if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) and value.attr in hf_fields:
        field = hf_fields[value.attr]
        return {k: v for k, v in field.items() if k in ("type", "enum", "items")}
    if isinstance(value, ast.BoolOp):
        return _value_schema(value.values[0], hf_fields)
    if isinstance(value, ast.List) and value.elts:
        return {"type": "array", "items": _value_schema(value.elts[0], hf_fields)}
    if isinstance(value, ast.Constant) and isinstance(value.value, (int, float)):
        return {"type": "number"}
    return {}
