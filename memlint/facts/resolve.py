"""From a plan's facts to the estimator's inputs, naming every assumption.

Precision is decided the way the framework will run it (see ``policy.py``): DeepSpeed's own
``bf16``/``fp16`` blocks mean half weights plus an fp32 master copy; HF Trainer / Accelerate
mixed precision over fp32 weights is autocast; a model loaded (or cast) in half precision
trains in pure half precision. Values no document states come from the project's settings
or from the framework's documented defaults, and each such choice is recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from memlint.catalog.models import UnknownModel, read_config, storage_note
from memlint.catalog.models import resolve as resolve_model_name
from memlint.documents.structured import SANE_INTEGERS
from memlint.estimate import (
    Architecture,
    Attention,
    Lora,
    ModelParallel,
    Optimizer,
    Precision,
    Projection,
    Sharding,
    TrainingSetup,
    UnsupportedArchitecture,
    as_sequence_classifier,
    from_config,
    routed_expert_params,
)
from memlint.estimate.setup import projector_only_fields, projector_params
from memlint.facts.companion_models import companions
from memlint.facts.plan import PEFT_METHOD_ADVICE, TrainingPlan
from memlint.model.provenance import Sourced
from memlint.model.vocabulary import LIGHTNING_PRECISION
from memlint.python import file_entries

# Framework defaults (transformers 5.x TrainingArguments / TRL / Axolotl), used when silent.
HF_DEFAULT_MICRO_BATCH = 8  # TrainingArguments.per_device_train_batch_size
HF_DEFAULT_OPTIMIZER = "adamw-fused"  # adamw_torch_fused on torch >= 2.8 (transformers 5)


@dataclass(frozen=True)
class RunContext:
    """What the project's settings say about runs whose documents are silent."""

    gpu: str | None = None
    world_size: int | None = None
    seq_len: int = 2048
    micro_batch: int | None = None
    model: str | None = None  # a fallback model (Hub id or config.json) for scripts that load by variable
    # the `model-config` setting: entry file -> the config.json that overrides its model, or None
    model_config: Callable[[str], Path | None] | None = field(default=None, compare=False)
    offline: bool = False  # `offline = true`: never ask the Hub


@dataclass(frozen=True)
class Assumed:
    """A deciding fact no document states, the value memlint took for it, and where the user
    can state the truth. A verdict that rests on one says so (and is less certain)."""

    # "parallelism", "unread_parallelism", "world_size", "seq_len", "seq_len_limit", "micro_batch",
    # "default_micro_batch" (a library's default nobody in the project set)
    fact: str
    value: str  # what was assumed, in words
    where: str  # where to state the truth


_STATE_PARALLELISM = (
    "if the run shards (ZeRO, FSDP), name its config where memlint can read it: `deepspeed: ds.json` or "
    "`fsdp: full_shard` in the config, or a launcher script in the project "
    "(`accelerate launch --config_file zero3.yaml ...`)"
)


@dataclass
class ResolvedRun:
    plan: TrainingPlan
    arch: Architecture | None
    setup: TrainingSetup | None
    # which fact decided each setup field (None: a default or a setting)
    provenance: dict[str, Sourced[Any] | None] = field(default_factory=dict)
    assumptions: list[str] = field(default_factory=list)
    problem: str | None = None  # why no estimate could be made (unknown model, ...)
    # how the model's architecture was found when not by its own catalogue entry (a variant or
    # mirror rule, a folder name, the Hub, `model-config`): memory findings say so
    model_note: str | None = None
    trains: bool = True  # False: the documents launch or define no training (nothing to estimate)
    # deciding facts no document states (a subset of what ``assumptions`` explains)
    assumed: list[Assumed] = field(default_factory=list)
    problem_fact: Sourced[Any] | None = None
    # the GPU an infrastructure file of the project requests (memlint.facts.infrastructure), when
    # the settings name none: the run is judged against it and its findings name the file
    gpu: Any = None
    # why the estimate is only a lower bound when a deciding value is unknown (a micro-batch passed
    # as a value memlint cannot evaluate, estimated at 1): a verdict of "exceeds" holds, "fits" is none
    lower_bound: str | None = None


def _precision(plan: TrainingPlan, arch: Architecture) -> tuple[Precision, Sourced | None, str | None]:
    """(policy, the fact that decided it, an assumption to report)."""
    ds_bf16, ds_fp16 = plan.get("ds_bf16"), plan.get("ds_fp16")
    mixed = plan.get("mixed")
    # Lightning: "bf16-true"/"16-true" convert the module; "*-mixed" is autocast over the weights
    # as loaded (like the HF Trainer's bf16=True); "32-true" leaves the weights as loaded.
    lightning = plan.get("lightning_precision")
    lightning_policy = LIGHTNING_PRECISION.get(str(lightning.value)) if lightning is not None else None
    if lightning_policy in ("bf16", "fp16"):
        return Precision(lightning_policy), lightning, None
    if (mixed is None or mixed.value not in ("bf16", "fp16")) and lightning is not None and \
            lightning_policy in ("amp-bf16", "amp-fp16"):
        mixed = lightning.with_value(lightning_policy[4:])
    uses_deepspeed = plan.get("zero_stage") is not None or ds_bf16 is not None or ds_fp16 is not None
    if uses_deepspeed:
        if ds_bf16 is not None and ds_bf16.value:
            return Precision.MIXED_BF16, ds_bf16, None
        if ds_fp16 is not None and ds_fp16.value:
            return Precision.MIXED_FP16, ds_fp16, None
        if mixed is not None and mixed.value in ("bf16", "fp16"):
            policy = Precision.MIXED_BF16 if mixed.value == "bf16" else Precision.MIXED_FP16
            return policy, mixed, None

    load = plan.get("half_model") or plan.get("load_dtype")
    assumption = None
    pinned = plan.get("pinned_load_dtype")
    if load is None and pinned is not None:
        load, assumption = pinned, pinned.note  # a transformers 4.x pin: from_pretrained loads fp32
    load_value = load.value if load is not None else "auto"
    if load_value == "auto":
        published = str(arch.config.get("torch_dtype") or arch.config.get("dtype") or "float32")
        load_value = {"bfloat16": "bf16", "float16": "fp16"}.get(published, "fp32")
        framework = plan.value("framework", "plain")
        if load is None and framework != "plain":
            assumption = (
                f"weights load in the checkpoint's dtype ({load_value}), transformers 5's "
                "from_pretrained default (dtype='auto')"
            )
    amp = mixed if (mixed is not None and mixed.value in ("bf16", "fp16")) else plan.get("autocast")
    amp_value = amp.value if amp is not None else None
    if load_value in ("bf16", "fp16") and amp is mixed and amp_value and _fsdp_full_training(plan) \
            and plan.get("pinned_no_fsdp_upcast") is None:
        # Accelerate's FSDP with mixed precision upcasts trainable half-precision parameters to
        # fp32 (accelerator.prepare_model, "FSDP upcast of low precision parameters"): the shards,
        # their gradients and Adam states are fp32, compute runs in the mixed dtype.
        policy = Precision.AMP_BF16 if amp_value == "bf16" else Precision.AMP_FP16
        return policy, amp, (
            f"FSDP with {amp_value} mixed precision: Accelerate upcasts the {load_value} weights to fp32 "
            "(fp32 parameter shards, gradients and optimizer states)"
        )
    if load_value in ("bf16", "fp16"):
        return (Precision.BF16 if load_value == "bf16" else Precision.FP16), load, assumption
    if amp_value == "bf16":
        return Precision.AMP_BF16, amp, assumption
    if amp_value == "fp16":
        return Precision.AMP_FP16, amp, assumption
    return Precision.FP32, load, assumption


def _fsdp_full_training(plan: TrainingPlan) -> bool:
    """FSDP (any sharding strategy, one process included) training every parameter: no adapter
    keeps the base frozen, so Accelerate's upcast reaches all the weights."""
    fsdp = plan.get("fsdp")
    if fsdp is None or str(fsdp.value) not in ("full", "hybrid", "grad-op"):
        return False
    return plan.get("lora_r") is None and plan.get("quantization") is None


def _optimizer(plan: TrainingPlan) -> tuple[Optimizer, Sourced | None, str | None]:
    fact = plan.get("optimizer")
    if fact is not None:
        try:
            return Optimizer.parse(str(fact.value)), fact, None
        except ValueError:
            pass
    framework = plan.value("framework", "plain")
    if framework in ("hf-trainer", "trl", "axolotl", "llamafactory"):
        return Optimizer(HF_DEFAULT_OPTIMIZER), None, "optimizer not set: the Trainer default adamw_torch_fused"
    return Optimizer.ADAMW, None, "optimizer not found: torch AdamW (foreach) assumed"


def _sharding(plan: TrainingPlan) -> tuple[Sharding, Sourced | None]:
    stage = plan.get("zero_stage")
    if stage is not None:
        mapping = {0: Sharding.NONE, 1: Sharding.ZERO1, 2: Sharding.ZERO2, 3: Sharding.ZERO3}
        return mapping.get(int(stage.value), Sharding.NONE), stage
    fsdp = plan.get("fsdp")
    if fsdp is not None:
        strategies = {"full": Sharding.FSDP_FULL, "hybrid": Sharding.FSDP_HYBRID, "grad-op": Sharding.FSDP_GRAD_OP}
        return strategies.get(str(fsdp.value), Sharding.NONE), fsdp
    return Sharding.NONE, None


def _with_framework_defaults(plan: TrainingPlan) -> tuple[TrainingPlan, list[str]]:
    """A TRL run (a script with ``SFTTrainer``/``SFTConfig``) whose documents say nothing of
    checkpointing, precision or sequence length gets TRL's defaults, and says so. (TRL config
    files get them from their extractor, located in the file.)"""
    if plan.value("framework") != "trl":
        return plan, []
    from dataclasses import replace

    from memlint.configs.trainer_args import trl_default_facts

    stated = set(plan.facts)
    if "ds_bf16" in stated or "ds_fp16" in stated:
        stated.add("mixed")  # DeepSpeed's own blocks decide the precision
    predated = plan.get("pinned_trl_predates")  # a TRL release older than its own defaults
    notes = [] if predated is None or not set(predated.value) - stated else [predated.note]
    if predated is not None:
        stated.update(predated.value)
    added = trl_default_facts(stated, None, False)
    if not added:
        return plan, notes
    facts = dict(plan.facts)
    facts.update({name: Sourced(value, None, note) for name, (value, note) in added.items()})
    return replace(plan, facts=facts), notes + [note for _, note in added.values()]


# the trainers that generate completions on the training GPUs between optimizer steps (TRL's
# online trainers: ``model.generate`` or a colocated vLLM engine; OpenRLHF's hybrid engine, whose
# vLLM shares the actor's GPUs): the KV cache of ``num_generations`` completions per prompt and
# the engine's reserved share are not in the estimate
_GENERATING = {"grpo": "GRPO", "rloo": "RLOO", "online_dpo": "online DPO", "ppo": "PPO", "gkd": "GKD"}


def _generating(plan: TrainingPlan) -> TrainingPlan:
    """A run whose trainer generates between steps: its estimate is a lower bound (``lower_bound``),
    so "exceeds" holds and "a lighter setting fits" does not."""
    kind = plan.get("trainer_kind")
    if kind is None or plan.get("lower_bound") is not None:
        return plan
    name = _GENERATING.get(str(kind.value))
    if name is None and kind.value == "openrlhf-ppo" and plan.value("colocated") == "all":
        name = "OpenRLHF's hybrid engine"
    if name is None:
        return plan
    from dataclasses import replace

    facts = dict(plan.facts)
    facts["lower_bound"] = Sourced(f"{name}'s generation of completions (its KV cache, or a vLLM engine on the "
                                   "same GPUs)", kind.origin, kind.note)
    return replace(plan, facts=facts)


def _prequantized(plan: TrainingPlan, model: Sourced[Any] | None, quantization: str) -> TrainingPlan:
    """A pre-quantized upload (``*-bnb-4bit``, ``*-GPTQ``, ``*-NVFP4``) loads its quantized weights
    whatever the script says: adapters train over them, QLoRA-style."""
    from dataclasses import replace

    facts = dict(plan.facts)
    facts["quantization"] = Sourced(quantization, model.origin if model is not None else None,
                                    storage_note(quantization) or quantization)
    return replace(plan, facts=facts)


def _frozen(plan: TrainingPlan, arch: Any, notes: list[str]) -> dict[str, Any]:
    """Freeze tuning's setup: the last N blocks train, the embeddings, head and the other blocks
    are frozen (and stay in the compute dtype while the trained ones are upcast)."""
    trained = plan.get("trained_layers")
    if trained is None or plan.get("lora_r") is not None:
        return {}
    layers = arch.num_layers
    kept = min(max(int(trained.value), 0), layers)
    half = plan.value("frozen_dtype")
    notes.append(f"freeze tuning: the last {kept} of {layers} blocks train; embeddings, head and "
                 f"{layers - kept} blocks frozen" + (f" in {half}" if half else ""))
    return {
        "frozen_layers": layers - kept,
        "freeze_embeddings": True,
        "freeze_head": True,
        "frozen_weight_bytes": {"bf16": 2.0, "fp16": 2.0}.get(str(half)) if half else None,
    }


def _projector_only(plan: TrainingPlan, arch: Any, lora: Lora | None, notes: list[str]) -> dict[str, Any]:
    """A vision-language model's alignment stage (LLaVA's ``--tune_mm_mlp_adapter True``, a script
    that freezes all but ``multi_modal_projector``): the language model is frozen whole (no
    gradients, no optimizer states), while its activations are still kept, since the loss's
    gradient flows back through every block to the projector's output at its input
    (``memlint.estimate.setup.projector_only_fields``)."""
    projector = plan.get("projector_only")
    if projector is None or projector.value is not True or lora is not None or not arch.num_layers:
        return {}
    notes.append(f"only the projector trains ({projector.note}): the language model's {arch.n_params / 1e9:.2f}B "
                 f"parameters are frozen; the projector priced as a two-layer MLP of its width, "
                 f"{projector_params(arch) / 1e6:.0f}M parameters")
    return projector_only_fields(arch)


def _selected_parameters(plan: TrainingPlan, arch: Any, lora: Lora | None, notes: list[str],
                         run: ResolvedRun) -> dict[str, Any] | None:
    """The share of the model a name selection trains (Axolotl's ``unfrozen_parameters``, a
    Spectrum file); None, with the run's problem set, where memlint cannot match the names."""
    from memlint.estimate.parameter_names import trained_share

    selected = plan.get("trained_parameters")
    if selected is None or lora is not None:
        return {}
    patterns = tuple(selected.value)
    share = trained_share(arch, patterns)
    where = f" ({selected.origin.path.rsplit('/', 1)[-1]}:{selected.origin.range.start.line})" \
        if selected.origin is not None else ""
    if share is None or share.parameters == 0:
        why = "match none of its parameters" if share is not None else "name parameters memlint cannot list"
        run.problem = (f"the run trains only the parameters whose names match {len(patterns)} patterns{where}, which "
                       f"{why} for {arch.name}; memory is not checked as full fine-tuning: {PARTLY_FROZEN_ADVICE}")
        run.problem_fact = selected
        return None
    notes.append(f"only the parameters matching {len(patterns)} name patterns{where} train: {share.tensors} tensors, "
                 f"{share.parameters / 1e9:.2f}B of {arch.n_params / 1e9:.2f}B parameters")
    return {"trainable_params": share.parameters, "frozen_layers": share.first_block,
            "freeze_embeddings": not share.embeddings, "freeze_head": not share.head}


def _images(plan: TrainingPlan, arch: Any, seq_len: int, lora: Lora | None, run: ResolvedRun) -> dict[str, Any]:
    """A vision-language run's image tokens per sequence and whether its vision tower trains.

    No file says how many images a sequence holds, so one image per sequence is assumed (and the
    finding says so); its size is the pixel budget images are resized into: LLaMA-Factory's
    ``image_max_pixels``, else the Qwen image processor's default budget."""
    from memlint.estimate import vision

    if arch.model_type not in vision.MODEL_TYPES:
        return {}
    budget = plan.get("image_max_pixels")
    pixels = int(budget.value) if budget is not None else vision.MAX_PIXELS
    side = max(int(pixels ** 0.5), 1)
    tokens = min(vision.image_tokens(arch.config, side, side, max_pixels=max(pixels, vision.MIN_PIXELS)), seq_len)
    said = (f"`image_max_pixels` {pixels}" if budget is not None and budget.origin is not None
            else f"LLaMA-Factory's default `image_max_pixels` {pixels}" if budget is not None
            else f"the image processor's default budget of {pixels} pixels")
    frozen = plan.get("freeze_vision_tower")
    tower_frozen = bool(frozen.value) if frozen is not None else False
    if not tower_frozen and (lora is None or vision.tower_adapted(arch, lora)):
        # only a tower that trains keeps activations for the images: then the count matters
        run.assumed.append(Assumed("images", f"one image per sequence at {said} ({tokens} image tokens)",
                                   "`memlint estimate --image-tokens N` prices N image tokens per sequence"))
    out: dict[str, Any] = {"image_tokens": tokens, "freeze_vision_tower": tower_frozen}
    half = plan.value("frozen_dtype")
    if tower_frozen and lora is None and half in ("bf16", "fp16"):
        out["frozen_weight_bytes"] = 2.0  # LLaMA-Factory upcasts only what trains
    return out


def _trained_blocks(plan: TrainingPlan, arch: Any) -> dict[str, Any]:
    """LLaMA Pro's expanded blocks (every ``num_layers // N``-th, the first at ``stride - 1``) or
    BAdam's one active block (taken as the first: every block after it keeps activations). The
    embeddings and the head are frozen in both."""
    trained = plan.get("trained_blocks")
    if trained is None or plan.get("lora_r") is not None or arch.num_layers == 0:
        return {}
    count = min(max(int(trained.value), 1), arch.num_layers)
    first = arch.num_layers // count - 1 if plan.value("block_layout") == "interleaved" else 0
    half = plan.value("frozen_dtype")  # freeze tuning upcasts only the trained blocks
    return {"trained_blocks": count, "frozen_layers": first, "freeze_embeddings": True, "freeze_head": True,
            "frozen_weight_bytes": {"bf16": 2.0, "fp16": 2.0}.get(str(half)) if half else None}


# LMFlow's ``lisa_activated_layers`` default (FinetunerArguments), the count of LISA's paper
LISA_DEFAULT_BLOCKS = 2


def _sampled_blocks(plan: TrainingPlan, lora: Lora | None, notes: list[str]) -> int | None:
    """LISA's count of blocks that hold gradients at a time, when the run samples layers (a full
    fine-tune only: LMFlow and Axolotl switch the blocks' own parameters, not an adapter's)."""
    if not plan.value("layer_sampling") or lora is not None:
        return None
    count = plan.get("sampled_blocks")
    if count is None:
        notes.append(f"LISA's block count not found: {LISA_DEFAULT_BLOCKS} (LMFlow's `lisa_activated_layers` default)")
        return LISA_DEFAULT_BLOCKS
    return max(int(count.value), 1)


def _model_parallel(plan: TrainingPlan) -> ModelParallel | None:
    """The split a Megatron config (or FSDP's expert parallelism) writes: (TP, PP, EP, sequence
    parallel, distributed optimizer, Megatron's state layout)."""
    fact = plan.get("model_parallel")
    if fact is None:
        return None
    tensor, pipeline, expert, sequence, distributed, megatron = fact.value
    return ModelParallel(int(tensor), int(pipeline), int(expert), bool(sequence), bool(distributed), bool(megatron))


def _no_model(plan: TrainingPlan) -> str:
    """Why no model was found, and what to do about it."""
    read = [e for e in map(file_entries.entry, plan.model_options) if e is not None]
    if read:  # ``cfg["model"]["id"]`` of ``cfg = yaml.safe_load(open("config.yaml"))``
        return (f"no model found: the script reads it as {read[0].where}, a file memlint cannot find or "
                "that writes no such entry (set `model` in [tool.memlint] or pass --model)")
    if plan.model_options:
        named = [f"`--{o}`" for o in plan.model_options if not o.startswith("#")]
        placed = [f"argument {o[1:]}" for o in plan.model_options if o.startswith("#")]
        written = " / ".join(named + placed)
        return (f"no model found: the script takes it from {written}, which has no default here and no "
                "launcher, README command or docstring of the project passes (set `model` in [tool.memlint] "
                "or pass --model)")
    return ("no model found (set `model` in [tool.memlint] for scripts that load it from a variable, or "
            "`model-config`, a config.json of the same architecture, for a model the script builds from its own "
            "classes)")


def _encoder_decoder_lengths(plan: TrainingPlan, arch: Any, seq_len: int, prov: dict) -> tuple[int, int]:
    """(encoder positions, decoder positions; 0: as many): an encoder-decoder whose script
    tokenizes its inputs and labels to lengths of their own (``max_source_length`` 1024,
    ``max_target_length`` 16) runs its decoder over the labels only. A decoder-only model
    trains on the prompt and the response concatenated (its labels are as long as its inputs,
    the prompt's masked with -100): the two lengths add up. Scripts that state one length keep
    ``seq_len`` for both."""
    source, target = plan.get("source_len"), plan.get("target_len")
    if not arch.is_encoder_decoder:
        stated = prov.get("seq_len")
        if source is None or target is None or stated is None or stated.origin not in (source.origin, target.origin):
            return seq_len, 0  # the length comes from elsewhere (an option, a config): it is the whole
        total = int(source.value) + int(target.value)
        if not 0 < total <= 2_000_000:
            return seq_len, 0
        prov["seq_len"] = Sourced(total, stated.origin, f"{source.value} + {target.value} tokens: the prompt's and "
                                  "the response's tokenizer(max_length=...), concatenated")
        return total, 0
    if target is None:
        return seq_len, 0
    labels = int(target.value)
    inputs = int(source.value) if source is not None else seq_len
    if not (0 < labels <= 1_000_000 and 0 < inputs <= 1_000_000):
        return seq_len, 0
    if source is not None:
        prov["seq_len"] = source
    prov["decoder_len"] = target
    return inputs, labels


def _padded_to_limit(plan: TrainingPlan, length: Sourced[Any], seq_len: int, usual: int, run: ResolvedRun) -> None:
    """A length that is a truncation limit (LLaVA's ``--model_max_length 8192``) is what every
    batch holds only when the run packs or pads to it; with dynamic padding the estimate at the
    limit assumes every batch has a sample that long, and says so -- for a limit above the length
    memlint takes when none is stated (``usual``, 2048 unless ``seq-len`` says otherwise): one at
    or below it is no more than what memlint would assume anyway, except in a projector-only stage,
    whose image-caption data (LLaVA's BLIP-558k: ~600 tokens with the image) stay far below any limit."""
    limit = plan.get("seq_len_limit")
    captions = plan.value("projector_only") is True
    if limit is None or limit.origin != length.origin or plan.get("full_length") is not None or (
            seq_len <= usual and not captions):
        return
    run.assumed.append(Assumed(
        "seq_len_limit",
        f"every batch padded to {seq_len} tokens (`{limit.value}` is a truncation limit; without packing or "
        f"`padding=\"max_length\"` a batch is as long as its longest sample)",
        "the length of your data's longest samples; if every batch is full, pad to `max_length` or pack"))


FROZEN_MODEL_ADVICE = ("the frozen model keeps its weights but no gradients, optimizer states or activations of its "
                       "own; measure one step with `torch.cuda.max_memory_allocated()` and silence this note with "
                       "`# memlint: ignore[MEM003]`")


PARTLY_FROZEN_ADVICE = ("only the matched parameters keep gradients and optimizer states; measure one step with "
                       "`torch.cuda.max_memory_allocated()` and silence this note with `# memlint: ignore[MEM003]`")


def _frozen_model(plan: TrainingPlan, name: str = "frozen_model") -> Sourced | None:
    """The freeze of the loaded model (whole, or all but a selection: ``name``), when nothing
    else says which part of it trains (an adapter, a projector, the last blocks: those the
    estimate models)."""
    frozen = plan.get(name)
    if frozen is None or plan.get("trained_parameters") is not None:
        return None
    projector = plan.get("projector_only")
    if plan.get("lora_r") is not None or plan.get("adapter_method") is not None or \
            plan.get("trained_layers") is not None or plan.get("trained_blocks") is not None or \
            (projector is not None and projector.value):
        return None
    return frozen


def resolve(plan: TrainingPlan, context: RunContext, base_dir: Path | None = None) -> ResolvedRun:
    """The architecture and setup of a plan, or the reason there is none."""
    plan, default_notes = _with_framework_defaults(plan)
    plan = _generating(plan)
    run = ResolvedRun(plan=plan, arch=None, setup=None, trains=plan.trains)
    if not plan.trains:
        off = plan.get("trains")
        run.problem = (f"the run does not train ({off.note or '`do_train` is false'})"
                       if off is not None and off.value is False
                       else "nothing here trains: the launcher runs no training script memlint can see")
        return run
    run.assumptions.extend(default_notes)
    unmodelled = plan.get("unmodelled")
    method = plan.get("peft_method")
    if unmodelled is None and method is not None:
        unmodelled = method.with_value((f"the PEFT method `{method.value}`", PEFT_METHOD_ADVICE))
    if unmodelled is not None:
        # a fact may carry what to do about it: (what the run uses, advice)
        what, advice = unmodelled.value if isinstance(unmodelled.value, tuple) else (unmodelled.value, "")
        run.problem = f"the run uses {what}, which memlint's estimate does not model" + (f": {advice}" if advice else "")
        run.problem_fact = unmodelled
        return run
    freeze = _frozen_model(plan)
    if freeze is not None:
        run.problem = (f"the run freezes the model it loads (`{freeze.value}`, its gradients turned off) and trains "
                       "modules the script adds to it, which memlint's estimate (of the loaded model trained) does "
                       f"not model: {FROZEN_MODEL_ADVICE}")
        run.problem_fact = freeze
        return run
    selected = _frozen_model(plan, "partly_frozen")
    if selected is not None:
        run.problem = (f"the run freezes the model it loads and trains again only the parameters whose names match "
                       f"`{selected.value}`, a selection read at run time, so memory is not checked as full "
                       f"fine-tuning: {PARTLY_FROZEN_ADVICE}")
        run.problem_fact = selected
        return run
    model = plan.get("model")
    model_name = model.value if model is not None else context.model
    override = context.model_config(plan.entry) if context.model_config is not None and plan.entry else None
    if not model_name and override is None:
        run.problem = _no_model(plan)
        return run
    try:
        if override is not None:
            arch = from_config(read_config(override), str(model_name or override))
            run.model_note = f"architecture from `model-config` {override}"
            run.assumptions.append(run.model_note)
        else:
            found = resolve_model_name(str(model_name), base_dir, offline=context.offline or None)
            arch = found.arch
            lineage = plan.get("model_lineage")  # a checkpoint an earlier stage of the launcher writes
            notes = [str(lineage.value)] if lineage is not None else []
            notes += [found.note] if found.note else []
            if notes:
                run.model_note = "; ".join(notes)
                run.assumptions.extend(notes)
            if found.quantization and plan.get("quantization") is None:
                plan = _prequantized(plan, model, found.quantization)
                run.plan = plan
    except (UnknownModel, UnsupportedArchitecture) as error:
        run.problem, run.problem_fact = str(error), model
        return run
    if arch.generic_note:
        run.assumptions.append(arch.generic_note)
    on_host = plan.get("experts_on_host")
    if on_host is not None and on_host.value and not routed_expert_params(arch):
        if arch.generic_note:
            why = (f"memlint has no layer recipe for `{arch.model_type}` and its meta-device count found no fused "
                   "expert weights, so it cannot tell which weights stay on the GPU:")
        else:
            why = (f"`{model_name}` ({arch.model_type}) has no routed experts to keep there (KTransformers trains "
                   "mixture-of-experts models): check `model_name_or_path`, or")
        run.problem = (f"the run keeps routed experts in host memory with KTransformers, but {why} measure the "
                       "first steps with `torch.cuda.max_memory_allocated()` and silence this note with "
                       "`# memlint: ignore[MEM003]`")
        run.problem_fact = on_host
        return run
    expanded = plan.get("expanded_blocks")
    if expanded is not None and int(expanded.value) > 0 and "num_hidden_layers" in arch.config:
        added = int(expanded.value)
        arch = from_config(dict(arch.config, num_hidden_layers=arch.num_layers + added), arch.name)
        run.assumptions.append(f"LLaMA Pro: {model_name} expanded by {added} blocks to {arch.num_layers} "
                               f"({expanded.note})")
    score = plan.get("score_head")
    if score is not None and arch.is_causal_lm and isinstance(score.value, int):
        arch = as_sequence_classifier(arch, score.value)
        run.assumptions.append(f"loaded as a sequence classifier ({score.note}): a score layer of "
                               f"{score.value} label(s) in place of the vocabulary head, no vocabulary logits")
    run.arch = arch
    prov = run.provenance
    notes = run.assumptions

    precision, fact, note = _precision(plan, arch)
    prov["precision"] = fact
    if note:
        notes.append(note)
    optimizer, fact, note = _optimizer(plan)
    prov["optimizer"] = fact
    if note:
        notes.append(note)
    sharding, prov["sharding"] = _sharding(plan)
    split = _model_parallel(plan)
    if split is not None and split.megatron and precision != Precision.FP32:
        precision = Precision.MIXED_FP16 if precision in (Precision.FP16, Precision.AMP_FP16,
                                                          Precision.MIXED_FP16) else Precision.MIXED_BF16
        notes.append(f"Megatron trains {precision.value.split('-')[1]} weights with fp32 master weights and an fp32 "
                     "main_grad buffer (mcore_adapter's Float16Module and DistributedDataParallel)")

    def number(name: str, default: int, why: str) -> int:
        fact = plan.get(name)
        prov[name] = fact
        if fact is not None:
            try:
                value = int(fact.value)
                if 1 <= value < SANE_INTEGERS.stop:  # larger: a typo no estimate can be made of
                    return value
            except (TypeError, ValueError, OverflowError):
                pass
        notes.append(why)
        return default

    framework = plan.value("framework", "plain")
    hf_like = framework in ("hf-trainer", "trl")
    batch_default = context.micro_batch or (HF_DEFAULT_MICRO_BATCH if hf_like else 1)
    passed = plan.get("micro_batch_unknown")
    unknown_batch = passed is not None and plan.get("micro_batch") is None and not context.micro_batch
    if unknown_batch:
        assert passed is not None
        # the launch passes a value memlint cannot evaluate: the smallest, 1, makes the estimate a
        # lower bound (the rules say so), never the default the option replaces
        prov["micro_batch"] = None
        micro_batch = 1
        notes.append(f"micro-batch unknown: `{passed.note}` is a value memlint cannot evaluate; estimated at 1, "
                     "a lower bound (set `micro-batch` in [tool.memlint] to judge the real one)")
        where = f", {Path(passed.origin.path).name}:{passed.origin.range.start.line}" if passed.origin else ""
        run.lower_bound = f"the micro-batch is unknown (`{passed.note}`{where}), estimated at 1"
    else:
        micro_batch = number(
            "micro_batch", batch_default,
            f"micro-batch not found: {batch_default}" + (" (TrainingArguments default)" if hf_like else ""),
        )
    chunk = plan.get("gradient_cache_chunk")
    if chunk is not None and isinstance(chunk.value, int) and 0 < chunk.value < micro_batch:
        # a gradient cache runs forward and backward one chunk at a time: its activations are the run's
        notes.append(f"micro-batch {micro_batch} runs in chunks of {chunk.value} ({chunk.note}): "
                     f"activations of {chunk.value} samples at a time")
        micro_batch = chunk.value
    unread = plan.get("unread_arguments")
    if unknown_batch:
        pass  # unknown, not assumed: the memory verdicts are lower bounds, and say so
    elif prov.get("micro_batch") is None and not context.micro_batch and (not hf_like or unread is not None):
        # a TrainingArguments default is what runs only when the script's arguments classes are
        # known: one memlint cannot read may set its own (LMFlow's DPOAlignerArguments: 4)
        said = f" (the TrainingArguments default; `{unread.value}` not read)" if hf_like and unread else ""
        run.assumed.append(Assumed("micro_batch", f"micro-batch {micro_batch}{said}", "`micro-batch` in [tool.memlint]"))
    elif prov.get("micro_batch") is None and not context.micro_batch:
        # the library's default is what runs, but no one in the project chose it: a verdict that
        # rests on it says so (the rules ask whether micro-batch 1 would fit)
        run.assumed.append(Assumed("default_micro_batch", f"micro-batch {micro_batch} (the TrainingArguments "
                                   "default: nothing in the project sets `per_device_train_batch_size`)",
                                   "`per_device_train_batch_size` on the launch or in the config"))
    if hf_like and unread is not None and plan.get("grad_ckpt") is None:
        run.assumed.append(Assumed("grad_ckpt", f"gradient checkpointing off (the TrainingArguments default; "
                                   f"`{unread.value}` not read)", "`--gradient_checkpointing` on the launch"))
    # a model never sees more tokens than it has positions (GPT-2's 1024: run_clm's block_size
    # defaults to the tokenizer's model_max_length, capped there)
    positions = arch.max_position_embeddings
    seq_default = min(context.seq_len, positions) if positions and positions > 0 else context.seq_len
    capped = f", the model's {positions} positions" if seq_default < context.seq_len else ""
    generated = plan.get("generation_len")
    # a loop of the script's own that trains on what it generates (simple_GRPO's vLLM rollouts):
    # the completion limit is the one length it states, a lower bound of every sequence
    rollouts = generated if (generated is not None and isinstance(generated.value, int)
                             and plan.get("seq_len") is None and not hf_like) else None
    if rollouts is not None:
        seq_len = number("seq_len", rollouts.value, f"sequence length not found: at least {rollouts.value} tokens, "
                         f"the completion limit of the script's own generation ({rollouts.note})")
        if run.lower_bound is None:
            run.lower_bound = (f"the sequence length is the completions' limit alone ({rollouts.note}), "
                               "without their prompts")
    else:
        seq_len = number("seq_len", seq_default, f"sequence length not found: {seq_default}{capped} "
                         "(set `seq-len` in [tool.memlint])")
    length = prov.get("seq_len")
    if length is not None:
        _padded_to_limit(plan, length, seq_len, context.seq_len, run)
    elif rollouts is None:
        run.assumed.append(Assumed("seq_len", f"sequence length {seq_len}", "`seq-len` in [tool.memlint]"))
    seq_len, decoder_len = _encoder_decoder_lengths(plan, arch, seq_len, prov)
    world = plan.get("world_size")
    single = plan.get("single_process")
    if world is None and single is not None and hf_like and prov.get("sharding") is None and \
            plan.get("unread_parallelism") is None and split is None and plan.get("device_map") is None:
        # transformers' TrainingArguments sees every GPU as ``n_gpu`` of one process and the Trainer
        # wraps the model in nn.DataParallel: GPU 0 holds the weights, the gradients and the optimizer
        # states, with no DDP buckets -- what one GPU holds (a ``device_map`` spreads the model over
        # those GPUs instead: said below)
        world = Sourced(1, single.origin, f"{single.note}: the Trainer's nn.DataParallel keeps the gradients "
                        "and optimizer states on GPU 0")
    prov["world_size"] = world
    world_size = int(world.value) if world is not None else (context.world_size or 1)
    if world_size not in SANE_INTEGERS:
        world_size = context.world_size or 1
    if split is not None:
        written = plan.get("model_parallel").note  # type: ignore[union-attr]
        fewest = split.model_split
        if world_size < fewest:
            notes.append(f"GPU count {'not found' if world is None and context.world_size is None else world_size}: "
                         f"{fewest}, the fewest this layout runs on ({written}; "
                         "set `gpus` in [tool.memlint] or pass --gpus)")
            world_size = fewest
        run.assumed.append(Assumed("model_parallel", f"that the published memory accounting holds for {written}",
                               "memlint's oracle has no measured peak of this form: measure the first steps with "
                               "`torch.cuda.max_memory_allocated()`"))
    elif world is None and context.world_size is None and sharding != Sharding.NONE:
        notes.append("GPU count not found: 1 (set `gpus` in [tool.memlint] or pass --gpus)")
        run.assumed.append(Assumed("world_size", "1 GPU", "`gpus` in [tool.memlint] or --gpus"))
    hostfile = plan.get("unread_hostfile")
    if hostfile is not None and split is None:
        per = f"{world_size} GPU{'s' if world_size != 1 else ''}"
        run.assumed.append(Assumed("hostfile", f"{per} in all (the launch runs on the machines "
                                   f"`{hostfile.value}` lists)",
                                   "`gpus` in [tool.memlint] or --gpus: the GPUs of every machine together"))
    spread = plan.get("device_map")
    if spread is not None and world is None and world_size > 1:
        # one process whose model accelerate splits over the GPUs: each holds some layers, their
        # states and activations, not the whole model, and the split is accelerate's to choose
        run.problem = (f"the run loads its model with `{spread.value}` in one process, which spreads "
                       f"the layers over the {world_size} GPUs it sees (naive model parallelism); memlint's estimate "
                       "does not model that split: set `gpus = 1` in [tool.memlint] to check the model on one GPU")
        run.problem_fact = spread
        return run
    unread = plan.get("unread_parallelism")
    if prov.get("sharding") is None and world_size > 1 and unread is not None and (split is None or not split.megatron):
        notes.append(f"parallelism not read: the run names `{unread.value}`, which cannot be found; its ZeRO "
                     "stage is unknown, estimated as plain data parallelism")
        run.assumed.append(Assumed("unread_parallelism", f"plain data parallelism (DDP) in place of the ZeRO stage "
                                   f"of `{unread.value}`", f"`{unread.value}` does not exist: correct the path"))
    elif prov.get("sharding") is None and world_size > 1 and plan.value("framework") == "torchtune":
        # a torchtune config whose recipe no header names: torchtune has no data-parallel recipe,
        # and every distributed one shards with FSDP (training.shard_model)
        sharding = Sharding.FSDP_FULL
        recipes = Sourced("full", None, "torchtune runs several GPUs only through its distributed recipes, which "
                                        "shard with FSDP")
        prov["sharding"] = recipes
        notes.append(recipes.note)
    elif prov.get("sharding") is None and world_size > 1 and (split is None or not split.megatron):
        notes.append("parallelism not found: plain data parallelism (every GPU holds the whole model and its "
                     "optimizer states)")
        run.assumed.append(Assumed("parallelism", "plain data parallelism (DDP)", _STATE_PARALLELISM))

    grad_ckpt = plan.get("grad_ckpt")
    prov["grad_ckpt"] = grad_ckpt
    attention = plan.get("attention")
    pinned_attention = plan.get("pinned_attention")
    if attention is None and pinned_attention is not None and "auto_map" not in arch.config:
        # the pinned release runs eager attention; a model with its own modelling code runs that
        attention = pinned_attention
        notes.append(pinned_attention.note)
    prov["attention"] = attention
    lora = None
    r = plan.get("lora_r")
    quant = plan.get("quantization")
    method = plan.get("adapter_method")
    if r is not None or quant is not None or method is not None:
        targets = plan.value("lora_targets") or ("q_proj", "v_proj")
        lora = Lora(
            r=int(r.value) if r is not None else 8,
            targets=tuple(targets),
            dropout=float(plan.value("lora_dropout", 0.0) or 0.0),
            quantization=str(quant.value) if quant is not None else None,
            double_quant=bool(plan.value("double_quant", False)),
            method=str(method.value) if method is not None else "lora",
            block_size=int(plan.value("oft_block_size", 32) or 32),
        )
        prov["lora"] = r or method or quant
    accum = plan.get("grad_accum")
    prov["grad_accum"] = accum
    by_name = _selected_parameters(plan, arch, lora, notes, run)
    if by_name is None:
        return run
    frozen = _frozen(plan, arch, notes) or _trained_blocks(plan, arch) or by_name or _projector_only(plan, arch, lora, notes)
    frozen = {**_images(plan, arch, seq_len, lora, run), **frozen}
    projection = plan.get("projection")
    if projection is not None:
        name, rank, layerwise, projected = projection.value
        frozen["projection"] = Projection(rank=int(rank), name=str(name), layerwise=bool(layerwise),
                                          targets=tuple(projected))
    if plan.value("experts_on_host"):
        frozen["experts_on_host"] = True
    sampled = _sampled_blocks(plan, lora, notes)
    if sampled is not None:
        frozen["sampled_blocks"] = sampled
    if split is not None:
        frozen["model_parallel"] = split
    try:
        run.setup = TrainingSetup(
            **frozen,
            micro_batch=micro_batch,
            seq_len=seq_len,
            decoder_len=decoder_len,
            precision=precision,
            optimizer=optimizer,
            grad_ckpt_every=int(grad_ckpt.value) if grad_ckpt is not None else 0,
            attention=Attention.parse(str(attention.value)) if attention is not None else Attention.SDPA,
            lora=lora,
            sharding=sharding,
            world_size=max(world_size, 1),
            offload_optimizer=bool(plan.value("offload_optimizer", False)),
            offload_params=bool(plan.value("offload_params", False)),
            grad_accum=max(int(accum.value), 1) if accum is not None else 1,
            fused_loss=bool(plan.value("fused_loss", False)),
            loss_chunks=int(plan.value("loss_chunks", 0) or 0),
            loss_compiled=bool(plan.value("loss_compiled", False)),
            keep_logits=bool(plan.value("keep_logits", False)),
            reduce_bucket_elements=plan.value("reduce_bucket"),
            allgather_bucket_elements=plan.value("allgather_bucket"),
            prefetch_bucket_elements=plan.value("prefetch_bucket"),
            max_live_parameters=plan.value("max_live_parameters"),
        )
    except ValueError as error:
        run.problem = str(error)
        return run
    others = companions(plan, arch, base_dir, context.offline or None)
    notes.extend(others.notes)
    if others.models or others.sequences_per_example != 1:
        from dataclasses import replace

        run.setup = replace(run.setup, companions=others.models, sequences_per_example=others.sequences_per_example)
    return run
