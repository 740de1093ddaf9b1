"""From memlint's run (an :class:`Architecture` and a :class:`TrainingSetup`) to a trace case.

The trace runs plain PyTorch training steps: one GPU (or one DDP replica) or FSDP2, the
precision policies torch and HF Trainer use, the optimizers in :data:`OPTIMIZERS`. Where a run
uses something the trace cannot run but a close measurable setup exists (flash-attention 2 →
SDPA's flash kernel, paged 8-bit AdamW → 8-bit AdamW, a DDP replica, ...), the case measures
that setup and says what changed; the estimate beside the measurement is then the estimate of
the *measured* setup, so the two numbers always describe the same step. Where nothing close
exists (DeepSpeed ZeRO, fp32 master weights, ...), :class:`NotMeasurable` says which flags pick
a setup the trace can run.

No torch here: ``memlint trace`` builds the case, then measures it in a worker subprocess.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from memlint.estimate.architecture import Architecture
from memlint.estimate.policy import Optimizer, Precision
from memlint.estimate.setup import Attention, Lora, Sharding, TrainingSetup
from memlint.estimate.training import effective_setup
from memlint.trace.case import OPTIMIZERS, PRECISIONS, Case, CaseError

#: micro-batches measured per step when a run accumulates gradients: from the second on, every
#: micro-batch allocates the same (the accumulated gradients stay alive), so two are exact
MEASURED_MICRO_BATCHES = 2


class NotMeasurable(CaseError):
    """The run uses something the trace cannot run; the message says what to pass instead."""

    def __init__(self, reasons: list[str]) -> None:
        self.reasons = reasons
        super().__init__("; ".join(reasons))


@dataclass(frozen=True)
class TracePlan:
    """A case to measure, the setup it measures, and how that differs from the run's own."""

    case: Case
    setup: TrainingSetup  # what the case measures: the estimate beside it prices this setup
    differences: tuple[str, ...]  # the run's setup -> the measured one, for people
    notes: tuple[str, ...] = ()  # what the framework itself changes (Gemma 2: eager attention)


def trace_plan(arch: Architecture, setup: TrainingSetup, *, steps: int = 2, round_bytes: int = 512) -> TracePlan:
    """The trace case of a run, or :class:`NotMeasurable` with what to change."""
    if not arch.is_causal_lm:
        raise NotMeasurable([f"{arch.name} is not a causal language model ({arch.model_type}); the trace "
                             "builds models with AutoModelForCausalLM"])
    if setup.mode != "train":
        raise NotMeasurable(["the trace measures training steps, not inference"])
    setup, notes = effective_setup(arch, setup)
    refused = _refusals(setup)
    if refused:
        raise NotMeasurable(refused)

    differences: list[str] = []
    measured = setup
    if setup.attention == Attention.FLASH:
        measured = measured.but(attention=Attention.SDPA)
        differences.append("flash-attention 2 measured as SDPA's flash kernel (the same saved tensors: "
                           "output and log-sum-exp)")
    if setup.optimizer == Optimizer.PAGED_ADAMW_8BIT:
        measured = measured.but(optimizer=Optimizer.ADAMW_8BIT)
        differences.append("paged 8-bit AdamW measured as 8-bit AdamW (paging only moves the states "
                           "under memory pressure)")
    if setup.offload_optimizer or setup.offload_params:
        measured = measured.but(offload_optimizer=False, offload_params=False)
        differences.append("measured without CPU offload (the trace keeps everything on the GPU)")
    if setup.frozen_layers or setup.freeze_embeddings:
        measured = measured.but(frozen_layers=0, freeze_embeddings=False)
        differences.append("measured with every layer trained (the trace freezes nothing)")
    if setup.fused_loss:
        measured = measured.but(fused_loss=False)
        differences.append("measured with transformers' own cross-entropy (full logits), not a fused loss")
    world, sharding = _world(measured, differences)
    measured = measured.but(world_size=world, sharding=sharding)
    if measured.lora is not None and measured.lora.quantization is not None and measured.lora.kbit_prepared:
        measured = measured.but(lora=replace(measured.lora, kbit_prepared=False))
        differences.append("QLoRA measured without peft's prepare_model_for_kbit_training (which keeps the "
                           "non-quantised weights in fp32)")
    if measured.grad_accum > MEASURED_MICRO_BATCHES:
        differences.append(f"{MEASURED_MICRO_BATCHES} of the {measured.grad_accum} accumulated micro-batches "
                           "measured (the later ones allocate what the second does)")
    # the trace runs PyTorch's CPU dropout kernel, which keeps a mask in the input's dtype
    # and its tracker sees no workspace that a CUDA kernel allocates inside an op
    measured = measured.but(dropout_mask_bytes=None, cuda_workspaces=False)
    positions = arch.max_position_embeddings
    if positions and measured.seq_len > positions:
        notes.append(f"the sequence length {measured.seq_len} is longer than the model's {positions} positions "
                     "(max_position_embeddings); fake tensors cannot tell whether a real run would fail there")

    case = Case.from_dict(_case_dict(arch, measured, steps=steps, round_bytes=round_bytes))
    return TracePlan(case=case, setup=measured, differences=tuple(differences), notes=tuple(notes))


def _refusals(setup: TrainingSetup) -> list[str]:
    out = []
    if setup.sharding in (Sharding.ZERO1, Sharding.ZERO2, Sharding.ZERO3):
        out.append(f"DeepSpeed ZeRO-{setup.sharding.value[-1]} is not something the trace can run (it measures "
                   "plain PyTorch and FSDP2): pass --zero 0 to measure one GPU's full replica, or --fsdp full")
    if setup.sharding == Sharding.FSDP_GRAD_OP:
        out.append("FSDP SHARD_GRAD_OP is not modelled by the trace: pass --fsdp full")
    if setup.precision.value not in PRECISIONS:
        out.append(f"precision {setup.precision.value} (half weights with an fp32 master copy, as DeepSpeed keeps "
                   "them) is not something the trace runs: pass --precision amp-bf16 (fp32 weights and autocast) "
                   "or --precision bf16")
    if setup.optimizer.value not in OPTIMIZERS and setup.optimizer != Optimizer.PAGED_ADAMW_8BIT:
        out.append(f"optimizer {setup.optimizer.value} is not one the trace builds: pass --optimizer with one of "
                   + ", ".join(OPTIMIZERS))
    if setup.grad_ckpt_every > 1:
        out.append(f"checkpointing every {setup.grad_ckpt_every} layers is not modelled by the trace (it "
                   "checkpoints every layer or none): pass --grad-ckpt")
    if setup.lora is not None and setup.lora.quantization not in (None, "nf4", "fp4"):
        out.append(f"{setup.lora.quantization} quantisation is not modelled by the trace: pass --qlora (4-bit NF4) "
                   "or plain --lora-r")
    if setup.quantized and setup.sharding in (Sharding.FSDP_FULL, Sharding.FSDP_HYBRID) and setup.world_size > 1:
        out.append("QLoRA with FSDP is not modelled by the trace: pass --gpus 1")
    if setup.precision == Precision.AMP_FP16 and setup.sharding in (Sharding.FSDP_FULL, Sharding.FSDP_HYBRID) \
            and setup.world_size > 1:
        out.append("amp-fp16 with FSDP (ShardedGradScaler) is not modelled by the trace: pass --precision amp-bf16")
    return out


def _world(setup: TrainingSetup, differences: list[str]) -> tuple[int, Sharding]:
    """World size and sharding the trace measures (per GPU numbers are the same)."""
    world = setup.world_size
    if setup.sharding == Sharding.NONE:
        if world > 1:
            differences.append(f"one of the {world} data-parallel replicas measured (every GPU holds a full "
                               "replica; DDP's gradient buckets are not in the trace)")
        return 1, Sharding.NONE
    if setup.sharding == Sharding.FSDP_HYBRID:
        shard = min(world, setup.gpus_per_node)
        differences.append(f"hybrid sharding measured as FSDP2 full sharding over the {shard} GPUs of a node")
        world = shard
    if world < 2:
        differences.append("FSDP on one GPU measured as plain single-GPU training")
        return 1, Sharding.NONE
    return world, Sharding.FSDP_FULL


def _lora_dict(lora: Lora) -> dict[str, Any]:
    targets: Any = list(lora.targets)
    if any(t in ("all-linear", "all_linear") for t in targets):
        targets = "all-linear"
    out: dict[str, Any] = {"r": lora.r, "alpha": lora.alpha, "dropout": lora.dropout, "target_modules": targets}
    if lora.quantization is not None:
        out["quant_type"] = lora.quantization
        out["double_quant"] = lora.double_quant
    return out


def _short_name(name: str) -> str:
    """A Hub id stays; a config.json path becomes the name of its directory (the case's id)."""
    path = Path(name)
    if name.endswith(".json") or path.is_dir():
        folder = path.parent if name.endswith(".json") else path
        return folder.resolve().name or name
    return name


def _case_dict(arch: Architecture, setup: TrainingSetup, *, steps: int, round_bytes: int) -> dict[str, Any]:
    config = dict(arch.config)
    config.setdefault("model_type", arch.model_type)
    lora = _lora_dict(setup.lora) if setup.lora is not None else None
    quantized = setup.quantized
    return {
        "model": config,
        "model_name": _short_name(arch.name),
        "batch_size": setup.micro_batch,
        "seq_len": setup.seq_len,
        "target_len": setup.decoder_len,
        "precision": setup.precision.value,
        "optimizer": setup.optimizer.value,
        "grad_ckpt": setup.grad_ckpt,
        "attn": setup.attention.value,
        "lora": None if quantized else lora,
        "qlora": lora if quantized else None,
        "world_size": setup.world_size,
        "sharding": setup.sharding.value,
        "keep_outputs": setup.keep_logits,
        "grad_accum": min(setup.grad_accum, MEASURED_MICRO_BATCHES),
        "steps": steps,
        "round_bytes": round_bytes,
    }
