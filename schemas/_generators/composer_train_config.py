"""llm-foundry training YAMLs (``composer scripts/train/train.py <yaml>``) as a schema.

llm-foundry's ``scripts/train/train.py`` turns the YAML into its ``TrainConfig`` dataclass
(``llmfoundry/utils/config_utils.py``) with ``make_dataclass_and_log_config``, which raises
``Unused parameters [...] found in cfg`` for any top-level key that is not a field of it (the
file's own values go under ``variables``). The dataclass is the source of truth; it is read with
``ast`` from the installed wheel (llm-foundry needs torch and Composer to import):

* each annotated field is a key, typed by its annotation (``Optional[...]`` adds null; a
  ``dict[str, Any]`` block such as ``model``, ``fsdp_config`` or ``optimizer`` stays open: its keys
  are the registered builder's arguments);
* a field whose default is ``MISSING`` is mandatory in llm-foundry, except the two that
  ``update_batch_size_info`` fills (``n_gpus``, ``device_train_grad_accum``); memlint does not
  require keys (a base YAML may be completed on the command line), so none is ``required``;
* any value may be an OmegaConf interpolation (``${variables.max_seq_len}``), which resolves
  before the dataclass is built;
* a key ``make_dataclass_and_log_config`` moves to another field by its type (``icl_tasks`` given
  as a path becomes ``icl_tasks_str``, a list ``eval_loader`` becomes ``eval_loaders``) also takes
  that field's type.
"""

from __future__ import annotations

import ast

from .common import envelope, package_file

FILE = "composer.schema.json"
_SCALARS = {"int": "integer", "float": "number", "str": "string", "bool": "boolean"}
_CONTAINERS = {"dict": "object", "Dict": "object", "list": "array", "List": "array"}
_FILLED = {"n_gpus", "device_train_grad_accum"}  # set by update_batch_size_info, not by the user
_INTERPOLATION = {"type": "string", "pattern": r"^\$\{.+\}$"}


def build() -> dict[str, dict]:
    source = package_file("llmfoundry", "utils/config_utils.py")
    tree = ast.parse(source.read_text(encoding="utf-8"), filename=str(source))
    config = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "TrainConfig")
    properties: dict[str, dict] = {}
    for statement in config.body:
        if not (isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)):
            continue
        name = statement.target.id
        types = _types(statement.annotation)
        schema: dict = {}
        if types:
            schema["anyOf"] = [*({"type": t} for t in types), _INTERPOLATION]
        default = statement.value
        if isinstance(default, ast.Name) and default.id == "MISSING":
            schema["description"] = ("Set by llm-foundry (`update_batch_size_info`), not in the YAML."
                                      if name in _FILLED else "Mandatory in llm-foundry's TrainConfig.")
        elif isinstance(default, ast.Constant):
            if default.value is not None:
                schema["default"] = default.value
        properties[name] = schema
    for written, flattened in _flattened(tree).items():  # icl_tasks: a path string -> icl_tasks_str
        if written in properties and flattened in properties:
            mine = properties[written].get("anyOf")
            theirs = properties[flattened].get("anyOf")
            if mine and theirs:
                properties[written]["anyOf"] = [*mine, *(t for t in theirs if t not in mine)]
            else:
                properties[written].pop("anyOf", None)
    body = {"type": "object", "properties": properties, "additionalProperties": False}
    return {FILE: envelope(FILE, "llm-foundry / Composer training YAML", "llm-foundry", body,
                           description="Top-level keys of llm-foundry's TrainConfig (scripts/train/train.py).")}


def _flattened(tree: ast.Module) -> dict[str, str]:
    """``make_dataclass_and_log_config`` moves a union-typed key to its own field before building
    the dataclass (``unstructured_config['icl_tasks_str'] = unstructured_config.pop('icl_tasks')``
    when it is a string): the written key also takes the type of the field it moves to."""
    function = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
                     and n.name == "make_dataclass_and_log_config"), None)
    moves: dict[str, str] = {}
    for node in ast.walk(function) if function is not None else ():
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript)):
            continue
        target, value = node.targets[0].slice, node.value
        if (isinstance(target, ast.Constant) and isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
                and value.func.attr == "pop" and value.args and isinstance(value.args[0], ast.Constant)):
            moves[str(value.args[0].value)] = str(target.value)
    return moves


def _types(annotation: ast.expr) -> list[str]:
    """JSON types of a field annotation; empty when it allows anything (``Any``)."""
    if isinstance(annotation, ast.Name):
        if annotation.id in _SCALARS:
            return [_SCALARS[annotation.id]]
        if annotation.id in _CONTAINERS:
            return [_CONTAINERS[annotation.id]]
        return []
    if isinstance(annotation, ast.Constant) and annotation.value is None:
        return ["null"]
    if isinstance(annotation, ast.Subscript) and isinstance(annotation.value, ast.Name):
        outer = annotation.value.id
        inner = annotation.slice
        if outer == "Optional":
            found = _types(inner)
            return found + ["null"] if found else []
        if outer == "Union":
            members = inner.elts if isinstance(inner, ast.Tuple) else [inner]
            found = [_types(m) for m in members]
            if any(not f for f in found):
                return []
            return list(dict.fromkeys(t for f in found for t in f))
        if outer in _CONTAINERS:
            return [_CONTAINERS[outer]]
    return []
