"""Inference and serving: weights, KV cache, and a vLLM-style capacity sheet.

KV cache per token = 2 (K and V) x layers x kv_heads x head_dim x bytes; sliding-window layers
(Mistral, Gemma 2/3) keep at most ``window`` tokens. A vLLM-style server claims
``gpu_memory_utilization`` of the GPU, subtracts the weights and the peak activations of its
profiling forward pass (``max_num_batched_tokens`` tokens), and cuts the rest into blocks of
``block_size`` tokens; a sequence of T tokens needs ceil(T / block_size) blocks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from memlint.estimate.architecture import Architecture
from memlint.estimate.budget import Capacity

KV_DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "int8": 1}
WEIGHT_DTYPE_BYTES = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5 + 4 / 64}


@dataclass(frozen=True)
class ServingSetup:
    seq_len: int = 4096  # tokens per sequence (prompt + generation)
    weight_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    gpu_memory_utilization: float = 0.9
    block_size: int = 16
    max_num_batched_tokens: int = 8192
    tensor_parallel: int = 1


@dataclass(frozen=True)
class ServingSheet:
    model: str
    weight_bytes: int
    kv_bytes_per_token: int  # at full context, averaged over sliding/global layers
    kv_bytes_per_sequence: int
    activation_bytes: int
    budget_bytes: int  # what the server claims
    kv_budget_bytes: int
    blocks: int
    max_sequences: int
    max_tokens: int
    capacity: Capacity | None

    def to_json(self) -> dict:
        return {
            "model": self.model,
            "weight_bytes": self.weight_bytes,
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "kv_bytes_per_sequence": self.kv_bytes_per_sequence,
            "activation_bytes": self.activation_bytes,
            "budget_bytes": self.budget_bytes,
            "kv_budget_bytes": self.kv_budget_bytes,
            "blocks": self.blocks,
            "max_sequences": self.max_sequences,
            "max_tokens": self.max_tokens,
            "capacity": self.capacity.to_json() if self.capacity else None,
        }


def kv_bytes_per_sequence(arch: Architecture, seq_len: int, kv_dtype: str = "bf16", tp: int = 1) -> int:
    """KV-cache bytes for one sequence of ``seq_len`` tokens on one GPU."""
    per_layer_token = 2 * max(arch.num_kv_heads // tp, 1) * arch.head_dim * KV_DTYPE_BYTES[kv_dtype]
    decoder_layers = sum(g.count for g in arch.blocks if g.kind != "encoder")
    sliding = min(arch.sliding_layers, decoder_layers) if arch.sliding_window else 0
    window = arch.sliding_window or seq_len
    full_layers = decoder_layers - sliding
    return per_layer_token * (full_layers * seq_len + sliding * min(seq_len, window))


def estimate_serving(arch: Architecture, setup: ServingSetup, capacity: Capacity | None) -> ServingSheet:
    if setup.kv_dtype not in KV_DTYPE_BYTES:
        raise ValueError(f"unknown KV-cache dtype {setup.kv_dtype!r}; expected one of {', '.join(KV_DTYPE_BYTES)}")
    if setup.weight_dtype not in WEIGHT_DTYPE_BYTES:
        raise ValueError(f"unknown weight dtype {setup.weight_dtype!r}")
    tp = max(setup.tensor_parallel, 1)
    weights = int(arch.n_params * WEIGHT_DTYPE_BYTES[setup.weight_dtype] / tp)
    per_seq = kv_bytes_per_sequence(arch, setup.seq_len, setup.kv_dtype, tp)
    per_token = per_seq // max(setup.seq_len, 1)
    # Profiling pass: one forward of max_num_batched_tokens with nothing saved for backward;
    # its high point is the logits of the sampled positions plus a few hidden-size buffers
    # and the largest MLP intermediate.
    act_bytes = 2
    tokens = setup.max_num_batched_tokens
    activations = int(tokens * act_bytes * (4 * arch.hidden_size + 2 * arch.intermediate_size) / tp)
    budget = int(capacity.total_bytes * setup.gpu_memory_utilization) if capacity else 0
    kv_budget = max(budget - weights - activations, 0)
    block_bytes = kv_bytes_per_sequence(arch, setup.block_size, setup.kv_dtype, tp)
    blocks = kv_budget // block_bytes if block_bytes else 0
    blocks_per_seq = math.ceil(setup.seq_len / setup.block_size)
    return ServingSheet(
        model=arch.name,
        weight_bytes=weights,
        kv_bytes_per_token=per_token,
        kv_bytes_per_sequence=per_seq,
        activation_bytes=activations,
        budget_bytes=budget,
        kv_budget_bytes=kv_budget,
        blocks=int(blocks),
        max_sequences=int(blocks // blocks_per_seq) if blocks_per_seq else 0,
        max_tokens=int(blocks * setup.block_size),
        capacity=capacity,
    )
