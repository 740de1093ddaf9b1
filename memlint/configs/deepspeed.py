"""DeepSpeed JSON configs: the facts they state, as DeepSpeed will execute them.

Offload is only what DeepSpeed really does: ``offload_optimizer`` works under ZeRO stages 1-3
and ``offload_param`` only under stage 3 (the schema's descriptions say so, and
``deepspeed/runtime/engine.py`` passes ``offload_param`` to the stage-3 optimizer alone), so an
offload block under a stage that ignores it is recorded as no offload (rule CFG013 reports
it). ``"auto"`` values are placeholders the HF Trainer or Accelerate fills at run time: they
are recorded as ``auto_keys``, never as facts, so the Trainer's own values decide the plan.

The same reader serves DeepSpeed configs written inline (``deepspeed: {...}`` in an Axolotl,
LLaMA-Factory or TrainingArguments YAML).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from memlint.configs import schema
from memlint.configs.reading import ConfigReader, loaded_mapping, new_facts
from memlint.documents.structured import Path_, Structured
from memlint.facts.extract import extractor
from memlint.facts.plan import RunFacts
from memlint.model.provenance import Location
from memlint.model.vocabulary import DEEPSPEED_OPTIMIZERS

if TYPE_CHECKING:
    from memlint.documents.parsed import ParsedDocument

OFFLOAD_DEVICES = ("cpu", "nvme")


def positive_int(value: Any) -> int | None:
    """An integer >= 1 (DeepSpeed writes ``1e9`` for integers, so integral floats count)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and value >= 1 else None


def number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def enabled(block: Any) -> bool | None:
    """``{"enabled": true}`` -> True; "auto", absent or odd values -> None."""
    if isinstance(block, dict) and isinstance(block.get("enabled"), bool):
        return block["enabled"]
    return None


def enabled_as_read(block: Any) -> bool | None:
    """``enabled`` as DeepSpeed's pydantic sections read it: also the strings "true"/"false"
    (CFG002 says what older releases, which test a string's truth, make of "false")."""
    flag = enabled(block)
    if flag is None and isinstance(block, dict) and isinstance(block.get("enabled"), str):
        flag = {"true": True, "false": False}.get(block["enabled"].strip().lower())
    return flag


def zero_stage(data: Structured, base: Path_ = ()) -> tuple[int | str | None, Path_]:
    """The ZeRO stage (an int, "auto", or None when the config has no ZeRO section) and the
    path that sets it. A ZeRO section without ``stage`` runs DeepSpeed's default stage."""
    block = data.get(*base, "zero_optimization")
    if block is True:  # the deprecated boolean form means stage 1
        return 1, base + ("zero_optimization",)
    if not isinstance(block, dict):
        return None, base + ("zero_optimization",)
    stage = block.get("stage")
    if stage == "auto":
        return "auto", base + ("zero_optimization", "stage")
    if isinstance(stage, int) and not isinstance(stage, bool):
        return stage, base + ("zero_optimization", "stage")
    default = schema.default("deepspeed", "zero_optimization", "stage")
    return (default if isinstance(default, int) else 0), base + ("zero_optimization",)


def offload_stages(key: str) -> tuple[int, ...]:
    """The ZeRO stages that honour an offload block, as the schema's description states them
    ("Valid with stage 1, 2, and 3", "Valid only with stage 3")."""
    node = schema.schema_at("deepspeed", ("zero_optimization", key)) or {}
    texts = [str(c.get("description", "")) for c in [node, *node.get("anyOf", [])] if isinstance(c, dict)]
    for text in texts:
        found = re.search(r"Valid (?:only )?with stages? ([0-9, and]+)", text)
        if found:
            return tuple(int(n) for n in re.findall(r"\d", found.group(1)))
    return (1, 2, 3) if key == "offload_optimizer" else (3,)


def offload_device(data: Structured, base: Path_, key: str) -> tuple[str | None, Path_]:
    """The device an offload block names ("cpu", "nvme", "none", "auto") and its path."""
    block = data.get(*base, "zero_optimization", key)
    if isinstance(block, dict):
        device = block.get("device")
        if device is None:
            return None, base + ("zero_optimization", key)
        return str(device).lower(), base + ("zero_optimization", key, "device")
    legacy = {"offload_optimizer": "cpu_offload", "offload_param": "cpu_offload_param"}[key]
    if data.get(*base, "zero_optimization", legacy) is True:
        return "cpu", base + ("zero_optimization", legacy)
    return None, base + ("zero_optimization", key)


def read_deepspeed(reader: ConfigReader) -> None:
    """Facts of a DeepSpeed config (a whole file, or a block at ``reader.base``)."""
    data, base = reader.data, reader.base
    for path, value in data.items():
        if value == "auto" and path[: len(base)] == base and len(path) > len(base):
            reader.auto(path[len(base):])

    def take(name: str, keys: tuple[str, ...], convert) -> None:
        value = reader.value(*keys)
        if value is None or value == "auto":
            return
        reader.set(name, convert(value), reader.location(*keys), ".".join(keys))

    take("micro_batch", ("train_micro_batch_size_per_gpu",), positive_int)
    take("grad_accum", ("gradient_accumulation_steps",), positive_int)
    take("global_batch", ("train_batch_size",), positive_int)
    take("grad_clip", ("gradient_clipping",), number)
    for fact, block in (("ds_bf16", "bf16"), ("ds_bf16", "bfloat16"), ("ds_fp16", "fp16")):
        flag = enabled_as_read(reader.value(block))
        if flag is not None:
            reader.set(fact, flag, reader.location(block, "enabled"), f"{block}.enabled")
    legacy = reader.value("bfloat16")
    if isinstance(legacy, dict) and legacy.get("enabled") == "auto":
        reader.set("ds_bf16_unfilled", True, reader.location("bfloat16", "enabled"), 'bfloat16.enabled "auto"')

    stage, stage_path = zero_stage(data, base)
    if isinstance(stage, int):
        note = "zero_optimization.stage" if stage_path[-1] == "stage" else "DeepSpeed default stage"
        reader.set("zero_stage", stage, Location(reader.path, data.range_of(stage_path)), note)
    for key, fact in (("offload_optimizer", "offload_optimizer"), ("offload_param", "offload_params")):
        device, device_path = offload_device(data, base, key)
        if device is None or device == "auto":
            continue
        where = Location(reader.path, data.range_of(device_path))
        honoured = stage == "auto" or (isinstance(stage, int) and stage in offload_stages(key))
        if device in OFFLOAD_DEVICES and not honoured:
            reader.set(fact, False, where, f"{key} ignored at ZeRO stage {stage}")
        else:
            reader.set(fact, device in OFFLOAD_DEVICES, where, f"{key}.device={device}")

    zero = ("zero_optimization",)
    take("reduce_bucket", zero + ("reduce_bucket_size",), number)
    take("allgather_bucket", zero + ("allgather_bucket_size",), number)
    for spelling in ("stage3_prefetch_bucket_size", "prefetch_bucket_size"):
        take("prefetch_bucket", zero + (spelling,), number)
    for spelling in ("stage3_max_live_parameters", "max_live_parameters"):
        take("max_live_parameters", zero + (spelling,), number)

    optimizer = reader.value("optimizer", "type")
    if isinstance(optimizer, str):
        name = DEEPSPEED_OPTIMIZERS.get(optimizer.strip().lower().replace("_", ""))
        reader.set("optimizer", name, reader.location("optimizer", "type"), f"DeepSpeed optimizer {optimizer}")


@extractor("deepspeed")
def extract_deepspeed(parsed: ParsedDocument) -> list[RunFacts]:
    data = loaded_mapping(parsed)
    if data is None:
        return []
    facts = new_facts(parsed.path, "deepspeed", data)
    read_deepspeed(ConfigReader(parsed.path, data, facts, "deepspeed"))
    return [facts]

