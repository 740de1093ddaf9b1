"""The peak of a training step, phase by phase.

Persistent state (weights, master weights, optimizer states; gradients while they exist) plus
the high point of each phase's transient memory:

* forward: every block's saved tensors (or, with checkpointing, each block's input), the
  head's logits and cross-entropy buffers, autocast's half weight copies;
* backward, start: the saved tensors plus the loss head's gradient buffers;
* backward, end: all gradients, plus the block being recomputed under checkpointing;
* optimizer step: weights + gradients + states + the step's temporaries (Adam allocates its
  states at the first step, so steps after the first carry them through forward/backward).

Validated against measured peaks of real Hugging Face models (docs/accuracy.md).
"""

from __future__ import annotations

from memlint.estimate import model_parallel
from memlint.estimate.activations import INPUT_BYTES_PER_TOKEN, has_vocab_logits, profile
from memlint.estimate.architecture import Architecture
from memlint.estimate.budget import Budget, Capacity, Component, Phase
from memlint.estimate.companions import companion_parts
from memlint.estimate.policy import OPTIMIZERS, POLICIES, Precision
from memlint.estimate.setup import Attention, Sharding, TrainingSetup
from memlint.estimate.states import count_parameters, device_block_params, shard_factor, stage, state_bytes

# DeepSpeed ZeRO defaults (deepspeed/runtime/zero/config.py): bucket sizes in elements.
DS_REDUCE_BUCKET = 5e8
DS_PREFETCH_BUCKET = 5e7


def _dtype_name(nbytes: int, half: str) -> str:
    return {4: "fp32", 2: half, 1: "int8"}.get(nbytes, f"{nbytes} B")


def effective_setup(arch: Architecture, setup: TrainingSetup) -> tuple[TrainingSetup, list[str]]:
    """Adjust a setup to what the framework will really run, and say what was assumed."""
    notes: list[str] = []
    if arch.model_type == "gemma2" and setup.attention == Attention.SDPA:
        setup = setup.but(attention=Attention.EAGER)
        notes.append("Gemma 2 has no SDPA path in transformers 5 (logit soft-capping): eager attention")
    if arch.family == "bloom" and setup.attention != Attention.EAGER:
        setup = setup.but(attention=Attention.EAGER)
        notes.append("BLOOM's ALiBi attention always runs its own eager kernel")
    if arch.family == "gpt_oss" and setup.attention == Attention.SDPA:
        setup = setup.but(attention=Attention.EAGER)
        notes.append("gpt-oss has no SDPA path in transformers 5 (attention sinks): eager attention")
    if (arch.family == "internlm2" and setup.attention == Attention.SDPA
            and str(arch.config.get("attn_implementation", "eager")) == "eager"):
        setup = setup.but(attention=Attention.EAGER)
        notes.append("InternLM2's own modelling code runs the attention its config.json names "
                     "(attn_implementation \"eager\")")
    return setup, notes


def _communication_bytes(setup: TrainingSetup) -> int:
    """Bytes per element of the gathered parameters and reduced gradients under sharding."""
    policy = POLICIES[setup.precision]
    if setup.precision == Precision.FP32:
        return 4
    return 2 if policy.autocast or policy.master_bytes else policy.weight_bytes


def _sharding_buffers(
    arch: Architecture, setup: TrainingSetup
) -> tuple[list[Component], list[Component], list[Component]]:
    """Communication and gathering buffers per GPU: (forward, loss-head backward, block backward)."""
    policy = POLICIES[setup.precision]
    zero = stage(setup)
    w = _communication_bytes(setup)
    block = device_block_params(arch, setup)
    fwd: list[Component] = []
    head: list[Component] = []
    bwd: list[Component] = []
    fsdp = setup.sharding in (Sharding.FSDP_FULL, Sharding.FSDP_HYBRID)
    if zero >= 3 and fsdp:
        root = arch.embedding_params + arch.final_params + (arch.lm_head.params if arch.lm_head else 0)
        note = "FSDP keeps the root module's embeddings and head unsharded during forward/backward"
        gathered = Component(
            "gathered_params", "Unsharded parameters (root module + current layer)",
            int((root + block) * w), note,
        )
        root_only = Component("gathered_params", "Unsharded parameters (root module)", int(root * w), note)
        prefetch = Component("all_gather", "All-gather buffer (next layer)", int(block * w))
        fwd += [gathered, prefetch]
        head += [root_only, prefetch]
        reduce = Component("reduce_scatter", "Reduce-scatter buffer (one layer)", int(block * w))
        layer_grads = Component(
            "unsharded_grads", "Unsharded gradients of the layer in backward", int(block * policy.grad_bytes)
        )
        bwd += [gathered, prefetch, reduce, layer_grads]
    elif zero >= 3:
        prefetch = setup.prefetch_bucket_elements or DS_PREFETCH_BUCKET
        embedding = arch.vocab_size * arch.hidden_size
        gathered = Component(
            "gathered_params",
            "Gathered parameters (current layer + prefetch + embeddings/head)",
            int((block + prefetch + embedding) * w),
            "ZeRO-3 all-gathers each module's parameters before it runs",
        )
        reduce = setup.reduce_bucket_elements or DS_REDUCE_BUCKET
        fwd.append(gathered)
        head.append(gathered)
        bwd += [gathered, Component("reduce_bucket", "ZeRO reduce bucket", int(reduce * w))]
    elif zero in (1, 2) and setup.sharding in (Sharding.ZERO1, Sharding.ZERO2):
        # DeepSpeed stage_1_and_2.py ``setup_buckets``: with contiguous_gradients (the default) the
        # first gradient hook of a backward allocates one reduce bucket of reduce_bucket_size
        # elements in the training dtype (two with overlap_comm); ``_release_ipg_buffers`` frees it
        # at the end of backward. No all-gather bucket: after the step ``all_gather_dp_groups``
        # uses ``all_gather_into_tensor`` straight into the flat half-precision parameter buffer
        # (runtime/utils.py ``all_gather_into_tensor_dp_groups``), so allgather_bucket_size
        # allocates nothing (measured: tests/calibration/deepspeed_results.json).
        reduce = setup.reduce_bucket_elements or DS_REDUCE_BUCKET
        bwd.append(Component("reduce_bucket", "ZeRO reduce bucket", int(reduce * w)))
    return fwd, head, bwd


def _zero12_master_step(setup: TrainingSetup) -> bool:
    """DeepSpeed ZeRO-1/2 with an fp32 master copy (``DeepSpeedZeroOptimizer``): its fp32
    gradient partition exists only inside ``step()``, not across the whole training step. With the
    optimizer offloaded the gradients go to the host during backward and none of this is on the GPU."""
    return (setup.sharding in (Sharding.ZERO1, Sharding.ZERO2) and POLICIES[setup.precision].master_bytes > 0
            and not setup.offload_optimizer)


def _vision_language(arch: Architecture, setup: TrainingSetup, notes: list[str]) -> int:
    """A vision-language model's tower activations (counted with the activations), and what was assumed."""
    from memlint.estimate import vision

    if arch.model_type not in vision.MODEL_TYPES:
        return 0
    saved = vision.saved_bytes(arch, setup)
    if saved:
        notes.append(f"vision tower activations for {setup.image_tokens} image tokens per sequence "
                     f"({saved / 2**30:.2f} GiB, counted with the activations)")
    elif setup.image_tokens <= 0:
        notes.append("text-only batches: no image tokens, so no vision tower activations "
                     "(memlint estimate --image-tokens N prices N per sequence)")
    elif setup.freeze_vision_tower:
        notes.append("the vision tower is frozen: no gradients, optimizer states or activations kept for it")
    else:
        notes.append("LoRA adapts no layer of the vision tower: its activations are not kept")
    return saved


def _oft_rotations(arch: Architecture, setup: TrainingSetup, notes: list[str]) -> int:
    """OFT builds each adapted layer's rotation in every forward (``_cayley_batch``: the Cayley-Neumann
    series, 5 terms by default) and keeps for backward about four (blocks x block_size x block_size)
    fp32 tensors per layer: the skew-symmetric matrix, its square, its cube, the rotation. Under
    checkpointing only the block being recomputed holds them."""
    lora = setup.lora
    if lora is None or lora.method != "oft" or arch.num_layers == 0:
        return 0
    per_layer = sum(group.count * 4 * 4 * lin.in_features * lora.oft_block(lin.in_features)
                    for group in arch.blocks for lin in group.linears if lora.applies_to(lin.name))
    kept = per_layer // arch.num_layers if setup.grad_ckpt else per_layer
    notes.append(f"OFT with blocks of {lora.block_size}: the rotations each forward builds "
                 f"({kept / 2**30:.2f} GiB) counted with the activations")
    return kept


def estimate_training(
    arch: Architecture, setup: TrainingSetup, capacity: Capacity | None = None
) -> Budget:
    setup, notes = effective_setup(arch, setup)
    policy = POLICIES[setup.precision]
    spec = OPTIMIZERS[setup.optimizer]
    counts = count_parameters(arch, setup)
    states = state_bytes(arch, setup, counts)
    prof = profile(arch, setup)
    tokens = setup.tokens
    fsdp_mixed = policy.autocast and setup.sharding.value.startswith("fsdp")
    half = policy.half_dtype

    weights = Component("weights", f"Weights ({states.weights_note})", int(states.weights))
    master = Component("master_weights", "Master weights (fp32)", int(states.master))
    fp32_grads = Component("fp32_gradients", "fp32 gradient partition", int(states.fp32_grads))
    opt = Component("optimizer_states", f"Optimizer states: {spec.label}", int(states.optimizer - states.paged))
    paged_opt = Component("paged_optimizer_states", f"Paged optimizer states: {spec.label}", int(states.paged),
                          "in CUDA managed memory: the driver evicts them to host memory when the GPU runs out "
                          "and the step pages them back (a slowdown, not an out-of-memory error)")
    grad_label = f"Gradients ({_dtype_name(policy.grad_bytes, half)})"
    grads = Component("gradients", grad_label, int(states.gradients))
    ddp = Component("ddp_buckets", "DDP all-reduce buckets", int(states.ddp_buckets),
                    "torch DDP copies gradients into flat buckets (gradient_as_bucket_view=False)")
    inputs = Component("inputs", "Input ids and labels", int(INPUT_BYTES_PER_TOKEN * tokens))
    step_temp = Component("optimizer_step_temp", "Optimizer step temporaries", int(states.step_temp),
                          "torch's foreach AdamW allocates a parameter-sized buffer in step()"
                          if spec.step_temp == "group" else "")

    stored = prof.stored() * tokens
    stored += _vision_language(arch, setup, notes)
    stored += _oft_rotations(arch, setup, notes)
    ckpt = prof.checkpointed_blocks > 0
    act_label = "Activations" + (" (checkpointed: block inputs)" if ckpt else "")
    activations = Component("activations", act_label, int(stored))
    if fsdp_mixed:
        notes.append("FSDP mixed precision: half-precision parameters are all-gathered, no autocast copies")
    casts = Component(
        "autocast_weight_copies",
        f"Autocast {half} weight copies",
        int(prof.weight_casts),
        "autocast caches a half copy of each weight during forward; backward keeps them",
    )
    logits_fwd = Component("logits", "Logits and cross-entropy (forward)", int(prof.logits_forward * tokens))
    logits_bwd = Component("logits", "Logits and cross-entropy gradients", int(prof.logits_backward * tokens))
    recompute = Component(
        "recompute",
        "Block in backward (recomputed by checkpointing)",
        int(prof.block_backward_peak * tokens + (prof.weight_casts / max(arch.num_layers, 1))),
        "its recomputed activations and the gradients in flight at its worst moment",
    )
    # without checkpointing, the last block's backward: its saved tensors are counted in the
    # activations; what it adds are the gradients in flight
    in_block = Component(
        "block_backward",
        "Gradients inside a block's backward",
        int(max(prof.block_backward_peak - prof.largest_block_saved, 0) * tokens),
    )
    accumulated = grads if setup.grad_accum > 1 else None
    fwd_buffers, head_buffers, bwd_buffers = _sharding_buffers(arch, setup)
    # A trainable embedding tied to the output head is one leaf used twice: autograd holds the
    # head's gradient in the leaf's input buffer from the loss head's backward until the
    # embedding's, then adds the embedding's gradient out of place (the head's is a transposed
    # view, InputBuffer cannot accumulate into it): the head's, the embedding's and the sum are
    # alive together before AccumulateGrad keeps the sum (measured: the DeepSpeed cases of
    # tests/calibration, where the end of backward decides the peak).
    # (an encoder priced with a classification head has no output head over the vocabulary)
    tied = (arch.tie_word_embeddings and arch.lm_head is None and has_vocab_logits(arch) and setup.lora is None
            and not setup.freeze_embeddings)
    tied_grad = arch.vocab_size * arch.hidden_size * policy.grad_bytes if tied else 0
    held = Component("tied_head_gradient", "Output head's gradient, held for the tied embedding", int(tied_grad))
    # An untied head's gradient is complete before the first block's backward; where gradients stay
    # in ``.grad`` (no sharding, DDP, DeepSpeed ZeRO-1) it is alive from then on. ZeRO-2 copies it
    # into the reduce bucket and frees it; FSDP and ZeRO-3 shard it.
    head_trainable = arch.lm_head is not None and setup.lora is None
    kept_in_grad = setup.sharding in (Sharding.NONE, Sharding.ZERO1)
    if head_trainable and kept_in_grad and not tied:
        held = Component("head_gradient", "Output head's gradient (before the blocks' backward)",
                         int(arch.lm_head.params * policy.grad_bytes))

    zero12_step = _zero12_master_step(setup)
    persistent = [weights, master, opt, paged_opt] if zero12_step else [weights, master, fp32_grads, opt, paged_opt]
    forward = persistent + [accumulated, activations, casts, logits_fwd, inputs] + fwd_buffers
    backward_start = persistent + [accumulated, activations, logits_bwd, inputs] + head_buffers
    if not ckpt:
        backward_start.append(casts)  # the half copies stay saved until their block's backward
    backward_end = persistent + [grads, ddp, inputs] + bwd_buffers
    candidates = [backward_start]
    bucket_elements = setup.reduce_bucket_elements or DS_REDUCE_BUCKET
    # DeepSpeed ZeRO-2 gradients that all fit in the reduce bucket reach their partition only in
    # the backward epilogue (``independent_gradient_partition_epilogue``), after every recompute
    zero2_epilogue = setup.sharding == Sharding.ZERO2 and counts.optimized <= bucket_elements
    if ckpt:
        if not zero2_epilogue:
            backward_end.append(recompute)
        # the first block recomputed: every checkpoint still alive, few gradients yet
        candidates.append(persistent + [accumulated, activations, recompute, held, inputs] + bwd_buffers)
    else:
        candidates.append(persistent + [accumulated, activations, in_block, casts, held, inputs] + bwd_buffers)
    candidates.append(backward_end)
    if setup.sharding in (Sharding.ZERO1, Sharding.ZERO2) and setup.world_size > 1:
        # Reducing a bucket over several ranks (stage_1_and_2.py ``average_tensor`` ->
        # ``allreduce_and_scatter`` -> ``allreduce_bucket``: ``tensor = self.flatten(bucket)``)
        # all-reduces a flattened copy of the bucket's gradients (the gradients themselves are
        # views into the bucket by then). Gradients that overflow the bucket are already in their
        # partition (ZeRO-2) or kept in ``.grad`` (ZeRO-1).
        reduced = Component("reduce_copy", "Flattened gradients being all-reduced",
                            int(min(counts.optimized, bucket_elements) * _communication_bytes(setup)))
        overflowed = [grads] if counts.optimized > bucket_elements else []
        candidates.append(persistent + overflowed + [reduced, inputs] + bwd_buffers)
    if tied:
        if setup.sharding == Sharding.ZERO2:
            # DeepSpeed ZeRO-2 copies each gradient into the reduce bucket and frees it; its
            # gradient partition exists once the bucket first fills (``copy_grads_in_partition``),
            # else only at the end of backward (``independent_gradient_partition_epilogue``)
            in_partition = [] if zero2_epilogue else [grads]
            summed = Component("tied_embedding_gradients", "Tied embedding's gradients (head's, "
                               "embedding's and their sum)", int(3 * tied_grad))
            candidates.append(persistent + in_partition + [summed, inputs] + bwd_buffers)
        else:
            summed = Component("tied_embedding_gradients", "Tied embedding's gradients (head's and "
                               "embedding's, besides their sum)", int(2 * tied_grad))
            candidates.append(persistent + [grads, ddp, summed, inputs] + bwd_buffers)
    optimizer_candidates = [persistent + [grads, ddp, step_temp]]
    if zero12_step:
        # DeepSpeedZeroOptimizer.step() (stage_1_and_2.py), per parameter group: the half-precision
        # gradients of the partition are flattened into a new buffer
        # (``flatten_dense_tensors_aligned(self.averaged_gradients[i])``) and converted to fp32
        # (``flat_grad_partition.to(fp32)``) while the gradients are still alive; then the flat copy
        # and the gradients are freed, the inner optimizer steps on the fp32 partition, and its
        # gradient is dropped (``single_partition_of_fp32_groups[i].grad = None``).
        flat = Component("flat_gradients", "Flattened gradient partition (in step)",
                         int(counts.optimized * policy.grad_bytes / shard_factor(setup)))
        step_grads = grads
        if setup.sharding == Sharding.ZERO1:
            # ZeRO-1 keeps every gradient in ``.grad`` through backward, but the backward epilogue
            # (``reduce_gradients`` -> ``independent_gradient_partition_epilogue``) copies this
            # rank's into ``grads_in_partition`` (``copy_grads_in_partition``, contiguous_gradients
            # being the default), points ``averaged_gradients`` at them and clears every
            # ``param.grad`` (``_clear_param_grad_only``): in step() only the partition's half
            # gradients are alive, as under ZeRO-2 (measured: the ZeRO-1 world-size-2 cases of
            # tests/calibration/deepspeed_results.json)
            step_grads = Component("gradients", f"Gradient partition ({_dtype_name(policy.grad_bytes, half)})",
                                   int(states.gradients / shard_factor(setup)))
        # (the update first: on a tie the breakdown names the optimizer's own temporary)
        optimizer_candidates = [
            persistent + [fp32_grads, step_temp],
            persistent + [step_grads, flat, fp32_grads],
        ]

    others = companion_parts(setup)

    def phase(name: str, parts) -> Phase:
        parts = list(parts) + list(others.persistent)
        if any(c is activations for c in parts):
            parts += others.activations
        if name == "optimizer_step" or any(c is grads for c in parts):
            parts += others.gradients
        if name == "optimizer_step":
            parts += others.step
        return Phase(name, tuple(c for c in parts if c is not None and c.bytes > 0))

    phases = (
        phase("forward", forward),
        max((phase("backward", c) for c in candidates), key=lambda p: p.bytes),
        max((phase("optimizer_step", c) for c in optimizer_candidates), key=lambda p: p.bytes),
    )

    assumptions = list(notes) + list(others.notes)
    pairs = (f" (each example a chosen and a rejected sequence: {setup.micro_batch * setup.sequences_per_example}"
             " sequences per forward)" if setup.sequences_per_example == 2 else "")
    labels = f" (labels: {setup.decoder_len} tokens, which the decoder runs over)" if setup.decoder_len else ""
    assumptions.append(f"micro-batch {setup.micro_batch} x {setup.seq_len} tokens{labels}{pairs}, no padding")
    if setup.lora and setup.quantized:
        assumptions.append("QLoRA as set up by prepare_model_for_kbit_training (non-quantised params in fp32)")
    if setup.lora:
        kind = "OFT" if setup.lora.method == "oft" else "LoRA"
        assumptions.append(f"PEFT keeps {kind} adapters in fp32 (autocast_adapter_dtype=True)")
    assumptions.extend(_state_notes(arch, setup, counts))
    if setup.offload_optimizer:
        assumptions.append("optimizer states, master weights and fp32 gradients offloaded to CPU")
    return model_parallel.per_gpu(arch, setup, Budget(
        model=arch.name,
        parameters=counts.total + counts.lora,
        trainable_parameters=counts.optimized,
        phases=phases,
        assumptions=tuple(assumptions),
        host_bytes=int(states.host) + others.host_bytes,
        setup=describe(setup),
        capacity=capacity,
    ))


def _state_notes(arch: Architecture, setup: TrainingSetup, counts) -> list[str]:
    """What the estimate assumed for BAdam / LLaMA Pro blocks, projected optimizer states and
    experts kept on the host."""
    out = []
    if setup.trained_blocks is not None:
        out.append(f"{setup.trained_blocks} of {arch.num_layers} blocks train; the first of them is block "
                   f"{setup.frozen_layers}, so the blocks after it keep activations for backward")
    if setup.sampled_blocks is not None and setup.lora is None:
        count = min(setup.sampled_blocks, arch.num_layers)
        out.append(f"LISA: {count} of {arch.num_layers} blocks, sampled anew every few steps, hold gradients beside "
                   "the embeddings and the head; the optimizer, built over every parameter before the first "
                   "switch, keeps the states of each block it has stepped: all of them after enough switches")
    projection = setup.projection
    if projection is not None:
        layerwise = ("; layer-wise: each gradient is freed by its hook, about one block's gradients alive"
                     if projection.layerwise else "")
        out.append(f"{projection.name} rank {projection.rank}: {counts.projected / 1e9:.2f}B parameters in "
                   f"projected matrices keep rank-{projection.rank} optimizer states and a projection matrix; "
                   f"the other trainable parameters keep full states{layerwise}")
    if setup.experts_on_host:
        out.append("KTransformers: routed experts' weights in host memory and computed on the CPU; their "
                   "activations are still counted on the GPU (an upper bound)")
    return out


def describe(setup: TrainingSetup) -> dict:
    out = {
        "micro_batch": setup.micro_batch,
        "seq_len": setup.seq_len,
        **({"decoder_len": setup.decoder_len} if setup.decoder_len else {}),
        "precision": setup.precision.value,
        "optimizer": setup.optimizer.value,
        "grad_ckpt": setup.grad_ckpt_every,
        "attention": setup.attention.value,
        "sharding": setup.sharding.value,
        "world_size": setup.world_size,
        "grad_accum": setup.grad_accum,
        "offload_optimizer": setup.offload_optimizer,
        "offload_params": setup.offload_params,
    }
    if setup.frozen_layers or setup.freeze_embeddings or setup.freeze_head:
        out["frozen"] = {"layers": setup.frozen_layers, "embeddings": setup.freeze_embeddings,
                         "head": setup.freeze_head}
    if setup.lora:
        out["lora"] = {
            "r": setup.lora.r,
            "targets": list(setup.lora.targets),
            "quantization": setup.lora.quantization,
        }
        if setup.lora.method != "lora":
            out["lora"]["method"] = setup.lora.method
            out["lora"]["block_size"] = setup.lora.block_size
    if setup.trained_blocks is not None:
        out["trained_blocks"] = setup.trained_blocks
    if setup.sampled_blocks is not None:
        out["sampled_blocks"] = setup.sampled_blocks
    if setup.projection is not None:
        out["projection"] = {"name": setup.projection.name, "rank": setup.projection.rank,
                             "layerwise": setup.projection.layerwise}
    if setup.experts_on_host:
        out["experts_on_host"] = True
    if setup.sequences_per_example != 1:
        out["sequences_per_example"] = setup.sequences_per_example
    if setup.companions:
        out["companions"] = [{"role": c.role, "model": c.arch.name, "trains": c.trains} for c in setup.companions]
    return out
