"""The chunk a gradient cache splits each batch into (the GradCache library,
``grad_cache.GradCache(models=[q_encoder, p_encoder], chunk_sizes=8, loss_fn=...)``).

Gradient caching (Gao et al., 2021, "Scaling Deep Contrastive Learning Batch Size under Memory
Limited Setup") runs the batch's forward without gradients in chunks, keeps only the
representations, computes the loss on them, then runs forward and backward again one chunk at a
time with the representations' gradients. Only one chunk's activations are alive at once, plus
the cached representations (batch x hidden, a few MiB): the activations of the micro-batch are
those of a chunk. ``chunk_sizes`` is one size or one per model; the largest decides.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from memlint.facts.script_facts import RANK_EXPLICIT, ScriptFacts


def recognise(ctx: ScriptFacts, call: cst.Call, names: frozenset[str], method: str | None) -> None:
    if not any(n.split(".", 1)[0] == "grad_cache" and n.endswith(".GradCache") for n in names):
        return
    chunk = ctx.values.arguments(call, ("models", "chunk_sizes")).get("chunk_sizes")
    if chunk is not None:
        ctx.state_found("gradient_cache_chunk", ctx.values.evaluate(chunk), largest_chunk,
                        "GradCache(chunk_sizes=...)", at=call, rank=RANK_EXPLICIT)


def largest_chunk(value: Any) -> int | None:
    """One size, or the largest of one per model; None for anything but positive integers."""
    sizes = value if isinstance(value, (list, tuple)) else [value]
    if not sizes or any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in sizes):
        return None
    return max(sizes)
