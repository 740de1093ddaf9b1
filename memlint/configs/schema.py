"""The committed JSON Schemas: where they are, and what they say about a key.

The schemas in ``schemas/`` are generated from each tool's own source (see its README); they
ship in the wheel as ``memlint/_schemas/``. Each is loaded (and its validator built) once.
Besides validation (``memlint.configs.validation``), memlint reads from them the things a tool
decides for keys a config leaves out: defaults, deprecations and their replacements, the
plugin a key belongs to, the top-level keys that tell one tool's config from another's.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema

from memlint.documents.structured import Path_

# document kind -> schema name (hf-args picks one of HF_VARIANTS by its keys)
SCHEMA_OF_KIND = {
    "deepspeed": "deepspeed",
    "accelerate": "accelerate",
    "axolotl": "axolotl",
    "llamafactory": "llamafactory",
    "torchtune": "torchtune",
    "composer": "composer",  # llm-foundry's TrainConfig
    "lightning-cli": "lightning-cli",  # LightningCLI's parser: Trainer arguments, model, data
    "neox": "deepspeed",  # a GPT-NeoX argument file: its DeepSpeed sections
}
HF_VARIANTS = ("hf-training-arguments", "trl-sft-config", "trl-dpo-config", "trl-grpo-config")
VALIDATED_KINDS = frozenset({*SCHEMA_OF_KIND, "hf-args"})  # the config kinds checked against a schema

TOOL = {
    "deepspeed": "DeepSpeed",
    "accelerate": "Accelerate",
    "axolotl": "Axolotl",
    "llamafactory": "LLaMA-Factory",
    "hf-training-arguments": "TrainingArguments/TRL",
    "trl-sft-config": "TRL SFTConfig",
    "trl-dpo-config": "TRL DPOConfig",
    "trl-grpo-config": "TRL GRPOConfig",
    "torchtune": "torchtune",
    "composer": "llm-foundry",
    "lightning-cli": "LightningCLI",
}

MISSING = object()  # "the schema states no default"


class SchemaUnavailable(Exception):
    """The schema files are not where the package expects them (a broken install)."""


# ---------------------------------------------------------------------------- loading


def schemas_dir() -> Path:
    """``memlint/_schemas`` in an installed wheel, ``schemas/`` beside the package in a checkout."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "_schemas", package.parent / "schemas"):
        if (candidate / "deepspeed.schema.json").is_file():
            return candidate
    raise SchemaUnavailable(f"memlint's JSON Schemas are missing (looked in {package / '_schemas'})")


@functools.lru_cache(maxsize=None)
def load_schema(name: str) -> dict[str, Any]:
    return json.loads((schemas_dir() / f"{name}.schema.json").read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=None)
def validator(name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(load_schema(name))


def resolve_ref(root: dict, node: dict) -> dict:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        return target if isinstance(target, dict) else {}
    return {}


def candidates(root: dict, node: Any) -> list[dict]:
    """``node`` and every subschema that applies alongside or instead of it ($ref, allOf,
    anyOf/oneOf branches, if/then/else), flattened."""
    out: list[dict] = []
    stack = [node]
    seen: set[int] = set()
    while stack:
        current = stack.pop()
        if not isinstance(current, dict) or id(current) in seen:
            continue
        seen.add(id(current))
        out.append(current)
        if "$ref" in current:
            stack.append(resolve_ref(root, current))
        for keyword in ("allOf", "anyOf", "oneOf"):
            stack.extend(reversed(current.get(keyword, [])))
        for keyword in ("then", "else"):
            if keyword in current:
                stack.append(current[keyword])
    return out


def property_schema(root: dict, node: Any, key: str) -> dict | None:
    """The subschema of property ``key`` of an object schema ``node``."""
    for candidate in candidates(root, node):
        properties = candidate.get("properties")
        if isinstance(properties, dict) and key in properties:
            return properties[key]
    return None


def items_schema(root: dict, node: Any) -> dict | None:
    """The schema of the items of an array schema ``node``."""
    return next((c["items"] for c in candidates(root, node) if isinstance(c.get("items"), dict)), None)


def known_keys(root: dict, node: Any) -> set[str]:
    keys: set[str] = set()
    for candidate in candidates(root, node):
        properties = candidate.get("properties")
        if isinstance(properties, dict):
            keys.update(properties)
    return keys


def schema_at(name: str, path: Path_) -> dict | None:
    """The subschema that describes the value at ``path`` (None when the schema says nothing)."""
    root = load_schema(name)
    node: Any = root
    for part in path:
        if isinstance(part, int):
            node = items_schema(root, node)
        else:
            node = property_schema(root, node, part)
        if node is None:
            return None
    return node


def default(name: str, *path: str) -> Any:
    """The tool's default for a key, as its schema states it (``MISSING`` when none)."""
    node = schema_at(name, path)
    if node is None:
        return MISSING
    for candidate in candidates(load_schema(name), node):
        if "default" in candidate:
            return candidate["default"]
    return MISSING


@functools.lru_cache(maxsize=None)
def top_level_keys(name: str) -> frozenset[str]:
    root = load_schema(name)
    return frozenset(known_keys(root, root))


def schema_name_for(kind: str, value: Any) -> str | None:
    """Which schema a document of ``kind`` is validated against. TrainingArguments-style files
    take the variant (Transformers, TRL SFT, TRL DPO) that knows most of their keys."""
    if kind in SCHEMA_OF_KIND:
        return SCHEMA_OF_KIND[kind]
    if kind != "hf-args":
        return None
    keys = set(value) if isinstance(value, dict) else set()
    return min(HF_VARIANTS, key=lambda n: (len(keys - top_level_keys(n)), HF_VARIANTS.index(n)))


def plugin_listed(plugin: str, plugins: Any) -> bool:
    if not isinstance(plugins, list):
        return False
    module, _, cls = plugin.rpartition(".")
    for listed in plugins:
        name = str(listed).replace(":", ".")
        if name == plugin or (name.rsplit(".", 1)[-1] == cls and name.startswith(module)):
            return True
    return False
