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
from memlint.python import option_formulas
from memlint.python.instance_attributes import self_attribute
from memlint.python.value_types import MISSING, Found
from memlint.python.values import Values


def recognise(ctx: ScriptFacts, call: cst.Call, names: frozenset[str], method: str | None) -> None:
    if not any(is_gradient_cache(n) for n in names):
        return
    chunk = ctx.values.arguments(call, ("models", "chunk_sizes")).get("chunk_sizes")
    if chunk is not None:
        ctx.state_found("gradient_cache_chunk", chunk_sizes(ctx.values, chunk), largest_chunk,
                        "GradCache(chunk_sizes=...)", at=call, rank=RANK_EXPLICIT)


def is_gradient_cache(name: str) -> bool:
    """The GradCache class, installed (``grad_cache.GradCache``) or vendored in the project
    (VLM2Vec's ``src.grad_cache.grad_cache.GradCache``)."""
    parts = name.split(".")
    return len(parts) > 1 and parts[-1] == "GradCache" and "grad_cache" in parts[:-1]


def chunk_sizes(values: Values, chunk: cst.BaseExpression) -> Found | None:
    """``chunk_sizes`` as written, an attribute the trainer sets (``self.gc_chunk_size``,
    ``self.args.gc_chunk_size``: ``memlint.python.instance_attributes``), or one size per model
    (``[self.args.gc_q_chunk_size, self.args.gc_p_chunk_size]``): the largest, which a launch
    redoes over the options it reads."""
    if (type(chunk) is cst.List or type(chunk) is cst.Tuple) and all(type(e) is cst.Element for e in chunk.elements):
        sizes = [_size(values, element.value) for element in chunk.elements]
        if not sizes or any(s is None for s in sizes):
            return values.evaluate(chunk)
        known = [s for s in sizes if s is not None and s.known and largest_chunk(s.value) is not None]
        formula = option_formulas.combine("max", [option_formulas.operand(s.value, s.options, s.formula, s.known)
                                                  for s in sizes if s is not None])
        if len(known) == len(sizes):
            return Found(max(s.value for s in known), chunk, formula=formula)
        return Found(MISSING, None, formula=formula) if formula is not None else None
    return _size(values, chunk)


def _size(values: Values, expr: cst.BaseExpression) -> Found | None:
    found = values.evaluate(expr)
    if found is not None and (found.known or found.options or found.formula is not None):
        return found
    return self_attribute(values, expr) or found


def largest_chunk(value: Any) -> int | None:
    """One size, or the largest of one per model; None for anything but positive integers."""
    sizes = value if isinstance(value, (list, tuple)) else [value]
    if not sizes or any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in sizes):
        return None
    return max(sizes)
