"""torchtune recipe configs (``tune run <recipe> --config <file>.yaml``) as a schema.

torchtune has no config dataclass: each recipe reads the keys it needs from the OmegaConf
``DictConfig`` it is given (``cfg.batch_size``, ``cfg.get("compile", False)``) and builds the
blocks it hands to ``config.instantiate`` (``cfg.model``, ``cfg.optimizer``) from their
``_component_`` path and keyword arguments. The sources of truth, read with ``ast`` (nothing of
torchtune is imported: it needs torch and torchao):

* every recipe the wheel ships (``recipes/*.py``, ``recipes/dev/*.py``): the top-level keys
  read from ``cfg``, with the default of each ``cfg.get(key, default)``; a key some recipe
  passes to ``config.instantiate`` (directly or as the ``cfg_*`` argument of a ``_setup_*``
  method) is a component block, whose keys are the builder's arguments (left open);
* ``torchtune/training/precision.py``: ``PRECISION_STR_TO_DTYPE`` gives the ``dtype`` values.

A key no recipe reads is silently ignored by torchtune, so it is unknown here.
"""

from __future__ import annotations

import ast
from pathlib import Path

from .common import envelope, package_file

FILE = "torchtune.schema.json"
COMPONENT = "_component_"
_CONFIG_NAMES = {"cfg"}  # the DictConfig parameter every recipe method takes
_METHODS = {"get", "pop", "setdefault"}
_TYPES = (bool, int, float, str)


def build() -> dict[str, dict]:
    recipes = package_file("recipes", "")
    files = sorted(recipes.glob("*.py")) + sorted((recipes / "dev").glob("*.py"))
    reads: dict[str, dict] = {"_constants": _string_constants(package_file("torchtune", ""))}
    components: set[str] = set()
    for path in files:
        if path.name == "__init__.py":
            continue
        _read_recipe(path, reads, components)
    dtypes = _precision_names(package_file("torchtune", "training/precision.py"))
    del reads["_constants"]
    properties: dict[str, dict] = {}
    for key in sorted(reads):
        found = reads[key]
        recipes_reading = sorted(found["recipes"])
        description = "Read by " + ", ".join(recipes_reading) + "."
        if key in components:
            properties[key] = {
                "description": f"A component block: `{COMPONENT}` names the builder, the other keys are its "
                               f"arguments. {description}",
                "anyOf": [{"$ref": "#/$defs/component"}, {"type": "array"}, {"type": "null"}],
            }
            continue
        schema: dict = {"description": description}
        if key == "dtype":
            schema["enum"] = dtypes
        if len(found["defaults"]) == 1:
            schema["default"] = next(iter(found["defaults"]))
        properties[key] = schema
    body = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
        "$defs": {
            "component": {
                "type": "object",
                "description": f"An object a recipe builds with `config.instantiate`: `{COMPONENT}` is its dotted "
                               "path, the other keys its keyword arguments.",
                "properties": {COMPONENT: {"type": "string"}},
                "additionalProperties": True,
            }
        },
    }
    return {FILE: envelope(FILE, "torchtune recipe config", "torchtune", body,
                           description="Keys torchtune's recipes read from a `tune run --config` YAML.")}


def _read_recipe(path: Path, reads: dict[str, dict], components: set[str]) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    recipe = path.stem if path.parent.name == "recipes" else f"dev/{path.stem}"
    setup_params = _component_parameters(tree)
    constants = reads["_constants"]  # cfg.get(PROFILER_KEY, None): torchtune.training.PROFILER_KEY

    def record(key: str, default: object = ..., component: bool = False) -> None:
        entry = reads.setdefault(key, {"recipes": set(), "defaults": set()})
        entry["recipes"].add(recipe)
        if component:
            components.add(key)
        if default is not ... and type(default) in _TYPES:
            # the default is an annotation only: it is no type (`cfg.get("stop_token_ids", False)`
            # reads a list, False is the recipe's "not set")
            entry["defaults"].add(default)

    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            callee = node.func
            if (isinstance(callee, ast.Attribute) and callee.attr in _METHODS and _is_cfg(callee.value)
                    and node.args and _key_name(node.args[0], constants) is not None):
                default = ...
                if len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
                    default = node.args[1].value
                record(_key_name(node.args[0], constants), default)
            if _is_instantiate(callee):
                for argument in node.args[:1]:
                    key = _cfg_key(argument)
                    if key is not None:
                        record(key, component=True)
            for keyword in node.keywords:  # self._setup_model(cfg_model=cfg.model, ...)
                key = _cfg_key(keyword.value)
                if key is not None and keyword.arg in setup_params:
                    record(key, component=True)
        elif isinstance(node, ast.Attribute) and _is_cfg(node.value) and node.attr not in _METHODS:
            record(node.attr)
        elif isinstance(node, ast.Subscript) and _is_cfg(node.value):
            if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                record(node.slice.value)


def _key_name(node: ast.AST, constants: dict[str, str]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    return None


def _string_constants(package: Path) -> dict[str, str]:
    """Module-level ``NAME = "text"`` constants of the torchtune package (``PROFILER_KEY``)."""
    out: dict[str, str] = {}
    for path in sorted(package.rglob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            continue
        for node in tree.body:
            if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                    and node.targets[0].id.isupper() and isinstance(node.value, ast.Constant)
                    and isinstance(node.value.value, str)):
                out.setdefault(node.targets[0].id, node.value.value)
    return out


def _component_parameters(tree: ast.Module) -> set[str]:
    """Parameters of the recipe's methods that the method hands to ``config.instantiate``."""
    out: set[str] = set()
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        names = {a.arg for a in function.args.args + function.args.kwonlyargs}
        for node in ast.walk(function):
            if isinstance(node, ast.Call) and _is_instantiate(node.func) and node.args:
                first = node.args[0]
                if isinstance(first, ast.Name) and first.id in names:
                    out.add(first.id)
    return out


def _is_cfg(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id in _CONFIG_NAMES


def _cfg_key(node: ast.AST) -> str | None:
    """``cfg.model`` or ``cfg["model"]`` -> "model"."""
    if isinstance(node, ast.Attribute) and _is_cfg(node.value) and node.attr not in _METHODS:
        return node.attr
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
            and _is_cfg(node.func.value) and node.args and isinstance(node.args[0], ast.Constant):
        return node.args[0].value if isinstance(node.args[0].value, str) else None
    return None


def _is_instantiate(callee: ast.AST) -> bool:
    return (isinstance(callee, ast.Attribute) and callee.attr == "instantiate") or (
        isinstance(callee, ast.Name) and callee.id == "instantiate")


def _precision_names(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if isinstance(target, ast.Name) and target.id == "PRECISION_STR_TO_DTYPE" and isinstance(node.value, ast.Dict):
            return [k.value for k in node.value.keys if isinstance(k, ast.Constant)]
    raise LookupError(f"{path}: PRECISION_STR_TO_DTYPE not found")
