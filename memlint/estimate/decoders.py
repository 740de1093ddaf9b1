"""Architectures of the newer decoder-only families, counted module by module from transformers 5.23.

DeepSeek-V2/V3 (multi-head latent attention and shared + routed experts), GLM and GLM-4 (fused
gate/up MLP, q/k/v biases, GLM-4's extra post-norms), StarCoder2 (LayerNorm, biases, GELU MLP)
and Llama-4's language model (dense-over-experts MoE interleaved with dense layers). They live beside ``architecture.py`` so that its builders table stays small; it registers
them through :data:`BUILDERS`. Config keys a published ``config.json`` omits take the defaults of
transformers' config class for that model type (named at each ``_default`` below).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from memlint.estimate.architecture import (
    Architecture,
    BlockGroup,
    Linear,
    UnsupportedArchitecture,
    _common,
    _head,
    _require,
    _sliding,
)

# DeepseekV2Config / DeepseekV3Config defaults (transformers 5.23) for the keys their recipes read.
_DEEPSEEK_DEFAULTS: dict[str, dict[str, Any]] = {
    "deepseek_v2": {"kv_lora_rank": 512, "q_lora_rank": 1536, "qk_nope_head_dim": 128,
                    "qk_rope_head_dim": 64, "v_head_dim": 128, "n_routed_experts": 64,
                    "n_shared_experts": 2, "first_k_dense_replace": 0,
                    "moe_intermediate_size": 1407},
    "deepseek_v3": {"kv_lora_rank": 512, "q_lora_rank": 1536, "qk_nope_head_dim": 128,
                    "qk_rope_head_dim": 64, "v_head_dim": 128, "n_routed_experts": 256,
                    "n_shared_experts": 1, "first_k_dense_replace": 3,
                    "moe_intermediate_size": 2048, "num_experts_per_tok": 8},
}


def _default(cfg: Mapping[str, Any], model_type: str, key: str) -> Any:
    """The config's value, or the config class's default when the key is absent (an explicit
    ``null`` is kept: DeepSeek-V2-Lite's ``"q_lora_rank": null`` means no query compression)."""
    if key in cfg:
        return cfg[key]
    return _DEEPSEEK_DEFAULTS[model_type].get(key)


def _positive(value: Any, key: str) -> int:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
        raise UnsupportedArchitecture(f"config.json: {key} must be a positive number, got {value!r}")
    return int(value)


def _deepseek(name: str, cfg: Mapping[str, Any], model_type: str) -> Architecture:
    """DeepSeek-V2 / V2-Lite / V3 / R1: multi-head latent attention (queries optionally through a
    low-rank ``q_a_proj``/``q_b_proj``, keys and values through the shared latent
    ``kv_a_proj_with_mqa`` -> ``kv_a_layernorm`` -> ``kv_b_proj``), a dense MLP in the first
    ``first_k_dense_replace`` layers and routed experts plus ``n_shared_experts`` shared ones after.
    V3's multi-token-prediction layer is not built by transformers and not counted."""
    c = _common(cfg, False)
    h, heads = c["hidden_size"], c["num_heads"]
    get = lambda key: _default(cfg, model_type, key)  # noqa: E731
    nope = _positive(get("qk_nope_head_dim"), "qk_nope_head_dim")
    rope = _positive(get("qk_rope_head_dim"), "qk_rope_head_dim")
    v_dim = _positive(get("v_head_dim"), "v_head_dim")
    kv_rank = _positive(get("kv_lora_rank"), "kv_lora_rank")
    q_rank = get("q_lora_rank")
    bias = bool(cfg.get("attention_bias", False))
    qk = nope + rope
    attention: tuple[Linear, ...]
    norms = 2 * h + kv_rank  # input and post-attention norms, kv_a_layernorm
    if q_rank:
        q_rank = _positive(q_rank, "q_lora_rank")
        attention = (Linear("q_a_proj", h, q_rank, bias), Linear("q_b_proj", q_rank, heads * qk))
        norms += q_rank  # q_a_layernorm
    else:
        attention = (Linear("q_proj", h, heads * qk),)
    attention += (
        Linear("kv_a_proj_with_mqa", h, kv_rank + rope, bias),
        Linear("kv_b_proj", kv_rank, heads * (nope + v_dim)),
        Linear("o_proj", heads * v_dim, h, bias),
    )
    inter = _require(cfg, "intermediate_size")
    experts = _positive(get("n_routed_experts"), "n_routed_experts")
    top_k = _positive(_default(cfg, model_type, "num_experts_per_tok") or 0, "num_experts_per_tok")
    moe_inter = _positive(get("moe_intermediate_size"), "moe_intermediate_size")
    shared = int(get("n_shared_experts") or 0)
    mlp_bias = bool(cfg.get("mlp_bias", False)) and model_type == "deepseek_v2"
    dense = (
        Linear("gate_proj", h, inter, mlp_bias),
        Linear("up_proj", h, inter, mlp_bias),
        Linear("down_proj", inter, h, mlp_bias),
    )
    moe: tuple[Linear, ...] = (
        Linear("gate", h, experts),  # the router (a bare weight, no bias)
        Linear("experts.gate_up_proj", h, 2 * moe_inter, copies=experts),
        Linear("experts.down_proj", moe_inter, h, copies=experts),
    )
    if shared:
        s = shared * moe_inter
        moe += (
            Linear("shared_experts.gate_proj", h, s, mlp_bias),
            Linear("shared_experts.up_proj", h, s, mlp_bias),
            Linear("shared_experts.down_proj", s, h, mlp_bias),
        )
    layers = c["num_layers"]
    first_dense = min(int(get("first_k_dense_replace") or 0), layers)
    # DeepseekV3TopkRouter's e_score_correction_bias is a buffer: not a parameter
    groups = [BlockGroup("decoder", first_dense, attention + dense, norms),
              BlockGroup("decoder", layers - first_dense, attention + moe, norms)]
    return Architecture(
        name=name,
        model_type=model_type,
        family="deepseek",
        intermediate_size=inter,
        blocks=tuple(g for g in groups if g.count),
        embedding_params=c["vocab_size"] * h,
        final_params=h,
        lm_head=_head(c),
        num_experts=experts,
        experts_per_token=top_k,
        moe_intermediate_size=moe_inter,
        activation=str(cfg.get("hidden_act", "silu")),
        attention_dropout=float(cfg.get("attention_dropout", 0.0) or 0.0),
        config=cfg,
        # transformers 5.23 caches the compressed latent (kv_lora_rank + qk_rope_head_dim values
        # a token and layer, shared by all heads): one "head" whose K and V halves hold it
        **{**c, "num_kv_heads": 1, "head_dim": (kv_rank + rope) // 2},
    )


def _glm(name: str, cfg: Mapping[str, Any], model_type: str) -> Architecture:
    """GLM (``glm``: THUDM/glm-4-9b-hf) and GLM-4 (``glm4``: the GLM-4-0414 models): Llama's
    attention with biases on q, k and v (not o), half of each head rotated, one fused
    ``gate_up_proj``; GLM-4 adds a norm after attention and after the MLP (4 norms a layer)."""
    c = _common(cfg, False)
    h, d = c["hidden_size"], c["head_dim"]
    q_dim, kv_dim = c["num_heads"] * d, c["num_kv_heads"] * d
    bias = bool(cfg.get("attention_bias", True))  # GlmConfig / Glm4Config default True
    inter = _require(cfg, "intermediate_size")
    linears = (
        Linear("q_proj", h, q_dim, bias),
        Linear("k_proj", h, kv_dim, bias),
        Linear("v_proj", h, kv_dim, bias),
        Linear("o_proj", q_dim, h),
        Linear("gate_up_proj", h, 2 * inter),
        Linear("down_proj", inter, h),
    )
    norms = (4 if model_type == "glm4" else 2) * h
    return Architecture(
        name=name,
        model_type=model_type,
        family=model_type,
        intermediate_size=inter,
        blocks=(BlockGroup("decoder", c["num_layers"], linears, norms),),
        embedding_params=c["vocab_size"] * h,
        final_params=h,
        lm_head=_head(c),
        activation=str(cfg.get("hidden_act", "silu")),
        attention_dropout=float(cfg.get("attention_dropout", 0.0) or 0.0),
        config=cfg,
        **c,
    )


def _starcoder2(name: str, cfg: Mapping[str, Any], model_type: str) -> Architecture:
    """StarCoder2: GQA attention and a GELU MLP (``c_fc``/``c_proj``), all with biases
    (``use_bias``), LayerNorms with biases, residual and embedding dropout, tied head by default."""
    c = _common(cfg, True)
    h, d = c["hidden_size"], c["head_dim"]
    q_dim, kv_dim = c["num_heads"] * d, c["num_kv_heads"] * d
    bias = bool(cfg.get("use_bias", True))
    inter = _require(cfg, "intermediate_size")
    linears = (
        Linear("q_proj", h, q_dim, bias),
        Linear("k_proj", h, kv_dim, bias),
        Linear("v_proj", h, kv_dim, bias),
        Linear("o_proj", q_dim, h, bias),
        Linear("c_fc", h, inter, bias),
        Linear("c_proj", inter, h, bias),
    )
    window, sliding_layers = _sliding(cfg, c["num_layers"])
    return Architecture(
        name=name,
        model_type=model_type,
        family="starcoder2",
        intermediate_size=inter,
        blocks=(BlockGroup("decoder", c["num_layers"], linears, 4 * h),),
        embedding_params=c["vocab_size"] * h,
        final_params=2 * h,
        lm_head=_head(c),
        activation=str(cfg.get("hidden_act", "gelu_pytorch_tanh")),
        dropout=float(cfg.get("residual_dropout", 0.0) or 0.0),
        attention_dropout=float(cfg.get("attention_dropout", 0.0) or 0.0),
        sliding_window=window,
        sliding_layers=sliding_layers,
        config=cfg,
        **c,
    )


def _llama4_text(name: str, cfg: Mapping[str, Any], model_type: str) -> Architecture:
    """Llama-4's language model (``llama4_text``; Scout, Maverick): Llama's attention (L2-normed q
    and k on the rotary layers: no parameters), and in the ``moe_layers`` (every
    ``interleave_moe_layer_step``-th layer) ``num_local_experts`` fused experts, an ``nn.Linear``
    router and a shared expert; the other layers a dense MLP of ``intermediate_size_mlp``. Missing
    keys take Llama4TextConfig's defaults (transformers 5.23), which are Scout's sizes."""
    cfg = {"hidden_size": 5120, "intermediate_size": 8192, "intermediate_size_mlp": 16384,
           "num_hidden_layers": 48, "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
           "vocab_size": 202048, "num_local_experts": 16, "num_experts_per_tok": 1, **cfg}
    c = _common(cfg, False)
    h, d = c["hidden_size"], c["head_dim"]
    q_dim, kv_dim = c["num_heads"] * d, c["num_kv_heads"] * d
    bias = bool(cfg.get("attention_bias", False))
    attention = (
        Linear("q_proj", h, q_dim, bias),
        Linear("k_proj", h, kv_dim, bias),
        Linear("v_proj", h, kv_dim, bias),
        Linear("o_proj", q_dim, h, bias),
    )
    inter = _require(cfg, "intermediate_size")
    dense_inter = _require(cfg, "intermediate_size_mlp")
    experts = _require(cfg, "num_local_experts")
    top_k = _require(cfg, "num_experts_per_tok")
    layers = c["num_layers"]
    step = int(cfg.get("interleave_moe_layer_step") or 1)
    moe_layers = cfg.get("moe_layers")
    if not isinstance(moe_layers, list):
        moe_layers = list(range(step - 1, layers, step))
    sparse = len({i for i in moe_layers if isinstance(i, int) and 0 <= i < layers})
    moe = (
        Linear("router", h, experts),
        Linear("experts.gate_up_proj", h, 2 * inter, copies=experts),
        Linear("experts.down_proj", inter, h, copies=experts),
        Linear("shared_expert.gate_proj", h, inter),
        Linear("shared_expert.up_proj", h, inter),
        Linear("shared_expert.down_proj", inter, h),
    )
    dense = (
        Linear("gate_proj", h, dense_inter),
        Linear("up_proj", h, dense_inter),
        Linear("down_proj", dense_inter, h),
    )
    groups = [BlockGroup("decoder", sparse, attention + moe, 2 * h),
              BlockGroup("decoder", layers - sparse, attention + dense, 2 * h)]
    return Architecture(
        name=name,
        model_type=model_type,
        family="llama4",
        intermediate_size=inter,
        blocks=tuple(g for g in groups if g.count),
        embedding_params=c["vocab_size"] * h,
        final_params=h,
        lm_head=_head(c),
        num_experts=experts,
        experts_per_token=top_k,
        moe_intermediate_size=inter,
        activation=str(cfg.get("hidden_act", "silu")),
        attention_dropout=float(cfg.get("attention_dropout", 0.0) or 0.0),
        config=cfg,
        **c,
    )


BUILDERS: dict[str, Callable[[str, Mapping[str, Any], str], Architecture]] = {
    "llama4_text": _llama4_text,
    "deepseek_v2": _deepseek,
    "deepseek_v3": _deepseek,
    "glm": _glm,
    "glm4": _glm,
    "starcoder2": _starcoder2,
}
