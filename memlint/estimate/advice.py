"""The cheapest changes that make a run fit, each priced by re-running the estimator.

Changes are tried in the order an engineer would reach for them: free ones first (a fused
optimizer, SDPA, fused cross-entropy), then ones that cost speed (checkpointing, a smaller
micro-batch with more accumulation, sharding, offload), then ones that change the training
itself (8-bit optimizer states, bf16 weights, LoRA, QLoRA).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from memlint.estimate.architecture import Architecture
from memlint.estimate.budget import Budget
from memlint.estimate.policy import Optimizer, Precision
from memlint.estimate.setup import Attention, Lora, Sharding, TrainingSetup
from memlint.estimate.training import estimate_training


@dataclass(frozen=True)
class Suggestion:
    key: str  # stable id: "grad_ckpt", "fused_adamw", ...
    change: str  # for people: "enable gradient checkpointing"
    how: str  # where to set it: "TrainingArguments(gradient_checkpointing=True)"
    setup: TrainingSetup
    peak_bytes: int
    saves_bytes: int
    fits: bool | None

    def to_json(self) -> dict:
        return {
            "key": self.key,
            "change": self.change,
            "how": self.how,
            "peak_bytes": self.peak_bytes,
            "saves_bytes": self.saves_bytes,
            "fits": self.fits,
        }


Candidate = tuple[str, str, str, Callable[[TrainingSetup], TrainingSetup | None]]


def _candidates(arch: Architecture, setup: TrainingSetup) -> list[Candidate]:
    s = setup
    out: list[Candidate] = []

    def add(key, change, how, make):
        out.append((key, change, how, make))

    if s.model_parallel is not None and s.model_parallel.megatron:
        return _megatron_candidates(s)
    if s.optimizer in (Optimizer.ADAMW, Optimizer.ADAM):
        add("fused_adamw", "use the fused AdamW kernel",
            'optim="adamw_torch_fused" or torch.optim.AdamW(..., fused=True)',
            lambda t: t.but(optimizer=Optimizer.ADAMW_FUSED))
    if s.attention == Attention.EAGER:
        add("sdpa", "use SDPA / flash attention", 'attn_implementation="sdpa" (transformers>=4.36)',
            lambda t: t.but(attention=Attention.SDPA))
    if arch.is_causal_lm and not s.fused_loss:
        add("fused_loss", "use a fused cross-entropy (no full logits)",
            "use_liger_kernel=True (Liger fused linear cross-entropy)",
            lambda t: t.but(fused_loss=True))
    if not s.grad_ckpt:
        add("grad_ckpt", "enable gradient checkpointing", "gradient_checkpointing=True",
            lambda t: t.but(grad_ckpt_every=1))
    # halving the micro-batch and doubling accumulation keeps the effective batch; each halving
    # is a candidate, and ``_single_changes`` keeps the largest micro-batch that fits
    factor = 2
    while s.micro_batch % factor == 0:
        micro, accum = s.micro_batch // factor, s.grad_accum * factor
        add("micro_batch", f"micro-batch {micro} with {accum}x gradient accumulation",
            f"per_device_train_batch_size={micro}, gradient_accumulation_steps={accum}",
            lambda t, f=factor: t.but(micro_batch=t.micro_batch // f, grad_accum=t.grad_accum * f))
        factor *= 2
    if s.world_size > 1 and s.sharding in (Sharding.NONE, Sharding.ZERO1):
        add("zero2", "ZeRO stage 2 (shard gradients and optimizer states)",
            '"zero_optimization": {"stage": 2}', lambda t: t.but(sharding=Sharding.ZERO2))
    if s.world_size > 1 and s.sharding not in (Sharding.ZERO3, Sharding.FSDP_FULL):
        add("zero3", "ZeRO stage 3 / FSDP full shard (shard parameters too)",
            '"zero_optimization": {"stage": 3}  or  fsdp="full_shard"',
            lambda t: t.but(sharding=Sharding.ZERO3))
    if s.world_size == 1 and s.sharding in (Sharding.ZERO3, Sharding.FSDP_FULL):
        # the run already shards fully: on one GPU there is nothing to shard over, so the change is the GPU count
        add("zero3_8", "run it on 8 GPUs (its full sharding then splits the model over them)", "--nproc_per_node 8",
            lambda t: t.but(world_size=8))
    elif s.world_size == 1:
        add("zero3_8", "shard over 8 GPUs (ZeRO-3 / FSDP)", "--nproc_per_node 8 with ZeRO stage 3",
            lambda t: t.but(world_size=8, sharding=Sharding.ZERO3))
    if not s.offload_optimizer and s.lora is None:
        add("offload_optimizer", "offload optimizer states to CPU (ZeRO-Offload)",
            '"offload_optimizer": {"device": "cpu"}',
            lambda t: t.but(offload_optimizer=True,
                            sharding=t.sharding if t.sharding != Sharding.NONE else Sharding.ZERO2))
    if s.optimizer in (Optimizer.ADAMW, Optimizer.ADAMW_FUSED, Optimizer.ADAM, Optimizer.ADAMW_FORLOOP):
        add("adamw_8bit", "8-bit AdamW states (bitsandbytes)", 'optim="adamw_bnb_8bit"',
            lambda t: t.but(optimizer=Optimizer.ADAMW_8BIT))
    if s.precision == Precision.FP32:
        add("amp_bf16", "bf16 mixed precision", "bf16=True",
            lambda t: t.but(precision=Precision.AMP_BF16))
    if s.precision in (Precision.FP32, Precision.AMP_BF16, Precision.AMP_FP16) and s.lora is None:
        add("bf16_weights", "load the model in bf16 (pure bf16 training)",
            "from_pretrained(..., torch_dtype=torch.bfloat16)",
            lambda t: t.but(precision=Precision.BF16))
    if s.lora is None:
        add("lora", "LoRA r=16 on all linear layers instead of full fine-tuning",
            'LoraConfig(r=16, target_modules="all-linear")',
            lambda t: t.but(lora=Lora(r=16, targets=("all-linear",)),
                            precision=Precision.BF16 if t.precision != Precision.FP32 else t.precision))
    if s.lora is None or s.lora.quantization is None:
        base = s.lora or Lora(r=16, targets=("all-linear",))
        add("qlora", "QLoRA: 4-bit NF4 base weights with LoRA adapters",
            'BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4")',
            lambda t: t.but(lora=Lora(r=base.r, targets=base.targets, quantization="nf4"),
                            precision=Precision.BF16, grad_ckpt_every=max(t.grad_ckpt_every, 1)))
    return out


def _megatron_candidates(s: TrainingSetup) -> list[Candidate]:
    """What a Megatron config changes to lower its peak: its own settings, not ZeRO's or PEFT's."""
    split = s.model_parallel
    assert split is not None
    out: list[Candidate] = []
    if not split.distributed_optimizer:
        out.append(("distributed_optimizer", "shard the fp32 states over data parallelism",
                    "use_distributed_optimizer: true",
                    lambda t: t.but(model_parallel=replace(split, distributed_optimizer=True))))
    if not s.grad_ckpt:
        out.append(("grad_ckpt", "recompute every layer in backward", "recompute_granularity: full",
                    lambda t: t.but(grad_ckpt_every=1)))
    if split.tensor > 1 and not split.sequence_parallel:
        out.append(("sequence_parallel", "split the layer norms' and dropouts' activations too",
                    "sequence_parallel: true",
                    lambda t: t.but(model_parallel=replace(split, sequence_parallel=True))))
    factor = 2
    while s.micro_batch % factor == 0:
        micro, accum = s.micro_batch // factor, s.grad_accum * factor
        def smaller(t: TrainingSetup, f: int = factor) -> TrainingSetup:
            return t.but(micro_batch=t.micro_batch // f, grad_accum=t.grad_accum * f)

        out.append(("micro_batch", f"micro-batch {micro} with {accum}x gradient accumulation",
                    f"per_device_train_batch_size: {micro}, gradient_accumulation_steps: {accum}", smaller))
        factor *= 2
    return out


MAX_COMBINED = 3


def _single_changes(arch: Architecture, setup: TrainingSetup, budget: Budget) -> list[Suggestion]:
    results: list[Suggestion] = []
    for key, change, how, make in _candidates(arch, setup):
        try:
            changed = make(setup)
        except ValueError:
            continue
        if changed is None:
            continue
        new = estimate_training(arch, changed, budget.capacity)
        saves = budget.peak_bytes - new.peak_bytes
        if saves <= 0:
            continue
        results.append(Suggestion(key, change, how, changed, new.peak_bytes, saves, new.fits))
    return _one_per_key(results)


def _one_per_key(results: list[Suggestion]) -> list[Suggestion]:
    """Of several sizes of one change (micro-batch 4, 2, 1), the first that fits, else the first."""
    chosen: dict[str, Suggestion] = {}
    for suggestion in results:
        kept = chosen.get(suggestion.key)
        if kept is None or (not kept.fits and suggestion.fits):
            chosen[suggestion.key] = suggestion
    return [s for s in results if chosen[s.key] is s]


def _combined(arch: Architecture, budget: Budget, first: list[Suggestion]) -> Suggestion | None:
    """When no single change fits: the biggest saving, then the biggest saving on top of it,
    up to three changes, until the run fits."""
    chosen: list[Suggestion] = []
    options = first
    current = budget
    for _ in range(MAX_COMBINED):
        if not options:
            return None
        best = max(options, key=lambda s: s.saves_bytes)
        chosen.append(best)
        current = estimate_training(arch, best.setup, budget.capacity)
        if current.fits:
            return Suggestion(
                key="+".join(s.key for s in chosen),
                change=" + ".join(s.change for s in chosen),
                how="; ".join(s.how for s in chosen),
                setup=best.setup,
                peak_bytes=current.peak_bytes,
                saves_bytes=budget.peak_bytes - current.peak_bytes,
                fits=True,
            )
        taken = {part for s in chosen for part in s.key.split("+")}
        options = [s for s in _single_changes(arch, best.setup, current) if s.key not in taken]
    return None


def suggest(arch: Architecture, setup: TrainingSetup, budget: Budget, limit: int = 6) -> list[Suggestion]:
    """Changes that lower the peak, those that make it fit first, each with its saving.

    When no single change makes the run fit, the cheapest combination that does comes first.
    """
    results = _single_changes(arch, setup, budget)
    fitting = [s for s in results if s.fits]
    others = sorted((s for s in results if not s.fits), key=lambda s: -s.saves_bytes)
    if not fitting and budget.capacity is not None and results:
        combination = _combined(arch, budget, results)
        if combination is not None:
            fitting = [combination]
    return (fitting + others)[:limit]
