"""T5's encoder and decoder blocks and the encoder output its cross-attention keeps, as transformers 5.23 runs
them (``modeling_t5.py``).

A T5 training step runs the encoder over the inputs and the decoder over the (right-shifted)
labels; every decoder layer attends to itself (causally) and to the encoder's output, whose
keys and values each layer projects anew. transformers 5.23 declares ``_supports_sdpa`` for T5
and folds the relative position bias into SDPA's additive mask. When that mask needs a gradient
(the position bias trains, or gradient checkpointing marks the cross-attention's zero bias), the
measured step (``memlint trace`` on CPU) runs SDPA's math kernel, which keeps the probabilities;
otherwise the fused kernel keeps none. On a GPU CUDA runs the math kernel there too and applies
the attention dropout inside it (op-level probe on an H200, tests/calibration/gpu_op_probe.json):
the dropped fp32 probabilities and the dropout mask are kept as well. The encoder's output (its final norm, then dropout) is one tensor that
every decoder layer's ``k``/``v`` projection saves: it is priced once, with the embeddings, not
per layer. A decoder block is priced per decoder position: its cross-attention's keys, values and
score rows are as long as the encoder's output (``TapeSettings.encoder_len`` when the labels are
shorter or longer than the inputs, ``TrainingSetup.decoder_len``; measured by ``memlint trace``
with labels of 32-512 tokens beside inputs of 256-1024); the position-bias masks, ``heads x T x T``
per stack and not per sequence, are left out (under 0.1 GiB for t5-base at 512 tokens).
Checked against ``memlint trace`` measurements (``tests/calibration/``, ``docs/accuracy.md``).
"""

from __future__ import annotations

from dataclasses import replace

from memlint.estimate.architecture import Architecture
from memlint.estimate.graph import Tape, TapeSettings, Value


def _bias_trains(t: Tape, prefix: str) -> bool:
    """Whether SDPA's additive mask needs a gradient: the self-attentions' relative position
    bias when its embedding trains; the cross-attentions' zero bias, which T5Attention marks
    ``requires_grad`` under gradient checkpointing."""
    if prefix == "EncDecAttention":
        return t.s.grad_ckpt
    return t.s.trainable("relative_attention_bias")


def _math_attention(t: Tape, q: Value, k: Value, v: Value, heads: int, dropout: float) -> Value:
    """SDPA's math kernel, which CUDA and the CPU trace run when the mask needs a gradient: half
    inputs upcast to fp32, q and k scaled (new tensors), the fp32 softmax result and v saved
    (as ``graph.Tape._math_sdpa``), and the attention dropout applied inside the kernel: its mask
    (``TrainingSetup.dropout_mask_bytes``: bool on CUDA) and the fp32 dropped probabilities,
    which the product with v saves. Op-level probe on an H200: tests/calibration/gpu_op_probe.json
    (``native_dropout`` over the fp32 probabilities; its bf16 copy is the kernel's second result,
    dropped at once)."""
    qc, kc, vc = (t.autocast_input(x) for x in (q, k, v))
    up = max(4, qc.nbytes)
    probs = t.math_sdpa_probabilities(heads, up, True)
    dropped = t.dropout(probs, dropout)
    t.save(t.new(qc.numel, up, True), t.new(kc.numel, up, True), t.new(vc.numel, up, True), probs)
    if dropped is not probs:
        t.save(dropped)
    return Value(q.numel, qc.nbytes, True, head_major=True)


def _attention(t: Tape, arch: Architecture, h: Value, prefix: str, kv_input: Value) -> Value:
    """One attention of a T5 layer. The cross-attention's keys and values are as long as the
    encoder's output (``TapeSettings.encoder_len``), its scores one row of that length per
    decoder position: both priced per decoder position."""
    inner = arch.num_heads * arch.head_dim
    cross = prefix == "EncDecAttention"
    q = t.linear(h, inner, f"{prefix}.q")
    k = t.linear(kv_input, inner, f"{prefix}.k", in_features=arch.hidden_size if cross else None)
    v = t.linear(kv_input, inner, f"{prefix}.v", in_features=arch.hidden_size if cross else None)
    own = t.s
    if cross and own.encoder_len:
        t.s = replace(own, seq_len=own.encoder_len)  # scores: heads x encoder positions per query
    try:
        if t.s.attention != "eager" and _bias_trains(t, prefix):
            out = _math_attention(t, q, k, v, arch.num_heads, arch.dropout)
            out = t.new(out.numel, out.nbytes, out.rg)  # transpose(1, 2).contiguous()
        else:
            out = t.attention(q, k, v, arch.num_heads, arch.num_heads, arch.dropout, softmax="input")
    finally:
        t.s = own
    return t.dropout(t.linear(out, arch.hidden_size, f"{prefix}.o"), arch.dropout)


def t5_encoder_block(t: Tape, arch: Architecture, x: Value) -> Value:
    """T5 encoder layer: bidirectional self-attention and the feed-forward, each pre-normed."""
    h = t.rms_norm(x, "layer_norm")
    x = t.add(x, _attention(t, arch, h, "SelfAttention", h))
    return t.add(x, _feed_forward(t, arch, t.rms_norm(x, "layer_norm")))


def _feed_forward(t: Tape, arch: Architecture, h: Value) -> Value:
    if str(arch.config.get("feed_forward_proj", "relu")).startswith("gated"):
        g = t.activation(t.linear(h, arch.intermediate_size, "wi_0"), "gelu_new")
        m = t.mul(g, t.linear(h, arch.intermediate_size, "wi_1"))
    else:
        m = t.activation(t.linear(h, arch.intermediate_size, "wi"), "relu")
    return t.dropout(t.linear(t.dropout(m, arch.dropout), arch.hidden_size, "wo"), arch.dropout)


def encoder_output(arch: Architecture, settings: TapeSettings) -> Value:
    """The encoder's output as the decoder reads it: its final norm's result, after dropout
    (per decoder position: as many encoder positions as ``TapeSettings.encoder_len`` says)."""
    rows = settings.encoder_len / settings.seq_len if settings.encoder_len else 1.0
    return Value(arch.hidden_size * rows, settings.param_bytes, True)


def t5_decoder_block(t: Tape, arch: Architecture, x: Value, encoded: Value | None = None) -> Value:
    """T5 decoder layer: causal self-attention, cross-attention over the encoder's output, FF.

    ``encoded`` is the encoder's output; the tape does not keep it (it is shared by every
    decoder layer: :func:`shared_saved` prices it once), but keeps what each layer makes of it
    (autocast's half copies, LoRA's dropout of it)."""
    shared = encoded or encoder_output(arch, t.s)
    h = t.rms_norm(x, "layer_norm")
    x = t.add(x, _attention(t, arch, h, "SelfAttention", h))
    h = t.rms_norm(x, "layer_norm")
    x = t.add(x, _attention(t, arch, h, "EncDecAttention", shared))
    t._saved.pop(id(shared), None)
    return t.add(x, _feed_forward(t, arch, t.rms_norm(x, "layer_norm")))


def shared_saved(arch: Architecture, settings: TapeSettings) -> float:
    """Per-token bytes of T5's encoder end that no block prices: the encoder's final norm and
    dropout, the decoder's own embedding dropout, and the encoder output when the decoder's
    cross-attention projections save it."""
    tape = Tape(settings)
    x = Value(arch.hidden_size, settings.param_bytes, True)
    tape.dropout(tape.rms_norm(x, "final_layer_norm"), arch.dropout)
    embedded = Value(arch.hidden_size, settings.param_bytes, settings.trainable("embed_tokens"))
    tape.dropout(embedded, arch.dropout)  # the decoder stack's input dropout
    probe = Tape(settings)
    encoded = encoder_output(arch, settings)
    probe.linear(encoded, arch.num_heads * arch.head_dim, "EncDecAttention.k")
    probe.linear(encoded, arch.num_heads * arch.head_dim, "EncDecAttention.v")
    kept = encoded.bytes if id(encoded) in probe._saved else 0.0
    return tape.saved_bytes + kept


__all__ = ["encoder_output", "shared_saved", "t5_decoder_block", "t5_encoder_block"]
