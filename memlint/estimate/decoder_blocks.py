"""Block recipes of the newer decoder-only families (``decoders.py``), as transformers 5.23 runs them.

DeepSeek-V2/V3 (``modeling_deepseek_v2.py``), GLM and GLM-4 (``modeling_glm.py``,
``modeling_glm4.py``) and StarCoder2 (``modeling_starcoder2.py``), written op by op like the
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
    cfg = arch.config
    params = cfg.get("rope_parameters") if isinstance(cfg.get("rope_parameters"), dict) else {}
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


BLOCKS = {
    "deepseek": deepseek_block,
    "glm": glm_block,
    "glm4": glm4_block,
    "starcoder2": starcoder2_block,
}

FINAL_NORM = {"deepseek": "rms", "glm": "rms", "glm4": "rms", "starcoder2": "layer"}
