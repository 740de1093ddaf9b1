"""Encoders built like BERT that are not BERT's own checkpoint: RoBERTa and DistilBERT.

Both are BERT's post-LayerNorm block (``families.bert_block``); what differs is what the
published checkpoint holds around the blocks, and DistilBERT's config keys and layer names:

* RoBERTa's checkpoint is ``RobertaForMaskedLM``: no pooler and no next-sentence head, the
  masked-LM head (dense + LayerNorm + an output bias; its weight is the tied embedding), one
  token type and ``max_position_embeddings`` positions (514: two are the padding offset).
* DistilBERT's is ``DistilBertForMaskedLM``: word and position embeddings with a LayerNorm
  (no token types), six blocks named ``q_lin``/``k_lin``/``v_lin``/``out_lin``/``lin1``/``lin2``,
  and the ``vocab_transform`` + ``vocab_layer_norm`` + projector bias head (weight tied).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from memlint.estimate.architecture import Architecture, BlockGroup, Linear, UnsupportedArchitecture

# the names PEFT targets in each model's attention and MLP (bert_block's order)
LINEAR_NAMES: dict[str, tuple[str, str, str, str, str, str]] = {
    "distilbert": ("q_lin", "k_lin", "v_lin", "out_lin", "lin1", "lin2"),
}

# DistilBERT adds the attention output to the residual without a dropout (BERT drops it out)
NO_ATTENTION_OUTPUT_DROPOUT = frozenset({"distilbert"})


def _masked_lm_head(h: int, vocab: int) -> int:
    """dense (h x h + bias) + LayerNorm + the decoder's bias; the decoder weight is tied."""
    return (h * h + h) + 2 * h + vocab


def roberta(name: str, cfg: Mapping[str, Any], model_type: str) -> Architecture:
    from memlint.estimate import architecture

    arch = architecture._bert(name, {"type_vocab_size": 1, **cfg}, model_type)
    return replace(arch, final_params=_masked_lm_head(arch.hidden_size, arch.vocab_size))


def _int(cfg: Mapping[str, Any], key: str, default: int | None = None) -> int:
    value = cfg.get(key, default)
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise UnsupportedArchitecture(f"{key} must be a number in a DistilBERT config.json") from None
    if number <= 0:
        raise UnsupportedArchitecture(f"{key} must be positive in a DistilBERT config.json")
    return number


def distilbert(name: str, cfg: Mapping[str, Any], model_type: str) -> Architecture:
    h, layers, heads = _int(cfg, "dim", 768), _int(cfg, "n_layers", 6), _int(cfg, "n_heads", 12)
    inter, vocab = _int(cfg, "hidden_dim", 3072), _int(cfg, "vocab_size")
    positions = _int(cfg, "max_position_embeddings", 512)
    q, k, v, o, up, down = LINEAR_NAMES["distilbert"]
    linears = (Linear(q, h, h, True), Linear(k, h, h, True), Linear(v, h, h, True), Linear(o, h, h, True),
               Linear(up, h, inter, True), Linear(down, inter, h, True))
    return Architecture(
        name=name,
        model_type=model_type,
        family="bert",
        hidden_size=h,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=heads,
        head_dim=h // heads,
        intermediate_size=inter,
        vocab_size=vocab,
        tie_word_embeddings=True,
        blocks=(BlockGroup("encoder", layers, linears, 4 * h),),
        embedding_params=(vocab + positions) * h + 2 * h,
        final_params=_masked_lm_head(h, vocab),
        lm_head=None,
        max_position_embeddings=positions,
        activation=str(cfg.get("activation", "gelu")),
        dropout=float(cfg.get("dropout", 0.1) or 0.0),
        attention_dropout=float(cfg.get("attention_dropout", 0.1) or 0.0),
        config=cfg,
    )


BUILDERS = {"roberta": roberta, "distilbert": distilbert}
