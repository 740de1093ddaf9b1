"""Accelerate configs (``accelerate config`` output, ``default_config.yaml``): world size,
precision and the sharding a launched script runs with.

``num_processes`` is the world size (all machines), ``mixed_precision`` the precision
``accelerate launch`` exports to the script (the HF Trainer picks it up when its own arguments
say nothing). With ``distributed_type: DEEPSPEED`` the nested ``deepspeed_config`` either names
a DeepSpeed JSON (``deepspeed_config_file``, linked like any reference) or describes the run
itself: ZeRO stage, offload devices, accumulation — and the mixed precision becomes
DeepSpeed's own ``bf16``/``fp16`` mode. With ``distributed_type: FSDP`` the nested
``fsdp_config`` gives the sharding strategy, parameter offload and activation checkpointing
(keys with or without the ``fsdp_`` prefix, as Accelerate accepts both).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from memlint.configs import schema
from memlint.configs.deepspeed import OFFLOAD_DEVICES, offload_stages, positive_int
from memlint.configs.reading import ConfigReader, loaded_mapping, new_facts
from memlint.facts.extract import extractor
from memlint.facts.hf_args import _bool
from memlint.facts.plan import RunFacts
from memlint.model.vocabulary import FSDP_STRATEGIES

if TYPE_CHECKING:
    from memlint.documents.parsed import ParsedDocument


def described_default(*path: str) -> Any:
    """A default Accelerate states only in its help text ("If unspecified, will default to `2`")."""
    node = schema.schema_at("accelerate", path) or {}
    found = re.search(r"default to `?'?([^`'.]+)", str(node.get("description", "")))
    return found.group(1) if found else None


@extractor("accelerate")
def extract_accelerate(parsed: ParsedDocument) -> list[RunFacts]:
    data = loaded_mapping(parsed)
    if data is None:
        return []
    facts = new_facts(parsed.path, "accelerate", data)
    reader = ConfigReader(parsed.path, data, facts, "accelerate")
    distributed = str(reader.value("distributed_type") or "").upper()

    processes = positive_int(reader.value("num_processes"))
    if processes is not None:
        reader.set("world_size", processes, reader.location("num_processes"), "num_processes")
        machines = positive_int(reader.value("num_machines")) or 1
        if processes % machines == 0:
            reader.set("gpus_per_node", processes // machines, reader.location("num_processes"),
                       "num_processes / num_machines")
    else:
        ids = reader.value("gpu_ids")
        if isinstance(ids, (str, int)) and str(ids).strip().lower() != "all":
            count = len([i for i in str(ids).split(",") if i.strip()])
            reader.set("world_size", count or None, reader.location("gpu_ids"), "gpu_ids")

    precision = str(reader.value("mixed_precision") or "").lower()
    precision_at = reader.location("mixed_precision")
    deepspeed = reader.inside("deepspeed_config")
    if distributed == "DEEPSPEED":
        if deepspeed.value("deepspeed_config_file"):
            deepspeed.reference(("deepspeed_config_file",), "deepspeed_config_file")
            if precision in ("bf16", "fp16"):  # fills the file's "auto" precision
                reader.set("mixed", precision, precision_at, "mixed_precision")
        else:
            _plugin_deepspeed(deepspeed, precision, precision_at)
    elif precision in ("bf16", "fp16"):
        reader.set("mixed", precision, precision_at, "mixed_precision")
    if distributed == "FSDP":
        _fsdp(reader.inside("fsdp_config"))
    return [facts]


def _plugin_deepspeed(reader: ConfigReader, precision: str, precision_at) -> None:
    """A DeepSpeed run described by the Accelerate config itself (no JSON file)."""
    stage: Any = reader.value("zero_stage")
    if isinstance(stage, int) and not isinstance(stage, bool):
        reader.set("zero_stage", stage, reader.location("zero_stage"), "deepspeed_config.zero_stage")
    else:
        described = described_default("deepspeed_config", "zero_stage")
        stage = int(described) if described and described.isdigit() else None
        reader.set("zero_stage", stage, None, f"Accelerate default zero_stage={stage}")
    for key, fact, block in (("offload_optimizer_device", "offload_optimizer", "offload_optimizer"),
                             ("offload_param_device", "offload_params", "offload_param")):
        device = str(reader.value(key) or "").lower()
        if not device:
            continue
        honoured = isinstance(stage, int) and stage in offload_stages(block)
        on = device in OFFLOAD_DEVICES and honoured
        ignored = device in OFFLOAD_DEVICES and not honoured
        note = f"{key}={device}" + (f" ignored at ZeRO stage {stage}" if ignored else "")
        reader.set(fact, on, reader.location(key), note)
    reader.set("grad_accum", positive_int(reader.value("gradient_accumulation_steps")),
               reader.location("gradient_accumulation_steps"), "deepspeed_config.gradient_accumulation_steps")
    clip = reader.value("gradient_clipping")
    if isinstance(clip, (int, float)) and not isinstance(clip, bool):
        reader.set("grad_clip", float(clip), reader.location("gradient_clipping"), "deepspeed_config.gradient_clipping")
    if precision in ("bf16", "fp16"):
        reader.set("ds_bf16" if precision == "bf16" else "ds_fp16", True, precision_at, "mixed_precision")


def _fsdp(reader: ConfigReader) -> None:
    def either(name: str) -> tuple[Any, tuple[str, ...]]:
        for key in (f"fsdp_{name}", name):
            if reader.has(key):
                return reader.value(key), (key,)
        return None, ()

    version, _ = either("version")
    strategy, strategy_key = either("sharding_strategy")
    reshard, reshard_key = either("reshard_after_forward")
    sharding: str | None
    if reshard is not None and str(reshard).strip().lower() in FSDP_STRATEGIES:
        # FSDP1 spelling of the strategy under its FSDP2 name (FULL_SHARD, SHARD_GRAD_OP, ...)
        sharding, keys = FSDP_STRATEGIES[str(reshard).strip().lower()], reshard_key
    elif str(version) == "2" and reshard is not None:
        sharding, keys = ("full" if _bool(reshard) else "grad-op"), reshard_key
    elif strategy is not None:
        sharding, keys = FSDP_STRATEGIES.get(str(strategy).strip().lower()), strategy_key
    else:  # what `accelerate launch` uses when the file says nothing
        default = reader.default("fsdp_sharding_strategy")
        sharding, keys = FSDP_STRATEGIES.get(str(default).lower()), ()
    if sharding and sharding != "none":
        where = reader.location(*keys) if keys else None
        reader.set("fsdp", sharding, where, keys[0] if keys else "Accelerate default sharding strategy")
    offload, offload_key = either("offload_params")
    if offload is not None and _bool(offload) is not None:
        reader.set("offload_params", bool(_bool(offload)), reader.location(*offload_key), offload_key[0])
    checkpointing, ckpt_key = either("activation_checkpointing")
    if checkpointing is not None and _bool(checkpointing) is not None:
        reader.set("grad_ckpt", int(bool(_bool(checkpointing))), reader.location(*ckpt_key), ckpt_key[0])
