"""CKP002: ``torch.utils.checkpoint`` called without an explicit ``use_reentrant``."""

from __future__ import annotations

from typing import Iterator

from memlint.documents.kinds import DocumentKind
from memlint.lint.context import RuleContext
from memlint.model.diagnostics import Applicability, Edit, Fix, Range, Severity
from memlint.python.index import index_for
from memlint.python.prefilter import Called
from memlint.python.syntax import has_star_kwargs, keyword
from memlint.rules.base import Example, Finding, Rule

_CHECKPOINT = (
    "torch.utils.checkpoint.checkpoint",
    "torch.utils.checkpoint.checkpoint_sequential",
)

_MODEL = """\
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, 8, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(x, x, x, need_weights=False)[0]
        return x + self.mlp(x)


class Encoder(nn.Module):
    def __init__(self, dim=768, depth=12, grad_ckpt=True):
        super().__init__()
        self.blocks = nn.ModuleList(Block(dim) for _ in range(depth))
        self.grad_ckpt = grad_ckpt

    def forward(self, x):
        for block in self.blocks:
            x = {call} if self.grad_ckpt and self.training else block(x)
        return x
"""


class CheckpointWithoutUseReentrant(Rule):
    """## What it does
    Finds ``torch.utils.checkpoint.checkpoint(...)`` and ``checkpoint_sequential(...)`` called
    without ``use_reentrant``.

    ## Why it matters
    Without it torch warns on every call and uses the *reentrant* variant, which PyTorch no
    longer recommends: when none of a segment's tensor inputs requires grad (frozen
    embeddings, LoRA, a frozen backbone), the reentrant checkpoint warns "None of the inputs
    have requires_grad=True. Gradients will be None" and the parameters inside the segment
    get no gradient at all. It also recomputes the whole segment, does not support
    ``torch.autograd.grad`` or keyword arguments, and torch has announced that calling
    checkpoint without ``use_reentrant`` will become an error.

    ## Fix
    Pass ``use_reentrant=False`` (the fix, safe, adds it), the variant PyTorch recommends.
    Pass ``use_reentrant=True`` explicitly only if you depend on the reentrant behaviour.
    """

    code = "CKP002"
    name = "checkpoint-without-use-reentrant"
    severity = Severity.WARNING
    kinds = frozenset({DocumentKind.PYTHON})
    # called (``calls_named``); imported under an alias, the import names it
    python_needs = Called(r"^checkpoint(?:_sequential)?$")
    fix_applicability = Applicability.SAFE

    VALID = (
        Example(
            _MODEL.format(call="checkpoint(block, x, use_reentrant=False)"),
            path="model.py",
            title="The non-reentrant variant, stated explicitly",
        ),
    )
    INVALID = (
        Example(
            _MODEL.format(call="checkpoint(block, x)"),
            path="model.py",
            lines=(25,),
            message="use_reentrant",
            fixed=_MODEL.format(call="checkpoint(block, x, use_reentrant=False)"),
            title="checkpoint() that silently picks the reentrant variant",
        ),
    )

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        index = index_for(ctx.python)
        if index is None:
            return
        py = index.py
        for node in index.calls:
            if not index.calls_named(node, *_CHECKPOINT):
                continue
            if keyword(node, "use_reentrant") is not None or has_star_kwargs(node) or not node.args:
                continue
            end = py.range_of(node.args[-1].value).end
            fix = Fix("pass use_reentrant=False", (Edit(ctx.path, Range(end, end), ", use_reentrant=False"),), Applicability.SAFE)
            yield Finding(
                range=py.range_of(node),
                message=(
                    f"`{py.code_of(node.func)}(...)` without `use_reentrant` uses the reentrant variant, which "
                    "computes no gradients for a segment whose inputs do not require grad; pass use_reentrant=False"
                ),
                fix=fix,
            )
