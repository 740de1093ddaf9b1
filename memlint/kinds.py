"""What a config document is, judged by its content first and its name second.

``ds_config.json`` is a DeepSpeed config, but so is ``configs/run7.json`` if it holds
``zero_optimization``; an Axolotl YAML has ``base_model``; an Accelerate config has
``distributed_type``; TrainingArguments as JSON/YAML (LLaMA-Factory style) has
``per_device_train_batch_size`` or ``output_dir``.
"""

from __future__ import annotations

import re
from typing import Any

DEEPSPEED_KEYS = {
    "zero_optimization", "train_micro_batch_size_per_gpu", "train_batch_size",
    "gradient_accumulation_steps", "zero_allow_untested_optimizer", "fp16", "bf16",
    "gradient_clipping", "steps_per_print", "wall_clock_breakdown", "activation_checkpointing",
}
ACCELERATE_KEYS = {"compute_environment", "distributed_type", "num_processes", "machine_rank", "use_cpu"}
AXOLOTL_KEYS = {"base_model", "sequence_len", "micro_batch_size", "datasets", "adapter", "lora_r", "load_in_4bit"}
LLAMAFACTORY_KEYS = {"model_name_or_path", "stage", "finetuning_type", "template", "cutoff_len", "lora_target"}
HF_ARGS_KEYS = {
    "per_device_train_batch_size", "output_dir", "gradient_accumulation_steps", "learning_rate",
    "num_train_epochs", "gradient_checkpointing", "bf16", "fp16", "optim", "max_seq_length", "max_length",
}

_DEEPSPEED_NAME = re.compile(r"(^|/)(ds|deepspeed)[_-]?(config)?[^/]*\.json$|(^|/)zero[0-9_-][^/]*\.json$", re.I)
_ACCELERATE_NAME = re.compile(r"(^|/)(accelerate|default_config)[^/]*\.ya?ml$|(^|/)accelerate_configs?/", re.I)


def detect(path: str, syntax: str, value: Any) -> str:
    """The document kind: deepspeed, accelerate, axolotl, llamafactory, hf-args, or the
    plain syntax ("json"/"yaml") when it is none of them."""
    if not isinstance(value, dict):
        return syntax
    keys = set(value)
    if syntax == "json" and (keys & {"zero_optimization", "train_micro_batch_size_per_gpu"}):
        return "deepspeed"
    if keys & ACCELERATE_KEYS and ("distributed_type" in keys or "compute_environment" in keys):
        return "accelerate"
    if "base_model" in keys and len(keys & AXOLOTL_KEYS) >= 2:
        return "axolotl"
    if "model_name_or_path" in keys and len(keys & LLAMAFACTORY_KEYS) >= 2:
        return "llamafactory"
    if syntax == "json" and len(keys & DEEPSPEED_KEYS) >= 2 and "output_dir" not in keys:
        return "deepspeed"
    if len(keys & HF_ARGS_KEYS) >= 2:
        return "hf-args"
    if syntax == "json" and _DEEPSPEED_NAME.search(path):
        return "deepspeed"
    if syntax == "yaml" and _ACCELERATE_NAME.search(path):
        return "accelerate"
    return syntax
