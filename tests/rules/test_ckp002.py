"""CKP002: torch.utils.checkpoint without an explicit use_reentrant."""

from __future__ import annotations

MODEL = """\
import torch.utils.checkpoint as cp
from torch import nn
from torch.utils.checkpoint import checkpoint_sequential


class Backbone(nn.Module):
    def __init__(self, layers, segments=4):
        super().__init__()
        self.layers = nn.Sequential(*layers)
        self.segments = segments

    def forward(self, x, mask=None):
        if self.training:
            return checkpoint_sequential(self.layers, self.segments, x)
        return self.layers(x)

    def forward_blocks(self, x, blocks):
        for block in blocks:
            x = cp.checkpoint(
                block,
                x,
                preserve_rng_state=False,
            )
        return x
"""


def test_aliases_and_checkpoint_sequential_fire(lint, where):
    assert where(lint("CKP002", MODEL, path="backbone.py")) == [(14, 19, 14, 71), (19, 16, 23, 13)]


def test_fix_appends_use_reentrant_false_after_the_last_argument(fix):
    fixed = fix("CKP002", MODEL, path="backbone.py")
    assert "checkpoint_sequential(self.layers, self.segments, x, use_reentrant=False)" in fixed
    assert "                preserve_rng_state=False, use_reentrant=False,\n" in fixed


def test_star_args_are_kept_before_the_keyword(fix):
    source = """\
    from torch.utils.checkpoint import checkpoint

    def run(layer, *inputs):
        return checkpoint(layer, *inputs)
    """
    assert "checkpoint(layer, *inputs, use_reentrant=False)" in fix("CKP002", source)


def test_near_misses(lint):
    source = """\
    import functools

    import deepspeed
    from torch.utils.checkpoint import checkpoint

    ckpt = functools.partial(checkpoint, use_reentrant=False)
    y = checkpoint(block, x, use_reentrant=True)
    z = checkpoint(block, x, **ckpt_kwargs)
    w = deepspeed.checkpointing.checkpoint(block, x)
    model.gradient_checkpointing_enable()
    """
    assert lint("CKP002", source) == []
