"""Axolotl's YAML config as a schema, from its pydantic models.

Axolotl validates a config with ``AxolotlInputConfig`` (``axolotl.utils.schemas.config``) plus
the argument models of the plugins the config loads (``merge_input_args`` adds them as base
classes). Pydantic's default ``extra="ignore"`` makes Axolotl drop unknown keys silently
(``sequence_length`` for ``sequence_len``), so every model is closed here.

Plugin argument models are found the way Axolotl names them: each plugin's ``get_input_args()``
returns the dotted path of its model; those return statements are read with ``ast`` so that no
plugin (and none of its heavy dependencies) is imported, only its arguments module.
"""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

from .common import envelope, package_file
from .pydantic_schema import models_schema

FILE = "axolotl.schema.json"


def build() -> dict[str, dict]:
    import pydantic
    from axolotl.utils.schemas.config import AxolotlInputConfig

    plugins = plugin_argument_models()
    bases = (AxolotlInputConfig, *[model for _, model in plugins])
    combined = pydantic.create_model("AxolotlInputConfig", __base__=bases, __module__=AxolotlInputConfig.__module__)
    # Each of Axolotl's ~200 model validators wraps the core schema once more; walking that chain
    # needs a deeper stack than Python's default 1000 frames.
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20_000))
    try:
        refs, defs = models_schema([combined], close=True)
    finally:
        sys.setrecursionlimit(limit)
    root = _pop_root(refs[combined], defs)
    for plugin, model in plugins:
        for name in model.model_fields:
            prop = root["properties"].get(name)
            if prop is not None and name not in AxolotlInputConfig.model_fields:
                prop["x-memlint-plugin"] = plugin
    root["$defs"] = defs
    return {
        FILE: envelope(
            FILE,
            "Axolotl config",
            "axolotl",
            root,
            description=(
                "Axolotl training YAML (AxolotlInputConfig plus every bundled plugin's arguments; a plugin's keys "
                "only take effect when the plugin is listed under `plugins`). Unknown keys are errors: Axolotl "
                "ignores them silently."
            ),
            also=("pydantic",),
        )
    }


def _pop_root(ref: dict, defs: dict[str, dict]) -> dict:
    name = ref["$ref"].rsplit("/", 1)[-1]
    return defs.pop(name)


def plugin_argument_models() -> list[tuple[str, type]]:
    """``[(plugin name as written under plugins:, argument model)]`` for the bundled plugins."""
    root = package_file("axolotl", "integrations")
    found = []
    for path in sorted(root.rglob("*.py")):
        for plugin_class, target in _input_args_targets(path):
            module_name, _, class_name = target.rpartition(".")
            try:
                model = getattr(importlib.import_module(module_name), class_name)
            except Exception:  # noqa: BLE001 - a plugin whose arguments need a missing package
                continue
            package = ".".join(path.relative_to(root.parent.parent).with_suffix("").parts[:3])
            found.append((f"{package}.{plugin_class}", model))
    return sorted(found, key=lambda pair: pair[0])


def _input_args_targets(path: Path) -> list[tuple[str, str]]:
    """``(plugin class, "module.Model")`` for each ``get_input_args`` returning a constant."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for fn in (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "get_input_args"):
            for ret in (n for n in ast.walk(fn) if isinstance(n, ast.Return)):
                if isinstance(ret.value, ast.Constant) and isinstance(ret.value.value, str):
                    out.append((cls.name, ret.value.value))
    return out
