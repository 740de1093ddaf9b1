"""One GPU's share of a run that splits the model itself: Megatron's tensor, pipeline and expert
parallelism, and expert parallelism under FSDP.

The whole-model budget of ``training.py`` is divided component by component, with the accounting
of Megatron's ``megatron/training/theoretical_memory_usage.py`` and of Korthikanti et al. 2022
("Reducing Activation Recomputation in Large Transformer Models"), both summarised in the
project's ``reference/estimators.md``:

* parameters on the most loaded GPU: ``(block parameters / PP + embedding) / TP`` (a vision tower
  counted with the embedding, on the first stage), the routed
  experts further divided by EP (Megatron's expert tensor parallel size defaults to TP);
* bytes per parameter: bf16 weight (2) + fp32 ``main_grad`` (4) + fp32 master weight and Adam's two
  states (12), the last 12 divided by the data-parallel size under the distributed optimizer
  (``6 + 12 / DP``); no half-precision ``.grad`` and no optimizer temporary (fused Adam);
* activations: the first pipeline stage keeps PP micro-batches in flight (1F1B) of L / PP layers,
  the activations of all L layers of one micro-batch; tensor parallelism divides them by TP with
  sequence parallelism, else only 24 of Korthikanti's 34 ``s·b·h`` bytes per layer (the layer norms
  and dropouts stay whole on every rank); the vocabulary-parallel cross-entropy divides the logits
  by TP.

Neither form has a measured peak in the oracle: the estimate says so, and a verdict on it is a
warning at most.
"""

from __future__ import annotations

from dataclasses import replace

from memlint.estimate.architecture import Architecture
from memlint.estimate.budget import Budget, Component, Phase
from memlint.estimate.policy import Precision
from memlint.estimate.setup import ModelParallel, TrainingSetup
from memlint.estimate.states import routed_expert_params

# components that scale with the parameters a GPU holds / with the optimizer's partition
_HELD = ("weights", "fp32_gradients", "head_gradient", "tied_head_gradient", "tied_embedding_gradients",
         "gradients", "ddp_buckets", "reduce_copy", "flat_gradients")
_PARTITIONED = ("master_weights", "optimizer_states", "paged_optimizer_states", "optimizer_step_temp")
# components of the activations (one micro-batch of every layer, on the first pipeline stage)
_ACTIVATIONS = ("activations", "recompute", "block_backward", "autocast_weight_copies")
# Korthikanti et al. 2022, eq. 2: 34 s·b·h bytes per layer of which 24 are split by tensor parallelism
# without sequence parallelism (the rest: layer norms, dropouts, their inputs)
_SPLIT_BY_TP, _PER_LAYER = 24, 34

UNMEASURED = ("no measured peak of this form in memlint's oracle (Megatron and expert-parallel runs are "
              "not in tests/calibration): the figure follows the published accounting, not a measurement")


def parameter_shares(arch: Architecture, setup: TrainingSetup, split: ModelParallel) -> tuple[float, float]:
    """The fractions of the model's parameters one GPU holds and one GPU's optimizer partition
    covers (the most loaded GPU: the first pipeline stage, with the embedding)."""
    total = max(arch.n_params, 1)
    experts = routed_expert_params(arch)
    # the first stage holds the embedding (and a vision-language model's tower, which runs before the
    # first block); the last, the final norm and the output head
    first = arch.embedding_params + arch.extra_params
    last = arch.final_params + (arch.lm_head.params if arch.lm_head is not None else 0)
    ends = first + last if split.pipeline == 1 else max(first, last)
    blocks = total - experts - first - last
    dense = (blocks / split.pipeline + ends) / split.tensor
    routed = experts / (split.pipeline * split.tensor * split.expert)
    held = dense + routed
    data = max(setup.world_size // (split.tensor * split.pipeline), 1)
    if split.distributed_optimizer:
        partition = dense / data + routed / max(data // split.expert, 1)
    else:
        partition = held
    return held / total, partition / total


def activation_share(split: ModelParallel) -> float:
    """The fraction of one micro-batch's activations of all layers a tensor-parallel rank keeps."""
    if split.tensor == 1 or split.sequence_parallel:
        return 1 / split.tensor
    return (_PER_LAYER - _SPLIT_BY_TP + _SPLIT_BY_TP / split.tensor) / _PER_LAYER


def per_gpu(arch: Architecture, setup: TrainingSetup, budget: Budget) -> Budget:
    """``budget`` (the whole model on one GPU) divided as ``setup.model_parallel`` splits it."""
    split = setup.model_parallel
    if split is None:
        return budget
    if not split.megatron:
        return _fsdp_experts(arch, split, budget, 4 if setup.precision == Precision.FP32 else 2)
    held, partition = parameter_shares(arch, setup, split)
    acts = activation_share(split)

    def scaled(c: Component) -> Component:
        if c.key == "gradients" or c.key == "ddp_buckets" or c.key == "optimizer_step_temp":
            return replace(c, bytes=0)  # main_grad is the gradient and the DDP bucket; fused Adam
        factor = (held if c.key in _HELD else partition if c.key in _PARTITIONED
                  else acts if c.key in _ACTIVATIONS else 1 / split.tensor if c.key == "logits" else 1.0)
        return replace(c, bytes=int(c.bytes * factor))

    phases = tuple(Phase(p.name, tuple(c for c in map(scaled, p.components) if c.bytes > 0)) for p in budget.phases)
    layout = " x ".join(f"{name} {size}" for name, size in (("TP", split.tensor), ("PP", split.pipeline),
                                                            ("EP", split.expert)) if size > 1)
    notes = (
        f"Megatron {layout} on {setup.world_size} GPUs: the first pipeline stage holds {held:.1%} of the "
        f"parameters (block parameters / PP + embedding, / TP; routed experts also / EP) at 2 B (bf16) + 4 B "
        f"(fp32 main_grad), and {partition:.1%} of them at 12 B (fp32 master weights + Adam)"
        + (" (distributed optimizer)" if split.distributed_optimizer else "")
        + "; as megatron/training/theoretical_memory_usage.py counts",
        f"activations: the first stage keeps {split.pipeline} micro-batch(es) in flight of "
        f"{max(arch.num_layers // split.pipeline, 1)} layers (1F1B), "
        + ("divided by TP (sequence parallel)" if split.sequence_parallel or split.tensor == 1 else
           f"{_SPLIT_BY_TP} of {_PER_LAYER} s*b*h bytes per layer divided by TP (no sequence parallel)")
        + "; logits divided by TP (vocabulary-parallel cross-entropy), counted on the same GPU (an upper bound)",
        UNMEASURED,
    )
    return replace(budget, phases=phases, assumptions=budget.assumptions + notes,
                   setup=dict(budget.setup, model_parallel=_describe(split)))


def _fsdp_experts(arch: Architecture, split: ModelParallel, budget: Budget, gathered_bytes: int) -> Budget:
    """Expert parallelism under FSDP: the states are sharded over the same GPUs either way; what
    changes is the layer FSDP gathers, which holds only this GPU's 1/EP of the routed experts."""
    experts_per_layer = routed_expert_params(arch) / max(arch.num_layers, 1)
    spared = experts_per_layer * (1 - 1 / split.expert)

    def scaled(c: Component) -> Component:
        if c.key != "gathered_params" or not c.bytes:
            return c
        # (FSDP gathers in the half dtype unless the run is fp32: training._communication_bytes)
        return replace(c, bytes=int(max(c.bytes - spared * gathered_bytes, 0)))

    phases = tuple(Phase(p.name, tuple(map(scaled, p.components))) for p in budget.phases)
    notes = (f"expert parallelism over {split.expert} GPUs: each holds 1/{split.expert} of the routed experts "
             "(and their gradients and optimizer states); the rest sharded by FSDP", UNMEASURED)
    return replace(budget, phases=phases, assumptions=budget.assumptions + notes,
                   setup=dict(budget.setup, model_parallel=_describe(split)))


def _describe(split: ModelParallel) -> dict:
    return {"tensor": split.tensor, "pipeline": split.pipeline, "expert": split.expert,
            "sequence_parallel": split.sequence_parallel, "distributed_optimizer": split.distributed_optimizer,
            "megatron": split.megatron}
