"""Model architectures read from a Hugging Face ``config.json``, with exact parameter counts.

Each supported ``model_type`` is turned into the same shape: token/position embeddings,
groups of identical blocks (each a list of Linear layers plus its norm parameters), final
parameters, and an optional untied output head. Everything memory-related downstream (weight
bytes, LoRA targets, QLoRA-quantised weights, ZeRO-3's largest gathered layer, activations)
reads this shape, so the counting below follows the modelling code of transformers 5.x
module by module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping


class UnsupportedArchitecture(ValueError):
    """The config names a model_type memlint has no block recipe for."""


@dataclass(frozen=True)
class Linear:
    """One linear layer (``copies`` > 1 for the experts of a mixture-of-experts layer)."""

    name: str
    in_features: int
    out_features: int
    bias: bool = False
    copies: int = 1

    @property
    def weight_params(self) -> int:
        return self.copies * self.in_features * self.out_features

    @property
    def params(self) -> int:
        return self.weight_params + (self.copies * self.out_features if self.bias else 0)


@dataclass(frozen=True)
class BlockGroup:
    """``count`` identical blocks: their linear layers and their other (norm) parameters."""

    kind: str  # "decoder", "encoder", "cross_decoder" (T5 decoder with cross-attention)
    count: int
    linears: tuple[Linear, ...]
    other_params: int = 0  # per block: norms, gates of shared experts, ...

    @property
    def params_per_block(self) -> int:
        return sum(linear.params for linear in self.linears) + self.other_params

    @property
    def params(self) -> int:
        return self.count * self.params_per_block


@dataclass(frozen=True)
class Architecture:
    """The normalised architecture of one model (decoder-only, encoder-only or T5)."""

    name: str
    model_type: str
    family: str  # the activation recipe this model's blocks follow
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool
    blocks: tuple[BlockGroup, ...]
    embedding_params: int  # token (+ position, token-type) embeddings and their norms
    final_params: int  # final norms, pooler, prediction-head transforms, tied-head biases
    lm_head: Linear | None  # None when the output head shares the embedding matrix
    max_position_embeddings: int | None = None
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    sliding_window: int | None = None
    # For KV caches: which layers use a sliding window (None = all global).
    sliding_layers: int = 0
    activation: str = "silu"
    # Parameters outside the language model (a multimodal checkpoint's vision tower and
    # projector): they take weight, gradient and optimizer memory but no text activations.
    extra_params: int = 0
    dropout: float = 0.0  # residual/attention dropout active in training
    attention_dropout: float = 0.0
    # Set when no recipe of memlint's describes this model (``meta_count.py``): what was assumed.
    generic_note: str | None = None
    # A sequence-classification checkpoint (a reward or value model): ``lm_head`` is its ``score``
    # layer (hidden -> this many labels) and no step computes logits over the vocabulary. 0: a LM.
    classifier_labels: int = 0
    config: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

    @property
    def n_params(self) -> int:
        head = self.lm_head.params if self.lm_head is not None else 0
        blocks = sum(g.params for g in self.blocks)
        return self.embedding_params + blocks + self.final_params + head + self.extra_params

    @property
    def linear_weight_params(self) -> int:
        """Parameters inside Linear weights of the blocks (what QLoRA quantises)."""
        return sum(g.count * sum(lin.weight_params for lin in g.linears) for g in self.blocks)

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def largest_block_params(self) -> int:
        return max(g.params_per_block for g in self.blocks)

    @property
    def q_dim(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def is_encoder_decoder(self) -> bool:
        return any(g.kind == "cross_decoder" for g in self.blocks)

    @property
    def is_causal_lm(self) -> bool:
        return self.family not in ("bert", "t5") and not self.classifier_labels


# --------------------------------------------------------------------------- config helpers


def _get(cfg: Mapping[str, Any], *names: str, default: Any = None) -> Any:
    for name in names:
        value = cfg.get(name)
        if value is not None:
            return value
    return default


def _require(cfg: Mapping[str, Any], *names: str) -> int:
    value = _get(cfg, *names)
    if value is None:
        raise UnsupportedArchitecture(f"config.json has none of {', '.join(names)}")
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
        raise UnsupportedArchitecture(f"config.json: {names[0]} must be a positive number, got {value!r}")
    return int(value)


def _common(cfg: Mapping[str, Any], tie_default: bool) -> dict[str, Any]:
    hidden = _require(cfg, "hidden_size", "n_embd", "d_model")
    heads = _require(cfg, "num_attention_heads", "n_head", "num_heads")
    kv = int(_get(cfg, "num_key_value_heads", default=heads) or heads)
    head_dim = int(_get(cfg, "head_dim", default=0) or hidden // heads)
    return dict(
        hidden_size=hidden,
        num_layers=_require(cfg, "num_hidden_layers", "n_layer", "num_layers"),
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=head_dim,
        vocab_size=_require(cfg, "vocab_size"),
        tie_word_embeddings=bool(_get(cfg, "tie_word_embeddings", default=tie_default)),
        max_position_embeddings=_get(cfg, "max_position_embeddings", "n_positions"),
    )


def _head(c: Mapping[str, Any], bias: bool = False) -> Linear | None:
    if c["tie_word_embeddings"]:
        return None
    return Linear("lm_head", c["hidden_size"], c["vocab_size"], bias=bias)


def _sliding(cfg: Mapping[str, Any], layers: int) -> tuple[int | None, int]:
    """Sliding-window size and how many layers use it (Mistral: all; Gemma 2/3: a pattern)."""
    window = cfg.get("sliding_window")
    layer_types = cfg.get("layer_types")
    if isinstance(layer_types, list) and window:
        return int(window), sum(1 for t in layer_types if t == "sliding_attention")
    if cfg.get("use_sliding_window") is False:
        return None, 0
    if window:
        pattern = cfg.get("sliding_window_pattern")
        if isinstance(pattern, int) and pattern > 0:  # every pattern-th layer is global
            return int(window), layers - layers // pattern
        return int(window), layers
    return None, 0


# --------------------------------------------------------------------------- families


# transformers' default when config.json omits tie_word_embeddings, where the config class ties
_TIED_BY_DEFAULT = ("gemma", "gemma2", "gemma3_text", "smollm3")


def _llama_like(name: str, cfg: Mapping[str, Any], model_type: str) -> Architecture:
    """Llama, Mistral, Qwen2/3, Gemma 1/2/3, SmolLM 1-3, TinyLlama, OLMo-2, Granite: RMSNorm +
    GQA + gated MLP. SmolLM3 skips RoPE on some layers (no parameters, no memory of its own);
    Granite only scales by constants; OLMo-2 normalises q and k over all heads and puts its
    norms after attention and MLP instead of before."""
    tie_default = model_type in _TIED_BY_DEFAULT
    c = _common(cfg, tie_default)
    h, d = c["hidden_size"], c["head_dim"]
    q_dim, kv_dim = c["num_heads"] * d, c["num_kv_heads"] * d
    attn_bias = bool(cfg.get("attention_bias", model_type in ("qwen2",)))
    out_bias = attn_bias and model_type not in ("qwen2",)  # Qwen2: biases on q, k, v only
    mlp_bias = bool(cfg.get("mlp_bias", False))
    inter = _require(cfg, "intermediate_size")
    linears = (
        Linear("q_proj", h, q_dim, attn_bias),
        Linear("k_proj", h, kv_dim, attn_bias),
        Linear("v_proj", h, kv_dim, attn_bias),
        Linear("o_proj", q_dim, h, out_bias),
        Linear("gate_proj", h, inter, mlp_bias),
        Linear("up_proj", h, inter, mlp_bias),
        Linear("down_proj", inter, h, mlp_bias),
    )
    norms = 2 * h
    if model_type in ("gemma2", "gemma3_text"):
        norms = 4 * h  # pre/post attention and pre/post feed-forward norms
    if model_type in ("qwen3", "gemma3_text", "qwen3_moe"):
        norms += 2 * d  # per-head q_norm and k_norm
    if model_type == "olmo2":
        norms += q_dim + kv_dim  # q_norm and k_norm over all heads at once
    family = {"gemma": "gemma", "gemma2": "gemma2", "gemma3_text": "gemma2", "olmo2": "olmo2",
              "granite": "granite"}.get(model_type, "llama")
    if model_type in ("qwen3",):
        family = "qwen3"
    window, sliding_layers = _sliding(cfg, c["num_layers"])
    return Architecture(
        name=name,
        model_type=model_type,
        family=family,
        intermediate_size=inter,
        blocks=(BlockGroup("decoder", c["num_layers"], linears, norms),),
        embedding_params=c["vocab_size"] * h,
        final_params=h,
        lm_head=_head(c),
        activation=str(_get(cfg, "hidden_activation", "hidden_act", default="silu")),
        attention_dropout=float(cfg.get("attention_dropout", 0.0) or 0.0),
        sliding_window=window,
        sliding_layers=sliding_layers,
        config=cfg,
        **c,
    )


def _internlm2(name: str, cfg: Mapping[str, Any], model_type: str) -> Architecture:
    """InternLM2 / 2.5 (``modeling_internlm2.py``, shipped with the checkpoint and read here as
    data only): Llama's block with q, k and v fused into one ``wqkv`` and the MLP named w1/w3/w2."""
    c = _common(cfg, False)
    h, d = c["hidden_size"], c["head_dim"]
    q_dim, kv_dim = c["num_heads"] * d, c["num_kv_heads"] * d
    bias = bool(cfg.get("bias", False))
    inter = _require(cfg, "intermediate_size")
    linears = (
        Linear("wqkv", h, q_dim + 2 * kv_dim, bias),
        Linear("wo", q_dim, h, bias),
        Linear("w1", h, inter),
        Linear("w3", h, inter),
        Linear("w2", inter, h),
    )
    return Architecture(
        name=name,
        model_type=model_type,
        family="internlm2",
        intermediate_size=inter,
        blocks=(BlockGroup("decoder", c["num_layers"], linears, 2 * h),),
        embedding_params=c["vocab_size"] * h,
        final_params=h,
        lm_head=_head(c),
        activation=str(cfg.get("hidden_act", "silu")),
        attention_dropout=float(cfg.get("attention_dropout", 0.0) or 0.0),
        config=cfg,
        **c,
    )


def _moe(name: str, cfg: Mapping[str, Any], model_type: str) -> Architecture:
    """Mixtral, Qwen2-MoE, Qwen3-MoE: attention as Llama, MLP replaced by routed experts."""
    c = _common(cfg, False)
    h, d = c["hidden_size"], c["head_dim"]
    q_dim, kv_dim = c["num_heads"] * d, c["num_kv_heads"] * d
    attn_bias = bool(cfg.get("attention_bias", model_type == "qwen2_moe"))
    qkv_bias = attn_bias
    out_bias = attn_bias and model_type != "qwen2_moe"
    attention = (
        Linear("q_proj", h, q_dim, qkv_bias),
        Linear("k_proj", h, kv_dim, qkv_bias),
        Linear("v_proj", h, kv_dim, qkv_bias),
        Linear("o_proj", q_dim, h, out_bias),
    )
    if model_type == "mixtral":
        experts = _require(cfg, "num_local_experts")
        top_k = _require(cfg, "num_experts_per_tok")
        inter = moe_inter = _require(cfg, "intermediate_size")
    else:
        experts = _require(cfg, "num_experts", "num_local_experts")
        top_k = _require(cfg, "num_experts_per_tok")
        moe_inter = _require(cfg, "moe_intermediate_size")
        inter = int(cfg.get("intermediate_size") or moe_inter)
    moe_linears: tuple[Linear, ...] = (
        Linear("gate", h, experts),  # the router
        Linear("experts.gate_proj", h, moe_inter, copies=experts),
        Linear("experts.up_proj", h, moe_inter, copies=experts),
        Linear("experts.down_proj", moe_inter, h, copies=experts),
    )
    other = 2 * h + (2 * d if model_type == "qwen3_moe" else 0)
    if model_type == "qwen2_moe":
        shared = _require(cfg, "shared_expert_intermediate_size")
        moe_linears += (
            Linear("shared_expert.gate_proj", h, shared),
            Linear("shared_expert.up_proj", h, shared),
            Linear("shared_expert.down_proj", shared, h),
            Linear("shared_expert_gate", h, 1),
        )
    dense_linears = (
        Linear("gate_proj", h, inter),
        Linear("up_proj", h, inter),
        Linear("down_proj", inter, h),
    )
    layers = c["num_layers"]
    step = int(cfg.get("decoder_sparse_step", 1) or 1)
    dense_only = set(cfg.get("mlp_only_layers") or [])
    sparse = [
        i for i in range(layers) if i not in dense_only and experts > 0 and (i + 1) % step == 0
    ]
    groups = [BlockGroup("decoder", len(sparse), attention + moe_linears, other)]
    if layers - len(sparse):
        groups.append(BlockGroup("decoder", layers - len(sparse), attention + dense_linears, other))
    window, sliding_layers = _sliding(cfg, layers)
    return Architecture(
        name=name,
        model_type=model_type,
        family="moe",
        intermediate_size=inter,
        blocks=tuple(g for g in groups if g.count),
        embedding_params=c["vocab_size"] * h,
        final_params=h,
        lm_head=_head(c),
        num_experts=experts,
        experts_per_token=top_k,
        moe_intermediate_size=moe_inter,
        attention_dropout=float(cfg.get("attention_dropout", 0.0) or 0.0),
        sliding_window=window,
        sliding_layers=sliding_layers,
        config=cfg,
        **c,
    )


def _phi3(name: str, cfg: Mapping[str, Any], model_type: str) -> Architecture:
    """Phi-3 / Phi-3.5 / Phi-4: fused qkv and fused gate_up projections, no biases."""
    c = _common(cfg, False)
    h, d = c["hidden_size"], c["head_dim"]
    q_dim, kv_dim = c["num_heads"] * d, c["num_kv_heads"] * d
    inter = _require(cfg, "intermediate_size")
    linears = (
        Linear("qkv_proj", h, q_dim + 2 * kv_dim),
        Linear("o_proj", q_dim, h),
        Linear("gate_up_proj", h, 2 * inter),
        Linear("down_proj", inter, h),
    )
    window, sliding_layers = _sliding(cfg, c["num_layers"])
    return Architecture(
        name=name,
        model_type=model_type,
        family="phi3",
        intermediate_size=inter,
        blocks=(BlockGroup("decoder", c["num_layers"], linears, 2 * h),),
        embedding_params=c["vocab_size"] * h,
        final_params=h,
        lm_head=_head(c),
        dropout=float(cfg.get("resid_pdrop", 0.0) or 0.0),
        attention_dropout=float(cfg.get("attention_dropout", 0.0) or 0.0),
        sliding_window=window,
        sliding_layers=sliding_layers,
        config=cfg,
        **c,
    )


def _phi(name: str, cfg: Mapping[str, Any], model_type: str) -> Architecture:
    """Phi-1/1.5/2: parallel attention + MLP after one LayerNorm, biases, untied head with bias."""
    c = _common(cfg, False)
    h, d = c["hidden_size"], c["head_dim"]
    q_dim, kv_dim = c["num_heads"] * d, c["num_kv_heads"] * d
    inter = _require(cfg, "intermediate_size")
    other = 2 * h
    if cfg.get("qk_layernorm"):
        other += 2 * 2 * d
    linears = (
        Linear("q_proj", h, q_dim, True),
        Linear("k_proj", h, kv_dim, True),
        Linear("v_proj", h, kv_dim, True),
        Linear("dense", q_dim, h, True),
        Linear("fc1", h, inter, True),
        Linear("fc2", inter, h, True),
    )
    return Architecture(
        name=name,
        model_type=model_type,
        family="phi",
        intermediate_size=inter,
        blocks=(BlockGroup("decoder", c["num_layers"], linears, other),),
        embedding_params=c["vocab_size"] * h,
        final_params=2 * h,
        lm_head=_head(c, bias=True),
        activation=str(cfg.get("hidden_act", "gelu_new")),
        dropout=float(cfg.get("resid_pdrop", 0.0) or 0.0),
        attention_dropout=float(cfg.get("attention_dropout", 0.0) or 0.0),
        config=cfg,
        **c,
    )


def _gpt2(name: str, cfg: Mapping[str, Any], model_type: str) -> Architecture:
    """GPT-2: learned positions, LayerNorm, Conv1D (=Linear with bias) blocks, tied head."""
    c = _common(cfg, True)
    h = c["hidden_size"]
    inter = int(cfg.get("n_inner") or 4 * h)
    linears = (
        Linear("c_attn", h, 3 * h, True),
        Linear("attn.c_proj", h, h, True),
        Linear("c_fc", h, inter, True),
        Linear("mlp.c_proj", inter, h, True),
    )
    positions = int(_get(cfg, "n_positions", "max_position_embeddings", default=1024))
    return Architecture(
        name=name,
        model_type=model_type,
        family="gpt2",
        intermediate_size=inter,
        blocks=(BlockGroup("decoder", c["num_layers"], linears, 4 * h),),
        embedding_params=c["vocab_size"] * h + positions * h,
        final_params=2 * h,
        lm_head=_head(c),
        activation=str(cfg.get("activation_function", "gelu_new")),
        dropout=float(cfg.get("resid_pdrop", 0.1)),
        attention_dropout=float(cfg.get("attn_pdrop", 0.1)),
        config=cfg,
        **c,
    )


def _gpt_neox(name: str, cfg: Mapping[str, Any], model_type: str) -> Architecture:
    """GPT-NeoX / Pythia: fused query_key_value, parallel residual, LayerNorm, biases."""
    c = _common(cfg, False)
    h = c["hidden_size"]
    inter = _require(cfg, "intermediate_size")
    bias = bool(cfg.get("attention_bias", True))
    linears = (
        Linear("query_key_value", h, 3 * h, bias),
        Linear("dense", h, h, bias),
        Linear("dense_h_to_4h", h, inter, True),
        Linear("dense_4h_to_h", inter, h, True),
    )
    return Architecture(
        name=name,
        model_type=model_type,
        family="gpt_neox",
        intermediate_size=inter,
        blocks=(BlockGroup("decoder", c["num_layers"], linears, 4 * h),),
        embedding_params=c["vocab_size"] * h,
        final_params=2 * h,
        lm_head=_head(c),
        activation=str(cfg.get("hidden_act", "gelu")),
        dropout=float(cfg.get("hidden_dropout", 0.0) or 0.0),
        attention_dropout=float(cfg.get("attention_dropout", 0.0) or 0.0),
        config=cfg,
        **c,
    )


def _opt(name: str, cfg: Mapping[str, Any], model_type: str) -> Architecture:
    """OPT: learned positions (offset 2), LayerNorm, ReLU MLP, optional embedding projection."""
    c = _common(cfg, True)
    h = c["hidden_size"]
    inter = _require(cfg, "ffn_dim")
    bias = bool(cfg.get("enable_bias", True))
    proj_dim = int(cfg.get("word_embed_proj_dim") or h)
    linears = (
        Linear("q_proj", h, h, bias),
        Linear("k_proj", h, h, bias),
        Linear("v_proj", h, h, bias),
        Linear("out_proj", h, h, bias),
        Linear("fc1", h, inter, bias),
        Linear("fc2", inter, h, bias),
    )
    ln_params = 2 * h if cfg.get("layer_norm_elementwise_affine", True) else 0
    positions = int(cfg.get("max_position_embeddings", 2048)) + 2
    embedding = c["vocab_size"] * proj_dim + positions * h
    final = 0
    if proj_dim != h:
        embedding += proj_dim * h + h * proj_dim  # project_in / project_out, no bias
    if cfg.get("do_layer_norm_before", True) and not cfg.get("_remove_final_layer_norm", False):
        final += ln_params
    head = None
    if not c["tie_word_embeddings"]:
        head = Linear("lm_head", proj_dim, c["vocab_size"])
    return Architecture(
        name=name,
        model_type=model_type,
        family="opt",
        intermediate_size=inter,
        blocks=(BlockGroup("decoder", c["num_layers"], linears, 2 * ln_params),),
        embedding_params=embedding,
        final_params=final,
        lm_head=head,
        activation=str(cfg.get("activation_function", "relu")),
        dropout=float(cfg.get("dropout", 0.1) or 0.0),
        attention_dropout=float(cfg.get("attention_dropout", 0.0) or 0.0),
        config=cfg,
        **c,
    )


def _falcon(name: str, cfg: Mapping[str, Any], model_type: str) -> Architecture:
    """Falcon: multi-query (7B) or grouped (40B+, new_decoder_architecture) attention."""
    c = _common(cfg, True)
    h, d = c["hidden_size"], c["head_dim"]
    heads = c["num_heads"]
    new_arch = bool(cfg.get("new_decoder_architecture", False))
    if new_arch:
        kv = int(cfg.get("num_kv_heads") or heads)
    elif cfg.get("multi_query", True):
        kv = 1
    else:
        kv = heads
    c["num_kv_heads"] = kv
    bias = bool(cfg.get("bias", False))
    inter = int(cfg.get("ffn_hidden_size") or 4 * h)
    linears = (
        Linear("query_key_value", h, (heads + 2 * kv) * d, bias),
        Linear("dense", heads * d, h, bias),
        Linear("dense_h_to_4h", h, inter, bias),
        Linear("dense_4h_to_h", inter, h, bias),
    )
    parallel = bool(cfg.get("parallel_attn", True))
    if new_arch and int(cfg.get("num_ln_in_parallel_attn") or 2) == 2:
        norms = 4 * h  # ln_attn + ln_mlp
    elif parallel:
        norms = 2 * h  # one input_layernorm
    else:
        norms = 4 * h  # input + post-attention LayerNorm
    return Architecture(
        name=name,
        model_type=model_type,
        family="falcon",
        intermediate_size=inter,
        blocks=(BlockGroup("decoder", c["num_layers"], linears, norms),),
        embedding_params=c["vocab_size"] * h,
        final_params=2 * h,
        lm_head=_head(c),
        activation=str(cfg.get("activation", "gelu")),
        dropout=float(cfg.get("hidden_dropout", 0.0) or 0.0),
        attention_dropout=float(cfg.get("attention_dropout", 0.0) or 0.0),
        config=cfg,
        **c,
    )


def _bert(name: str, cfg: Mapping[str, Any], model_type: str) -> Architecture:
    """BERT as ``BertModel`` (encoder + pooler): the figure model cards publish."""
    c = _common(cfg, True)
    h = c["hidden_size"]
    inter = _require(cfg, "intermediate_size")
    linears = (
        Linear("query", h, h, True),
        Linear("key", h, h, True),
        Linear("value", h, h, True),
        Linear("attention.output.dense", h, h, True),
        Linear("intermediate.dense", h, inter, True),
        Linear("output.dense", inter, h, True),
    )
    positions = int(cfg.get("max_position_embeddings", 512))
    type_vocab = int(cfg.get("type_vocab_size", 2))
    embedding = (c["vocab_size"] + positions + type_vocab) * h + 2 * h
    pooler = h * h + h
    # BertForPreTraining, the checkpoint published for BERT: the masked-LM head's transform
    # (dense + LayerNorm) and output bias (its weight is tied), and the next-sentence head
    heads = (h * h + h) + 2 * h + c["vocab_size"] + (2 * h + 2)
    return Architecture(
        name=name,
        model_type=model_type,
        family="bert",
        intermediate_size=inter,
        blocks=(BlockGroup("encoder", c["num_layers"], linears, 4 * h),),
        embedding_params=embedding,
        final_params=pooler + heads,
        lm_head=None,
        activation=str(cfg.get("hidden_act", "gelu")),
        dropout=float(cfg.get("hidden_dropout_prob", 0.1) or 0.0),
        attention_dropout=float(cfg.get("attention_probs_dropout_prob", 0.1) or 0.0),
        config=cfg,
        **c,
    )


def _t5(name: str, cfg: Mapping[str, Any], model_type: str) -> Architecture:
    """T5 / Flan-T5 as ``T5ForConditionalGeneration``: encoder, decoder with cross-attention."""
    h = _require(cfg, "d_model")
    heads = _require(cfg, "num_heads")
    d_kv = _require(cfg, "d_kv")
    inner = heads * d_kv
    d_ff = _require(cfg, "d_ff")
    enc_layers = _require(cfg, "num_layers")
    dec_layers = int(cfg.get("num_decoder_layers") or enc_layers)
    vocab = _require(cfg, "vocab_size")
    gated = str(cfg.get("feed_forward_proj", "relu")).startswith("gated")
    ff = (
        (Linear("wi_0", h, d_ff), Linear("wi_1", h, d_ff), Linear("wo", d_ff, h))
        if gated
        else (Linear("wi", h, d_ff), Linear("wo", d_ff, h))
    )

    def attention(prefix: str) -> tuple[Linear, ...]:
        return (
            Linear(f"{prefix}.q", h, inner),
            Linear(f"{prefix}.k", h, inner),
            Linear(f"{prefix}.v", h, inner),
            Linear(f"{prefix}.o", inner, h),
        )

    relative_bias = int(cfg.get("relative_attention_num_buckets", 32)) * heads
    tie = bool(cfg.get("tie_word_embeddings", True))
    return Architecture(
        name=name,
        model_type=model_type,
        family="t5",
        hidden_size=h,
        num_layers=enc_layers + dec_layers,
        num_heads=heads,
        num_kv_heads=heads,
        head_dim=d_kv,
        intermediate_size=d_ff,
        vocab_size=vocab,
        tie_word_embeddings=tie,
        blocks=(
            BlockGroup("encoder", enc_layers, attention("SelfAttention") + ff, 2 * h),
            BlockGroup(
                "cross_decoder",
                dec_layers,
                attention("SelfAttention") + attention("EncDecAttention") + ff,
                3 * h,
            ),
        ),
        # shared embedding; relative position biases live in the first block of each stack
        embedding_params=vocab * h + 2 * relative_bias,
        final_params=2 * h,
        lm_head=None if tie else Linear("lm_head", h, vocab),
        activation=str(cfg.get("dense_act_fn", "relu")),
        dropout=float(cfg.get("dropout_rate", 0.1) or 0.0),
        attention_dropout=float(cfg.get("dropout_rate", 0.1) or 0.0),
        config=cfg,
    )


def _bloom(name: str, cfg: Mapping[str, Any], model_type: str) -> Architecture:
    """BLOOM: ALiBi positions, LayerNorm after the embeddings, fused qkv with biases, tied head."""
    cfg = {**cfg, "num_hidden_layers": _get(cfg, "n_layer", "num_hidden_layers"),
           "num_attention_heads": _get(cfg, "n_head", "num_attention_heads"),
           "hidden_size": _get(cfg, "hidden_size", "n_embed")}
    c = _common(cfg, True)
    h = c["hidden_size"]
    linears = (
        Linear("query_key_value", h, 3 * h, True),
        Linear("self_attention.dense", h, h, True),
        Linear("dense_h_to_4h", h, 4 * h, True),
        Linear("dense_4h_to_h", 4 * h, h, True),
    )
    return Architecture(
        name=name,
        model_type=model_type,
        family="bloom",
        intermediate_size=4 * h,
        blocks=(BlockGroup("decoder", c["num_layers"], linears, 4 * h),),
        embedding_params=c["vocab_size"] * h + 2 * h,
        final_params=2 * h,
        lm_head=_head(c),
        activation="gelu",
        dropout=float(cfg.get("hidden_dropout", 0.0) or 0.0),
        attention_dropout=float(cfg.get("attention_dropout", 0.0) or 0.0),
        config=cfg,
        **c,
    )


def _gpt_oss(name: str, cfg: Mapping[str, Any], model_type: str) -> Architecture:
    """gpt-oss: GQA attention with biases and per-head sinks, routed experts with biases."""
    c = _common(cfg, False)
    h, d = c["hidden_size"], c["head_dim"]
    q_dim, kv_dim = c["num_heads"] * d, c["num_kv_heads"] * d
    bias = bool(cfg.get("attention_bias", True))
    experts = _require(cfg, "num_local_experts", "num_experts")
    top_k = _require(cfg, "num_experts_per_tok")
    inter = _require(cfg, "intermediate_size")
    linears = (
        Linear("q_proj", h, q_dim, bias),
        Linear("k_proj", h, kv_dim, bias),
        Linear("v_proj", h, kv_dim, bias),
        Linear("o_proj", q_dim, h, bias),
        Linear("router", h, experts, True),
        Linear("experts.gate_up_proj", h, 2 * inter, True, copies=experts),
        Linear("experts.down_proj", inter, h, True, copies=experts),
    )
    window, sliding_layers = _sliding(cfg, c["num_layers"])
    return Architecture(
        name=name,
        model_type=model_type,
        family="gpt_oss",
        intermediate_size=inter,
        blocks=(BlockGroup("decoder", c["num_layers"], linears, 2 * h + c["num_heads"]),),
        embedding_params=c["vocab_size"] * h,
        final_params=h,
        lm_head=_head(c),
        num_experts=experts,
        experts_per_token=top_k,
        moe_intermediate_size=inter,
        attention_dropout=float(cfg.get("attention_dropout", 0.0) or 0.0),
        sliding_window=window,
        sliding_layers=sliding_layers,
        config=cfg,
        **c,
    )


# the families built here; estimate/config_json.py adds those of decoders.py, encoders.py and vision.py
BUILDERS: dict[str, Callable[[str, Mapping[str, Any], str], Architecture]] = {
    "llama": _llama_like,
    "mistral": _llama_like,
    "qwen2": _llama_like,
    "qwen3": _llama_like,
    "gemma": _llama_like,
    "gemma2": _llama_like,
    "gemma3_text": _llama_like,
    "olmo2": _llama_like,
    "smollm3": _llama_like,
    "granite": _llama_like,
    "internlm2": _internlm2,
    "mixtral": _moe,
    "qwen2_moe": _moe,
    "qwen3_moe": _moe,
    "phi3": _phi3,
    "phi": _phi,
    "gpt2": _gpt2,
    "gpt_neox": _gpt_neox,
    "opt": _opt,
    "falcon": _falcon,
    "bert": _bert,
    "t5": _t5,
    "bloom": _bloom,
    "gpt_oss": _gpt_oss,
}

# A multimodal config's text_config omits keys equal to the text model's class defaults, which
# transformers then fills in; these are transformers 5.23's Gemma3TextConfig defaults.
_TEXT_CONFIG_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma3": {
        "vocab_size": 262_208,
        "hidden_size": 2304,
        "intermediate_size": 9216,
        "num_hidden_layers": 26,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "hidden_activation": "gelu_pytorch_tanh",
        "max_position_embeddings": 131_072,
        "sliding_window": 4096,
        "sliding_window_pattern": 6,
    },
}


def text_config(config: Mapping[str, Any]) -> tuple[Mapping[str, Any], str]:
    """The language-model part of a config (multimodal Gemma 3 nests it in ``text_config``).

    LLaVA is not unwrapped: its language-model recipe would leave out the CLIP tower and the
    projector, and the Hub's compact file omits the Llama sizes it shares with LlamaConfig's
    defaults, so a LLaVA config is counted whole on the meta device instead."""
    model_type = str(config.get("model_type", ""))
    if model_type in ("gemma3", "gemma3n", "mistral3") and isinstance(
        config.get("text_config"), Mapping
    ):
        inner = {**_TEXT_CONFIG_DEFAULTS.get(model_type, {}), **config["text_config"]}
        inner_type = str(inner.get("model_type") or {"gemma3": "gemma3_text"}.get(model_type, ""))
        if model_type == "gemma3" and "tie_word_embeddings" not in inner:
            inner["tie_word_embeddings"] = config.get("tie_word_embeddings", True)
        return inner, inner_type
    return config, model_type


def _siglip_params(vision: Mapping[str, Any]) -> int:
    """A SigLIP vision tower (Gemma 3, PaliGemma): patch and position embeddings, encoder
    layers (two LayerNorms, q/k/v/o, a GELU MLP, all with biases), the final LayerNorm.
    Missing keys take transformers' SiglipVisionConfig defaults."""
    h = int(vision.get("hidden_size", 768))
    inter = int(vision.get("intermediate_size", 3072))
    layers = int(vision.get("num_hidden_layers", 12))
    patch = int(vision.get("patch_size", 16))
    image = int(vision.get("image_size", 224))
    channels = int(vision.get("num_channels", 3))
    embeddings = channels * patch * patch * h + h + (image // patch) ** 2 * h
    layer = 2 * 2 * h + 4 * (h * h + h) + (h * inter + inter) + (inter * h + h)
    head = 0
    if vision.get("vision_use_head", True):
        head = h + 3 * (h * h + h) + (h * h + h) + 2 * h + (h * inter + inter) + (inter * h + h)
    return embeddings + layers * layer + 2 * h + head


def _pixtral_params(config: Mapping[str, Any], text_hidden: int) -> int:
    """A Mistral 3 checkpoint's Pixtral vision tower and projector (Mistral Small 3.1/3.2,
    Magistral Small 2509): the bias-free patch convolution, ln_pre, pre-norm layers of q/k/v/o and
    a gated MLP without biases; then the projector's RMSNorm, the patch merger (a Linear over
    spatial_merge_size^2 patches) and two Linears into the text width. Missing keys take
    transformers' PixtralVisionConfig and Mistral3Config defaults."""
    vision = config["vision_config"]
    h = int(vision.get("hidden_size", 1024))
    inter = int(vision.get("intermediate_size", 4096))
    layers = int(vision.get("num_hidden_layers", 24))
    patch = int(vision.get("patch_size", 16))
    channels = int(vision.get("num_channels", 3))
    tower = channels * patch * patch * h + h + layers * (2 * h + 4 * h * h + 3 * h * inter)
    merge = int(config.get("spatial_merge_size", 2))
    feature_layers = config.get("vision_feature_layer", -1)
    width = h * (len(feature_layers) if isinstance(feature_layers, list) else 1)
    bias = bool(config.get("multimodal_projector_bias", False))
    projector = (h + h * merge * merge * h + width * text_hidden + text_hidden * text_hidden
                 + (2 * text_hidden if bias else 0))
    return tower + projector


def _multimodal_extra(config: Mapping[str, Any], text_hidden: int) -> int:
    """Parameters of a multimodal checkpoint outside its language model."""
    if config.get("model_type") == "gemma3" and isinstance(config.get("vision_config"), Mapping):
        vision = config["vision_config"]
        vh = int(vision.get("hidden_size", 768))
        projector = vh * text_hidden + vh  # mm_input_projection_weight + mm_soft_emb_norm
        return _siglip_params(vision) + projector
    if config.get("model_type") == "mistral3" and isinstance(config.get("vision_config"), Mapping):
        return _pixtral_params(config, text_hidden)
    return 0
