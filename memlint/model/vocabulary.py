"""Translating the ecosystem's spellings into memlint's vocabulary.

One table per concept, shared by every extractor (scripts, TrainingArguments JSON/YAML, Axolotl,
LLaMA-Factory, launchers), so ``optim="adamw_torch_fused"`` means the same everywhere.
"""

from __future__ import annotations

import re

# transformers.training_args.OptimizerNames (and Axolotl/TRL spellings) -> memlint optimizer
HF_OPTIMIZERS: dict[str, str] = {
    "adamw_torch": "adamw",
    "adamw_torch_fused": "adamw-fused",
    "adamw_apex_fused": "adamw-fused",
    "adamw_torch_xla": "adamw",
    "adamw_torch_npu_fused": "adamw-fused",
    "adamw_hf": "adamw",
    "adamw_anyprecision": "adamw-forloop",
    "adamw_torch_4bit": "adamw-8bit",
    "adamw_torch_8bit": "adamw-8bit",
    "adafactor": "adafactor",
    "adamw_bnb_8bit": "adamw-8bit",
    "adamw_8bit": "adamw-8bit",
    "ademamix_8bit": "adamw-8bit",
    "paged_adamw_8bit": "paged-adamw-8bit",
    "paged_adamw_32bit": "paged-adamw",
    "paged_adamw": "paged-adamw",
    "paged_ademamix_8bit": "paged-adamw-8bit",
    "lion_8bit": "lion",
    "lion_32bit": "lion",
    "paged_lion_8bit": "lion",
    "paged_lion_32bit": "paged-lion",
    "sgd": "sgd",
    "adagrad": "sgd-momentum",
    "rmsprop": "sgd-momentum",
    "adamw": "adamw",
    "adam": "adam",
}

# torch / bitsandbytes / transformers optimizer classes (qualified names) -> memlint optimizer
OPTIMIZER_CLASSES: dict[str, str] = {
    "torch.optim.AdamW": "adamw",
    "torch.optim.Adam": "adam",
    "torch.optim.SGD": "sgd",
    "torch.optim.Adafactor": "adafactor",
    "transformers.Adafactor": "adafactor",
    "transformers.optimization.Adafactor": "adafactor",
    "bitsandbytes.optim.AdamW8bit": "adamw-8bit",
    "bitsandbytes.optim.Adam8bit": "adamw-8bit",
    "bitsandbytes.optim.PagedAdamW8bit": "paged-adamw-8bit",
    "bitsandbytes.optim.PagedAdamW": "paged-adamw",
    "bitsandbytes.optim.PagedAdamW32bit": "paged-adamw",
    "bitsandbytes.optim.PagedLion": "paged-lion",
    "bitsandbytes.optim.PagedLion32bit": "paged-lion",
    "bitsandbytes.optim.Lion": "lion",
    "apex.optimizers.FusedAdam": "adamw-fused",
    "deepspeed.ops.adam.FusedAdam": "adamw-fused",
    "deepspeed.ops.adam.DeepSpeedCPUAdam": "adamw-fused",
    "adam_mini.Adam_mini": "adam-mini",
}

# DeepSpeed "optimizer": {"type": ...} -> memlint optimizer (DeepSpeed steps with its fused kernels)
DEEPSPEED_OPTIMIZERS: dict[str, str] = {
    "adam": "adamw-fused",
    "adamw": "adamw-fused",
    "fusedadam": "adamw-fused",
    "cpuadam": "adamw-fused",
    "onebitadam": "adamw-fused",
    "zerooneadam": "adamw-fused",
    "onebitlamb": "adamw-fused",
    "lamb": "adamw-fused",
    "lion": "lion",
    "muadam": "adamw-fused",
    "muadamw": "adamw-fused",
    "sgd": "sgd",
}

# torch dtype spellings -> memlint dtype name
DTYPES: dict[str, str] = {
    "float32": "fp32",
    "torch.float32": "fp32",
    "fp32": "fp32",
    "float": "fp32",
    "float16": "fp16",
    "torch.float16": "fp16",
    "fp16": "fp16",
    "half": "fp16",
    "torch.half": "fp16",
    "bfloat16": "bf16",
    "torch.bfloat16": "bf16",
    "bf16": "bf16",
    "auto": "auto",
}

# attn_implementation values -> memlint attention
# device maps with which accelerate spreads the layers over every visible GPU (a dict or "cuda:0"
# places the whole model on one device)
SPREAD_DEVICE_MAPS = frozenset({"auto", "balanced", "balanced_low_0", "sequential"})


def spread_device_map(value: object) -> str | None:
    """A ``device_map`` that spreads the model, as the keyword is written (``device_map="auto"``:
    a bare "auto" would read as DeepSpeed's "auto" when runs merge); None for any other."""
    text = str(value).strip()
    return f'device_map="{text}"' if text in SPREAD_DEVICE_MAPS else None


ATTENTION: dict[str, str] = {
    "eager": "eager",
    "sdpa": "sdpa",
    "flash_attention_2": "flash",
    "flash_attention_3": "flash",
    "kernels-community/flash-attn": "flash",
    "kernels-community/vllm-flash-attn3": "flash",
    "flex_attention": "sdpa",
}

# Lightning Trainer(precision=...) -> (policy kind, dtype)
# Lightning's registered DeepSpeed strategy names -> (ZeRO stage, offload optimizer, offload parameters)
LIGHTNING_DEEPSPEED: dict[str, tuple[int, bool, bool]] = {
    "deepspeed": (2, False, False),  # DeepSpeedStrategy() defaults to stage 2
    "deepspeed_stage_1": (1, False, False),
    "deepspeed_stage_2": (2, False, False),
    "deepspeed_stage_2_offload": (2, True, False),
    "deepspeed_stage_3": (3, False, False),
    "deepspeed_stage_3_offload": (3, True, True),
    "deepspeed_stage_3_offload_nvme": (3, True, True),
}

LIGHTNING_PRECISION: dict[str, str] = {
    "32": "fp32",
    "32-true": "fp32",
    "64": "fp32",
    "16": "amp-fp16",
    "16-mixed": "amp-fp16",
    "bf16": "amp-bf16",
    "bf16-mixed": "amp-bf16",
    "16-true": "fp16",
    "bf16-true": "bf16",
    "transformer-engine": "amp-bf16",
}

# FSDP sharding strategy spellings (HF `fsdp`, Accelerate fsdp_sharding_strategy) -> memlint
FSDP_STRATEGIES: dict[str, str] = {
    "full_shard": "full",
    "1": "full",
    "shard_grad_op": "grad-op",
    "2": "grad-op",
    "no_shard": "none",
    "3": "none",
    "hybrid_shard": "hybrid",
    "4": "hybrid",
    "hybrid_shard_zero2": "hybrid",
    "5": "hybrid",
}


def optimizer_from_hf(name: str) -> str | None:
    return HF_OPTIMIZERS.get(str(name).strip().lower())


def dtype_name(text: str) -> str | None:
    return DTYPES.get(str(text).strip().lower())


# A key or option that names the run's DeepSpeed or Accelerate config (``deepspeed:``,
# ``--deepspeed``, ``ds_config``, LMFlow's ``accelerate_config_file:``, ``accelerate launch
# --config_file``): the file it names is the run's parallelism config.
_PARALLELISM_KEY = re.compile(r"deepspeed|ds_?config|accelerate.*config|fsdp.*config", re.I)


def names_parallelism_config(key: str) -> bool:
    """Does a key (or a reference's note) name a DeepSpeed/Accelerate/FSDP config?"""
    return _PARALLELISM_KEY.search(key) is not None
