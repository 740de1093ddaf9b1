"""LLaMA-Factory training YAMLs (``llamafactory-cli train run.yaml``): the run they define.

One flat YAML fills LLaMA-Factory's model, data, fine-tuning and (HF Seq2Seq) training
arguments. What decides memory, as LLaMA-Factory 0.9 sets it up:

* ``finetuning_type`` (default ``lora``) with ``lora_rank``/``lora_target`` (defaults 8 and
  ``all``: every linear layer); ``quantization_bit: 4`` loads NF4 (or FP4) weights, 8 int8.
* Gradient checkpointing is on unless ``disable_gradient_checkpointing: true``
  (``model/model_utils/checkpointing.py``), whatever ``gradient_checkpointing`` says.
* ``bf16``/``fp16``/``pure_bf16`` choose the dtype the model loads in; trainable parameters
  are then upcast to fp32 unless ``pure_bf16`` (or DeepSpeed ZeRO-3 without quantisation
  keeps them in fp32 anyway) — so full fine-tuning with ``bf16: true`` keeps fp32 weights
  under bf16 autocast, and LoRA keeps the frozen base in bf16.
* ``cutoff_len`` is the sequence length; ``max_length`` is a *generation* setting here.
* For vision-language models, ``image_max_pixels`` (default 768 x 768) is the pixel budget each
  image is resized into, and ``freeze_vision_tower`` (default true) keeps the vision tower out of
  training (``lora_target: all`` then skips it as well).

Keys the file leaves out take LLaMA-Factory's defaults from its schema.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memlint.configs.deepspeed import positive_int, read_deepspeed
from memlint.configs.reading import ConfigReader, loaded_mapping, new_facts
from memlint.facts.extract import extractor
from memlint.facts.hf_args import _bool, _fsdp, lora_target_names
from memlint.facts.plan import RunFacts
from memlint.model.provenance import Sourced
from memlint.model.vocabulary import optimizer_from_hf

if TYPE_CHECKING:
    from memlint.documents.parsed import ParsedDocument

TOOL = "LLaMA-Factory"
FLASH_ATTN = {"fa2": "flash", "fa3": "flash", "sdpa": "sdpa", "disabled": "eager"}


@extractor("llamafactory")
def extract_llamafactory(parsed: ParsedDocument) -> list[RunFacts]:
    data = loaded_mapping(parsed)
    if data is None:
        return []
    facts = new_facts(parsed.path, "llamafactory", data)
    facts.framework = Sourced("llamafactory", None, "LLaMA-Factory config")
    reader = ConfigReader(parsed.path, data, facts, "llamafactory")
    reader.read("model", ("model_name_or_path",), lambda v: str(v) if v else None, TOOL)
    _not_training(reader)
    reader.read("seq_len", ("cutoff_len",), positive_int, TOOL)
    _cutoff_is_a_limit(reader)
    reader.read("micro_batch", ("per_device_train_batch_size",), positive_int, TOOL)
    reader.read("grad_accum", ("gradient_accumulation_steps",), positive_int, TOOL)
    reader.read("optimizer", ("optim",), lambda v: optimizer_from_hf(str(v)), TOOL)
    reader.read("grad_clip", ("max_grad_norm",), lambda v: float(v) if isinstance(v, (int, float)) else None, TOOL)
    _finetuning(reader)
    _other_models(reader)
    _precision(reader)
    _megatron(reader)
    _checkpointing(reader)
    attention = reader.value("flash_attn")
    if isinstance(attention, str) and attention in FLASH_ATTN:  # a mapping there is no name
        reader.set("attention", FLASH_ATTN[attention], reader.location("flash_attn"), "flash_attn")
    for key in ("enable_liger_kernel", "use_liger_kernel"):
        if _bool(reader.value(key)):
            reader.set("fused_loss", True, reader.location(key), key)
    reader.set("fsdp", _fsdp(reader.value("fsdp")) if reader.has("fsdp") else None, reader.location("fsdp"), "fsdp")
    _unmodelled(reader)
    # only a vision-language model reads them (facts/resolve.py); images are resized into the budget
    reader.read("image_max_pixels", ("image_max_pixels",), positive_int, TOOL)
    frozen, frozen_at = reader.setting("freeze_vision_tower")
    if frozen is not None:
        reader.set("freeze_vision_tower", bool(_bool(frozen)), frozen_at,
                   "freeze_vision_tower" if frozen_at is not None else f"{TOOL} default freeze_vision_tower={frozen!r}")
    deepspeed = reader.value("deepspeed")
    if isinstance(deepspeed, str):
        reader.reference(("deepspeed",), "deepspeed")
    elif isinstance(deepspeed, dict):
        read_deepspeed(reader.inside("deepspeed", schema_name="deepspeed"))
    return [facts]


# the keys of a ``llamafactory-cli chat``/``webchat``/``api`` config, of an ``export`` config, and of a
# prediction run: with no ``do_train``, LLaMA-Factory trains nothing (TrainingArguments' default is False)
_NOT_TRAINING = ("infer_backend", "export_dir", "do_predict")


def _not_training(reader: ConfigReader) -> None:
    """An inference, export, prediction or evaluation config names a model but trains nothing,
    and so does a file of model defaults (llm-finetune-rag's ``configs/models/*.yaml``): every
    workflow of LLaMA-Factory trains only under ``do_train`` (``train/sft/workflow.py``:
    ``if training_args.do_train: trainer.train(...)``), which TrainingArguments leaves false."""
    if reader.has("do_train"):
        if _bool(reader.value("do_train")) is False:
            reader.set("trains", False, reader.location("do_train"), "`do_train: false`: LLaMA-Factory trains nothing")
        return
    key = next((k for k in _NOT_TRAINING if reader.has(k) and reader.value(k) not in (None, False)), None)
    if key is not None:
        reader.set("trains", False, reader.location(key), f"`{key}` without `do_train`: LLaMA-Factory "
                   "runs inference, export or prediction, not training")
        return
    if any(reader.has(k) for k in _OWN_KEYS):
        # a file only LLaMA-Factory reads; a Trainer file of another project that LLaMA-Factory could
        # also read (Firefly's train_args: its own train.py trains without `do_train`) is left be
        reader.set("trains", False, reader.location("model_name_or_path"), "no `do_train`: LLaMA-Factory trains "
                   "only with `do_train: true` (TrainingArguments' default is false)")


# stages whose batches LLaMA-Factory pads only to their longest sample: the collators of
# ``data/collator.py`` (``SFTDataCollatorWith4DAttentionMask``, ``PairwiseDataCollatorWithPadding``,
# ``KTODataCollatorWithPadding``) extend ``DataCollatorForSeq2Seq``, whose padding is the longest
_PADDED_TO_LONGEST = ("sft", "rm", "dpo", "kto")


def _cutoff_is_a_limit(reader: ConfigReader) -> None:
    """``cutoff_len`` is where LLaMA-Factory cuts a sample, not what every batch holds, unless the
    stage concatenates texts into blocks of that length: ``pt`` does (``hparams/parser.py``:
    ``data_args.packing = ... finetuning_args.stage == "pt"``), and so does SFT under ``packing``
    or ``neat_packing`` (which turns ``packing`` on)."""
    stage, _ = reader.setting("stage")
    if stage not in _PADDED_TO_LONGEST or not reader.has("cutoff_len"):
        return
    for key in ("packing", "neat_packing"):
        if _bool(reader.value(key)) and stage == "sft":
            reader.set("full_length", key, reader.location(key), f"{key}: true")
            return
    reader.set("seq_len_limit", "cutoff_len", reader.location("cutoff_len"), "cutoff_len")


# keys of LLaMA-Factory's own arguments (hparams/*.py), which no TrainingArguments has
_OWN_KEYS = ("stage", "finetuning_type", "template", "cutoff_len", "lora_target", "dataset", "dataset_dir")


def _other_models(reader: ConfigReader) -> None:
    """The models a preference or PPO stage holds beside the policy (hparams/finetuning_args.py
    ``use_ref_model``; train/trainer_utils.py ``create_ref_model``, ``create_reward_model``): DPO
    (not ORPO/SimPO) and KTO a reference, PPO a reference and, with ``reward_model_type: full``, a
    reward model (a ``lora`` one is an adapter on the policy, an ``api`` one a server)."""
    stage, stage_at = reader.setting("stage")
    if stage not in ("dpo", "kto", "ppo") or stage_at is None:
        return
    loss = reader.value("pref_loss", default="sigmoid")
    if stage == "dpo" and loss in ("orpo", "simpo"):
        reader.set("trainer_kind", loss, reader.location("pref_loss"), f"stage: dpo with pref_loss: {loss}")
        return
    reader.set("trainer_kind", stage, stage_at, f"stage: {stage}")
    reader.read("reference_model", ("ref_model",), lambda v: str(v) if v else None, TOOL)
    if stage == "ppo" and reader.value("reward_model_type", default="lora") == "full":
        reader.read("reward_model", ("reward_model",), lambda v: str(v) if v else None, TOOL)


def _finetuning(reader: ConfigReader) -> None:
    method, method_at = reader.setting("finetuning_type")
    if method == "freeze":
        _freeze(reader)
        return
    if method == "full" and _bool(reader.value("use_badam")):
        _badam(reader)
    if method not in ("lora", "oft"):
        return
    if method == "oft":
        # PEFT's OFTConfig(r=oft_rank, oft_block_size=...) (model/adapter.py): r 0 means blocks of
        # oft_block_size; a rank instead sets the block size to in_features / rank per layer
        reader.set("adapter_method", "oft", method_at, "finetuning_type: oft (PEFT OFT)")
        reader.read("oft_block_size", ("oft_block_size",), positive_int, TOOL)
        reader.read("lora_targets", ("oft_target",), lora_target_names, TOOL)
        rank, rank_at = reader.setting("oft_rank")
        if isinstance(rank, int) and not isinstance(rank, bool) and rank > 0:
            reader.set("unmodelled", f"OFT with a rank instead of a block size (`oft_rank: {rank}`)", rank_at,
                       "oft_rank")
    else:
        reader.read("lora_r", ("lora_rank",), positive_int, TOOL)
        reader.read("lora_targets", ("lora_target",), lora_target_names, TOOL)
        reader.read("lora_dropout", ("lora_dropout",), lambda v: float(v) if isinstance(v, (int, float)) else None,
                    TOOL)
    bits = reader.value("quantization_bit")
    if bits in (4, 8):
        where = reader.location("quantization_bit")
        if bits == 8:
            reader.set("quantization", "int8", where, "quantization_bit: 8")
            return
        kind, _ = reader.setting("quantization_type")
        reader.set("quantization", str(kind or "nf4").lower(), where, f"quantization_bit: 4 ({kind})")
        double, double_at = reader.setting("double_quantization")
        reader.set("double_quant", bool(_bool(double)), double_at, "double_quantization")


def _freeze(reader: ConfigReader) -> None:
    """Freeze tuning as LLaMA-Factory sets it up (``model/adapter.py``, ``_setup_freeze_tuning``):
    ``freeze_trainable_layers: N`` > 0 trains the last N blocks, every module of them
    (``freeze_trainable_modules: all``); the embeddings, the head and the other blocks are frozen.
    Other layouts (the first blocks, LLaMA Pro's interleaved blocks, chosen modules, extra
    modules) are named as what the estimate does not model."""
    layers, layers_at = reader.setting("freeze_trainable_layers")
    modules, _ = reader.setting("freeze_trainable_modules")
    llama_pro = bool(_bool(reader.value("use_llama_pro")))
    trained, why = freeze_layout(layers, modules, reader.value("freeze_extra_modules"), llama_pro)
    if llama_pro and why is None and trained is not None:
        # _setup_freeze_tuning with use_llama_pro: blocks stride-1, 2*stride-1, ... train
        # (stride = num_layers // freeze_trainable_layers): the blocks scripts/llama_pro.py added
        where = reader.location("use_llama_pro")
        reader.set("trained_blocks", trained, layers_at or where,
                   f"use_llama_pro: the {trained} expanded blocks train, one every num_layers/{trained}")
        reader.set("block_layout", "interleaved", where, "use_llama_pro: true")
        return
    if why is not None:
        where = reader.location("use_llama_pro") if reader.has("use_llama_pro") else reader.location("finetuning_type")
        reader.set("unmodelled", why, where, "finetuning_type: freeze")
    elif trained is not None:
        note = f"freeze_trainable_layers: {trained} (the last {trained} blocks train)"
        reader.set("trained_layers", trained, layers_at or reader.location("finetuning_type"), note)


def freeze_layout(layers: Any, modules: Any, extra: Any, llama_pro: bool) -> tuple[int | None, str | None]:
    """(the number of last blocks that train, or why the layout is not one the estimate states)."""
    layers = 2 if layers is None else layers  # FinetuningArguments' default
    if isinstance(layers, bool) or not isinstance(layers, int):
        return None, None
    if llama_pro and layers <= 0:
        return None, f"LLaMA Pro with `freeze_trainable_layers: {layers}`"
    if layers <= 0:
        return None, f"freeze tuning of the first blocks (`freeze_trainable_layers: {layers}`)"
    if modules is not None and str(modules).strip() != "all":
        return None, f"freeze tuning of chosen modules (`freeze_trainable_modules: {modules}`)"
    if extra:
        return None, f"freeze tuning with extra modules (`freeze_extra_modules: {extra}`)"
    return layers, None


def _precision(reader: ConfigReader) -> None:
    bf16, bf16_at = reader.setting("bf16")
    fp16, fp16_at = reader.setting("fp16")
    pure, pure_at = reader.setting("pure_bf16")
    if _bool(bf16):
        reader.set("mixed", "bf16", bf16_at, "bf16")
    elif _bool(fp16):
        reader.set("mixed", "fp16", fp16_at, "fp16")
    if _bool(pure):
        reader.set("load_dtype", "bf16", pure_at, "pure_bf16: weights and optimizer states in bf16")
        return
    method, _ = reader.setting("finetuning_type")
    half = "bf16" if _bool(bf16) else ("fp16" if _bool(fp16) else None)
    where = bf16_at if _bool(bf16) else fp16_at
    if method in ("full", "freeze"):
        reader.set("load_dtype", "fp32", where, "LLaMA-Factory upcasts trainable parameters to float32")
        if half is not None:  # freeze tuning's frozen blocks, a frozen vision tower
            reader.set("frozen_dtype", half, where, f"frozen parameters stay in the compute dtype {half}")
    elif half is not None:
        reader.set("load_dtype", half, where, f"frozen base weights in the compute dtype {half}")


def _checkpointing(reader: ConfigReader) -> None:
    disabled, where = reader.setting("disable_gradient_checkpointing")
    if _bool(disabled):
        if _bool(reader.value("gradient_checkpointing")):
            reader.set("grad_ckpt", 1, reader.location("gradient_checkpointing"), "gradient_checkpointing")
        else:
            reader.set("grad_ckpt", 0, where, "disable_gradient_checkpointing")
        return
    note = ("disable_gradient_checkpointing: false" if where
            else "LLaMA-Factory checkpoints unless disable_gradient_checkpointing")
    reader.set("grad_ckpt", 1, where, note)


# LLaMA-Factory's Megatron backend (``examples/megatron``) takes Megatron's parallel sizes
_MODEL_PARALLEL_KEYS = ("tensor_model_parallel_size", "pipeline_model_parallel_size", "expert_model_parallel_size")
# GaLore and APOLLO (``train/trainer_utils.py``, ``_create_galore_optimizer``/``_create_apollo_optimizer``):
# every Linear but the output head (``*_target: all``) or the named ones keeps rank-``*_rank``
# projected optimizer states; ``*_layerwise`` steps each parameter in its gradient hook
_PROJECTIONS = {"galore": "GaLore", "apollo": "APOLLO"}


def _megatron(reader: ConfigReader) -> None:
    """LLaMA-Factory's Megatron backend (``examples/megatron``, mcore_adapter's
    ``TrainingArguments``): the parallel sizes split the model (``estimate/model_parallel.py``);
    ``use_distributed_optimizer`` shards the fp32 states over data parallelism; Megatron recomputes
    only with ``recompute_granularity: full`` (``selective`` recomputes the attention core, which
    flash attention does not keep)."""
    split = [k for k in _MODEL_PARALLEL_KEYS if isinstance(reader.value(k), int) and not isinstance(
        reader.value(k), bool) and reader.value(k) > 1]
    if not split:
        return
    sizes = tuple(reader.value(k) if k in split else 1 for k in _MODEL_PARALLEL_KEYS)
    # (tensor, pipeline, expert, sequence parallel, distributed optimizer, Megatron's state layout)
    layout = sizes + (bool(_bool(reader.value("sequence_parallel"))),
                      bool(_bool(reader.value("use_distributed_optimizer"))), True)
    written = " x ".join(f"{k}: {reader.value(k)}" for k in split)
    reader.set("model_parallel", layout, reader.location(split[0]), f"Megatron {written}")
    full = reader.value("recompute_granularity") == "full"
    where = reader.location("recompute_granularity" if reader.has("recompute_granularity") else split[0])
    reader.set("grad_ckpt", 1 if full else 0, where,
               "recompute_granularity: full" if full else "Megatron recomputes nothing unless recompute_granularity: full")


def _unmodelled(reader: ConfigReader) -> None:
    """What the run does that memlint's estimate models apart (Megatron's parallel sizes:
    ``_megatron``; GaLore, APOLLO: ``_projection``; KTransformers: routed experts on the host)."""
    if reader.facts.model_parallel is not None:
        return
    for prefix, name in _PROJECTIONS.items():
        if _bool(reader.value(f"use_{prefix}")):
            _projection(reader, prefix, name)
            return
    if _bool(reader.value("use_kt")):
        reader.set("experts_on_host", True, reader.location("use_kt"),
                   "use_kt: KTransformers keeps the routed experts in CPU memory")


def _projection(reader: ConfigReader, prefix: str, name: str) -> None:
    rank, _ = reader.setting(f"{prefix}_rank")
    targets, _ = reader.setting(f"{prefix}_target")
    layerwise, _ = reader.setting(f"{prefix}_layerwise")
    if not isinstance(rank, int) or isinstance(rank, bool) or rank <= 0:
        return
    written = lora_target_names(targets if targets is not None else "all") or ("all-linear",)
    reader.set("projection", (name, rank, bool(_bool(layerwise)), tuple(written)), reader.location(f"use_{prefix}"),
               f"use_{prefix}: {name} rank {rank}")


def _badam(reader: ConfigReader) -> None:
    """BAdam (``_create_badam_optimizer``): ``badam_mode: layer`` trains one decoder block at a time
    (a BlockOptimizer over the base optimizer; embeddings and head stay frozen), switching blocks
    every ``badam_switch_interval`` steps; the estimate takes the block that leaves the most
    activations to keep, the first. ``ratio`` mode updates a share of every matrix (not modelled)."""
    mode, mode_at = reader.setting("badam_mode")
    where = reader.location("use_badam")
    if mode != "layer":
        reader.set("unmodelled", f"BAdam's ratio mode (`badam_mode: {mode}`)", mode_at or where, "badam_mode")
        return
    # "Pure bf16 / BAdam detected, remaining trainable params in half precision" (model/adapter.py): no
    # fp32 upcast; without bf16/fp16 the model loads in the checkpoint's dtype (patcher.py, infer_optim_dtype)
    half = "bf16" if _bool(reader.value("bf16")) else ("fp16" if _bool(reader.value("fp16")) else "auto")
    reader.set("load_dtype", half, where, f"use_badam: trainable parameters stay in the loaded dtype ({half})")
    reader.set("trained_blocks", 1, where, "use_badam: BAdam trains one block at a time")
    reader.set("block_layout", "each in turn", where, "badam_mode: layer")
