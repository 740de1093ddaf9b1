"""What Hugging Face ``TrainingArguments`` (and TRL / LLaMA-Factory / run_clm spellings) mean
for memory, shared by every place they appear: a Python call, a JSON/YAML file, a command line.
"""

from __future__ import annotations

import re

from typing import Any, Callable

from memlint.model.vocabulary import ATTENTION, FSDP_STRATEGIES, dtype_name, optimizer_from_hf


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        number = int(str(value).strip())
    except (TypeError, ValueError):
        return None
    return number if number >= 0 else None


def _bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off", "none"):
        return False
    return None


def _fsdp(value: Any) -> str | None:
    if value is True:
        return "full"  # `fsdp=True` (transformers >= 5.23): FULL_SHARD
    if isinstance(value, (list, tuple)):
        words = [str(v).lower() for v in value]
    else:
        words = str(value).lower().replace(",", " ").split()
    for word in words:
        strategy = FSDP_STRATEGIES.get(word)
        if strategy and strategy != "none":
            return strategy
    return None


def _float(value: Any) -> float | None:
    return float(value) if _is_number(value) else None


def lora_target_names(value: Any) -> tuple[str, ...] | None:
    """LoRA target modules: a list, a string separated by commas or spaces (a command line's
    ``--target_modules q_proj v_proj``), a list written as one argument (``fire``'s
    ``--target_modules '["q_proj", "v_proj"]'``), or "all"/"all-linear"."""
    if isinstance(value, (list, tuple)):
        names = [str(v).strip() for v in value if str(v).strip()]
    elif isinstance(value, str):
        text = value.strip()
        if text.startswith("[") and text.endswith("]"):
            text = text[1:-1]
        names = [n for v in text.replace(",", " ").split() if (n := v.strip("'\""))]
    else:
        return None
    if any(n.lower() in ("all", "all-linear", "all_linear") for n in names):
        return ("all-linear",)
    return tuple(names) or None


def _projector_parts(value: Any) -> bool | None:
    """LLaVA-NeXT's ``mm_tunable_parts`` (``"mm_mlp_adapter"``, ``"mm_vision_tower,mm_mlp_adapter,
    mm_language_model"``): True when the language model is not among the trained parts."""
    if not isinstance(value, str) or not value.strip():
        return None
    parts = {p.strip() for p in value.split(",") if p.strip()}
    return "mm_language_model" not in parts


def _flag(value: Any, on: Any) -> Any:
    """``on`` when the value is true, else None (nothing to say)."""
    return on if _bool(value) else None


# field -> (fact name, converter). A converter returns None for values it does not understand.
FIELDS: dict[str, tuple[str, Callable[[Any], Any]]] = {
    # TrainingArguments.do_train is read by the scripts, not the Trainer (``if args.do_train:
    # trainer.train()``): false makes a prediction or evaluation run
    "do_train": ("trains", _bool),
    "per_device_train_batch_size": ("micro_batch", _int),
    "per_gpu_train_batch_size": ("micro_batch", _int),
    "micro_batch_size": ("micro_batch", _int),
    "train_micro_batch_size_per_gpu": ("micro_batch", _int),
    "gradient_accumulation_steps": ("grad_accum", _int),
    "gradient_checkpointing": ("grad_ckpt", lambda v: None if _bool(v) is None else int(bool(_bool(v)))),
    # transformers >= 5.23 name; wins over gradient_checkpointing when both are set
    "activation_checkpointing": ("grad_ckpt", lambda v: None if _bool(v) is None else int(bool(_bool(v)))),
    "max_grad_norm": ("grad_clip", _float),
    "optim": ("optimizer", lambda v: optimizer_from_hf(str(v))),
    "max_seq_length": ("seq_len", _int),
    "max_seq_len": ("seq_len", _int),  # DeepSpeed-Chat, fms-hf-tuning (argparse prefix of max_seq_length)
    "max_length": ("seq_len", _int),
    "cutoff_len": ("seq_len", _int),
    "block_size": ("seq_len", _int),
    "model_max_length": ("seq_len", _int),
    "sequence_len": ("seq_len", _int),
    # run_summarization / run_translation's DataTrainingArguments: an encoder-decoder's inputs and
    # labels, truncated apart (the longer one is the sequence length the scripts' tokenizer states)
    "max_source_length": ("source_len", _int),
    "max_target_length": ("target_len", _int),
    "model_name_or_path": ("model", lambda v: str(v) if v else None),
    "base_model": ("model", lambda v: str(v) if v else None),
    "torch_dtype": ("load_dtype", lambda v: dtype_name(str(v))),
    "dtype": ("load_dtype", lambda v: dtype_name(str(v))),
    "attn_implementation": ("attention", lambda v: ATTENTION.get(str(v))),
    "fsdp": ("fsdp", _fsdp),
    "use_liger_kernel": ("fused_loss", _bool),
    # LLaVA-family arguments classes: the alignment stage trains the projector alone
    "tune_mm_mlp_adapter": ("projector_only", _bool),
    "freeze_backbone": ("projector_only", _bool),
    "mm_tunable_parts": ("projector_only", lambda v: _projector_parts(v)),
    "use_liger": ("fused_loss", _bool),
    "lora_r": ("lora_r", _int),
    "lora_rank": ("lora_r", _int),
    "lora_dropout": ("lora_dropout", lambda v: float(v) if _is_number(v) else None),
    "lora_target_modules": ("lora_targets", lora_target_names),  # TRL ModelConfig / PEFT
    "lora_target": ("lora_targets", lora_target_names),  # LLaMA-Factory: "all" or "q_proj,v_proj"
    # PEFT's LoraConfig fields, for scripts that parse it: HfArgumentParser((..., LoraConfig))
    "r": ("lora_r", _int),
    "target_modules": ("lora_targets", lora_target_names),
    # TRL ModelConfig / Axolotl: 4-bit loading means NF4 there (their bnb_4bit_quant_type default)
    "load_in_4bit": ("quantization", lambda v: _flag(v, "nf4")),
    "load_in_8bit": ("quantization", lambda v: _flag(v, "int8")),
    "bnb_4bit_use_double_quant": ("double_quant", _bool),
    # TRL configs that name the other models of a run (trl/trainer/*_config.py)
    "precompute_ref_log_probs": ("precompute_ref", _bool),  # DPOConfig, KTOConfig
    "teacher_model_name_or_path": ("teacher_model", lambda v: str(v) if v else None),  # GKDConfig, GOLDConfig
    "reward_model_path": ("reward_model", lambda v: str(v) if v else None),  # PPOConfig
    "sft_model_path": ("model", lambda v: str(v) if v else None),  # PPOConfig: the policy
    "beta": ("kl_coef", _float),  # GRPOConfig / RLOOConfig: 0.0 loads no reference model
    # Spectrum's file of the parameters that train (`unfrozen_parameters:`, a list of regexes), as
    # its README and TRL-style recipes name it; read when the script freezes all but a selection
    "spectrum_config_path": ("trained_parameters_file", lambda v: str(v) if v else None),
    # LISA: LMFlow's FinetunerArguments (it activates 2 blocks unless told; the resolver knows)
    "use_lisa": ("layer_sampling", _bool),
    "lisa_activated_layers": ("sampled_blocks", _int),
    # what makes every sequence as long as the limit: TRL's packing, run_*.py's pad_to_max_length
    "packing": ("full_length", lambda v: _flag(v, "packing")),
    "pad_to_max_length": ("full_length", lambda v: _flag(v, "pad_to_max_length")),
}
# the options a parsed TrainingArguments (or a subclass) takes from the command line
OPTIONS = tuple(FIELDS) + ("bf16", "fp16")

# Lengths that are truncation limits: a longer sample is cut, a shorter one is padded only to the
# longest of its batch (the Trainer's default collators, TRL's, LLaVA's ``pad_sequence``), so the
# limit is the longest a batch can be, not what every batch is -- unless the run packs or pads to
# ``max_length`` (``full_length``). ``block_size`` (run_clm's grouped texts) is always full.
TRUNCATION_LIMITS = frozenset({"max_seq_length", "max_seq_len", "max_length", "model_max_length"})


# A project's arguments class declares its adapter's parameters (LLaVA's ``lora_enable: bool =
# False`` beside ``lora_r: int = 64``): a default rank or target list is a parameter of an adapter
# the script may build, not the choice of one. The ``LoraConfig(r=args.lora_r)`` that builds it
# states the rank (under its condition); a launch that passes ``--lora_r`` states it too.
ADAPTER_PARAMETERS = frozenset(field for field, (fact, _) in FIELDS.items()
                               if fact in ("lora_r", "lora_targets", "lora_dropout"))


# the switch that makes an adapter's rank and targets parameters (``ADAPTER_PARAMETERS``): a
# boolean field named for the adapter (``lora_enable``, ``use_lora``, ``use_peft``). A class
# without one (artidoro/qlora's ``lora_r: int = 64`` beside ``full_finetune: bool = False``:
# adapters unless asked otherwise) chooses the adapter by its rank.
ADAPTER_SWITCH = re.compile(r"(^|_)(lora|peft|adapters?)(_|$)", re.I)


def has_adapter_switch(defaults: dict[str, str]) -> bool:
    """Do these field defaults (field -> its default as written: ``False``, ``True``) hold a
    boolean adapter switch?"""
    return any(ADAPTER_SWITCH.search(key) and str(default).strip().lower() in ("true", "false")
               for key, default in defaults.items() if key not in ADAPTER_PARAMETERS)


# Fields only the project's own model code reads (the Trainer never does): an adapter's parameters
# and the quantization switches (LMFlow's ``ModelArguments.load_in_4bit = True`` is read only
# under ``if model_args.use_qlora:``). Their defaults in a class whose code memlint does not
# follow say nothing of the run.
MODEL_CODE_FIELDS = ADAPTER_PARAMETERS | frozenset(field for field, (fact, _) in FIELDS.items()
                                                   if fact in ("quantization", "double_quant"))


def _is_number(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return not isinstance(value, bool)


def facts_for(field: str, value: Any) -> dict[str, Any]:
    """The memlint facts one TrainingArguments-style field sets (``{}`` if none)."""
    if field in ("bf16", "fp16"):
        flag = _bool(value)
        if flag:
            return {"mixed": field}
        return {}
    if field == "deepspeed":
        return {"__reference__": str(value)} if isinstance(value, str) and value else {}
    spec = FIELDS.get(field)
    if spec is None:
        return {}
    name, convert = spec
    converted = convert(value)
    if converted is None:
        return {}
    if name == "seq_len" and field in TRUNCATION_LIMITS:
        return {name: converted, "seq_len_limit": field}
    return {name: converted}
