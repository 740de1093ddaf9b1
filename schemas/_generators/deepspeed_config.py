"""DeepSpeed's config JSON as a schema, derived from DeepSpeed's own reader.

DeepSpeed has two kinds of config sections:

* pydantic ``DeepSpeedConfigModel`` subclasses (``zero_optimization``, ``fp16``, ``bf16``, the
  monitors, ...), which reject unknown keys at run time: their ``model_json_schema()`` is used;
* keys read by hand in ``deepspeed/runtime/config.py`` (``get_scalar_param(param_dict, NAME,
  DEFAULT)``, ``NAME in param_dict``), where a misspelt key is silently ignored.

To find the second kind without typing a list, the generator runs ``DeepSpeedConfig`` on a dict
that records every key read (``dict_reads``), on a single simulated rank. Each key is then
probed with ``{"<probe>": 0}``: a pydantic error names the model behind the key; reads under
the key describe a hand-read section; anything else is a scalar, typed by its default.

Then the Hugging Face ``"auto"`` placeholders are allowed exactly where Transformers or
Accelerate fill them (``hf_auto``), and the top level is closed: an unknown key is an error.
"""

from __future__ import annotations

import ast
import copy
from typing import Any
from unittest import mock

from . import auto_values, hf_auto
from .common import envelope, json_default, package_file, prune_unused_defs
from .dict_reads import Log, record
from .pydantic_schema import models_schema, resolve

FILE = "deepspeed.schema.json"
PROBE = "__memlint_probe__"
_BASE = {"train_batch_size": 1}  # DeepSpeedConfig refuses to finish without a batch size

# Fix-ups where DeepSpeed's reader is silent (its default is None, so it says nothing about
# the type). Each entry names the code that constrains the value.
_SCALAR_FIXUPS: dict[str, dict] = {
    # _batch_assertion(): each must be > 0 once resolved; null is read as absent (get_scalar_param is
    # dict.get with a default of None) and _set_batch_related_parameters() works it out from the others.
    "train_batch_size": {"type": ["integer", "null"], "minimum": 1},
    "train_micro_batch_size_per_gpu": {"type": ["integer", "null"], "minimum": 1},
    "gradient_accumulation_steps": {"type": ["integer", "null"], "minimum": 1},
    # engine: `global_steps % steps_per_print`.
    "steps_per_print": {"type": ["integer", "null"], "minimum": 1},
    # get_communication_data_type(): lower-cased, then fp32|fp16|bf16, else ValueError.
    "communication_data_type": {"enum": ["fp32", "fp16", "bf16", None]},
    "seq_parallel_communication_data_type": {"enum": ["fp32", "fp16", "bf16", None]},
    # _do_warning_check(): `vocabulary_size % TENSOR_CORE_ALIGN_SIZE`.
    "vocabulary_size": {"type": ["integer", "null"]},
    # set_log_level_from_string().
    "log_level": {"type": ["string", "null"]},
    # DeepSpeedConfig.__init__ / deepspeed.initialize(): world-size divisors.
    "sequence_parallel_size": {"type": "integer", "minimum": 1},
    "data_parallel_size": {"type": "integer", "minimum": 1},
}
# get_zero_config(): a bare boolean is the pre-dict format (read_zero_config_deprecated warns).
_DEPRECATED_BOOLEAN_FORM = "zero_optimization"


def build() -> dict[str, dict]:
    import deepspeed.comm
    from deepspeed.runtime import config as ds_config
    from deepspeed.runtime import constants
    from deepspeed.runtime.config_utils import DeepSpeedConfigModel

    def reader(param_dict):
        return ds_config.DeepSpeedConfig(param_dict)

    # One simulated rank, and no warnings from the probes (they are expected).
    with (
        mock.patch.object(deepspeed.comm, "get_rank", lambda *a, **k: 0),
        mock.patch.object(deepspeed.comm, "get_world_size", lambda *a, **k: 1),
        mock.patch.object(ds_config.logger, "disabled", True),
    ):
        sections = _Sections(reader, _model_classes(DeepSpeedConfigModel))
    removed = dict(getattr(ds_config, "_REMOVED_TOP_LEVEL_CONFIG_KEYS", {}))
    keys = [k for k in sections.top_keys() + _initialize_keys() if k not in removed]
    keys = list(dict.fromkeys(keys))

    models = sorted({m for m, _ in sections.models.values()}, key=lambda m: m.__name__)
    refs, defs = models_schema(models)
    _clean_deprecations(defs)
    _mark_removed_zero_keys(defs, refs, sections, ds_config)
    properties: dict[str, dict] = {}
    for key in keys:
        if key in sections.models:
            model, inner = sections.models[key]
            properties[key] = _model_property(refs[model], inner, defs)
        elif sections.is_section(key):
            properties[key] = _hand_read(sections.log_for(key), (key,))
        else:
            properties[key] = _scalar(key, sections.default(key), constants)
    _mark_deprecated(properties, constants, sections)
    _allow_auto(properties, defs)
    # Fix-up: DeepSpeed ignores a "$schema" key, which lets an editor bind this schema in-file.
    properties["$schema"] = {"type": "string", "description": "JSON Schema of this file (ignored by DeepSpeed)."}

    body = prune_unused_defs(
        {
            "type": "object",
            "properties": properties,
            "additionalProperties": False,
            "$defs": defs,
            "x-memlint-removed-keys": removed,
        }
    )
    return {
        FILE: envelope(
            FILE,
            "DeepSpeed configuration",
            "deepspeed",
            body,
            description=(
                "DeepSpeed config (ds_config.json). Unknown top-level keys are errors: DeepSpeed ignores them "
                'silently. "auto" is accepted only where the Hugging Face Trainer or Accelerate fills it in.'
            ),
            also=("transformers", "accelerate", "pydantic"),
        )
    }


def _model_classes(base: type) -> dict[str, type]:
    """Every ``DeepSpeedConfigModel`` subclass by class name (pydantic errors name the model)."""
    found: dict[str, type] = {}
    stack = [base]
    while stack:
        cls = stack.pop()
        for sub in cls.__subclasses__():
            found.setdefault(sub.__name__, sub)
            stack.append(sub)
    return found


class _Sections:
    """Runs DeepSpeed's reader with probes and remembers what each top-level key is."""

    def __init__(self, reader, classes: dict[str, type]) -> None:
        import pydantic

        self._reader = reader
        self.base_log, _ = record(reader, _BASE)
        self.models: dict[str, tuple[type, tuple]] = {}
        self._logs: dict[str, Log] = {}
        for key in self.top_keys():
            log, error = record(reader, {**_BASE, key: {PROBE: 0}})
            probe_errors = []
            if isinstance(error, pydantic.ValidationError):
                probe_errors = [
                    e for e in error.errors() if e["type"] == "extra_forbidden" and e["loc"][-1:] == (PROBE,)
                ]
            if probe_errors and error.title in classes:
                self.models[key] = (classes[error.title], tuple(probe_errors[0]["loc"][:-1]))
            else:
                self._logs[key] = self._explore(key, log)
        # The deprecated boolean zero_optimization reads companion keys of its own.
        bool_log, _ = record(reader, {**_BASE, _DEPRECATED_BOOLEAN_FORM: True})
        self.deprecated_companions = [k for k in _top(bool_log) if k not in _top(self.base_log)]
        for key in self.deprecated_companions:
            self.base_log.reads[(key,)] = bool_log.reads[(key,)]

    def _explore(self, key: str, log: Log, rounds: int = 3) -> Log:
        """Fill a hand-read section with values that take more branches, until no new key is read."""
        for _ in range(rounds):
            sample = _sample(log, (key,))
            if not isinstance(sample, dict):
                return log
            new_log, _ = record(self._reader, {**_BASE, key: sample})
            merged = _merge(log, new_log)
            if merged.reads.keys() == log.reads.keys():
                return merged
            log = merged
        return log

    def top_keys(self) -> list[str]:
        return _top(self.base_log)

    def is_section(self, key: str) -> bool:
        log = self._logs.get(key)
        return bool(log and (log.children((key,)) or log.reads[(key,)].iterated))

    def log_for(self, key: str) -> Log:
        return self._logs[key]

    def default(self, key: str) -> tuple[bool, Any]:
        read = self.base_log.reads.get((key,))
        defaults = [d for d in (read.defaults if read else []) if d is not None]
        return (True, defaults[0]) if defaults else (False, None)


def _top(log: Log) -> list[str]:
    return [p[0] for p in log.reads if len(p) == 1]


def _merge(a: Log, b: Log) -> Log:
    merged = Log()
    for log in (a, b):
        for path, read in log.reads.items():
            target = merged.touch(path)
            target.defaults += read.defaults
            target.iterated |= read.iterated
    return merged


def _sample(log: Log, path: tuple) -> Any:
    """A value for ``path`` that makes a reader go further than the defaults: sections get a
    dict of their children, booleans the opposite of their default, other leaves a string."""
    children = log.children(path)
    read = log.reads[path]
    dict_default = any(isinstance(d, dict) for d in read.defaults)
    if children or dict_default or read.iterated:
        return {child: _sample(log, path + (child,)) for child in children}
    for default in read.defaults:
        if isinstance(default, bool):
            return not default
        if default is not None:
            return default
    return PROBE


def _initialize_keys() -> list[str]:
    """Keys ``deepspeed.initialize()`` reads from its ``config`` dict before DeepSpeedConfig."""
    tree = ast.parse(package_file("deepspeed", "__init__.py").read_text(encoding="utf-8"))
    function = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "initialize")
    keys = []
    for node in ast.walk(function):
        key = None
        if isinstance(node, ast.Compare) and _is_config(node.comparators[0]) and isinstance(node.ops[0], ast.In):
            key = node.left
        elif isinstance(node, ast.Subscript) and _is_config(node.value):
            key = node.slice
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            key = node.args[0] if _is_config(node.func.value) and node.args else None
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            keys.append(key.value)
    return keys


def _is_config(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "config"


def _model_property(ref: dict, inner: tuple, defs: dict[str, dict]) -> dict:
    """The schema of a key backed by a model, or by one field of a model (the monitors)."""
    schema = ref
    for step in inner:
        schema = resolve(schema, defs)["properties"][step]
    return copy.deepcopy(schema)


def _hand_read(log: Log, path: tuple) -> dict:
    """A section DeepSpeed reads key by key: its children are the keys read under it."""
    read = log.reads[path]
    children = log.children(path)
    if not children and not read.iterated and not any(isinstance(d, dict) for d in read.defaults):
        return _leaf(read.defaults)
    schema: dict = {"type": "object"}
    if children:
        schema["properties"] = {child: _hand_read(log, path + (child,)) for child in children}
    if not read.iterated and children:
        schema["additionalProperties"] = False
    return schema


def _leaf(defaults: list) -> dict:
    """A hand-read leaf, typed by the default DeepSpeed passes (strings may be sentinels such as
    ``"auto"``, so they constrain nothing)."""
    for default in defaults:
        ok, value = json_default(default)
        if not ok or value is None or isinstance(value, (dict, list)):
            continue
        if isinstance(value, bool):
            return {"type": "boolean", "default": value}
        if isinstance(value, (int, float)):
            return {"type": "number", "default": value}
        return {"default": value}
    return {}


def _scalar(key: str, default: tuple[bool, Any], constants) -> dict:
    """A top-level scalar: fix-up type or the type of its default, its ``*_FORMAT`` text, and an
    enum when ``constants`` lists the supported values (``<NAME>_SUPPORTED``)."""
    has_default, value = default
    schema = dict(_SCALAR_FIXUPS.get(key) or (_leaf([value]) if has_default else {}))
    if has_default:
        ok, json_value = json_default(value)
        if ok:
            schema["default"] = json_value
    name = _constant_name(constants, key)
    supported = getattr(constants, f"{name}_SUPPORTED", None) if name else None
    if isinstance(supported, (list, tuple)):
        schema = {k: v for k, v in schema.items() if k != "type"}
        schema["enum"] = list(supported)
    text = _format_text(constants, name) if name else None
    if text:
        schema["description"] = text
    return schema


def _constant_name(constants, key: str) -> str | None:
    names = [n for n, v in vars(constants).items() if n.isupper() and v == key and not n.endswith("_DEFAULT")]
    return min(names, key=len) if names else None


def _format_text(constants, name: str) -> str | None:
    """DeepSpeed documents a key in a ``<NAME>_FORMAT`` string next to its constant."""
    formats = [n for n in vars(constants) if n.endswith("_FORMAT") and name.startswith(n[: -len("_FORMAT")])]
    if not formats:
        return None
    return " ".join(str(getattr(constants, max(formats, key=len))).split())


def _mark_deprecated(properties: dict, constants, sections: _Sections) -> None:
    """``<NAME>_OLD`` constants are kept "for backwards compatibility"; the boolean
    ``zero_optimization`` and the keys only it reads are the pre-dict ZeRO format."""
    for name, value in vars(constants).items():
        if name.endswith("_OLD") and value in properties:
            new = getattr(constants, name[: -len("_OLD")], None)
            properties[value]["deprecated"] = True
            if new in properties:
                properties[value]["x-memlint-replaced-by"] = new
    zero = properties.get(_DEPRECATED_BOOLEAN_FORM)
    if zero is not None:
        properties[_DEPRECATED_BOOLEAN_FORM] = {
            "anyOf": [zero, {"type": "boolean", "deprecated": True, "description": "Pre-dict ZeRO format."}]
        }
    for key in sections.deprecated_companions:
        if key in properties:
            properties[key]["deprecated"] = True
            properties[key]["x-memlint-replaced-by"] = _DEPRECATED_BOOLEAN_FORM


def _mark_removed_zero_keys(defs: dict[str, dict], refs: dict, sections: "_Sections", ds_config) -> None:
    """DeepSpeed refuses ZeRO keys of removed features (``_REMOVED_ZERO_CONFIG_KEYS``: MiCS,
    LoCo-Zero++) with a message of its own; the ZeRO section's schema keeps that table, so a
    config that still sets them hears why rather than "unknown key"."""
    removed = dict(getattr(ds_config, "_REMOVED_ZERO_CONFIG_KEYS", {}))
    zero = sections.models.get("zero_optimization")
    if not removed or zero is None:
        return
    name = str(refs[zero[0]]["$ref"]).rsplit("/", 1)[-1]
    defs[name]["x-memlint-removed-keys"] = removed


def _clean_deprecations(defs: dict[str, dict]) -> None:
    """DeepSpeed marks deprecated fields with ``json_schema_extra={"deprecated": True,
    "new_param": ...}``; keep ``deprecated`` and turn ``new_param`` into ``x-memlint-replaced-by``."""
    for definition in defs.values():
        for prop in definition.get("properties", {}).values():
            new = prop.pop("new_param", None)
            prop.pop("set_new_param", None)
            message = prop.pop("deprecated_msg", None)
            if new:
                prop["x-memlint-replaced-by"] = new
            if message:
                prop["description"] = (prop.get("description", "") + " " + message).strip()


def _allow_auto(properties: dict, defs: dict[str, dict]) -> None:
    """Accept ``"auto"`` where Transformers or Accelerate fill it (types of untyped leaves come
    from the ``TrainingArguments`` field the value is copied from)."""
    from transformers import TrainingArguments

    from .dataclass_schema import dataclass_properties

    hf_fields, _ = dataclass_properties(TrainingArguments)
    fills = hf_auto.transformers_fills() + hf_auto.accelerate_fills()
    auto_values.allow_auto_at(properties, defs, fills, hf_fields)
