"""Each model family's block, written as the ops its Hugging Face implementation runs.

These recipes drive ``graph.Tape`` to find the tensors a block saves for backward. They follow
transformers 5.x (``modeling_<family>.py``) and were checked op by op against measured saved
tensors (see ``docs/accuracy.md``). A recipe receives the block's input (the residual stream)
and returns its output; the tape collects what is saved along the way.
"""

from __future__ import annotations

from typing import Callable

from memlint.estimate.architecture import Architecture
from memlint.estimate.encoder_decoder import t5_encoder_block
from memlint.estimate.encoders import LINEAR_NAMES, NO_ATTENTION_OUTPUT_DROPOUT
from memlint.estimate.graph import Tape, Value

Block = Callable[[Tape, Architecture, Value], Value]


def _rotary_fraction(arch: Architecture) -> float:
    cfg = arch.config or {}
    rope = cfg.get("rope_parameters")
    params = rope if isinstance(rope, dict) else {}
    for source in (params, cfg):
        for key in ("partial_rotary_factor", "rotary_pct"):
            value = source.get(key)
            if isinstance(value, (int, float)) and 0 < value < 1:
                return float(value)
    return 1.0


def _gated_mlp(
    t: Tape, arch: Architecture, x: Value, inter: int, prefix: str = "", out: int | None = None
) -> Value:
    gate = t.linear(x, inter, prefix + "gate_proj")
    up = t.linear(x, inter, prefix + "up_proj")
    hidden = t.mul(t.activation(gate, arch.activation), up)
    return t.linear(hidden, out or arch.hidden_size, prefix + "down_proj")


def _qkv_attention(t: Tape, arch: Architecture, x: Value, q_norm: bool = False) -> Value:
    """Separate q/k/v projections, RoPE, attention, o_proj (Llama, Mistral, Qwen, Gemma)."""
    q = t.linear(x, arch.q_dim, "q_proj")
    k = t.linear(x, arch.kv_dim, "k_proj")
    v = t.linear(x, arch.kv_dim, "v_proj")
    if q_norm:  # Qwen3 / Gemma 3: RMSNorm over each head before RoPE
        gemma = arch.family == "gemma2"
        q = t.rms_norm(q, "q_norm", gemma=gemma)
        k = t.rms_norm(k, "k_norm", gemma=gemma)
    q = t.rope(q, cos_bytes=x_bytes(t, x))
    k = t.rope(k, cos_bytes=x_bytes(t, x))
    softcap = bool(attn_softcap(arch))
    out = t.attention(q, k, v, arch.num_heads, arch.num_kv_heads, arch.attention_dropout,
                      softcap=softcap)
    return t.linear(out, arch.hidden_size, "o_proj")


def attn_softcap(arch: Architecture) -> float | None:
    """Gemma 2 caps attention logits (config default 50.0); others do not."""
    default = 50.0 if arch.model_type == "gemma2" else None
    return arch.config.get("attn_logit_softcapping", default)


def final_softcap(arch: Architecture) -> float | None:
    """Gemma 2 caps the output logits (config default 30.0)."""
    default = 30.0 if arch.model_type == "gemma2" else None
    return arch.config.get("final_logit_softcapping", default)


def x_bytes(t: Tape, x: Value) -> int:
    """cos/sin are made in the dtype of the hidden states the model was called with."""
    return t.s.param_bytes


def llama_block(t: Tape, arch: Architecture, x: Value) -> Value:
    h = t.rms_norm(x, "input_layernorm")
    x = t.add(x, _qkv_attention(t, arch, h, q_norm=arch.family == "qwen3"))
    h = t.rms_norm(x, "post_attention_layernorm")
    return t.add(x, _gated_mlp(t, arch, h, arch.intermediate_size))


def gemma_block(t: Tape, arch: Architecture, x: Value) -> Value:
    h = t.rms_norm(x, "input_layernorm", gemma=True)
    x = t.add(x, _qkv_attention(t, arch, h))
    h = t.rms_norm(x, "post_attention_layernorm", gemma=True)
    return t.add(x, _gated_mlp(t, arch, h, arch.intermediate_size))


def gemma2_block(t: Tape, arch: Architecture, x: Value) -> Value:
    """Gemma 2 / 3: "sandwich" norms around attention and MLP (Gemma 3 adds q/k norms)."""
    h = t.rms_norm(x, "input_layernorm", gemma=True)
    a = _qkv_attention(t, arch, h, q_norm=arch.model_type == "gemma3_text")
    a = t.rms_norm(a, "post_attention_layernorm", gemma=True)
    x = t.add(x, a)
    h = t.rms_norm(x, "pre_feedforward_layernorm", gemma=True)
    m = _gated_mlp(t, arch, h, arch.intermediate_size)
    m = t.rms_norm(m, "post_feedforward_layernorm", gemma=True)
    return t.add(x, m)


def olmo2_block(t: Tape, arch: Architecture, x: Value) -> Value:
    """OLMo-2: no norm before attention or MLP; RMSNorm (weight applied in fp32) over all of q
    and all of k before RoPE, and after the attention and MLP outputs, before each residual add."""
    q = t.rms_norm(t.linear(x, arch.q_dim, "q_proj"), "q_norm", gemma=True)
    k = t.rms_norm(t.linear(x, arch.kv_dim, "k_proj"), "k_norm", gemma=True)
    v = t.linear(x, arch.kv_dim, "v_proj")
    q = t.rope(q, cos_bytes=x_bytes(t, x))
    k = t.rope(k, cos_bytes=x_bytes(t, x))
    out = t.attention(q, k, v, arch.num_heads, arch.num_kv_heads, arch.attention_dropout)
    a = t.rms_norm(t.linear(out, arch.hidden_size, "o_proj"), "post_attention_layernorm", gemma=True)
    x = t.add(x, a)
    m = t.rms_norm(_gated_mlp(t, arch, x, arch.intermediate_size), "post_feedforward_layernorm",
                   gemma=True)
    return t.add(x, m)


def granite_block(t: Tape, arch: Architecture, x: Value) -> Value:
    """Granite 3: Llama's block with each branch scaled by ``residual_multiplier`` before its
    residual add (a multiplication by a constant, which saves nothing)."""
    h = t.rms_norm(x, "input_layernorm")
    x = t.add(x, t.scale(_qkv_attention(t, arch, h)))
    h = t.rms_norm(x, "post_attention_layernorm")
    return t.add(x, t.scale(_gated_mlp(t, arch, h, arch.intermediate_size)))


def internlm2_block(t: Tape, arch: Architecture, x: Value) -> Value:
    """InternLM2: Llama's block with one fused ``wqkv`` (q, k and v are slices of it) and a gated
    MLP named w1 (gate), w3 (up), w2 (down)."""
    h = t.rms_norm(x, "attention_norm")
    qkv = t.linear(h, arch.q_dim + 2 * arch.kv_dim, "wqkv")
    q = t.rope(t.view(qkv, arch.q_dim), t.s.param_bytes)
    k = t.rope(t.view(qkv, arch.kv_dim), t.s.param_bytes)
    v = t.view(qkv, arch.kv_dim)
    out = t.attention(q, k, v, arch.num_heads, arch.num_kv_heads, arch.attention_dropout)
    x = t.add(x, t.linear(out, arch.hidden_size, "wo"))
    h = t.rms_norm(x, "ffn_norm")
    gate = t.linear(h, arch.intermediate_size, "w1")
    up = t.linear(h, arch.intermediate_size, "w3")
    hidden = t.mul(t.activation(gate, arch.activation), up)
    return t.add(x, t.linear(hidden, arch.hidden_size, "w2"))


def phi3_block(t: Tape, arch: Architecture, x: Value) -> Value:
    """Phi-3: fused qkv_proj (q, k, v are views of it) and gate_up_proj, residual dropout."""
    h = t.rms_norm(x, "input_layernorm")
    qkv = t.linear(h, arch.q_dim + 2 * arch.kv_dim, "qkv_proj")
    fraction = _rotary_fraction(arch)
    q = t.rope(t.view(qkv, arch.q_dim), t.s.param_bytes, fraction, concat=True)
    k = t.rope(t.view(qkv, arch.kv_dim), t.s.param_bytes, fraction, concat=True)
    v = t.view(qkv, arch.kv_dim)
    out = t.attention(q, k, v, arch.num_heads, arch.num_kv_heads, arch.attention_dropout)
    a = t.dropout(t.linear(out, arch.hidden_size, "o_proj"), arch.dropout)
    x = t.add(x, a)
    h = t.rms_norm(x, "post_attention_layernorm")
    gate_up = t.linear(h, 2 * arch.intermediate_size, "gate_up_proj")
    gate = t.view(gate_up, arch.intermediate_size)
    up = t.view(gate_up, arch.intermediate_size)
    hidden = t.mul(t.activation(gate, arch.activation), up)
    m = t.dropout(t.linear(hidden, arch.hidden_size, "down_proj"), arch.dropout)
    return t.add(x, m)


def phi_block(t: Tape, arch: Architecture, x: Value) -> Value:
    """Phi-1/2: one LayerNorm feeds attention and MLP in parallel; partial rotary."""
    h = t.layer_norm(x, "input_layernorm")
    q = t.linear(h, arch.q_dim, "q_proj")
    k = t.linear(h, arch.kv_dim, "k_proj")
    v = t.linear(h, arch.kv_dim, "v_proj")
    fraction = _rotary_fraction(arch)
    q = t.rope(q, t.s.param_bytes, fraction)
    k = t.rope(k, t.s.param_bytes, fraction)
    out = t.attention(q, k, v, arch.num_heads, arch.num_kv_heads, arch.attention_dropout)
    a = t.dropout(t.linear(out, arch.hidden_size, "dense"), arch.dropout)
    m = t.linear(t.activation(t.linear(h, arch.intermediate_size, "fc1"), arch.activation),
                 arch.hidden_size, "fc2")
    m = t.dropout(m, arch.dropout)
    return t.add(t.add(a, m), x)


def gpt2_block(t: Tape, arch: Architecture, x: Value) -> Value:
    """GPT-2: LayerNorm, fused c_attn (q, k, v are views of it), GELU, dropouts."""
    h = t.layer_norm(x, "ln_1")
    qkv = t.linear(h, 3 * arch.hidden_size, "c_attn")
    q, k, v = (t.view(qkv, arch.hidden_size) for _ in range(3))
    out = t.attention(q, k, v, arch.num_heads, arch.num_heads, arch.attention_dropout,
                      softmax="input")
    a = t.dropout(t.linear(out, arch.hidden_size, "attn.c_proj"), arch.dropout)
    x = t.add(x, a)
    h = t.layer_norm(x, "ln_2")
    m = t.activation(t.linear(h, arch.intermediate_size, "c_fc"), arch.activation)
    m = t.dropout(t.linear(m, arch.hidden_size, "mlp.c_proj"), arch.dropout)
    return t.add(x, m)


def neox_block(t: Tape, arch: Architecture, x: Value) -> Value:
    """GPT-NeoX / Pythia: fused qkv, partial rotary, parallel residual by default."""
    h = t.layer_norm(x, "input_layernorm")
    qkv = t.linear(h, 3 * arch.hidden_size, "query_key_value")
    fraction = _rotary_fraction(arch)
    q = t.rope(t.view(qkv, arch.hidden_size), t.s.param_bytes, fraction)
    k = t.rope(t.view(qkv, arch.hidden_size), t.s.param_bytes, fraction)
    v = t.view(qkv, arch.hidden_size)
    out = t.attention(q, k, v, arch.num_heads, arch.num_heads, arch.attention_dropout)
    a = t.dropout(t.linear(out, arch.hidden_size, "dense"), arch.dropout)
    parallel = bool(arch.config.get("use_parallel_residual", True))
    base = x if parallel else t.add(a, x)
    h2 = t.layer_norm(base, "post_attention_layernorm")
    m = t.activation(t.linear(h2, arch.intermediate_size, "dense_h_to_4h"), arch.activation)
    m = t.dropout(t.linear(m, arch.hidden_size, "dense_4h_to_h"), arch.dropout)
    return t.add(t.add(m, a), x) if parallel else t.add(m, base)


def opt_block(t: Tape, arch: Architecture, x: Value) -> Value:
    """OPT (pre-LayerNorm variant): attention, dropout, residual, LayerNorm, ReLU MLP."""
    h = t.layer_norm(x, "self_attn_layer_norm")
    q = t.scale(t.linear(h, arch.hidden_size, "q_proj"))  # query * scaling
    k = t.linear(h, arch.hidden_size, "k_proj")
    v = t.linear(h, arch.hidden_size, "v_proj")
    out = t.attention(q, k, v, arch.num_heads, arch.num_heads, arch.attention_dropout)
    a = t.dropout(t.linear(out, arch.hidden_size, "out_proj"), arch.dropout)
    x = t.add(x, a)
    h = t.layer_norm(x, "final_layer_norm")
    m = t.activation(t.linear(h, arch.intermediate_size, "fc1"), arch.activation)
    m = t.dropout(t.linear(m, arch.hidden_size, "fc2"), arch.dropout)
    return t.add(x, m)


def falcon_block(t: Tape, arch: Architecture, x: Value) -> Value:
    """Falcon: fused query_key_value, RoPE, parallel attention + MLP."""
    cfg = arch.config
    new_arch = bool(cfg.get("new_decoder_architecture", False))
    two_norms = new_arch and int(cfg.get("num_ln_in_parallel_attn") or 2) == 2
    h_attn = t.layer_norm(x, "ln_attn" if two_norms else "input_layernorm")
    h_mlp = t.layer_norm(x, "ln_mlp") if two_norms else h_attn
    qkv = t.linear(h_attn, (arch.num_heads + 2 * arch.num_kv_heads) * arch.head_dim,
                   "query_key_value")
    # transpose(1, 2).reshape(...) copies q, k and v into head-major tensors
    q = t.rope(Value(arch.q_dim, qkv.nbytes, qkv.rg, head_major=True), t.s.param_bytes)
    k = t.rope(Value(arch.kv_dim, qkv.nbytes, qkv.rg, head_major=True), t.s.param_bytes)
    v = Value(arch.kv_dim, qkv.nbytes, qkv.rg, head_major=True)
    out = t.attention(q, k, v, arch.num_heads, arch.num_kv_heads, 0.0, softmax="hidden",
                      broadcast_kv=not new_arch)
    a = t.linear(out, arch.hidden_size, "dense")
    parallel = bool(cfg.get("parallel_attn", True)) or new_arch
    if not parallel:
        x = t.add(x, t.dropout(a, arch.attention_dropout))
        h_mlp = t.layer_norm(x, "post_attention_layernorm")
    m = t.activation(t.linear(h_mlp, arch.intermediate_size, "dense_h_to_4h"), arch.activation)
    m = t.linear(m, arch.hidden_size, "dense_4h_to_h")
    if parallel:
        m = t.add(m, a)
    return t.add(t.dropout(m, arch.dropout), x)


def moe_block(t: Tape, arch: Architecture, x: Value) -> Value:
    """Mixtral / Qwen-MoE: attention as Llama; the router picks top-k experts per token.

    Per token, each of its k experts sees a gathered copy of the token and runs a gated MLP
    of ``moe_intermediate_size``; the router's logits are soft-maxed in fp32.
    """
    h = t.rms_norm(x, "input_layernorm")
    x = t.add(x, _qkv_attention(t, arch, h, q_norm=arch.model_type == "qwen3_moe"))
    h = t.rms_norm(x, "post_attention_layernorm")
    k = max(arch.experts_per_token, 1)
    logits = t.linear(h, arch.num_experts, "gate")
    probs = t.new(arch.num_experts, 4, logits.rg)
    t.save(probs)  # softmax(router_logits, dtype=float32)
    routed = t.new(k * arch.hidden_size, h.nbytes, h.rg)  # hidden_states[token_idx] per expert
    out = _gated_mlp(
        t, arch, routed, k * arch.moe_intermediate_size, "experts.", k * arch.hidden_size
    )
    weighted = t.mul(out, t.new(k, probs.nbytes, probs.rg))  # * routing weights
    moe = t.new(arch.hidden_size, weighted.nbytes, weighted.rg)  # index_add_ into the output
    if arch.model_type == "qwen2_moe":
        inter = int(arch.config.get("shared_expert_intermediate_size") or 0)
        shared = _gated_mlp(t, arch, h, inter, prefix="shared_expert.")
        gate = t.linear(h, 1, "shared_expert_gate")
        moe = t.add(moe, t.mul(shared, t.new(1, gate.nbytes, gate.rg)))
    return t.add(x, moe)


_BERT_NAMES = ("query", "key", "value", "attention.output.dense", "intermediate.dense", "output.dense")


def bert_block(t: Tape, arch: Architecture, x: Value) -> Value:
    """BERT post-LayerNorm encoder block (bidirectional attention); RoBERTa's and DistilBERT's
    too, under their own layer names (``encoders.LINEAR_NAMES``)."""
    names = LINEAR_NAMES.get(arch.model_type, _BERT_NAMES)
    q = t.linear(x, arch.hidden_size, names[0])
    k = t.linear(x, arch.hidden_size, names[1])
    v = t.linear(x, arch.hidden_size, names[2])
    out = t.attention(q, k, v, arch.num_heads, arch.num_heads, arch.attention_dropout,
                      softmax="input")
    a = t.linear(out, arch.hidden_size, names[3])
    if arch.model_type not in NO_ATTENTION_OUTPUT_DROPOUT:
        a = t.dropout(a, arch.dropout)
    x = t.layer_norm(t.add(a, x), "attention.output.LayerNorm")
    m = t.activation(t.linear(x, arch.intermediate_size, names[4]), arch.activation)
    m = t.dropout(t.linear(m, arch.hidden_size, names[5]), arch.dropout)
    return t.layer_norm(t.add(m, x), "output.LayerNorm")


def bloom_block(t: Tape, arch: Architecture, x: Value) -> Value:
    """BLOOM: LayerNorm, fused qkv, ALiBi attention (always its own eager kernel: baddbmm,
    fp32 softmax), dropout-add residuals, a GELU MLP (a custom autograd function that saves
    only its input)."""
    h = t.layer_norm(x, "input_layernorm")
    qkv = t.linear(h, 3 * arch.hidden_size, "query_key_value")
    q, k, v = (t.view(qkv, arch.hidden_size) for _ in range(3))
    out = t.attention(q, k, v, arch.num_heads, arch.num_heads, arch.attention_dropout)
    x = t.add(t.dropout(t.linear(out, arch.hidden_size, "self_attention.dense"), arch.dropout), x)
    h = t.layer_norm(x, "post_attention_layernorm")
    m = t.gelu(t.linear(h, arch.intermediate_size, "dense_h_to_4h"))
    m = t.linear(m, arch.hidden_size, "dense_4h_to_h")
    return t.add(t.dropout(m, arch.dropout), x)


def gpt_oss_block(t: Tape, arch: Architecture, x: Value) -> Value:
    """gpt-oss: RMSNorm that applies its weight in fp32, Llama-style attention whose eager
    softmax runs over the logits plus a sink column in the compute dtype, and routed experts
    with a clamped SwiGLU: ``(clamp(up) + 1) * clamp(gate) * sigmoid(alpha * clamp(gate))``."""
    h = t.rms_norm(x, "input_layernorm", gemma=True)
    q = t.rope(t.linear(h, arch.q_dim, "q_proj"), t.s.param_bytes)
    k = t.rope(t.linear(h, arch.kv_dim, "k_proj"), t.s.param_bytes)
    v = t.linear(h, arch.kv_dim, "v_proj")
    out = t.attention(q, k, v, arch.num_heads, arch.num_kv_heads, arch.attention_dropout,
                      softmax="input")
    x = t.add(x, t.linear(out, arch.hidden_size, "o_proj"))
    h = t.rms_norm(x, "post_attention_layernorm", gemma=True)
    k_top = max(arch.experts_per_token, 1)
    logits = t.linear(h, arch.num_experts, "router")
    routed = t.new(k_top * arch.hidden_size, h.nbytes, h.rg)  # tokens gathered per expert
    inter = k_top * arch.moe_intermediate_size
    gate_up = t.linear(routed, 2 * inter, "experts.gate_up_proj")
    gate = t.new(inter, gate_up.nbytes, gate_up.rg)  # clamp() of a strided view
    sigmoid = t.new(inter, gate_up.nbytes, gate_up.rg)
    t.save(gate_up, sigmoid)  # clamp reads its input, sigmoid saves its result
    glu = t.mul(gate, sigmoid)
    up = t.new(inter, gate_up.nbytes, gate_up.rg)  # clamp(up) + 1
    hidden = t.mul(up, glu)
    out = t.linear(hidden, k_top * arch.hidden_size, "experts.down_proj")
    weighted = t.mul(out, t.new(k_top, logits.nbytes, logits.rg))
    return t.add(x, t.new(arch.hidden_size, weighted.nbytes, weighted.rg))


# the blocks of the families here; estimate/blocks.py adds those of decoder_blocks.py
BLOCKS: dict[str, Block] = {
    "llama": llama_block,
    "qwen3": llama_block,
    "gemma": gemma_block,
    "gemma2": gemma2_block,
    "phi3": phi3_block,
    "olmo2": olmo2_block,
    "granite": granite_block,
    "internlm2": internlm2_block,
    "phi": phi_block,
    "gpt2": gpt2_block,
    "gpt_neox": neox_block,
    "opt": opt_block,
    "falcon": falcon_block,
    "moe": moe_block,
    "bert": bert_block,
    "t5": t5_encoder_block,
    "bloom": bloom_block,
    "gpt_oss": gpt_oss_block,
}

# Which normalisation each family uses for its final norm (before the output head).
FINAL_NORM: dict[str, str] = {
    "llama": "rms",
    "qwen3": "rms",
    "moe": "rms",
    "gemma": "gemma",
    "gemma2": "gemma",
    "phi3": "rms",
    "olmo2": "gemma",  # Olmo2RMSNorm applies its weight in fp32 too
    "granite": "rms",
    "internlm2": "rms",
    "phi": "layer",
    "gpt2": "layer",
    "gpt_neox": "layer",
    "opt": "layer",
    "falcon": "layer",
    "bert": "layer",
    "t5": "rms",
    "bloom": "layer",
    "gpt_oss": "gemma",
}
