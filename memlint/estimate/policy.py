"""Precision policies and optimizers, as the frameworks really execute them.

A precision flag alone does not decide memory: HF Trainer ``bf16=True`` on an fp32-loaded model
keeps fp32 weights, gradients and Adam states and only runs the matmuls in bf16 (``amp-bf16``);
a model loaded in bf16 and trained with torch AdamW keeps everything in bf16 (``bf16``);
DeepSpeed's bf16 mode keeps half weights plus an fp32 master copy (``mixed-bf16``). The facts
layer picks the policy per source; this module says what each policy costs.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Precision(str, enum.Enum):
    FP32 = "fp32"
    BF16 = "bf16"  # pure: weights, grads and optimizer states in bf16
    FP16 = "fp16"  # pure half precision
    AMP_BF16 = "amp-bf16"  # fp32 weights + torch.autocast(bfloat16)
    AMP_FP16 = "amp-fp16"  # fp32 weights + torch.autocast(float16) + GradScaler
    MIXED_BF16 = "mixed-bf16"  # half weights + fp32 master copy (DeepSpeed / Megatron)
    MIXED_FP16 = "mixed-fp16"

    @classmethod
    def parse(cls, text: str) -> "Precision":
        return _parse_enum(cls, text, "precision")


class Optimizer(str, enum.Enum):
    ADAMW = "adamw"  # torch.optim.AdamW default: the foreach (multi-tensor) implementation
    ADAMW_FUSED = "adamw-fused"
    ADAMW_FORLOOP = "adamw-forloop"
    ADAM = "adam"
    SGD = "sgd"
    SGD_MOMENTUM = "sgd-momentum"
    ADAFACTOR = "adafactor"
    ADAMW_8BIT = "adamw-8bit"  # bitsandbytes AdamW8bit
    PAGED_ADAMW_8BIT = "paged-adamw-8bit"  # bitsandbytes PagedAdamW8bit
    PAGED_ADAMW = "paged-adamw"  # bitsandbytes PagedAdamW / PagedAdamW32bit (32-bit states)
    PAGED_LION = "paged-lion"  # bitsandbytes PagedLion / PagedLion32bit (32-bit states)
    LION = "lion"
    ADAM_MINI = "adam-mini"  # zyushun/Adam-mini's Adam_mini

    @classmethod
    def parse(cls, text: str) -> "Optimizer":
        return _parse_enum(cls, text, "optimizer")


def _parse_enum(cls, text: str, what: str):
    key = text.strip().lower().replace("_", "-")
    for member in cls:
        if member.value == key:
            return member
    names = ", ".join(m.value for m in cls)
    raise ValueError(f"unknown {what} {text!r}; expected one of {names}")


@dataclass(frozen=True)
class PrecisionPolicy:
    """Bytes per element of each kind of tensor under one precision policy."""

    weight_bytes: int  # the parameters the model holds
    grad_bytes: int  # .grad of trainable parameters
    master_bytes: int  # fp32 master copy kept by the optimizer (0 = none)
    fp32_grad_bytes: int  # DeepSpeed/Megatron fp32 gradient accumulation buffer (0 = none)
    compute_bytes: int  # activations of matmuls and most elementwise ops
    autocast: bool  # torch.autocast: linear inputs and weights are cast per use
    half_dtype: str  # "bf16", "fp16" or "fp32": the dtype of half-precision tensors

    @property
    def state_bytes(self) -> int:
        """Bytes per optimizer-state element: fp32 when a master copy exists, else the param's."""
        return 4 if self.master_bytes else self.weight_bytes


POLICIES: dict[Precision, PrecisionPolicy] = {
    Precision.FP32: PrecisionPolicy(4, 4, 0, 0, 4, False, "fp32"),
    Precision.BF16: PrecisionPolicy(2, 2, 0, 0, 2, False, "bf16"),
    Precision.FP16: PrecisionPolicy(2, 2, 0, 0, 2, False, "fp16"),
    Precision.AMP_BF16: PrecisionPolicy(4, 4, 0, 0, 2, True, "bf16"),
    Precision.AMP_FP16: PrecisionPolicy(4, 4, 0, 0, 2, True, "fp16"),
    Precision.MIXED_BF16: PrecisionPolicy(2, 2, 4, 4, 2, False, "bf16"),
    Precision.MIXED_FP16: PrecisionPolicy(2, 2, 4, 4, 2, False, "fp16"),
}


@dataclass(frozen=True)
class OptimizerSpec:
    """What an optimizer keeps per trainable parameter and what its step allocates."""

    label: str
    states_per_param: float  # state tensors per parameter, each at the policy's state dtype
    fixed_state_bytes: float = 0.0  # bytes per param independent of dtype (8-bit states)
    # Step temporaries, in parameter-sized tensors at the state dtype:
    #   "group": one temporary as large as all parameters of a dtype (foreach AdamW)
    #   "largest": one temporary as large as the largest single parameter (for-loop impls)
    step_temp: str = "none"
    step_temp_count: float = 1.0
    factored: bool = False  # Adafactor: row + column second moments for matrices
    # bitsandbytes' 32-bit kernels keep fp32 states whatever the parameters' dtype
    # (``Optimizer2State.init_state``: ``get_state_buffer(p, dtype=torch.float32)``)
    fp32_states: bool = False
    # bitsandbytes' paged optimizers put each state of a tensor of at least ``BNB_PAGED_MIN_SIZE``
    # values in CUDA managed memory (``get_state_buffer`` -> ``F.get_paged``, cudaMallocManaged),
    # which the driver evicts to host memory when the GPU runs out instead of failing
    paged: bool = False


OPTIMIZERS: dict[Optimizer, OptimizerSpec] = {
    # torch 2.13 _multi_tensor_adam: torch._foreach_sqrt(exp_avg_sqs) allocates a copy of all
    # second moments at once (measured by the oracle: +12.5 GiB on a bf16 Llama-2-7B).
    Optimizer.ADAMW: OptimizerSpec("AdamW (foreach)", 2, step_temp="group"),
    Optimizer.ADAM: OptimizerSpec("Adam (foreach)", 2, step_temp="group"),
    Optimizer.ADAMW_FUSED: OptimizerSpec("AdamW (fused)", 2),
    Optimizer.ADAMW_FORLOOP: OptimizerSpec("AdamW (for-loop)", 2, step_temp="largest"),
    Optimizer.SGD: OptimizerSpec("SGD", 0),
    Optimizer.SGD_MOMENTUM: OptimizerSpec("SGD with momentum", 1),
    Optimizer.LION: OptimizerSpec("Lion", 1, step_temp="largest"),
    # adam_mini.Adam_mini (zyushun/Adam-mini, adam_mini/adam_mini.py): a first moment ``m`` like the
    # parameter and one second moment per block (a query/key head, a neuron's row of the other
    # matrices, a whole bias or norm vector); the step goes parameter by parameter and allocates
    # ``grad * grad`` and ``m * stepsize`` for the one it updates
    Optimizer.ADAM_MINI: OptimizerSpec("Adam-mini", 1, step_temp="largest", step_temp_count=2),
    # transformers' Adafactor: factored second moment, no first moment (beta1=None); each
    # parameter is updated in fp32 with four parameter-sized temporaries alive at once (an fp32
    # copy of the gradient and of the parameter, grad**2 + eps, the row x column estimate).
    Optimizer.ADAFACTOR: OptimizerSpec(
        "Adafactor", 0, step_temp="largest", step_temp_count=4, factored=True
    ),
    # bitsandbytes blockwise 8-bit states: 1 byte each for m and v, plus an fp32 absmax per
    # 256-value block per state (2 * 4/256 bytes); tensors under 4096 values stay 32-bit.
    Optimizer.ADAMW_8BIT: OptimizerSpec("AdamW 8-bit (bitsandbytes)", 0, 2 + 8 / 256),
    Optimizer.PAGED_ADAMW_8BIT: OptimizerSpec("Paged AdamW 8-bit (bitsandbytes)", 0, 2 + 8 / 256, paged=True),
    Optimizer.PAGED_ADAMW: OptimizerSpec("Paged AdamW 32-bit (bitsandbytes)", 2, fp32_states=True, paged=True),
    Optimizer.PAGED_LION: OptimizerSpec("Paged Lion 32-bit (bitsandbytes)", 1, fp32_states=True, paged=True),
}

# bitsandbytes keeps 32-bit states for tensors smaller than this (``min_8bit_size``).
BNB_MIN_8BIT_SIZE = 4096
# bitsandbytes pages the states of tensors of at least this many values (``get_state_buffer``:
# ``p.numel() < 1e5`` stays in ordinary device memory).
BNB_PAGED_MIN_SIZE = 100_000
