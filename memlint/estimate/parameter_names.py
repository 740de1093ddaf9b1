"""The share of a model that trains when a list of regexes picks its parameters by name.

Spectrum's ``unfrozen_parameters`` file and Axolotl's ``unfrozen_parameters:`` key freeze every
parameter and turn the gradient back on for each name a pattern matches from its start
(``re.match`` over ``model.named_parameters()``; Axolotl escapes a ``.`` not followed by ``+``
and drops a trailing ``[start:end]`` row range, whose parameter still holds a whole gradient:
``axolotl/utils/freeze.py``, ``freeze_layers_except`` and ``LayerNamePattern``). The names are
Hugging Face's for the Llama-style decoders (Llama, Mistral, Qwen2/3, ...): ``model.embed_tokens``,
``model.layers.N.self_attn.q_proj``, ``model.layers.N.mlp.down_proj``, the two norms of each
block, ``model.norm`` and ``lm_head``. Another layout's names are not known here: None.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memlint.estimate.architecture import Architecture

_ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")
_MLP = ("gate_proj", "up_proj", "down_proj")
_RANGE = re.compile(r"^(.+)\[([0-9]*)(?::([0-9]*))?\]$")


@dataclass(frozen=True)
class TrainedShare:
    """What a name selection trains: its parameter count, the first block it reaches (every
    block after it keeps activations for backward), and whether the embeddings and the head do."""

    parameters: int
    first_block: int
    embeddings: bool
    head: bool
    tensors: int  # parameter tensors matched


def named_parameters(arch: Architecture) -> list[tuple[str, int, int | None]] | None:
    """``(name, elements, block index or None)`` for each parameter, as ``named_parameters()``
    lists them; None for a layout whose names are not the Llama-style ones."""
    if arch.family != "llama" or len(arch.blocks) != 1 or arch.num_experts or arch.extra_params:
        return None
    [group] = arch.blocks
    if group.kind != "decoder" or {lin.name for lin in group.linears} != set(_ATTENTION + _MLP):
        return None
    h = arch.hidden_size
    norms = [("input_layernorm.weight", h), ("post_attention_layernorm.weight", h)]
    if group.other_params == 2 * h + 2 * arch.head_dim:  # Qwen3's per-head query and key norms
        norms += [("self_attn.q_norm.weight", arch.head_dim), ("self_attn.k_norm.weight", arch.head_dim)]
    elif group.other_params != 2 * h:
        return None
    if arch.final_params != h:
        return None
    out: list[tuple[str, int, int | None]] = [("model.embed_tokens.weight", arch.embedding_params, None)]
    for index in range(group.count):
        prefix = f"model.layers.{index}."
        for lin in group.linears:
            module = f"{prefix}{'self_attn' if lin.name in _ATTENTION else 'mlp'}.{lin.name}"
            out.append((f"{module}.weight", lin.in_features * lin.out_features * lin.copies, index))
            if lin.bias:
                out.append((f"{module}.bias", lin.out_features * lin.copies, index))
        out += [(prefix + name, size, index) for name, size in norms]
    out.append(("model.norm.weight", h, None))
    if arch.lm_head is not None:
        out.append(("lm_head.weight", arch.lm_head.params, None))
    return out


def pattern(text: str) -> re.Pattern[str] | None:
    """Axolotl's reading of one pattern: a row range dropped, a ``.`` not before ``+`` literal
    (Spectrum's own loop uses ``re.match`` on the text as written, which matches the same names
    where a ``.`` stands between name parts). None for a pattern that does not compile."""
    ranged = _RANGE.match(text)
    try:
        return re.compile(re.sub(r"\.(?!\+)", "\\.", ranged.group(1) if ranged else text))
    except re.error:
        return None


def trained_share(arch: Architecture, patterns: tuple[str, ...]) -> TrainedShare | None:
    """The share the patterns train, or None where the names or a pattern cannot be read."""
    names = named_parameters(arch)
    compiled = [pattern(p) for p in patterns]
    if names is None or not compiled or any(c is None for c in compiled):
        return None
    matched = [(name, size, block) for name, size, block in names
               if any(c is not None and c.match(name) for c in compiled)]
    blocks = [block for _, _, block in matched if block is not None]
    embeddings = any(name == "model.embed_tokens.weight" for name, _, _ in matched)
    head = any(name in ("lm_head.weight", "model.norm.weight") for name, _, _ in matched)
    first = 0 if embeddings else min(blocks, default=arch.num_layers)
    return TrainedShare(sum(size for _, size, _ in matched), first, embeddings, head, len(matched))
