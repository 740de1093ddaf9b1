"""Falcon-H1: hybrid layers where a Mamba-2 mixer and attention read the same normed input in
parallel, then a gated MLP (transformers 5.23, ``modeling_falcon_h1.py``).

The weights are counted module by module (:func:`from_falcon_h1_config`). The activations
(:func:`falcon_h1_block`) follow the path transformers runs without the ``mamba_ssm`` kernels
(``mamba2_split_conv1d_scan_combined`` answers None, as on CPU and on a GPU without the
kernels package): a depthwise ``conv1d`` and ``mamba2_chunk_scan``, the chunked state-space scan
in fp32 einsums, which keeps chunk x heads values per token several times over. With the fused
kernels installed the mixer keeps far less; that path is not modelled (the estimate is then an
upper bound). Config keys a published ``config.json`` omits take ``FalconH1Config``'s defaults.
Checked against ``memlint trace`` measurements (``tests/calibration/``, ``docs/accuracy.md``).
"""

from __future__ import annotations

from typing import Any, Mapping

from memlint.estimate.architecture import Architecture, BlockGroup, Linear, _common, _head
from memlint.estimate.graph import Tape, Value

# FalconH1Config defaults (transformers 5.23) for the keys the recipe reads
_DEFAULTS: dict[str, Any] = {
    "vocab_size": 128000, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "mamba_n_heads": 128, "mamba_d_head": 8,
    "mamba_n_groups": 1, "mamba_d_state": 256, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_d_ssm": 1024,
    "mamba_chunk_size": 256, "mamba_conv_bias": True, "mamba_proj_bias": False, "mamba_rms_norm": False,
    "projectors_bias": False, "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": False,
}


def _mixer_sizes(cfg: Mapping[str, Any]) -> dict[str, int]:
    h = int(cfg["hidden_size"])
    d_ssm = int(cfg.get("mamba_d_ssm") or int(cfg["mamba_expand"] * h))
    groups_state = int(cfg["mamba_n_groups"]) * int(cfg["mamba_d_state"])
    conv_dim = d_ssm + 2 * groups_state
    heads = int(cfg["mamba_n_heads"])
    return {"d_ssm": d_ssm, "conv_dim": conv_dim, "heads": heads, "groups_state": groups_state,
            "projection": d_ssm + conv_dim + heads, "state": int(cfg["mamba_d_state"]),
            "chunk": int(cfg["mamba_chunk_size"]), "head_dim": int(cfg["mamba_d_head"])}


def from_falcon_h1_config(name: str, cfg: Mapping[str, Any], model_type: str) -> Architecture:
    """FalconH1ForCausalLM: per layer ``mamba`` (``in_proj``, depthwise ``conv1d``, ``dt_bias``,
    ``A_log``, ``D``, the gated norm when ``mamba_rms_norm``, ``out_proj``), ``self_attn``
    (q/k/v/o), ``feed_forward`` (gate/up/down) and two RMSNorms."""
    cfg = {**_DEFAULTS, **{k: v for k, v in cfg.items() if v is not None}}
    c = _common(cfg, False)
    h, d = c["hidden_size"], c["head_dim"]
    m = _mixer_sizes(cfg)
    attn_bias, mlp_bias = bool(cfg["attention_bias"]), bool(cfg["mlp_bias"])
    inter = int(cfg["intermediate_size"])
    linears = (
        Linear("in_proj", h, m["projection"], bool(cfg["mamba_proj_bias"])),
        Linear("out_proj", m["d_ssm"], h, bool(cfg["projectors_bias"])),
        Linear("q_proj", h, c["num_heads"] * d, attn_bias),
        Linear("k_proj", h, c["num_kv_heads"] * d, attn_bias),
        Linear("v_proj", h, c["num_kv_heads"] * d, attn_bias),
        Linear("o_proj", c["num_heads"] * d, h, attn_bias),
        Linear("gate_proj", h, inter, mlp_bias),
        Linear("up_proj", h, inter, mlp_bias),
        Linear("down_proj", inter, h, mlp_bias),
    )
    conv = m["conv_dim"] * int(cfg["mamba_d_conv"]) + (m["conv_dim"] if cfg["mamba_conv_bias"] else 0)
    other = 2 * h + conv + 3 * m["heads"] + (m["d_ssm"] if cfg["mamba_rms_norm"] else 0)
    return Architecture(
        name=name,
        model_type=model_type,
        family="falcon_h1",
        intermediate_size=inter,
        blocks=(BlockGroup("decoder", c["num_layers"], linears, other),),
        embedding_params=c["vocab_size"] * h,
        final_params=h,
        lm_head=_head(c),
        activation=str(cfg.get("hidden_act", "silu")),
        attention_dropout=float(cfg.get("attention_dropout", 0.0) or 0.0),
        config=cfg,
        **c,
    )


def _einsum(t: Tape, a: Value, b: Value, out_numel: float) -> Value:
    """``torch.einsum`` of two fp32 operands: bmm on permuted copies, which it saves."""
    rg = a.rg or b.rg
    if rg:
        t.save(t.new(a.numel, a.nbytes, a.rg), t.new(b.numel, b.nbytes, b.rg))
    return t.new(out_numel, 4, rg)


def _chunk_scan(t: Tape, x: Value, dt: Value, b: Value, c: Value, m: dict[str, int]) -> Value:
    """``mamba2_chunk_scan`` in fp32: per token, heads x chunk values for the decay matrix L,
    the ``C.B`` scores G and their product M, beside the per-head B and C."""
    heads, state, chunk = m["heads"], m["state"], m["chunk"]
    dt = t.new(heads, dt.nbytes, dt.rg)  # dt + dt_bias
    t.silu(dt)  # softplus saves its input
    dt = t.new(heads, dt.nbytes, dt.rg)
    t.silu(dt)  # clamp saves its input
    dt32 = t.new(heads, 4, dt.rg)
    x32 = t.cast(x, 4)
    b_rep = t.new(heads * state, 4, b.rg)  # B.float().repeat_interleave(heads // groups)
    c_rep = t.new(heads * state, 4, c.rg)
    d_residual = t.mul(x32, t.new(0, 4, t.s.trainable("D")))  # D * x
    xdt = t.mul(x32, dt32)
    a_dt = t.mul(t.new(0, 4, t.s.trainable("A_log")), t.new(heads, 4, dt.rg))
    # reshape_into_chunks pads (a copy) each of x*dt, A*dt, B and C
    xdt, b_rep, c_rep = (t.new(v.numel, 4, v.rg) for v in (xdt, b_rep, c_rep))
    a_cumsum = t.new(heads, 4, a_dt.rg)
    decay = t.new(heads * chunk, 4, a_dt.rg)  # exp(segment_sum(A)) saves its result
    if decay.rg:
        t.save(decay)
    g = _einsum(t, c_rep, b_rep, heads * chunk)
    scores = t.mul(g, decay)
    y_diag = _einsum(t, scores, xdt, m["d_ssm"])
    decay_states = t.new(heads, 4, a_cumsum.rg)
    if decay_states.rg:
        t.save(decay_states)  # exp saves its result
    b_decay = t.mul(b_rep, decay_states)
    per_chunk = heads * m["head_dim"] * state / chunk  # one state per chunk
    states = _einsum(t, b_decay, xdt, per_chunk)
    states = t.new(per_chunk, 4, states.rg)  # cat with the zero initial state
    new_states = _einsum(t, t.new(0, 4, a_cumsum.rg), states, per_chunk)
    decay_out = t.new(heads, 4, a_cumsum.rg)
    if decay_out.rg:
        t.save(decay_out)
    c_states = _einsum(t, c_rep, new_states, m["d_ssm"])
    y_off = t.mul(c_states, decay_out)
    y = t.add(y_diag, y_off)
    return t.add(y, d_residual)


def _mixer(t: Tape, arch: Architecture, h: Value) -> Value:
    m = _mixer_sizes(arch.config)
    projected = t.scale(t.linear(t.scale(h), m["projection"], "in_proj"))  # * ssm_in, * mup_vector
    gate = t.view(projected, m["d_ssm"])
    xbc = t.view(projected, m["conv_dim"])
    dt = t.view(projected, m["heads"])
    if xbc.rg or t.s.trainable("conv1d"):
        t.save(xbc)  # conv1d saves its input (a view: the whole projection stays)
    conv = t.activation(t.new(m["conv_dim"], xbc.nbytes, xbc.rg or t.s.trainable("conv1d")), arch.activation)
    x = t.view(conv, m["d_ssm"])
    b = t.view(conv, m["groups_state"])
    c = t.view(conv, m["groups_state"])
    y = _chunk_scan(t, x, dt, b, c, m)
    if arch.config.get("mamba_rms_norm"):
        y = t.mul(y, t.silu(gate))
        y = t.rms_norm(y, "norm")
    else:
        y = t.mul(y, t.silu(gate))  # scan_output * silu(gate): fp32
    return t.scale(t.linear(t.cast(y, t.s.compute_bytes), arch.hidden_size, "out_proj"))


def _attention(t: Tape, arch: Architecture, h: Value) -> Value:
    x = t.scale(h)  # * attention_in_multiplier
    q = t.linear(x, arch.q_dim, "q_proj")
    k = t.scale(t.linear(x, arch.kv_dim, "k_proj"))  # * key_multiplier
    v = t.linear(x, arch.kv_dim, "v_proj")
    q, k = t.rope(q, t.s.param_bytes), t.rope(k, t.s.param_bytes)
    out = t.attention(q, k, v, arch.num_heads, arch.num_kv_heads, arch.attention_dropout)
    return t.scale(t.linear(out, arch.hidden_size, "o_proj"))  # * attention_out_multiplier


def _mlp(t: Tape, arch: Architecture, x: Value) -> Value:
    up = t.linear(x, arch.intermediate_size, "up_proj")
    gate = t.activation(t.scale(t.linear(x, arch.intermediate_size, "gate_proj")), arch.activation)
    return t.scale(t.linear(t.mul(up, gate), arch.hidden_size, "down_proj"))


def falcon_h1_block(t: Tape, arch: Architecture, x: Value) -> Value:
    """FalconH1DecoderLayer: ``mamba(norm(x)) + attention(norm(x))`` added to x, then the MLP."""
    h = t.rms_norm(x, "input_layernorm")
    x = t.add(x, t.add(_mixer(t, arch, h), _attention(t, arch, h)))
    return t.add(x, _mlp(t, arch, t.rms_norm(x, "pre_ff_layernorm")))


__all__ = ["falcon_h1_block", "from_falcon_h1_config"]
