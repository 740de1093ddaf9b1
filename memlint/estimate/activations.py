"""Activation memory of a model under one training setup, per token.

The blocks' saved tensors come from replaying each family's recipe on a symbolic tape
(``graph.py`` + ``families.py``). Around the blocks sit the embeddings, the final norm and the
output head; the head's logits and cross-entropy buffers are priced from what transformers'
``ForCausalLMLoss`` allocates, measured with PyTorch's memory tracker (docs/accuracy.md):

* forward: the logits in the compute dtype, an fp32 upcast of them (when they are not fp32
  already) and the fp32 ``log_softmax`` output that cross-entropy saves;
* end of forward: the logits (still referenced by the model output) and the log-softmax;
* start of backward: the log-softmax plus two fp32 logits-sized gradients (8 bytes/logit).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from memlint.estimate.architecture import Architecture
from memlint.estimate.blocks import BLOCKS, CROSS_DECODER_BLOCKS, FINAL_NORM
from memlint.estimate.encoder_decoder import shared_saved
from memlint.estimate.families import final_softcap
from memlint.estimate.graph import Tape, TapeSettings, Value
from memlint.estimate.policy import POLICIES, PrecisionPolicy
from memlint.estimate.setup import TrainingSetup

# bytes per token of the input ids and labels (int64 each)
INPUT_BYTES_PER_TOKEN = 16


@dataclass(frozen=True)
class ActivationProfile:
    """Bytes per token (per sequence position of the micro-batch) of each activation part."""

    block_saved: float  # all blocks' saved tensors, summed (no checkpointing)
    largest_block_saved: float  # one block's saved tensors (what checkpointing recomputes)
    # the worst moment of one block's backward: what it still holds plus the gradients in
    # flight (see graph.Tape.backward_peak)
    block_backward_peak: float
    block_input: float  # one block's input: what a checkpointed block keeps
    checkpointed_blocks: int  # how many blocks keep only their input
    base_saved: float  # embeddings, final norm, the head's saved input
    weight_casts: int  # bytes (not per token): autocast's half copies saved for backward
    logits_forward: float  # per token: the head's forward high point
    logits_end_of_forward: float
    logits_backward: float  # per token: log-softmax and the two fp32 gradient buffers
    blocks: int = 0  # how many blocks ``block_saved`` sums over (0: all alike, as many as checkpointed)

    def stored(self) -> float:
        """Per-token bytes alive after the forward, before the head (blocks + base)."""
        if self.checkpointed_blocks:
            # the checkpointed blocks' share of the saved tensors (blocks of two kinds, as T5's
            # encoder and decoder layers, are checkpointed alike: each stack's every layer)
            share = (self.block_saved * self.checkpointed_blocks / self.blocks if self.blocks
                     else self.checkpointed_blocks * self.largest_block_saved)
            return self.checkpointed_blocks * self.block_input + (self.block_saved - share) + self.base_saved
        return self.block_saved + self.base_saved


def tape_settings(arch: Architecture, setup: TrainingSetup, block_trains: bool = True) -> TapeSettings:
    policy = POLICIES[setup.precision]
    lora = setup.lora
    base_trains = lora is None and block_trains
    compute = policy.compute_bytes
    param_bytes = policy.weight_bytes
    autocast = policy.autocast
    if autocast and setup.sharding.value.startswith("fsdp"):
        # FSDP's mixed-precision policy all-gathers half-precision parameters: the forward
        # runs in pure half precision (autocast has nothing left to cast).
        param_bytes, autocast = compute, False
    if setup.quantized:
        # prepare_model_for_kbit_training upcasts the non-quantised parameters (norms,
        # embeddings, head) to fp32, as does mixed precision's fp32 weights (the weights' own
        # account, states.state_bytes); bnb Linear4bit computes in bnb_4bit_compute_dtype.
        param_bytes = 4 if setup.lora is not None and setup.lora.kbit_prepared else int(policy.weight_bytes)
        compute = 2
    return TapeSettings(
        compute_bytes=compute,
        param_bytes=param_bytes,
        autocast=autocast,
        seq_len=setup.seq_len,
        attention=setup.attention.value,
        trainable=lambda name: base_trains,
        lora_targets=lora.applies_to if lora else (lambda name: False),
        lora_rank=lora.r if lora else 0,
        lora_dropout=lora.dropout if lora else 0.0,
        oft=lora is not None and lora.method == "oft",
        quantized_base=setup.quantized,
        mask_bytes=setup.dropout_mask_bytes,
        fp32_gqa_sdpa_math=setup.fp32_gqa_sdpa_math,
        softmax_workspace=setup.cuda_workspaces,
        grad_ckpt=setup.grad_ckpt,
    )


def _block_bytes(
    arch: Architecture, settings: TapeSettings, input_rg: bool, kind: str = "decoder"
) -> tuple[float, float, float]:
    """(saved bytes, input bytes, backward high point) per token of one block of ``kind``."""
    tape = Tape(settings)
    x = Value(arch.hidden_size, settings.param_bytes, input_rg)
    block = CROSS_DECODER_BLOCKS.get(arch.family) if kind == "cross_decoder" else None
    (block or BLOCKS[arch.family])(tape, arch, x)
    return tape.saved_bytes, x.bytes, tape.backward_peak


def _head_input(arch: Architecture, settings: TapeSettings, x: Value) -> tuple[Tape, Value]:
    """Final norm and the head's saved input, on a tape of their own."""
    tape = Tape(settings)
    kind = FINAL_NORM[arch.family]
    if kind == "layer":
        out = tape.layer_norm(x, "final_norm")
    else:
        out = tape.rms_norm(x, "norm", gemma=kind == "gemma")
    if has_vocab_logits(arch):
        tape.linear(out, arch.vocab_size, "lm_head")
    return tape, out


def has_vocab_logits(arch: Architecture) -> bool:
    """Whether the step computes logits over the vocabulary: causal LMs and T5's decoder do;
    an encoder is priced as it is most often fine-tuned, with a small classification head."""
    return arch.is_causal_lm or arch.family == "t5"


def _embedding_saved(arch: Architecture, settings: TapeSettings) -> float:
    """Embedding outputs that backward keeps: GPT-2/OPT/BERT dropout masks; Gemma's scaling."""
    tape = Tape(settings)
    trains = settings.trainable("embed_tokens")
    x = Value(arch.hidden_size, settings.param_bytes, trains)
    if arch.family in ("gpt2", "opt", "bert", "t5", "phi", "gpt_neox", "falcon"):
        p = float(arch.config.get("embd_pdrop", arch.dropout) or 0.0)
        if arch.family == "phi":
            p = float(arch.config.get("embd_pdrop", 0.0) or 0.0)
        tape.dropout(x, p)
    if arch.family == "starcoder2":
        tape.dropout(x, float(arch.config.get("embedding_dropout", 0.0) or 0.0))
    return tape.saved_bytes


def logits_bytes_per_token(arch: Architecture, setup: TrainingSetup) -> tuple[float, float, float]:
    """(forward high point, end of forward, start of backward) bytes per token of the head."""
    if not has_vocab_logits(arch) or setup.fused_loss:
        # fused/chunked cross-entropy never materialises B*T*V logits
        return 0.0, 0.0, 0.0
    v = arch.vocab_size
    policy: PrecisionPolicy = POLICIES[setup.precision]
    c = 4 if (setup.quantized and setup.lora is not None and setup.lora.kbit_prepared) else policy.compute_bytes
    if arch.family == "t5" and not policy.autocast:
        # T5ForConditionalGeneration's CrossEntropyLoss takes the logits in their own dtype
        # (no fp32 upcast; CUDA autocast does upcast a loss's input): log_softmax saves a
        # logits-sized result, backward two gradients
        return 2 * c * v, 2 * c * v, (3 * c + (c if setup.keep_logits else 0)) * v
    upcast = 4 if c != 4 else 0
    n = setup.loss_chunks
    if n > 1:
        # torchtune's CEWithChunkedOutputLoss (modules/loss), as its recipes run it: the output
        # projection gives n chunks of logits, each upcast and put through cross_entropy on its
        # own; the recipe deletes the logits after the loss. Eager, log_softmax saves its fp32
        # output (not the upcast input): forward peak every chunk's logits, the saved log-probs
        # and the last chunk's upcast; backward the log-probs and one chunk's gradients at a time.
        # Compiled (``compile: True``), the graph saves its bf16 input chunk and the row-wise
        # log-sum-exp and recomputes the rest in backward. Derived from the code, not yet measured.
        if setup.loss_compiled:
            return (c + (upcast + 4) / n) * v, c * v, (c + (upcast + 4 + c) / n) * v
        return (c + 4 + upcast / n) * v, 4.0 * v, (4 + (8 + (c if upcast else 0)) / n) * v
    softcap = final_softcap(arch)
    extra = 2 * c if softcap else 0  # logits/cap, tanh (saved), *cap
    forward = (c + upcast + 4 + extra) * v
    end = (c + 4 + (c if softcap else 0)) * v
    backward = (4 + 8 + (c if softcap else 0)) * v
    if setup.keep_logits:
        backward += c * v
    return forward, end, backward


def profile(arch: Architecture, setup: TrainingSetup) -> ActivationProfile:
    settings = tape_settings(arch, setup)
    frozen_settings = tape_settings(arch, setup, block_trains=False)
    lora = setup.lora is not None
    embeddings_train = lora is False and not setup.freeze_embeddings and setup.frozen_layers == 0
    # enable_input_require_grads (LoRA under checkpointing), or a trained projector's output
    first_input_rg = embeddings_train or (lora and setup.grad_ckpt) or setup.trains_inputs

    cache: dict[tuple[bool, bool, str], tuple[float, float, float]] = {}
    total = 0.0
    largest = 0.0
    backward_peak = 0.0
    inputs = 0.0
    kinds = [g.kind for g in arch.blocks for _ in range(g.count)]
    # a decoder over labels shorter (or longer) than the inputs: its blocks are priced per
    # decoder position, then expressed per input position like everything else here
    ratio = setup.decoder_len / setup.seq_len if setup.decoder_len and setup.seq_len else 1.0
    for index, kind in enumerate(kinds):
        frozen = index < setup.frozen_layers
        rg = first_input_rg if index == 0 else (lora or embeddings_train or setup.trains_inputs
                                                 or index > setup.frozen_layers)
        key = (frozen, rg, kind)
        if key not in cache:
            chosen = frozen_settings if frozen else settings
            if kind == "cross_decoder" and ratio != 1.0:
                decoder = replace(chosen, seq_len=setup.decoder_len, encoder_len=setup.seq_len)
                cache[key] = tuple(b * ratio for b in _block_bytes(arch, decoder, rg, kind))  # type: ignore[assignment]
            else:
                cache[key] = _block_bytes(arch, chosen, rg, kind)
        saved, input_bytes, block_peak = cache[key]
        total += saved
        inputs += input_bytes
        largest = max(largest, saved)
        backward_peak = max(backward_peak, block_peak)
    input_bytes = inputs / len(kinds) if kinds else 0.0  # what a checkpointed block keeps, on average

    head_tape, _ = _head_input(arch, settings, Value(arch.hidden_size, settings.param_bytes, True))
    base = head_tape.saved_bytes + _embedding_saved(arch, settings)
    if any(g.kind == "cross_decoder" for g in arch.blocks):
        base += shared_saved(arch, settings)

    casts = 0
    if settings.autocast:
        head = arch.lm_head.weight_params if arch.lm_head else (arch.vocab_size * arch.hidden_size if has_vocab_logits(arch) else 0)
        linears = arch.linear_weight_params
        if setup.frozen_weight_bytes == settings.compute_bytes and arch.num_layers:
            # frozen weights already in the compute dtype are used as they are: only the
            # trained (upcast) blocks' weights get an autocast copy
            trained = setup.trained_blocks if setup.trained_blocks is not None else arch.num_layers - setup.frozen_layers
            linears = linears * trained // arch.num_layers
            head = 0 if setup.freeze_head else head
        if setup.quantized:
            # bitsandbytes' 4-bit linears dequantize their weight into the compute dtype inside
            # MatMul4Bit and keep only the packed weight for backward: autocast has no weight to
            # copy there (measured: tests/calibration, the amp-bf16 QLoRA case)
            linears = 0
        casts = settings.compute_bytes * (linears + head)

    checkpointed = 0
    if setup.grad_ckpt:
        checkpointed = arch.num_layers // setup.grad_ckpt_every if setup.grad_ckpt_every > 1 else arch.num_layers
    fwd, end, bwd = (b * ratio for b in logits_bytes_per_token(arch, setup))  # the decoder's positions
    return ActivationProfile(
        block_saved=total,
        largest_block_saved=largest,
        block_backward_peak=backward_peak,
        block_input=input_bytes,
        checkpointed_blocks=checkpointed,
        base_saved=base,
        weight_casts=casts,
        logits_forward=fwd,
        logits_end_of_forward=end,
        logits_backward=bwd,
        blocks=len(kinds),
    )
