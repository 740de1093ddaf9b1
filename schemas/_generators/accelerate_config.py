"""Accelerate's ``accelerate config`` file (``default_config.yaml``) as a schema.

Sources of truth, all in Accelerate:

* ``commands/config/config_args.py``: the ``ClusterConfig`` / ``SageMakerConfig`` dataclasses
  (the loader rejects keys that are not fields); ``BaseConfig.process_config`` fills some
  fields in and converts legacy keys before that check (read with ``ast``);
* ``commands/launch.py``: ``_validate_launch_command`` copies each nested ``*_config`` dict
  into the ``accelerate launch`` arguments (``fsdp_config.x`` -> ``--fsdp_x``), so the launch
  parser's arguments are the keys, types, choices and help of those dicts;
* ``commands/config/*.py``: the options the questionnaire writes into a nested dict
  (``fsdp_config["fsdp_reshard_after_forward"] = _ask_options(query, FSDP_SHARDING_STRATEGY, ...)``
  for FSDP1) are valid values of that key, whatever the launch argument's default suggests;
* ``utils/launch.py`` and ``utils/dataclasses.py``: a ``deepspeed_config`` key the launcher hands
  on as an environment variable (``current_env["ACCELERATE_GRADIENT_CLIPPING"] =
  str(args.gradient_clipping)``) that ``DeepSpeedPlugin.__post_init__`` reads with an ``"auto"``
  default and keeps when it is ``"auto"`` takes ``"auto"`` as well.
"""

from __future__ import annotations

import argparse
import ast
import copy
import importlib

import jsonschema

from .auto_values import allow_auto
from .common import envelope, json_default, package_file
from .dataclass_schema import dataclass_properties, object_schema, widen
from .python_types import schema_for

FILE = "accelerate.schema.json"
SAGEMAKER = "AMAZON_SAGEMAKER"

# Fix-up: `deepspeed_config` keys carry no common prefix (zero_stage, offload_*), so they are
# the arguments of this launch-parser group; every other `<name>_config` dict holds the
# arguments whose names start with `<name>_` (megatron_lm_, mpirun_, parallelism_, fsdp_, ...).
_GROUP_OF = {"deepspeed_config": "DeepSpeed Arguments"}
# Fix-up: utils/launch.py reads `DynamoBackend(args.dynamo_backend.upper())`, so the upper-case
# enum values that `accelerate config` writes are valid as well as the parser's lower-case choices.
# The same holds for `fp8_backend`: the questionnaire writes FP8BackendType values ("AO", "TE",
# "MSAMP": commands/config/config_utils._convert_fp8_backend), which the Accelerator compares with.
_CASE_INSENSITIVE = {"dynamo_backend", "fp8_backend"}


def build() -> dict[str, dict]:
    from accelerate.commands.config.config_args import ClusterConfig, SageMakerConfig
    from accelerate.commands.launch import launch_command_parser
    from accelerate.utils import ComputeEnvironment, DistributedType, SageMakerDistributedType

    if SAGEMAKER not in [e.value for e in ComputeEnvironment]:
        raise LookupError(f"ComputeEnvironment has no {SAGEMAKER}: the loader's class choice changed")
    parser = launch_command_parser()
    asked = _asked_options()
    filled, legacy = _process_config_keys()
    prefixes = _added_prefixes()
    defaulted = _defaulted_when_none()
    auto = _auto_through_the_plugin()
    defs = {}
    for cls, distributed in ((ClusterConfig, DistributedType), (SageMakerConfig, SageMakerDistributedType)):
        properties, required = dataclass_properties(cls)
        properties["distributed_type"] = {**properties["distributed_type"], **schema_for(distributed)}
        _refine_from_parser(properties, parser)
        _accept_null_where_defaulted(properties, parser, defaulted)
        for name, values in _written_values(cls.__name__).items():
            if name in properties:
                properties[name] = _accept_written(properties[name], values)
        for name, schema in properties.items():
            if name.endswith("_config") and schema.get("type") in ("object", ["object", "null"]):
                properties[name] = _nested_dict(name, schema, parser, prefixes, asked.get(name, {}))
        if "deepspeed_config" in properties:
            _accept_auto(properties["deepspeed_config"], auto)
        for key, replacement in legacy.items():
            properties[key] = {
                "deprecated": True,
                "description": f"Legacy key: BaseConfig.process_config converts it to `{replacement}`.",
            }
            if replacement:
                properties[key]["x-memlint-replaced-by"] = replacement
        defs[cls.__name__] = object_schema(properties, [r for r in required if r not in filled])
    body = {
        "type": "object",
        "properties": {"compute_environment": schema_for(ComputeEnvironment)},
        "if": {"properties": {"compute_environment": {"const": SAGEMAKER}}, "required": ["compute_environment"]},
        "then": {"$ref": "#/$defs/SageMakerConfig"},
        "else": {"$ref": "#/$defs/ClusterConfig"},
        "$defs": defs,
    }
    return {
        FILE: envelope(
            FILE,
            "Accelerate config (accelerate config / default_config.yaml)",
            "accelerate",
            body,
            description=(
                "The YAML/JSON written by `accelerate config` and read by `accelerate launch --config_file`. "
                "SageMakerConfig applies when compute_environment is AMAZON_SAGEMAKER, ClusterConfig otherwise."
            ),
        )
    }


def _refine_from_parser(properties: dict, parser: argparse.ArgumentParser) -> None:
    """A field typed plain ``str`` whose launch argument has choices takes those choices
    (``mixed_precision`` -> no|fp16|bf16|fp8), and help text where the dataclass has none."""
    actions = {a.dest: a for a in parser._actions}
    for name, schema in properties.items():
        action = actions.get(name)
        if action is None:
            continue
        if action.choices and schema.get("type") in ("string", ["string", "null"]):
            nullable = schema.pop("type") != "string"
            schema["enum"] = list(action.choices) + ([None] if nullable else [])
        if action.help and "description" not in schema:
            schema["description"] = " ".join(str(action.help).split())


def _nested_dict(name: str, schema: dict, parser: argparse.ArgumentParser, prefixes: dict[str, str],
                 asked: dict[str, list]) -> dict:
    """Keys of a nested ``*_config`` dict = the launch arguments it is copied into; a value the
    questionnaire writes for a key (``asked``) is valid too."""
    group_title = _GROUP_OF.get(name)
    prefix = prefixes.get(name) or name[: -len("config")]
    actions = []
    for group in parser._action_groups:
        for action in group._group_actions:
            if group_title is not None and group.title != group_title:
                continue
            if group_title is None and not action.dest.startswith(prefix):
                continue
            actions.append(action)
    properties = {}
    for action in actions:
        properties[action.dest] = _accept_asked(_argument_schema(action), asked.get(action.dest, []))
        if name in prefixes:  # the loader adds the prefix when it is missing
            short = action.dest[len(prefix) :]
            properties.setdefault(short, copy.deepcopy(properties[action.dest]))
            properties[short]["description"] = f"Same as `{action.dest}` (accelerate adds the prefix)."
    nested = {"type": ["object", "null"], "properties": properties, "additionalProperties": False}
    if schema.get("description"):
        nested["description"] = schema["description"]
    return nested


def _argument_schema(action: argparse.Action) -> dict:
    """What a YAML value for this launch argument may be. Values copied from the config file
    skip argparse's ``type=`` conversion and are mostly passed on with ``str()``, so a ``str``
    argument also takes numbers and booleans."""
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)) or action.type is bool:
        schema: dict = {"type": "boolean"}
    elif action.choices:
        values = list(action.choices)
        if action.dest in _CASE_INSENSITIVE:
            values += [v.upper() for v in values if v.upper() not in values]
        values += [int(v) for v in values if isinstance(v, str) and v.isdigit()]
        schema = {"enum": values}
    elif action.type is int:
        schema = {"type": "integer"}
    elif action.type is float:
        schema = {"type": "number"}
    elif getattr(action.type, "__name__", "") == "str_to_bool" or str(action.default).lower() in ("true", "false"):
        schema = {"anyOf": [{"type": "boolean"}, {"enum": ["true", "false", "True", "False"]}]}
    else:
        schema = {"type": ["string", "number", "boolean"]}
    if action.help and action.help != argparse.SUPPRESS:
        schema["description"] = " ".join(str(action.help).split())
    ok, default = json_default(action.default)
    if ok and isinstance(default, list) and isinstance(schema.get("type"), list):
        # a tuple default (`fp8_override_linear_precision=(False, False, False)`) is what the
        # questionnaire writes into the file and utils/launch.py indexes: a list is valid too
        kinds = {bool: "boolean", int: "integer", float: "number", str: "string"}
        schema["type"] = schema["type"] + ["array"]
        schema["items"] = {"type": sorted({kinds.get(type(v), "string") for v in default}) or ["boolean"]}
    if ok and default is not None and action.default is not argparse.SUPPRESS:
        schema["default"] = default
    return schema


def _auto_through_the_plugin() -> dict[str, str]:
    """``{launch argument: environment variable}`` for the DeepSpeed arguments whose ``"auto"``
    reaches the plugin: ``utils/launch.py`` copies the argument into the variable
    (``current_env["ACCELERATE_GRADIENT_ACCUMULATION_STEPS"] = str(args.gradient_accumulation_steps)``)
    and ``DeepSpeedPlugin.__post_init__`` reads it with ``os.environ.get(VAR, "auto")``, keeping
    "auto" (``int(gas) if gas.isdigit() else gas``) for the Accelerator or the HF Trainer to fill
    from the script's own setting. Other variables (``ACCELERATE_DEEPSPEED_ZERO_STAGE``, read by
    ``int()``) are absent."""
    launch = ast.parse(package_file("accelerate", "utils/launch.py").read_text("utf-8"))
    passed: dict[str, str] = {}
    for node in ast.walk(launch):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Subscript)
                and isinstance(node.targets[0].value, ast.Name) and node.targets[0].value.id == "current_env"
                and isinstance(node.targets[0].slice, ast.Constant)):
            continue
        read = [n.attr for n in ast.walk(node.value)
                if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "args"]
        if len(read) == 1:
            passed[str(node.targets[0].slice.value)] = read[0]
    plugin = ast.parse(package_file("accelerate", "utils/dataclasses.py").read_text("utf-8"))
    cls = next(n for n in plugin.body if isinstance(n, ast.ClassDef) and n.name == "DeepSpeedPlugin")
    post_init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__post_init__")
    auto = {}
    for node in ast.walk(post_init):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                and len(node.args) == 2 and all(isinstance(a, ast.Constant) for a in node.args)
                and node.args[1].value == "auto" and node.args[0].value in passed):
            auto[passed[node.args[0].value]] = node.args[0].value
    if not auto:
        raise LookupError("DeepSpeedPlugin.__post_init__ reads no launch variable with an \"auto\" default")
    return auto


def _accept_auto(section: dict, auto: dict[str, str]) -> None:
    """The ``deepspeed_config`` keys whose "auto" the plugin keeps also take "auto". (The HF
    Trainer hands the Accelerator a GradientAccumulationPlugin and fills both; a bare
    ``Accelerator()`` reads ``ACCELERATE_GRADIENT_ACCUMULATION_STEPS`` with ``int()`` itself.)"""
    for key, variable in auto.items():
        if key in section["properties"]:
            section["properties"][key] = allow_auto(
                section["properties"][key],
                f"The launcher passes it as {variable}; DeepSpeedPlugin keeps \"auto\" "
                "(utils/dataclasses.py), and the HF Trainer or the Accelerator fills it in.")


def _defaulted_when_none() -> set[str]:
    """Launch arguments ``_validate_launch_command`` gives a value of its own when they are
    None (``if args.num_machines is None: ... args.num_machines = 1``)."""
    tree = ast.parse(package_file("accelerate", "commands/launch.py").read_text("utf-8"))
    function = next(
        n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_validate_launch_command"
    )
    names = set()
    for node in ast.walk(function):
        test = node.test if isinstance(node, ast.If) else None
        if not (
            isinstance(test, ast.Compare)
            and isinstance(test.left, ast.Attribute)
            and isinstance(test.left.value, ast.Name)
            and test.left.value.id == "args"
            and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Is)
            and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value is None
        ):
            continue
        name = test.left.attr
        assigns = any(
            isinstance(t, ast.Attribute) and t.attr == name
            for stmt in ast.walk(node)
            if isinstance(stmt, ast.Assign)
            for t in stmt.targets
        )
        if assigns:
            names.add(name)
    return names


def _accept_null_where_defaulted(properties: dict, parser: argparse.ArgumentParser, defaulted: set[str]) -> None:
    """A field copied into a launch argument whose parser default is None, and which the launcher
    defaults when it is None (``num_machines``, ``num_processes``, ``mixed_precision``), may be
    null: the loader keeps the null, the copy leaves the argument None, and the launcher then
    chooses (templates people commit write ``num_processes: null`` for a script to fill)."""
    actions = {a.dest: a for a in parser._actions}
    for name in defaulted:
        action = actions.get(name)
        schema = properties.get(name)
        if action is None or schema is None or action.default is not None:
            continue
        if "enum" in schema and None not in schema["enum"]:
            schema["enum"] = list(schema["enum"]) + [None]
        kind = schema.get("type")
        if isinstance(kind, str) and kind != "null":
            schema["type"] = [kind, "null"]
        elif isinstance(kind, list) and "null" not in kind:
            schema["type"] = kind + ["null"]


def _written_values(class_name: str) -> dict[str, list]:
    """Literals ``accelerate config`` itself writes into each field.

    The questionnaire (``commands/config/*.py``) builds ``ClusterConfig(field=variable, ...)``;
    a literal assigned to that variable is a value real config files contain, so it must
    validate even where the annotation is narrower (``downcast_bf16: bool`` is written as "no").
    """
    found: dict[str, list] = {}
    for path in sorted(package_file("accelerate", "commands/config").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for function in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)):
            literals: dict[str, list] = {}
            for node in ast.walk(function):
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                    for target in node.targets:
                        if isinstance(target, ast.Name) and node.value.value is not None:
                            literals.setdefault(target.id, []).append(node.value.value)
            for call in (n for n in ast.walk(function) if isinstance(n, ast.Call)):
                if not (isinstance(call.func, ast.Name) and call.func.id == class_name):
                    continue
                for keyword in call.keywords:
                    if keyword.arg and isinstance(keyword.value, ast.Name):
                        values = found.setdefault(keyword.arg, [])
                        values += [v for v in literals.get(keyword.value.id, []) if v not in values]
    return found


def _asked_options() -> dict[str, dict[str, list]]:
    """The options ``accelerate config`` offers for each key of a nested dict: ``dict -> key ->
    values`` from ``<dict>["key"] = _ask_options(query, OPTIONS, ...)``, the options being a
    list literal or a list of the module (``FSDP_SHARDING_STRATEGY``), both branches of a
    conditional one; the answer written is one of them."""
    found: dict[str, dict[str, list]] = {}
    for path in sorted(package_file("accelerate", "commands/config").glob("*.py")):
        module = importlib.import_module(f"accelerate.commands.config.{path.stem}")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                    and isinstance(node.value.func, ast.Name) and node.value.func.id == "_ask_options"
                    and len(node.value.args) >= 2):
                continue
            for target in node.targets:
                if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) \
                        and isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, str):
                    values = found.setdefault(target.value.id, {}).setdefault(target.slice.value, [])
                    values += [v for v in _options(node.value.args[1], module) if v not in values]
    return found


def _options(node: ast.expr, module: object) -> list:
    if isinstance(node, ast.IfExp):
        return _options(node.body, module) + _options(node.orelse, module)
    if isinstance(node, ast.List):
        return [e.value for e in node.elts if isinstance(e, ast.Constant)]
    if isinstance(node, ast.Name):
        value = getattr(module, node.id, None)
        if isinstance(value, (list, tuple)):
            return [v for v in value if isinstance(v, (str, int)) and not isinstance(v, bool)]
    return []


def _accept_asked(schema: dict, values: list) -> dict:
    """``schema``, or it or the offered values it would reject."""
    rejected = [v for v in values if not jsonschema.Draft202012Validator(schema).is_valid(v)]
    if not rejected:
        return schema
    description = schema.pop("description", None)
    default = schema.pop("default", None)
    widened: dict = {"anyOf": [*(schema["anyOf"] if list(schema) == ["anyOf"] else [schema]), {"enum": rejected}]}
    if default is not None:
        widened["default"] = default
    if description is not None:
        widened["description"] = description
    return widened


def _accept_written(schema: dict, values: list) -> dict:
    """Widen ``schema`` by the JSON type of each written value it would reject."""
    kinds = {bool: "boolean", int: "integer", float: "number", str: "string"}
    for value in values:
        if not jsonschema.Draft202012Validator(schema).is_valid(value) and type(value) in kinds:
            schema = widen(schema, [kinds[type(value)]])
    return schema


def _process_config_keys() -> tuple[set[str], dict[str, str]]:
    """From ``BaseConfig.process_config``: the keys it fills in when missing, and the legacy keys
    it removes (``del config_dict[k]`` / ``config_dict.pop(k)``) with the key whose new value is
    computed from them."""
    tree = ast.parse(package_file("accelerate", "commands/config/config_args.py").read_text("utf-8"))
    function = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "process_config")
    assigned: list[tuple[str, ast.expr]] = []  # config_dict["x"] = value
    popped: dict[str, str] = {}  # variable = config_dict.pop("key")
    removed: list[str] = []
    for node in ast.walk(function):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant):
                    assigned.append((target.slice.value, node.value))
                if isinstance(target, ast.Name) and _pop_key(node.value):
                    popped[target.id] = _pop_key(node.value)
        if isinstance(node, ast.Delete):
            removed += [
                t.slice.value
                for t in node.targets
                if isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant)
            ]
        if _pop_key(node):
            removed.append(_pop_key(node))
    legacy: dict[str, str] = {}
    for key in dict.fromkeys(removed):
        for new, value in assigned:
            for n in ast.walk(value):
                tested = isinstance(n, ast.Compare) and isinstance(n.left, ast.Constant) and n.left.value == key
                from_pop = isinstance(n, ast.Name) and popped.get(n.id) == key
                if (tested or from_pop) and new != key:
                    legacy.setdefault(key, new)
        legacy.setdefault(key, "")
    return {k for k, _ in assigned} - set(legacy), legacy


def _pop_key(node: ast.AST) -> str | None:
    """``"k"`` for a ``config_dict.pop("k")`` call."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "pop"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    ):
        return node.args[0].value
    return None


def _added_prefixes() -> dict[str, str]:
    """``{dict name: prefix}`` from ``_validate_launch_command``: ``if name == "fsdp_config" and
    not key.startswith("fsdp"): key = "fsdp_" + key``."""
    tree = ast.parse(package_file("accelerate", "commands/launch.py").read_text("utf-8"))
    function = next(
        n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_validate_launch_command"
    )
    prefixes = {}
    for node in ast.walk(function):
        if not (isinstance(node, ast.If) and isinstance(node.test, ast.BoolOp)):
            continue
        names = [
            c.comparators[0].value
            for c in node.test.values
            if isinstance(c, ast.Compare) and isinstance(c.comparators[0], ast.Constant)
        ]
        for stmt in node.body:
            if (
                names
                and isinstance(stmt, ast.Assign)
                and isinstance(stmt.value, ast.BinOp)
                and isinstance(stmt.value.left, ast.Constant)
            ):
                prefixes[names[0]] = stmt.value.left.value
    return prefixes
