"""Block recipes of the newer decoder-only families (``decoders.py``), as transformers 5.23 runs them.

DeepSeek-V2/V3 (``modeling_deepseek_v2.py``), GLM and GLM-4 (``modeling_glm.py``,
``modeling_glm4.py``), StarCoder2 (``modeling_starcoder2.py``) and Llama-4's language model
(``modeling_llama4.py``), written op by op like the
recipes in ``families.py``, which registers them. Checked against ``memlint trace`` measurements
(``tests/calibration/``, ``docs/accuracy.md``).
"""

from __future__ import annotations

from memlint.estimate.architecture import Architecture
from memlint.estimate.families import _gated_mlp, x_bytes
from memlint.estimate.graph import Tape, Value


def _parameter_linear(t: Tape, x: Value, out_features: int, name: str) -> Value:
    """``F.linear`` with a bare ``nn.Parameter`` (fused experts, DeepSeek's router): what
    ``t.linear`` does, less the LoRA adapter, since PEFT targets ``nn.Linear`` modules only."""
    trains = t.s.trainable(name) and not t.s.quantized_base
    x_in = t.autocast_input(x)
    if trains:
        t.save(x_in)
    return t.new(out_features, x_in.nbytes, x.rg or trains)


def _mla_attention(t: Tape, arch: Architecture, h: Value) -> Value:
    """Multi-head latent attention: queries (optionally through a low-rank bottleneck and its
    norm), the shared latent ``kv_a_proj_with_mqa`` split into a normed part that
    ``kv_b_proj`` expands into per-head keys and values and a rotary part shared by all heads."""
    cfg = arch.config
    heads = arch.num_heads
    nope = int(cfg.get("qk_nope_head_dim", 128))
    rope = int(cfg.get("qk_rope_head_dim", 64))
    v_dim = int(cfg.get("v_head_dim", 128))
    kv_rank = int(cfg.get("kv_lora_rank", 512))
    qk = nope + rope
    if any(lin.name == "q_a_proj" for lin in arch.blocks[0].linears):
        q_rank = int(cfg.get("q_lora_rank") or 1536)
        q_a = t.rms_norm(t.linear(h, q_rank, "q_a_proj"), "q_a_layernorm")
        q = t.linear(q_a, heads * qk, "q_b_proj")
    else:
        q = t.linear(h, heads * qk, "q_proj")
    latent = t.linear(h, kv_rank + rope, "kv_a_proj_with_mqa")
    k_nope = t.rms_norm(t.view(latent, kv_rank), "kv_a_layernorm")
    # the rotary parts (a query slice per head, one key slice): rotated in fp32 through complex
    # numbers and cast back (V2), or rotate_half (V3); neither saves anything per layer
    q_pe = t.new(heads * rope, q.nbytes, q.rg)
    k_pe = t.new(rope, latent.nbytes, latent.rg)
    query = t.new(heads * qk, q.nbytes, q.rg or q_pe.rg)  # cat((q_nope, q_pe))
    query = Value(query.numel, query.nbytes, query.rg, head_major=True)
    kv = t.linear(k_nope, heads * (nope + v_dim), "kv_b_proj")
    key = Value(heads * qk, kv.nbytes, kv.rg or k_pe.rg, head_major=True)  # new_empty + copy_
    value = t.view(kv, heads * v_dim)
    out = t.attention(query, key, value, heads, heads, arch.attention_dropout,
                      out_numel=heads * v_dim)
    return t.linear(out, arch.hidden_size, "o_proj")


def deepseek_block(t: Tape, arch: Architecture, x: Value) -> Value:
    """DeepSeek-V2/V3 decoder layer: MLA, then routed experts and shared experts.

    Every block is priced as a mixture-of-experts block (the first ``first_k_dense_replace``
    dense layers save about as much: DeepSeek-V2-Lite's dense MLP is 10,944 wide, its six routed
    plus two shared experts 11,264). The router runs in fp32 on an fp32 copy of its input; the
    experts run as in ``moe_block`` (grouped tokens, fused gate/up, fp32 routing weights).
    """
    h = t.rms_norm(x, "input_layernorm")
    x = t.add(x, _mla_attention(t, arch, h))
    h = t.rms_norm(x, "post_attention_layernorm")
    k = max(arch.experts_per_token, 1)
    h32 = t.cast(h, 4)  # hidden_states.type(torch.float32)
    logits = _parameter_linear(t, h32, arch.num_experts, "gate")
    scores = t.new(arch.num_experts, 4, logits.rg)
    t.save(scores)  # softmax (V2) / sigmoid (V3) save their result
    t.save(t.new(k, 8, False))  # topk's indices
    routed = t.new(k * arch.hidden_size, h.nbytes, h.rg)  # hidden_states[token_idx] per expert
    inter = k * arch.moe_intermediate_size
    gate_up = _parameter_linear(t, routed, 2 * inter, "experts.gate_up_proj")
    hidden = t.mul(t.activation(t.view(gate_up, inter), arch.activation), t.view(gate_up, inter))
    out = _parameter_linear(t, hidden, k * arch.hidden_size, "experts.down_proj")
    weighted = t.mul(out, t.new(k, 4, scores.rg))  # * top_k_weights (fp32)
    moe = t.new(arch.hidden_size, h.nbytes, weighted.rg)  # .to(dtype), index_add_
    shared = int(arch.config.get("n_shared_experts") or 0) * arch.moe_intermediate_size
    if shared:
        moe = t.add(moe, _gated_mlp(t, arch, h, shared, prefix="shared_experts."))
    return t.add(x, moe)


def _glm_attention(t: Tape, arch: Architecture, h: Value) -> Value:
    """GLM's attention: the first ``partial_rotary_factor`` (0.5) of each head is rotated with
    interleaved cos/sin that each layer slices and repeats anew (so they are saved per layer),
    then concatenated with the rest into new head-major q and k."""
    cfg = arch.config or {}
    rope = cfg.get("rope_parameters")
    params = rope if isinstance(rope, dict) else {}
    fraction = float(params.get("partial_rotary_factor") or cfg.get("partial_rotary_factor") or 0.5)
    q = t.linear(h, arch.q_dim, "q_proj")
    k = t.linear(h, arch.kv_dim, "k_proj")
    v = t.linear(h, arch.kv_dim, "v_proj")
    rotary = int(arch.head_dim * fraction)
    cos_bytes = x_bytes(t, h)
    t.save(t.new(rotary, cos_bytes, False), t.new(rotary, cos_bytes, False))  # cos, sin
    q = t.rope(q, cos_bytes, fraction)
    k = t.rope(k, cos_bytes, fraction)
    out = t.attention(q, k, v, arch.num_heads, arch.num_kv_heads, arch.attention_dropout)
    return t.linear(out, arch.hidden_size, "o_proj")


def _fused_gated_mlp(t: Tape, arch: Architecture, h: Value) -> Value:
    """``gate_up_proj`` chunked into gate and up (views of one tensor), ``down_proj``."""
    inter = arch.intermediate_size
    gate_up = t.linear(h, 2 * inter, "gate_up_proj")
    hidden = t.mul(t.activation(t.view(gate_up, inter), arch.activation), t.view(gate_up, inter))
    return t.linear(hidden, arch.hidden_size, "down_proj")


def glm_block(t: Tape, arch: Architecture, x: Value) -> Value:
    """GLM (glm-4-9b-hf): Llama's pre-norm block with GLM's attention and fused MLP."""
    x = t.add(x, _glm_attention(t, arch, t.rms_norm(x, "input_layernorm")))
    return t.add(x, _fused_gated_mlp(t, arch, t.rms_norm(x, "post_attention_layernorm")))


def glm4_block(t: Tape, arch: Architecture, x: Value) -> Value:
    """GLM-4 (0414): GLM's block with a norm on the attention output and on the MLP output."""
    a = _glm_attention(t, arch, t.rms_norm(x, "input_layernorm"))
    x = t.add(x, t.rms_norm(a, "post_self_attn_layernorm"))
    m = _fused_gated_mlp(t, arch, t.rms_norm(x, "post_attention_layernorm"))
    return t.add(x, t.rms_norm(m, "post_mlp_layernorm"))


def starcoder2_block(t: Tape, arch: Architecture, x: Value) -> Value:
    """StarCoder2: LayerNorm, GQA attention with biases, residual dropout after attention and
    MLP, a GELU (tanh) MLP ``c_fc``/``c_proj``."""
    h = t.layer_norm(x, "input_layernorm")
    q = t.rope(t.linear(h, arch.q_dim, "q_proj"), x_bytes(t, x))
    k = t.rope(t.linear(h, arch.kv_dim, "k_proj"), x_bytes(t, x))
    v = t.linear(h, arch.kv_dim, "v_proj")
    out = t.attention(q, k, v, arch.num_heads, arch.num_kv_heads, arch.attention_dropout)
    x = t.add(x, t.dropout(t.linear(out, arch.hidden_size, "o_proj"), arch.dropout))
    h = t.layer_norm(x, "post_attention_layernorm")
    m = t.activation(t.linear(h, arch.intermediate_size, "c_fc"), arch.activation)
    m = t.dropout(t.linear(m, arch.hidden_size, "c_proj"), arch.dropout)
    return t.add(x, m)


def _l2_norm(t: Tape, x: Value, heads: int) -> Value:
    """Llama-4's weightless q/k norm: ``x.float()`` (saved), an fp32 rsqrt per head (saved), the
    product cast back with ``type_as``."""
    x32 = t.cast(x, 4)
    if x.rg:
        t.save(x32, t.new(heads, 4, True))
    return t.cast(t.new(x.numel, 4, x.rg), x.nbytes)


def _llama4_attention(t: Tape, arch: Architecture, h: Value, rope: bool) -> Value:
    """Llama's projections; on the rotary layers q and k are rotated through complex numbers
    (new tensors, nothing saved per layer) and L2-normed (``use_qk_norm``); the other (NoPE)
    layers scale q by a per-position temperature instead."""
    q = t.linear(h, arch.q_dim, "q_proj")
    k = t.linear(h, arch.kv_dim, "k_proj")
    v = t.linear(h, arch.kv_dim, "v_proj")
    if rope:
        q, k = t.new(q.numel, q.nbytes, q.rg), t.new(k.numel, k.nbytes, k.rg)
        if arch.config.get("use_qk_norm", True):
            q, k = _l2_norm(t, q, arch.num_heads), _l2_norm(t, k, arch.num_kv_heads)
    elif arch.config.get("attn_temperature_tuning", True):
        q = t.cast(t.mul(q, t.new(1, 4, False)), q.nbytes)  # (q * fp32 scales).to(q.dtype)
    out = t.attention(q, k, v, arch.num_heads, arch.num_kv_heads, arch.attention_dropout)
    return t.linear(out, arch.hidden_size, "o_proj")


def _llama4_moe(t: Tape, arch: Architecture, h: Value) -> Value:
    """Llama4TextMoe as transformers 5.23 runs it: every token is repeated for *every* expert,
    scaled by its sigmoid router score (zero for unchosen experts) and run through all of them
    with ``bmm``; the shared expert runs on the token once."""
    experts, hidden = arch.num_experts, arch.hidden_size
    inter = experts * arch.moe_intermediate_size
    logits = t.linear(h, experts, "router")  # an nn.Linear: LoRA reaches it
    scores = t.new(experts, 4, logits.rg)
    t.save(scores)  # sigmoid(scores.float()) saves its result
    scores = t.cast(scores, h.nbytes)
    routed = t.mul(t.new(experts * hidden, h.nbytes, h.rg), scores)  # repeat, * scores
    gate_up = _parameter_linear(t, routed, 2 * inter, "experts.gate_up_proj")
    hidden_states = t.mul(t.view(gate_up, inter), t.activation(t.view(gate_up, inter), arch.activation))
    out = _parameter_linear(t, hidden_states, experts * hidden, "experts.down_proj")
    shared = _gated_mlp(t, arch, h, arch.moe_intermediate_size, prefix="shared_expert.")
    return t.new(hidden, shared.nbytes, shared.rg or out.rg)  # shared.add_(routed.sum(0))


def _mixed(t: Tape, fraction: float, branch) -> Value:
    """Run ``branch`` on a tape of its own and keep ``fraction`` of what it saved: one recipe
    prices every block, so layers of two kinds are priced as their mixture (the sum over all
    layers is exact; one block's high point is the mixture's)."""
    sub = Tape(t.s)
    out = branch(sub)
    for value in sub._saved.values():
        t.save(Value(value.numel * fraction, value.nbytes, False))
    return out


def llama4_block(t: Tape, arch: Architecture, x: Value) -> Value:
    """Llama-4 decoder layer: attention (rotary + qk-norm layers and NoPE layers), then the
    mixture-of-experts MLP in the ``moe_layers`` and a dense MLP of ``intermediate_size_mlp`` in
    the others, each priced by its share of the layers."""
    cfg = arch.config
    layers = arch.num_layers
    rope_flags = cfg.get("no_rope_layers")
    if not isinstance(rope_flags, list) or not rope_flags:
        interval = int(cfg.get("no_rope_layer_interval") or 4)
        rope_flags = [int((i + 1) % interval != 0) for i in range(layers)]
    rope_share = sum(1 for f in rope_flags if f) / max(len(rope_flags), 1)
    moe_share = arch.blocks[0].count / layers if any(
        lin.name == "router" for lin in arch.blocks[0].linears) else 0.0
    h = t.rms_norm(x, "input_layernorm")
    a = _mixed(t, rope_share, lambda s: _llama4_attention(s, arch, h, rope=True))
    if rope_share < 1:
        _mixed(t, 1 - rope_share, lambda s: _llama4_attention(s, arch, h, rope=False))
    x = t.add(x, a)
    h = t.rms_norm(x, "post_attention_layernorm")
    m = _mixed(t, moe_share, lambda s: _llama4_moe(s, arch, h)) if moe_share else None
    if moe_share < 1:
        dense_inter = int(cfg.get("intermediate_size_mlp") or arch.intermediate_size)
        m = _mixed(t, 1 - moe_share, lambda s: _gated_mlp(s, arch, h, dense_inter))
    assert m is not None  # a share of experts, of the dense MLP, or both
    return t.add(x, m)


BLOCKS = {
    "llama4": llama4_block,
    "deepseek": deepseek_block,
    "glm": glm_block,
    "glm4": glm4_block,
    "starcoder2": starcoder2_block,
}

FINAL_NORM = {"llama4": "rms", "deepseek": "rms", "glm": "rms", "glm4": "rms", "starcoder2": "layer"}
