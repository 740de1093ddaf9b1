"""Pydantic models -> one draft 2020-12 schema with shared ``$defs``, fixed up for config files.

``model_json_schema()`` is the source of truth for DeepSpeed's and Axolotl's config models, but
what it emits describes the Python model, not every file the tool accepts. The fix-ups here
close that gap:

* values with no JSON form (``torch.dtype`` enum members, callables in ``json_schema_extra``)
  would make pydantic raise; they become member names or are dropped;
* a field can be set by its alias and, with ``populate_by_name``, by its name, or by any of its
  ``AliasChoices``: every accepted spelling becomes a property, and giving two spellings at once
  (which pydantic rejects) is an error;
* descriptions come from the attribute docstrings the tools write under each field;
* models that silently ignore unknown keys are closed (``additionalProperties: false``) when
  asked, because the ignored key is exactly the mistake memlint reports.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Iterable
from typing import Any

import pydantic
from pydantic import AliasChoices, AliasPath
from pydantic.json_schema import GenerateJsonSchema, models_json_schema
from pydantic_core import PydanticSerializationError

from .common import json_default
from .python_types import enum_values


def _json_only(extra: dict) -> dict:
    """``json_schema_extra`` without the entries that have no JSON form (e.g. converter lambdas)."""
    out = {}
    for key, value in extra.items():
        ok, json_value = json_default(value)
        if ok:
            out[key] = json_value
    return out


class ConfigSchemaGenerator(GenerateJsonSchema):
    """``GenerateJsonSchema`` that never gives up on a value a config file cannot hold."""

    def generate_inner(self, schema):  # type: ignore[override]
        metadata = schema.get("metadata") if isinstance(schema, dict) else None
        extra = metadata.get("pydantic_js_extra") if isinstance(metadata, dict) else None
        if isinstance(extra, dict) and _json_only(extra) != extra:
            schema = {**schema, "metadata": {**metadata, "pydantic_js_extra": _json_only(extra)}}
        return super().generate_inner(schema)

    def enum_schema(self, schema):  # type: ignore[override]
        try:
            return super().enum_schema(schema)
        except PydanticSerializationError:
            cls = schema["cls"]
            return {"enum": enum_values(cls), "title": cls.__name__}

    def is_instance_schema(self, schema):  # type: ignore[override]
        cls = schema["cls"]
        return {"x-memlint-python-type": f"{cls.__module__}.{cls.__qualname__}"}

    def handle_invalid_for_json_schema(self, schema, error_info):  # type: ignore[override]
        return {"x-memlint-python-type": error_info}


def attribute_docstrings(cls: type) -> dict[str, str]:
    """Docstrings written under class attributes (``x: int = 0`` then ``\"\"\"doc\"\"\"``), MRO-wide."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass in (object, pydantic.BaseModel) or not issubclass(klass, pydantic.BaseModel):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for stmt, following in zip(body, body[1:], strict=False):
            target = stmt.target if isinstance(stmt, ast.AnnAssign) else None
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target = stmt.targets[0]
            if (
                isinstance(target, ast.Name)
                and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                docs[target.id] = inspect.cleandoc(following.value.value)
    return docs


def input_names(name: str, info: pydantic.fields.FieldInfo, by_name: bool) -> list[str]:
    """Every key a config file may use for this field; the first is the one the schema shows."""
    names: list[str] = []
    alias = info.validation_alias if info.validation_alias is not None else info.alias
    if isinstance(alias, str):
        names.append(alias)
    elif isinstance(alias, AliasChoices):
        names += [c for c in alias.choices if isinstance(c, str)]
    elif isinstance(alias, AliasPath):
        pass
    if not names or by_name:
        names.append(name)
    return list(dict.fromkeys(names))


def _by_name(model: type[pydantic.BaseModel]) -> bool:
    config = model.model_config
    return bool(config.get("populate_by_name") or config.get("validate_by_name"))


def _add_spellings(definition: dict, model: type[pydantic.BaseModel]) -> None:
    """Add the other accepted spellings of each field, and forbid giving two of them."""
    properties = definition.get("properties", {})
    exclusive = []
    for name, info in model.model_fields.items():
        names = input_names(name, info, _by_name(model))
        shown = next((n for n in names if n in properties), None)
        if shown is None:
            continue
        for other in names:
            if other != shown and other not in properties:
                copy = dict(properties[shown])
                copy["description"] = f"Same as `{shown}`." + (
                    f" {copy['description']}" if copy.get("description") else ""
                )
                copy.pop("title", None)
                properties[other] = copy
        pairs = [[a, b] for i, a in enumerate(names) for b in names[i + 1 :]]
        if len(pairs) == 1:
            exclusive.append({"not": {"required": pairs[0]}})
        elif pairs:
            exclusive.append({"not": {"anyOf": [{"required": pair} for pair in pairs]}})
    if exclusive:
        definition.setdefault("allOf", []).extend(
            {**rule, "description": "Give only one spelling of a field."} for rule in exclusive
        )


def _add_docstrings(definition: dict, model: type[pydantic.BaseModel]) -> None:
    docs = attribute_docstrings(model)
    properties = definition.get("properties", {})
    for name, info in model.model_fields.items():
        doc = docs.get(name)
        if not doc:
            continue
        for key in input_names(name, info, _by_name(model)):
            if key in properties and not properties[key].get("description"):
                properties[key]["description"] = doc


def _models_in(models: Iterable[type[pydantic.BaseModel]]) -> dict[str, type[pydantic.BaseModel]]:
    """Every model reachable from ``models`` (field annotations included), by class name."""
    found: dict[str, type[pydantic.BaseModel]] = {}
    stack = list(models)
    while stack:
        model = stack.pop()
        if model.__name__ in found:
            continue
        found[model.__name__] = model
        for info in model.model_fields.values():
            stack.extend(_model_types(info.annotation))
    return found


def _model_types(annotation: Any) -> list[type[pydantic.BaseModel]]:
    import typing

    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _model_types(arg)]


def models_schema(
    models: list[type[pydantic.BaseModel]], *, close: bool = False
) -> tuple[dict[type, dict], dict[str, dict]]:
    """``({model: {"$ref": ...}}, $defs)`` for ``models`` and every model they use.

    With ``close``, models that would ignore unknown keys get ``additionalProperties: false``
    (models with ``extra="allow"`` stay open).
    """
    refs, top = models_json_schema(
        [(m, "validation") for m in models],
        by_alias=True,
        ref_template="#/$defs/{model}",
        schema_generator=ConfigSchemaGenerator,
    )
    defs: dict[str, dict] = top.get("$defs", {})
    by_name = _models_in(models)
    for definition in defs.values():
        model = by_name.get(definition.get("title", ""))
        if model is None or "properties" not in definition:
            continue
        _add_docstrings(definition, model)
        _add_spellings(definition, model)
        if close and model.model_config.get("extra") != "allow":
            definition.setdefault("additionalProperties", False)
    return {m: refs[(m, "validation")] for m in models}, defs


def resolve(schema: dict, defs: dict[str, dict]) -> dict:
    """Follow a local ``$ref`` (one level) into ``defs``."""
    ref = schema.get("$ref")
    if ref and ref.startswith("#/$defs/"):
        return defs[ref[len("#/$defs/") :]]
    return schema
