"""Where Hugging Face's integrations replace DeepSpeed ``"auto"`` values, read from their source.

DeepSpeed itself drops ``"auto"`` (its models ignore the value and keep their default), so an
``"auto"`` is only meaningful where Transformers or Accelerate fills it in before DeepSpeed reads
the config. Those places are the string paths passed to:

* Transformers ``integrations/deepspeed.py``: ``HfTrainerDeepSpeedConfig.fill_match(path, value,
  hf_key)`` / ``fill_only(path, value)``;
* Accelerate ``utils/dataclasses.py``: ``DeepSpeedPlugin``'s ``plugin_to_config_mapping`` values
  and its ``fill_match(path)`` calls; ``accelerator.py``: the ``config_kwargs`` keys that
  ``Accelerator._prepare_deepspeed`` hands to ``deepspeed_config_process``.

The files are parsed with ``ast``, never imported for this.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .common import package_file


@dataclass(frozen=True)
class AutoFill:
    path: str  # dotted DeepSpeed config path, e.g. "zero_optimization.reduce_bucket_size"
    by: str  # "transformers" or "accelerate"
    source: str  # where the value comes from, for the description
    value: ast.expr | None = None  # the expression that fills it (to type untyped leaves)


def _tree(package: str, relative: str) -> ast.Module:
    path = package_file(package, relative)
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    raise LookupError(f"class {name} not found")


def _function(scope: ast.AST, name: str) -> ast.FunctionDef:
    for node in ast.walk(scope):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise LookupError(f"function {name} not found")


def _string(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _self_calls(scope: ast.AST, methods: tuple[str, ...]):
    """``self.<method>(...)`` calls inside ``scope``."""
    for node in ast.walk(scope):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in methods
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "self"
        ):
            yield node


def transformers_fills() -> list[AutoFill]:
    """``fill_match``/``fill_only`` paths in ``HfTrainerDeepSpeedConfig``."""
    cls = _class(_tree("transformers", "integrations/deepspeed.py"), "HfTrainerDeepSpeedConfig")
    fills = []
    for call in _self_calls(cls, ("fill_match", "fill_only")):
        path = _string(call.args[0]) if call.args else None
        if path is None:
            continue
        value = call.args[1] if len(call.args) > 1 else None
        hf_key = _string(call.args[2]) if len(call.args) > 2 else None
        for kw in call.keywords:
            hf_key = _string(kw.value) if kw.arg == "hf_key" else hf_key
        source = f"TrainingArguments {hf_key}" if hf_key else (ast.unparse(value) if value is not None else "")
        fills.append(AutoFill(path, "transformers", source, value))
    return fills


def accelerate_fills() -> list[AutoFill]:
    """Paths Accelerate's DeepSpeed plugin and ``Accelerator._prepare_deepspeed`` fill."""
    fills = []
    plugin = _class(_tree("accelerate", "utils/dataclasses.py"), "DeepSpeedPlugin")
    for node in ast.walk(plugin):
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "plugin_to_config_mapping" for t in node.targets)
            and isinstance(node.value, ast.Dict)
        ):
            for key, value in zip(node.value.keys, node.value.values, strict=True):
                if _string(value):
                    fills.append(AutoFill(_string(value), "accelerate", f"DeepSpeedPlugin.{_string(key)}"))
    for call in _self_calls(plugin, ("fill_match",)):
        path = _string(call.args[0]) if call.args else None
        if path:
            fills.append(AutoFill(path, "accelerate", "Accelerator mixed_precision"))
    prepare = _function(_class(_tree("accelerate", "accelerator.py"), "Accelerator"), "_prepare_deepspeed")
    for key in _config_kwargs_keys(prepare):
        fills.append(AutoFill(key, "accelerate", "Accelerator.prepare (model, dataloaders, optimizer)"))
    return fills


def _config_kwargs_keys(function: ast.FunctionDef) -> list[str]:
    """String keys put into the local dict ``config_kwargs``."""
    keys: list[str] = []

    def add_dict(node: ast.AST) -> None:
        if isinstance(node, ast.Dict):
            keys.extend(k for k in map(_string, node.keys) if k)

    for node in ast.walk(function):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id == "config_kwargs":
                    add_dict(node.value)
                if (
                    isinstance(target, ast.Subscript)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "config_kwargs"
                    and _string(target.slice)
                ):
                    keys.append(_string(target.slice))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "update"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "config_kwargs"
            and node.args
        ):
            add_dict(node.args[0])
    return keys
