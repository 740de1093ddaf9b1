"""Schema validation as findings on the exact key: jsonschema's errors turned into issues.

One issue per unknown key (on the key, with "did you mean ...?"), one per bad value (on the
value, saying what is allowed), and for an ``anyOf``/``oneOf`` the errors of the branch the
value was meant for — the branches whose type it has, the one with the fewest problems, then
jsonschema's ``best_match`` — or, when it fits no branch's type, one message listing what is
allowed, instead of a wall of alternatives. Keys the schemas mark ``deprecated`` (with
``x-memlint-replaced-by``), keys a tool removed (``x-memlint-removed-keys``) and Axolotl
plugin keys (``x-memlint-plugin``) are found by walking the document alongside its schema.
Issues are computed once per loaded document and shared by the rules that report them.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

from jsonschema.exceptions import ValidationError, best_match

from memlint.configs.schema import (
    HF_VARIANTS,
    TOOL,
    VALIDATED_KINDS,
    candidates,
    items_schema,
    known_keys,
    load_schema,
    plugin_listed,
    property_schema,
    resolve_ref,
    schema_at,
    schema_name_for,
    top_level_keys,
    validator,
)
from memlint.documents.structured import Path_, Structured
from memlint.model.diagnostics import Applicability, Edit, Fix, Range

if TYPE_CHECKING:
    from jsonschema.exceptions import _Error

# What the tool does with a key it does not know (the reason an unknown key matters).
ON_UNKNOWN = {
    "deepspeed": "DeepSpeed does not read it",
    "accelerate": "`accelerate launch` refuses the file",
    "axolotl": "Axolotl ignores unknown keys silently",
    "llamafactory": "LLaMA-Factory's argument parser refuses the file",
    "hf-training-arguments": "HfArgumentParser refuses the file",
    "trl-sft-config": "HfArgumentParser refuses the file",
    "trl-dpo-config": "HfArgumentParser refuses the file",
    "trl-grpo-config": "HfArgumentParser refuses the file",
    "torchtune": "torchtune's recipes never read it",
    "composer": "llm-foundry's train.py refuses the file (\"Unused parameters\"; put your own values under `variables`)",
    "lightning-cli": "LightningCLI's parser refuses the file",
}
# A torchtune recipe reads the keys it wants from the config; a copied recipe (`tune cp`) or one
# newer than the schema reads keys the schema does not list, so only a near-certain misspelling
# of a key the recipes read (`enable_activation_checkpoint`) is reported.
TORCHTUNE_NEAR = 0.9

# GPT-NeoX passes its `fp16`/`bf16` sections to DeeperSpeed, the DeepSpeed fork it pins
# (requirements/requirements.txt), which reads them by hand (`enabled`, the loss-scale keys) and
# ignores the rest; NeoX itself writes `{"type": "fp16", "enabled": True}` there
# (megatron/neox_arguments/arguments.py) and its configs carry `"fp16": true` inside. Upstream
# DeepSpeed's pydantic sections would refuse those keys, so they are no finding in a NeoX file.
NEOX_PRECISION_SECTIONS = frozenset({("fp16",), ("bf16",)})

# DeepSpeed's precision sections; `bfloat16` is the legacy name of `bf16`, still read when `bf16` is
# absent (deepspeed/runtime/precision_config.py, BFLOAT16_OLD) and the only name before 0.6.0
PRECISION_SECTIONS = ("fp16", "bf16", "bfloat16")

# Spellings a tool still accepts although its schema model does not list them: Axolotl strips
# an ``fsdp_`` prefix from ``fsdp_config`` keys before validating (with a deprecation warning;
# axolotl/utils/schemas/validation.py, check_fsdp_config_kwargs_prefix).
LEGACY_PREFIXES: dict[str, dict[Path_, str]] = {"axolotl": {("fsdp_config",): "fsdp_"}}

@dataclass(frozen=True)
class Issue:
    """One schema finding, placed on the key or value it is about."""

    category: str  # "unknown", "invalid", "missing", "deprecated", "removed", "plugin"
    path: Path_  # the key (or value) it is about
    message: str
    range: Range
    fix: Fix | None = None


_CACHE: "weakref.WeakKeyDictionary[Structured, list[Issue]]" = weakref.WeakKeyDictionary()


def issues(path: str, kind: str, data: Structured | None) -> list[Issue]:
    """Every schema issue of a loaded document (computed once per loaded document)."""
    if data is None or not data.ok or kind not in VALIDATED_KINDS:
        return []
    cached = _CACHE.get(data)
    if cached is None:
        name = schema_name_for(kind, data.value)
        found = [] if name is None else list(_Validation(path, name, data, kind).run())
        cached = _CACHE[data] = _with_numbers_out_of_range(data, found)
    return cached


def _with_numbers_out_of_range(data: Structured, found: list[Issue]) -> list[Issue]:
    """A number no tool can take (kept as its text by the loader) is an invalid value, said
    so once: not also as a string where a number belongs."""
    insane = {p.range: p for p in data.problems if p.kind == "out-of-range"}
    if not insane:
        return found
    kept = [issue for issue in found if issue.range not in insane]
    for problem in insane.values():
        kept.append(Issue("invalid", (), problem.message, problem.range))
    return sorted(kept, key=lambda issue: (issue.range.start, issue.range.end))


def _dotted(path: Path_) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "the document"


def _shown(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


_TYPE_WORDS = {
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "string": "a string",
    "object": "a mapping",
    "array": "a list",
    "null": "null",
}


def _unfilled_auto(path: Path_) -> str:
    """Why an "auto" that nothing fills in is wrong. The HF Trainer and Accelerate fill `bf16.enabled`
    (transformers' ``fill_match("bf16.enabled", ...)``), never the legacy `bfloat16` section, and
    DeepSpeed's config models drop an "auto" they are handed (``DeepSpeedConfigModel``, non-strict),
    so the key keeps its default (an older DeepSpeed reading the key by hand: ``deepspeed_releases``)."""
    if path[:1] == ("bfloat16",):
        # Accelerate's mixed precision adds a `bf16` section when there is none, which DeepSpeed reads first
        off = " (bf16 off, unless mixed precision adds a `bf16` section)" if path[1:] == ("enabled",) else ""
        return ('; the HF Trainer and Accelerate fill "auto" in `bf16`, not in the legacy `bfloat16` section, '
                f'and DeepSpeed drops the "auto" and keeps its default{off}: rename the section `bf16` or set a value')
    return ('; neither the HF Trainer nor Accelerate fills "auto" in for this key, and DeepSpeed '
            "falls back to its default: set a value")


def _type_words(types: list[str]) -> list[str]:
    """JSON Schema types as alternatives in a message ("true", "false", "an integer", ...)."""
    return [w for t in types for w in (("true", "false") if t == "boolean" else (_TYPE_WORDS.get(t, t),))]


YAML_NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+$")


class _Validation:
    def __init__(self, path: str, name: str, data: Structured, kind: str = "") -> None:
        self.file = path
        self.name = name
        self.data = data
        self.root = load_schema(name)
        self.validator = validator(name)
        self.tool = TOOL[name]
        # a GPT-NeoX argument file holds NeoX's own keys beside the DeepSpeed sections it passes on
        self.foreign_top_level = kind == "neox"
        # DeepSpeed's autotuner takes a list of candidates where a value goes ("stage": [0, 1, 2, 3])
        self.tuning = name == "deepspeed" and isinstance(data.value, dict) and isinstance(
            data.value.get("autotuning"), dict)

    def run(self) -> Iterator[Issue]:
        seen: set[tuple] = set()
        for error in sorted(self.validator.iter_errors(self.data.value), key=lambda e: list(map(str, e.absolute_path))):
            for issue in self._from_error(error):
                marker = (issue.category, issue.path, issue.message)
                if marker not in seen:
                    seen.add(marker)
                    yield issue
        yield from self._walk(self.data.value, self.root, ())

    # ------------------------------------------------------------------ jsonschema errors

    def _from_error(self, error: ValidationError) -> Iterator[Issue]:
        path = tuple(error.absolute_path)
        validator_name = error.validator
        if self.tuning and isinstance(error.instance, list) and path and path[0] != "autotuning":
            return  # an autotuning space: the tuner tries each value
        if error.instance is None and validator_name == "type" and isinstance(error.schema, dict) and (
                "default" in error.schema and error.schema["default"] is None):
            return  # the tool's own default is None (Accelerate writes `commands: null` itself)
        if validator_name in ("anyOf", "oneOf") and error.context:
            yield from self._from_alternatives(error)
        elif validator_name in ("additionalProperties", "unevaluatedProperties"):
            yield from self._unknown(error, path)
        elif validator_name == "required":
            yield self._missing(error, path)
        elif validator_name == "not" and "required" in (_value(error) or {}):
            yield self._two_spellings(error, path)
        else:
            yield self._invalid(path, error.instance, self._expected(error.schema, error), error)

    def _from_alternatives(self, error: ValidationError) -> Iterator[Issue]:
        """The branch the value was meant for, else one message listing what is allowed."""
        branches: dict[Any, list[ValidationError]] = {}
        for sub in error.context:
            branches.setdefault(sub.relative_schema_path[0], []).append(sub)
        here = list(error.absolute_path)

        def shape_mismatch(errors: list[ValidationError]) -> bool:
            return all(list(e.absolute_path) == here and e.validator in ("type", "const", "enum") for e in errors)

        meant = {index: errs for index, errs in branches.items() if not shape_mismatch(errs)}
        if meant:
            # the branch with the fewest problems (each unknown key counts), then jsonschema's relevance
            fewest = min(self._problem_count(errs) for errs in meant.values())
            closest = {i: errs for i, errs in meant.items() if self._problem_count(errs) == fewest}
            best = best_match([e for errs in closest.values() for e in errs])
            index = next(i for i, errs in closest.items() if _contains(errs, best))
            for sub in meant[index]:
                yield from self._from_error(sub)
            return
        schema: Any = error.schema
        alternatives = schema.get(error.validator, [])
        expected = _join([word for branch in alternatives for word in self._describe(branch)])
        yield self._invalid(tuple(error.absolute_path), error.instance, expected, error)

    def _problem_count(self, errors: list[ValidationError]) -> int:
        """How much is wrong under one branch: each unknown key counts, as does each other error."""
        count = 0
        for error in errors:
            closed = error.validator in ("additionalProperties", "unevaluatedProperties")
            if closed and isinstance(error.instance, dict):
                known = known_keys(self.root, error.schema)
                count += max(1, sum(1 for key in error.instance if key not in known))
            else:
                count += 1
        return count

    def _unknown(self, error: ValidationError, path: Path_) -> Iterator[Issue]:
        instance = error.instance if isinstance(error.instance, dict) else {}
        known = known_keys(self.root, error.schema)
        patterns = [re.compile(p) for c in candidates(self.root, error.schema) for p in c.get("patternProperties", {})]
        # keys a tool removed, at the top level or in a section whose schema lists its own
        # (DeepSpeed's ZeRO section: MiCS, LoCo-Zero++)
        section = error.schema if isinstance(error.schema, dict) else {}
        removed = section.get("x-memlint-removed-keys") or (
            self.root.get("x-memlint-removed-keys", {}) if not path else {})
        foreign = _unschematised_plugin_prefixes(self.name, self.data.get("plugins")) if not path else ()
        for key in instance:
            suggestible = known
            if key in known or any(p.search(str(key)) for p in patterns):
                continue
            if str(key).startswith(foreign or ("\0",)):
                continue  # a listed plugin whose keys the schema does not know
            key_path = path + (key,)
            where = self.data.range_of(key_path, key=True)
            prefix = LEGACY_PREFIXES.get(self.name, {}).get(path)
            if prefix and str(key).startswith(prefix) and key[len(prefix):] in known:
                yield self._deprecated(key_path, key[len(prefix):], instance, "", legacy_prefix=prefix)
                continue
            if self.foreign_top_level and not path:
                continue  # a NeoX argument, not a DeepSpeed key
            if self.foreign_top_level and path in NEOX_PRECISION_SECTIONS:
                continue  # NeoX's precision keys (`fp16: {fp16: true, type: ...}`), read by hand in DeeperSpeed
            if self.name == "deepspeed" and not path and str(key).startswith(("_", "//", "#")):
                continue  # the JSON comment idiom ("_comment": "..."): DeepSpeed ignores it by design
            if key in removed:
                message = f"`{_dotted(key_path)}` was removed from {self.tool}: {removed[key].strip()}"
                yield Issue("removed", key_path, message, where)
                continue
            if self.name in HF_VARIANTS and not path:
                # A TrainingArguments/TRL file is often parsed together with the script's own
                # dataclasses (TRL's ModelConfig, ScriptArguments): only a near-miss of a known
                # field that starts like it (`per_device_batch_size`) is surely a mistake;
                # `lora_target_modules` is not a misspelt `optim_target_modules`.
                # (near-misses among TrainingArguments' and the SFT/DPO configs' keys, and the file's
                # own schema's: a GRPOConfig field is no spelling a DPO recipe meant)
                first = str(key).split("_")[0]
                near = [k for k in _hf_trainer_keys() | known if k.split("_")[0] == first]
                if key in _hf_family_keys() or not _suggest(str(key), set(near), instance)[0]:
                    continue
                suggestible = set(near)
            if self.name == "torchtune" and not path:
                near = [k for k in known if k not in instance
                        and difflib.SequenceMatcher(None, str(key).lower(), k.lower()).ratio() >= TORCHTUNE_NEAR]
                if not near:
                    continue
                suggestible = set(near)
            yield self._unknown_issue(key_path, key, suggestible, instance, where)

    def _unknown_issue(self, key_path: Path_, key: Any, known: set[str], siblings: dict, where: Range) -> Issue:
        """One unknown key, with the key probably meant, or the DeepSpeed section it belongs in."""
        scope = f" in `{_dotted(key_path[:-1])}`" if len(key_path) > 1 else ""
        message = f"unknown {self.tool} key `{key}`{scope}"
        suggestions, certain = _suggest(str(key), known, siblings)
        fix = None
        if suggestions:
            message += "; did you mean " + " or ".join(f"`{s}`" for s in suggestions) + "?"
            if len(suggestions) == 1:
                fix = self._rename_fix(key_path, suggestions[0], Applicability.SAFE if certain else Applicability.UNSAFE)
        consequence = ON_UNKNOWN.get(self.name, "")
        if self.name == "axolotl" and len(key_path) > 1:
            consequence = "Axolotl does not read it"
        elif self.name == "deepspeed" and len(key_path) == 1:
            consequence = "DeepSpeed ignores unknown top-level keys silently"
            section = next((s for s in _DEEPSPEED_SECTIONS if not suggestions and key in _section_keys(self.root, s)),
                           None)
            if section is not None:  # rllm's offload blocks written beside `zero_optimization`
                message += f"; it belongs inside `{section}`"
        elif self.name == "deepspeed" and _is_pydantic_section(self.root, key_path[:-1]):
            consequence = "DeepSpeed refuses the config"
        elif self.name == "accelerate" and len(key_path) > 1:
            # ClusterConfig.from_yaml_file refuses unknown top-level keys only; `accelerate launch`
            # copies each key of a section (fsdp_config, deepspeed_config, ...) onto its arguments,
            # where an unknown one is never read (accelerate/commands/launch.py, _validate_launch_command)
            consequence = "`accelerate launch` ignores it silently"
        if consequence:
            message += f" ({consequence})"
        return Issue("unknown", key_path, message, where, fix)

    def _missing(self, error: ValidationError, path: Path_) -> Issue:
        required = _value(error)
        missing = [k for k in required if isinstance(error.instance, dict) and k not in error.instance]
        key = missing[0] if missing else required[0]
        if path in self.data.key_ranges:
            where = self.data.key_ranges[path]
        elif isinstance(error.instance, dict) and error.instance:  # a list item: its first key
            where = self.data.range_of(path + (next(iter(error.instance)),), key=True)
        else:
            where = self.data.range_of(path)
        scope = f" to `{_dotted(path)}`" if path else ""
        return Issue("missing", path + (key,), f"{self.tool} requires `{key}`; add it{scope}", where)

    def _two_spellings(self, error: ValidationError, path: Path_) -> Issue:
        first, second = _value(error)["required"][:2]
        where = self.data.range_of(path + (second,), key=True)
        return Issue("invalid", path + (second,),
                     f"`{first}` and `{second}` are two spellings of one {self.tool} setting; keep one", where)

    def _invalid(self, path: Path_, instance: Any, expected: str, error: ValidationError) -> Issue:
        where = self.data.range_of(path)
        if where.start.line != where.end.line and path:
            where = self.data.range_of(path, key=True)  # a whole block: point at its key
        subject = f"`{_dotted(path)}`" if path else f"a {self.tool} config"
        message = f"{subject} must be {expected} (got {_shown(instance)})"
        hint = ""
        if isinstance(instance, str) and YAML_NUMBER.match(instance) and "number" in expected:
            mantissa, _, exponent = instance.lower().partition("e")
            fixed = f"{mantissa}.0e{exponent}" if "." not in mantissa else instance
            hint = f"; YAML 1.1 reads `{instance}` as a string: write `{fixed}`"
        elif instance == "auto" and self.name == "deepspeed":
            hint = _unfilled_auto(path)
        elif isinstance(instance, str) and error.validator in ("enum", "anyOf", "oneOf"):
            choices = [str(v) for v in _enum_values(error.schema, self.root)]
            close = difflib.get_close_matches(instance, choices, n=1, cutoff=0.75)
            if close:
                hint = f"; did you mean `{close[0]}`?"
        return Issue("invalid", path, message + hint, where)

    # ------------------------------------------------------------------ describing schemas

    def _expected(self, schema: Any, error: ValidationError) -> str:
        validator_name = error.validator
        value = _value(error)
        if validator_name == "type":
            types: list[str] = value if isinstance(value, list) else [value]
            return _TYPE_WORDS.get(types[0], types[0]) if len(types) == 1 else _join(_type_words(types))
        if validator_name == "enum":
            return _choices(value)
        if validator_name == "const":
            return _shown(value)
        bounds = {"minimum": "at least", "maximum": "at most", "exclusiveMinimum": "more than",
                  "exclusiveMaximum": "less than", "minItems": "a list of at least", "maxItems": "a list of at most",
                  "minLength": "a string of at least", "maxLength": "a string of at most"}
        if validator_name in bounds:
            unit = " items" if "Items" in validator_name else (" characters" if "Length" in validator_name else "")
            return f"{bounds[validator_name]} {_shown(value)}{unit}"
        if validator_name is None or schema is False:  # a `false` subschema
            return "absent (not allowed here)"
        return error.message

    def _describe(self, branch: Any) -> list[str]:
        if not isinstance(branch, dict):
            return []
        if "$ref" in branch:
            return self._describe(resolve_ref(self.root, branch)) or ["a mapping"]
        if "const" in branch:
            return [_shown(branch["const"])]
        if "enum" in branch:
            return [_shown(v) for v in branch["enum"]]
        if "type" in branch:
            return _type_words(branch["type"] if isinstance(branch["type"], list) else [branch["type"]])
        words = [w for key in ("anyOf", "oneOf") for b in branch.get(key, []) for w in self._describe(b)]
        return words or ["any value"]

    # ------------------------------------------------------------------ fixes

    def _rename_fix(self, key_path: Path_, new_key: str, applicability: Applicability) -> Fix:
        where = self.data.range_of(key_path, key=True)
        return Fix(f"rename `{key_path[-1]}` to `{new_key}`", (Edit(self.file, where, self._key_text(where, new_key)),),
                   applicability)

    def _key_text(self, where: Range, new_key: str) -> str:
        """``new_key`` written the way the old key was (double-quoted, single-quoted or plain)."""
        quote = self.data.source(where)[:1]
        if self.data.syntax == "json" or quote == '"':
            return json.dumps(new_key)
        return f"'{new_key}'" if quote == "'" else new_key

    # ------------------------------------------------------------------ walking the document

    def _walk(self, value: Any, node: Any, path: Path_) -> Iterator[Issue]:
        """Deprecated keys and forms, and plugin keys without their plugin."""
        stack: list[tuple[Any, Any, Path_]] = [(value, node, path)]
        while stack:
            value, node, path = stack.pop()
            if node is None:
                continue
            if isinstance(value, dict):
                for key, child in value.items():
                    sub = property_schema(self.root, node, key)
                    if sub is None:
                        continue
                    key_path = path + (key,)
                    if sub.get("deprecated") is True:
                        replacement, description = sub.get("x-memlint-replaced-by"), sub.get("description", "")
                        yield self._deprecated(key_path, replacement, value, description)
                    plugin = sub.get("x-memlint-plugin")
                    if plugin and not plugin_listed(plugin, self.data.get("plugins")):
                        yield Issue("plugin", key_path,
                                    f"`{key}` only takes effect with the plugin `{plugin}` listed under `plugins:`; "
                                    "without it Axolotl ignores the key silently",
                                    self.data.range_of(key_path, key=True))
                    form = _deprecated_form(self.root, sub, child)
                    if form is not None:
                        yield Issue("deprecated", key_path,
                                    f"this form of `{_dotted(key_path)}` is deprecated in {self.tool}"
                                    + (f" ({form.rstrip('.')})" if form else ""),
                                    self.data.range_of(key_path))
                    stack.append((child, sub, key_path))
            elif isinstance(value, list):
                items = items_schema(self.root, node)
                for index, child in enumerate(value):
                    stack.append((child, items, path + (index,)))

    def _deprecated(self, key_path: Path_, replacement: Any, siblings: dict, description: str,
                    legacy_prefix: str | None = None) -> Issue:
        key = key_path[-1]
        where = self.data.range_of(key_path, key=True)
        version = self.root.get("x-memlint-generated-from", {}).get("version", "")
        if legacy_prefix:
            message = (f"the `{legacy_prefix}` prefix of keys in `{_dotted(key_path[:-1])}` is deprecated in "
                       f"{self.tool}: write `{replacement}`")
        else:
            message = f"`{key}` is deprecated in {self.tool} {version}".rstrip()
        detail = _first_sentence(description)
        fix = None
        if isinstance(replacement, str) and re.fullmatch(r"\w+", replacement):
            if replacement not in siblings and self._takes_value(key_path, replacement, siblings):
                fix = self._rename_fix(key_path, replacement, Applicability.SAFE)
                if not legacy_prefix:
                    message += f": use `{replacement}`"
            elif replacement in siblings:
                message += f"; `{replacement}` is set too, so remove `{key}`"
            elif not legacy_prefix:
                message += f": use `{replacement}`" + (f" ({detail})" if detail and replacement not in detail else "")
        elif detail:
            message += f": {detail}"
        return Issue("deprecated", key_path, message, where, fix)

    def _takes_value(self, key_path: Path_, replacement: str, siblings: dict) -> bool:
        """Does the new key (a sibling in the schema) take the old key's value as it is? Then
        the rename is mechanical (DeepSpeed's ``bfloat16`` -> ``bf16``), unlike ``cpu_offload:
        true`` -> ``offload_optimizer: {device: cpu}``."""
        parent = schema_at(self.name, key_path[:-1]) if key_path[:-1] else self.root
        target = property_schema(self.root, parent, replacement) if parent is not None else None
        if target is None:
            return False
        value = siblings[key_path[-1]]
        return not any(True for _ in self.validator.descend(value, target))


# ---------------------------------------------------------------------------- helpers


def _value(error: ValidationError) -> Any:
    """The failed keyword's value in the schema (``["a", "b"]`` of ``required``): always set on
    the errors a validator yields, which types-jsonschema cannot tell from a hand-made one."""
    return error.validator_value


def _contains(errors: list[ValidationError], target: ValidationError) -> bool:
    for error in errors:
        current: _Error | None = target
        while current is not None:
            if current is error:
                return True
            current = current.parent
    return False


def _join(words: list[str]) -> str:
    words = list(dict.fromkeys(words))
    if len(words) > 8:
        return "one of " + ", ".join(words[:8]) + ", ..."
    if len(words) <= 1:
        return words[0] if words else "something else"
    return ", ".join(words[:-1]) + " or " + words[-1]


def _choices(values: list[Any]) -> str:
    shown = [_shown(v) for v in values]
    if len(shown) > 8:
        return f"one of {len(shown)} values (" + ", ".join(shown[:5]) + ", ...)"
    return "one of " + ", ".join(shown)


def _enum_values(schema: Any, root: dict) -> list[Any]:
    return [v for c in candidates(root, schema) for v in c.get("enum", []) + ([c["const"]] if "const" in c else [])]


def _suggest(key: str, known: set[str], siblings: dict) -> tuple[list[str], bool]:
    """The key(s) probably meant, and whether the match is certain (only case or dashes
    differ). Near ties are all given: `per_device_batch_size` is as close to the eval batch
    size as to the train one."""
    normal = key.lower().replace("-", "_")
    free = sorted(k for k in known if k not in siblings)
    for candidate in free:
        if candidate.lower() == normal:
            return [candidate], True
    scored = []
    for candidate in free:
        if candidate[:1].lower() != normal[:1]:
            continue  # a misspelling keeps the first letter: `_comment` is not `comet`
        matcher = difflib.SequenceMatcher(None, normal, candidate.lower())
        if matcher.real_quick_ratio() >= 0.75 and matcher.quick_ratio() >= 0.75:
            ratio = matcher.ratio()
            if ratio >= 0.75:
                scored.append((ratio, candidate))
    if not scored:
        return [], False
    scored.sort(key=lambda item: -item[0])
    best = scored[0][0]
    return [c for r, c in scored if r >= best - 0.03][:2], False


def _first_sentence(text: str) -> str:
    text = " ".join(str(text).split())
    text = re.sub(r"^\[?deprecated\]?[,:.]?\s*", "", text, flags=re.I)
    return text.split(". ")[0].rstrip(".")


def _is_pydantic_section(root: dict, path: Path_) -> bool:
    """DeepSpeed validates its pydantic sections strictly (their schemas carry a title)."""
    node = schema_at("deepspeed", path) if path else None
    return node is not None and any("title" in c for c in candidates(root, node))


def _deprecated_form(root: dict, node: dict, value: Any) -> str | None:
    """The description of a deprecated ``anyOf`` branch that this value takes (e.g. DeepSpeed's
    boolean ``zero_optimization``), else None."""
    kinds = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}
    value_type = kinds.get(type(value))
    for branch in node.get("anyOf", []) + node.get("oneOf", []):
        if isinstance(branch, dict) and branch.get("deprecated") is True:
            types = branch.get("type")
            types = types if isinstance(types, list) else [types]
            if value_type in types or (value_type == "integer" and "number" in types):
                return branch.get("description", "")
    return None


# the variants whose keys are offered for a misspelt key of any TrainingArguments/TRL file
_SUGGESTED_FROM = ("hf-training-arguments", "trl-sft-config", "trl-dpo-config")


@functools.lru_cache(maxsize=None)
def _hf_trainer_keys() -> frozenset[str]:
    """Top-level keys of TrainingArguments and TRL's SFT and DPO configs, the ones a misspelt key
    of any such file may have meant."""
    return frozenset().union(*(top_level_keys(n) for n in _SUGGESTED_FROM))


@functools.lru_cache(maxsize=None)
def _hf_family_keys() -> frozenset[str]:
    """Top-level keys any HfArgumentParser-read schema knows (TrainingArguments, TRL, and
    LLaMA-Factory's model/data arguments)."""
    return frozenset().union(*(top_level_keys(n) for n in (*HF_VARIANTS, "llamafactory")))


@functools.lru_cache(maxsize=None)
def _schematised_plugins(name: str) -> frozenset[str]:
    root = load_schema(name)
    return frozenset(plugin for p in root.get("properties", {}).values()
                     if isinstance(p, dict) and (plugin := p.get("x-memlint-plugin")))


def _unschematised_plugin_prefixes(name: str, plugins: Any) -> tuple[str, ...]:
    """Key prefixes of listed Axolotl plugins the schema has no keys for. Axolotl names a
    plugin's keys after its package (``cut_cross_entropy`` for
    ``axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin``); the committed schema
    lacks the plugins whose argument modules its generator could not import."""
    if name != "axolotl" or not isinstance(plugins, list):
        return ()
    known = _schematised_plugins(name)
    prefixes = []
    for listed in plugins:
        dotted = str(listed).replace(":", ".")
        parts = dotted.split(".")
        if len(parts) >= 2 and not any(plugin_listed(k, [dotted]) for k in known):
            prefixes.append(parts[-2])
    return tuple(prefixes)


# DeepSpeed sections whose own keys are often written one level too high
_DEEPSPEED_SECTIONS = ("zero_optimization",)


def _section_keys(root: dict, section: str) -> set[str]:
    """The keys the schema knows inside a top-level section (``offload_param`` in ``zero_optimization``)."""
    properties = root.get("properties", {})
    return known_keys(root, properties.get(section)) if isinstance(properties, dict) and section in properties else set()
