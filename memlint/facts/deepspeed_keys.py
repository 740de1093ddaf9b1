"""What the keys of a DeepSpeed config mean for memory, wherever the config is written.

A DeepSpeed config arrives as a JSON file or as a dict built in the script
(``deepspeed.initialize(config=ds_config)``, ``TrainingArguments(deepspeed={...})``); both read
through :func:`deepspeed_facts`, which works on plain values and reports the key path of each
fact so the caller can locate it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator

from memlint.model.vocabulary import DEEPSPEED_OPTIMIZERS

Path = tuple[str, ...]


@dataclass(frozen=True)
class DeepSpeedFact:
    name: str  # RunFacts field
    value: Any
    path: Path  # where in the config (("zero_optimization", "stage"))


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(str(value))
    except ValueError:
        return None


def _enabled(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return None


def _offloaded(block: Any) -> bool | None:
    if isinstance(block, dict):
        device = block.get("device")
        if isinstance(device, str):
            return device.lower() in ("cpu", "nvme")
    return None


# key -> (the fact it sets, how its value is read)
_Keys = dict[str, tuple[str, Callable[[Any], "int | float | bool | None"]]]
_TOP: _Keys = {
    "train_micro_batch_size_per_gpu": ("micro_batch", _int),
    "train_batch_size": ("global_batch", _int),
    "gradient_accumulation_steps": ("grad_accum", _int),
}
_ZERO: _Keys = {
    "stage": ("zero_stage", _int),
    "reduce_bucket_size": ("reduce_bucket", _number),
    "allgather_bucket_size": ("allgather_bucket", _number),
    "stage3_prefetch_bucket_size": ("prefetch_bucket", _number),
    "stage3_max_live_parameters": ("max_live_parameters", _number),
    "cpu_offload": ("offload_optimizer", _enabled),  # DeepSpeed < 0.3.x spelling
}


def auto_paths(config: Any, prefix: Path = ()) -> Iterator[Path]:
    """Key paths whose value is ``"auto"`` (filled from the Trainer's arguments)."""
    if isinstance(config, dict):
        for key, value in config.items():
            yield from auto_paths(value, prefix + (str(key),))
    elif isinstance(config, str) and config.strip().lower() == "auto":
        yield prefix


def deepspeed_facts(config: dict[str, Any]) -> list[DeepSpeedFact]:
    """The memlint facts a DeepSpeed config states ("auto" values state nothing)."""
    out: list[DeepSpeedFact] = []
    for key, (name, convert) in _TOP.items():
        if key in config:
            value = convert(config[key])
            if value is not None:
                out.append(DeepSpeedFact(name, value, (key,)))
    zero = config.get("zero_optimization")
    if isinstance(zero, dict):
        for key, (name, convert) in _ZERO.items():
            if key in zero:
                value = convert(zero[key])
                if value is not None:
                    out.append(DeepSpeedFact(name, value, ("zero_optimization", key)))
        for key, name in (("offload_optimizer", "offload_optimizer"), ("offload_param", "offload_params")):
            offloaded = _offloaded(zero.get(key))
            if offloaded is not None:
                out.append(DeepSpeedFact(name, offloaded, ("zero_optimization", key, "device")))
    for key, name in (("bf16", "ds_bf16"), ("bfloat16", "ds_bf16"), ("fp16", "ds_fp16")):
        block = config.get(key)
        if isinstance(block, dict) and "enabled" in block:
            enabled = _enabled(block["enabled"])
            if enabled is not None:
                out.append(DeepSpeedFact(name, enabled, (key, "enabled")))
    optimizer = config.get("optimizer")
    if isinstance(optimizer, dict) and isinstance(optimizer.get("type"), str):
        known = DEEPSPEED_OPTIMIZERS.get(optimizer["type"].strip().lower())
        if known is not None:
            out.append(DeepSpeedFact("optimizer", known, ("optimizer", "type")))
    return out
