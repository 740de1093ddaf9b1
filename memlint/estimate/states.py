"""Model states per GPU: weights, gradients, master weights and optimizer states.

Counts come from the architecture (which parameters exist and which train); bytes from the
precision policy and the optimizer; the division by the world size from the sharding.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from memlint.estimate import vision
from memlint.estimate.architecture import Architecture, Linear
from memlint.estimate.policy import BNB_PAGED_MIN_SIZE, OPTIMIZERS, POLICIES
from memlint.estimate.setup import Sharding, TrainingSetup

# bitsandbytes NF4/FP4: 4 bits per weight plus one absmax per 64-weight block, stored as fp32,
# or with double quantisation as 8 bits plus one fp32 constant per 256 absmax values.
NF4_BYTES = 0.5 + 4 / 64
NF4_DOUBLE_QUANT_BYTES = 0.5 + 1 / 64 + 4 / (64 * 256)
INT8_BYTES = 1.0  # LLM.int8(): int8 weights (+ one fp32 scale per row, negligible)
# GPTQ/AWQ (the layout of their QuantLinear buffers): 4-bit integers packed in int32 ``qweight``,
# and per group of 128 input rows one fp16 ``scales`` and one 4-bit ``qzeros`` entry per column
GROUP_INT4_BYTES = 0.5 + (2 + 0.5) / 128
# NVFP4 (NVIDIA ModelOpt): FP4 E2M1 values and one FP8 E4M3 scale per block of 16 (+ one fp32
# scale per tensor, negligible)
NVFP4_BYTES = 0.5 + 1 / 16


def quantized_weight_bytes(quantization: str, double_quant: bool = True) -> tuple[float, int]:
    """Bytes per quantized weight, and bytes per quantized Linear that do not scale with its size.

    AQLM (``aqlm-<bits>bit-<M>x<B>``) stores ``bits`` per weight as M codes of B bits per group of
    M*B/bits weights, and per Linear M codebooks of 2^B fp16 vectors of that group size.
    """
    if quantization == "int8":
        return INT8_BYTES, 0
    if quantization == "int4":
        return GROUP_INT4_BYTES, 0
    if quantization == "nvfp4":
        return NVFP4_BYTES, 0
    if quantization.startswith("aqlm-"):
        _, bits_word, shape = quantization.split("-")
        bits = int(bits_word[:-3])
        books, book_bits = (int(x) for x in shape.split("x"))
        group = books * book_bits // bits
        return bits / 8, books * 2**book_bits * group * 2
    return (NF4_DOUBLE_QUANT_BYTES if double_quant else NF4_BYTES), 0  # nf4, fp4 (bitsandbytes)


@dataclass(frozen=True)
class ParameterCounts:
    total: int  # parameters of the base model
    trainable: int  # base parameters that train (full fine-tuning)
    lora: int  # adapter parameters (they always train)
    quantized: int  # base parameters stored in 4/8 bits (QLoRA)
    small_tensors: int  # trainable parameters in tensors under 4096 values (norms, biases)
    largest_tensor: int  # the largest single trainable tensor (for-loop optimizer temps)
    matrix_sides: int  # sum of rows + columns of trainable matrices (Adafactor's factors)
    # GaLore / APOLLO: trainable values in projected matrices, the values of one projected state of
    # them (rank x the longer side), and their projection matrices (rank x the shorter side)
    projected: int = 0
    projected_state: int = 0
    projector: int = 0
    largest_projected: tuple[int, int] = (0, 0)  # (rows, cols) of the largest projected matrix
    # KTransformers: base parameters held in host memory (the routed experts), not on the GPU
    host: int = 0

    @property
    def optimized(self) -> int:
        return self.trainable + self.lora


def _block_linears(arch: Architecture):
    for group in arch.blocks:
        for linear in group.linears:
            yield group.count, linear


def count_parameters(arch: Architecture, setup: TrainingSetup) -> ParameterCounts:
    lora = setup.lora
    total = arch.n_params
    lora_params = 0
    quantized = arch.linear_weight_params if setup.quantized else 0
    if lora is not None:
        adapted = [(c, lin) for c, lin in _block_linears(arch) if lora.applies_to(lin.name)]
        for count, linear in adapted:
            lora_params += count * lora.adapter_params(linear.in_features, linear.out_features)
        lora_params += vision.tower_lora_params(arch, lora)  # "all-linear" reaches the vision tower too
        if lora.method == "oft":
            # one (blocks x block_size*(block_size-1)/2) generator per layer
            largest = max((lora.adapter_params(lin.in_features, lin.out_features) for _, lin in adapted), default=0)
            sides = sum(c * (lin.in_features // lora.oft_block(lin.in_features)
                             + lora.oft_block(lin.in_features) * (lora.oft_block(lin.in_features) - 1) // 2)
                        for c, lin in adapted)
        else:
            largest = max((lora.r * max(lin.in_features, lin.out_features) for _, lin in adapted), default=0)
            # lora_A is (r x in) and lora_B (out x r): Adafactor keeps r+in and out+r values
            sides = sum(c * (2 * lora.r + lin.in_features + lin.out_features) for c, lin in adapted)
        return ParameterCounts(total, 0, lora_params, quantized, 0, largest, sides, host=_host_params(arch, setup))

    frozen_blocks = min(setup.frozen_layers, arch.num_layers)
    if setup.trained_blocks is not None:
        frozen_blocks = arch.num_layers - min(max(setup.trained_blocks, 0), arch.num_layers)
    frozen = 0
    if frozen_blocks:
        per_block = arch.blocks[0].params_per_block
        frozen = frozen_blocks * per_block
    if setup.freeze_embeddings:
        frozen += arch.embedding_params
    if setup.freeze_head:
        frozen += arch.final_params + (arch.lm_head.params if arch.lm_head is not None else 0)
    if setup.freeze_vision_tower:
        frozen += arch.extra_params  # a vision-language model's extra parameters: its tower and merger
    trainable = total - frozen if setup.trainable_params is None else min(max(setup.trainable_params, 0), total)
    linears: list[tuple[int, Linear]] = list(_block_linears(arch))
    head = arch.lm_head
    largest = max(
        [lin.in_features * lin.out_features for _, lin in linears]
        + [arch.vocab_size * arch.hidden_size]
    )
    biases = sum(count * lin.copies * lin.out_features for count, lin in linears if lin.bias)
    norms = sum(g.count * g.other_params for g in arch.blocks) + arch.final_params
    small = biases + norms
    sides = sum(count * lin.copies * (lin.in_features + lin.out_features) for count, lin in linears)
    sides += arch.vocab_size + arch.hidden_size  # the embedding matrix
    if head is not None:
        sides += head.in_features + head.out_features
    sides += small  # vectors keep a full second moment
    counts = ParameterCounts(total, trainable, 0, quantized, small, largest, sides, host=_host_params(arch, setup))
    return _projected(arch, setup, counts, frozen_blocks)


def sampled_gradient_params(arch: Architecture, setup: TrainingSetup, trainable: int) -> int:
    """The trainable parameters that hold gradients at once: under LISA only the sampled blocks'
    (with the embeddings, the head and the final norm, which always train), else all of them. The
    other blocks are frozen for the step and their gradients were freed by ``zero_grad``."""
    if setup.sampled_blocks is None or setup.lora is not None or arch.num_layers == 0:
        return trainable
    idle = arch.num_layers - min(max(setup.sampled_blocks, 1), arch.num_layers)
    return max(trainable - idle * arch.blocks[0].params_per_block, 0)


def routed_expert_params(arch: Architecture) -> int:
    """The routed experts' weights, as the layer recipe names them (0 for a model counted whole on
    the meta device, whose recipe cannot tell them apart)."""
    return sum(count * lin.copies * lin.in_features * lin.out_features
               for count, lin in _block_linears(arch) if lin.name.startswith("experts."))


def device_block_params(arch: Architecture, setup: TrainingSetup) -> int:
    """The largest block's parameters on the GPU, which sharding gathers whole: without its routed
    experts when KTransformers keeps them in host memory."""
    if not setup.experts_on_host:
        return arch.largest_block_params
    return max(group.params_per_block - sum(lin.params for lin in group.linears if lin.name.startswith("experts."))
               for group in arch.blocks)


def _host_params(arch: Architecture, setup: TrainingSetup) -> int:
    """The routed experts' weights KTransformers keeps in host memory."""
    return routed_expert_params(arch) if setup.experts_on_host else 0


def _projected(arch: Architecture, setup: TrainingSetup, counts: ParameterCounts, frozen_blocks: int) -> ParameterCounts:
    """GaLore / APOLLO: which trainable matrices the optimizer projects, and the sizes of their
    projected states and projection matrices (counted over the trained blocks only)."""
    projection = setup.projection
    if projection is None or arch.num_layers == 0:
        return counts
    trained_share = (arch.num_layers - frozen_blocks) / arch.num_layers
    projected = state = projector = 0
    largest = (0, 0)
    for count, linear in _block_linears(arch):
        if not projection.applies_to(linear.name):
            continue
        rows, cols = linear.out_features, linear.in_features
        n = int(count * linear.copies * trained_share)
        rank = min(projection.rank, rows, cols)
        projected += n * rows * cols
        state += n * rank * max(rows, cols)
        projector += n * rank * min(rows, cols)
        if rows * cols > largest[0] * largest[1]:
            largest = (rows, cols)
    return replace(counts, projected=projected, projected_state=state, projector=projector,
                   largest_projected=largest)


@dataclass(frozen=True)
class StateBytes:
    """Bytes per GPU of each persistent state, after sharding and offload."""

    weights: float
    weights_note: str
    gradients: float
    master: float
    fp32_grads: float
    optimizer: float
    step_temp: float
    host: float  # bytes on the host (per node) for offloaded states
    ddp_buckets: float  # DDP's flat all-reduce buckets (a second copy of the gradients)
    paged: float = 0.0  # of ``optimizer``, the bytes a paged optimizer keeps in CUDA managed memory


def _dtype(nbytes: int) -> str:
    return {4: "fp32", 2: "bf16"}.get(nbytes, f"{nbytes} B")


def shard_factor(setup: TrainingSetup) -> int:
    if setup.sharding == Sharding.FSDP_HYBRID:
        return max(1, min(setup.world_size, setup.gpus_per_node))
    return max(1, setup.world_size)


def stage(setup: TrainingSetup) -> int:
    """The ZeRO stage a sharding corresponds to (FSDP full = 3, SHARD_GRAD_OP = 2)."""
    return {
        Sharding.NONE: 0,
        Sharding.ZERO1: 1,
        Sharding.ZERO2: 2,
        Sharding.FSDP_GRAD_OP: 2,
        Sharding.ZERO3: 3,
        Sharding.FSDP_FULL: 3,
        Sharding.FSDP_HYBRID: 3,
    }[setup.sharding]


def state_bytes(arch: Architecture, setup: TrainingSetup, counts: ParameterCounts) -> StateBytes:
    policy = POLICIES[setup.precision]
    spec = OPTIMIZERS[setup.optimizer]
    n = shard_factor(setup)
    zero = stage(setup)

    # ---- weights
    if setup.quantized:
        assert setup.lora is not None and setup.lora.quantization is not None
        per_q, per_linear = quantized_weight_bytes(setup.lora.quantization, setup.lora.double_quant)
        # prepare_model_for_kbit_training keeps the non-quantised parameters in fp32
        rest = 4 if setup.lora.kbit_prepared else policy.weight_bytes
        weights = (counts.quantized - counts.host) * per_q + (counts.total - counts.quantized) * rest
        weights += per_linear * sum(g.count * len(g.linears) for g in arch.blocks)
        note = f"{counts.quantized / 1e9:.2f}B quantised to {per_q:.3f} B/param, the rest {_dtype(rest)}"
    elif setup.frozen_weight_bytes is not None and counts.trainable < counts.total:
        frozen = counts.total - counts.host - counts.trainable
        weights = counts.trainable * policy.weight_bytes + frozen * setup.frozen_weight_bytes
        note = (f"{counts.trainable / 1e9:.2f}B trained at {policy.weight_bytes} B/param, "
                f"{frozen / 1e9:.2f}B frozen at {setup.frozen_weight_bytes:g} B/param")
    else:
        weights = (counts.total - counts.host) * policy.weight_bytes
        note = f"{policy.weight_bytes} B/param"
    if counts.host:
        note += f"; {counts.host / 1e9:.2f}B routed-expert parameters in host memory (KTransformers)"
    weights += counts.lora * 4  # PEFT keeps adapters in fp32
    if zero >= 3:
        weights /= n
    if setup.offload_params and zero >= 3:
        weights = 0.0

    # ---- gradients, master weights, fp32 gradient buffers
    base_trainable = counts.trainable
    with_grads = sampled_gradient_params(arch, setup, base_trainable)
    grads = with_grads * policy.grad_bytes + counts.lora * 4
    projection = setup.projection
    if projection is not None and projection.layerwise:
        # each parameter steps in its gradient hook and drops its gradient: about one block's
        # gradients are alive at a time
        grads = min(base_trainable, arch.largest_block_params) * policy.grad_bytes + counts.lora * 4
    master = base_trainable * policy.master_bytes
    fp32_grads = with_grads * policy.fp32_grad_bytes
    if zero >= 1:
        master /= n
        fp32_grads /= n
    if zero >= 2:
        grads /= n
    if zero >= 3 and policy.master_bytes and setup.sharding != Sharding.ZERO3:
        # FSDP over half weights with an fp32 master copy reduce-scatters straight into the fp32
        # gradient partition: no persistent half-precision copy
        grads = counts.lora * 4 / n
    # DeepSpeed ZeRO-3 keeps both: its half-precision gradient partition
    # (stage3.py ``grad_partitions_flat_buffer``, allocated at init in the training dtype) and the
    # fp32 gradient buffer the optimizer steps on -- 20 bytes/param / N, two more than
    # ``estimate_zero3_model_states_mem_needs`` counts. With the optimizer offloaded both live on
    # the CPU.
    if setup.sharding == Sharding.ZERO3 and setup.offload_optimizer:
        grads = counts.lora * 4 / n

    # ---- optimizer states: fp32 for adapters, for master-weight policies and for bitsandbytes' 32-bit kernels
    state_elem = 4 if spec.fp32_states else policy.state_bytes
    full_state = base_trainable - counts.projected
    states = spec.states_per_param * ((full_state + counts.projected_state) * state_elem + counts.lora * 4)
    states += counts.projector * state_elem
    if spec.fixed_state_bytes:  # 8-bit optimizers: small tensors keep 32-bit states
        big = counts.optimized - counts.small_tensors
        states += big * spec.fixed_state_bytes + counts.small_tensors * 8
    if spec.factored:
        states += counts.matrix_sides * 4
    if zero >= 1:
        states /= n

    # ---- optimizer step temporaries
    temp_elem = 4 if (counts.lora or policy.master_bytes) else state_elem
    if spec.step_temp == "group":
        # also under DeepSpeed: a client torch AdamW (the HF Trainer's, when the DeepSpeed config
        # has no "optimizer" block) runs its foreach step on the fp32 partition
        temp = counts.optimized * temp_elem
        if zero >= 1:
            temp /= n
    elif spec.step_temp == "largest":
        temp = spec.step_temp_count * counts.largest_tensor * (4 if spec.factored else temp_elem)
    else:
        temp = 0.0
    if projection is not None and counts.projected:
        # refreshing a projection runs an fp32 SVD of the largest projected gradient: the fp32
        # copy (m x n), U (m x k) and Vh (k x n), k = min(m, n) (torch.linalg.svd, full_matrices=False)
        m, n_cols = counts.largest_projected
        temp = max(temp, 4.0 * (m * n_cols + min(m, n_cols) * (m + n_cols)))

    host = 0.0
    if setup.offload_optimizer and zero >= 1:
        # ZeRO-Offload keeps fp32 master weights, gradients and Adam states on the CPU
        host = (
            counts.optimized * (policy.master_bytes or 4)
            + counts.optimized * 4
            + spec.states_per_param * counts.optimized * 4
        ) * min(n, setup.gpus_per_node) / n
        master = fp32_grads = states = temp = 0.0
    if setup.offload_params and zero >= 3:
        host += counts.total * policy.weight_bytes * min(n, setup.gpus_per_node) / n
    host += counts.host * policy.weight_bytes

    ddp = 0.0
    if setup.world_size > 1 and setup.sharding == Sharding.NONE:
        # gradient_as_bucket_view=False (the default): buckets copy the grads, of every parameter
        # that trained when DDP wrapped the model (all of them before LISA's first switch)
        ddp = grads if with_grads == base_trainable else base_trainable * policy.grad_bytes

    paged = states * _paged_share(arch, setup, counts) if spec.paged else 0.0
    return StateBytes(weights, note, grads, master, fp32_grads, states, temp, host, ddp, paged)


def _paged_share(arch: Architecture, setup: TrainingSetup, counts: ParameterCounts) -> float:
    """The share of the optimized values whose states a bitsandbytes paged optimizer puts in managed
    memory: those of tensors of at least ``BNB_PAGED_MIN_SIZE`` values. LoRA's factors are
    ``r x in`` and ``out x r``: at rank 16 on a 4096-wide layer (65,536 values) nothing is paged;
    OFT keeps one generator tensor per layer. In a full fine-tune only norms and biases are smaller
    (a few MiB): they count as paged."""
    if not counts.optimized:
        return 0.0
    lora = setup.lora
    if lora is None:
        return 1.0
    paged = 0
    for count, linear in _block_linears(arch):
        if not lora.applies_to(linear.name):
            continue
        tensors = ((lora.adapter_params(linear.in_features, linear.out_features),) if lora.method == "oft"
                   else (lora.r * linear.in_features, lora.r * linear.out_features))
        paged += count * sum(values for values in tensors if values >= BNB_PAGED_MIN_SIZE)
    return min(paged / counts.optimized, 1.0)
