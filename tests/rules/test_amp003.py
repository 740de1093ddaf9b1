"""AMP003: clipping gradients that are still multiplied by the loss scale."""

from __future__ import annotations

TRAIN = """\
from dataclasses import dataclass

import torch
from torch.cuda.amp import GradScaler, autocast


@dataclass
class Args:
    grad_clip: float = 1.0
    accum: int = 4


def train_epoch(model, loader, optimizer, args: Args):
    scaler = GradScaler()
    for it, (x, y) in enumerate(loader):
        with autocast():
            loss = model(x, y) / args.accum
        scaler.scale(loss).backward()
        if (it + 1) % args.accum == 0:
            if args.grad_clip > 0:
                grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
"""


def test_clip_under_the_accumulation_guard_fires(lint, where):
    diagnostics = lint("AMP003", TRAIN)
    assert where(diagnostics) == [(21, 28, 21, 94)]
    assert "call `scaler.unscale_(optimizer)` first" in diagnostics[0].message
    assert diagnostics[0].fix.applicability == "unsafe"


def test_unsafe_fix_inserts_unscale_before_the_clip(fix):
    fixed = fix("AMP003", TRAIN, unsafe=True)
    assert (
        "            if args.grad_clip > 0:\n"
        "                scaler.unscale_(optimizer)\n"
        "                grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)\n"
    ) in fixed


def test_clip_in_a_helper_between_scaled_backward_and_step(lint, where):
    source = """\
    import torch.nn as nn

    def clip(model, max_norm=1.0):
        return nn.utils.clip_grad_norm_(model.parameters(), max_norm)

    def step(model, loss, optimizer, scaler):
        scaler.scale(loss).backward()
        clip(model)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
    """
    assert where(lint("AMP003", source)) == [(4, 11, 4, 65)]


def test_fsdp_clip_method_fires_too(lint, where):
    source = """\
    from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

    scaler = ShardedGradScaler()
    for batch in loader:
        loss = fsdp_model(batch)
        scaler.scale(loss).backward()
        fsdp_model.clip_grad_norm_(1.0)
        scaler.step(optimizer)
        scaler.update()
    """
    assert where(lint("AMP003", source)) == [(7, 4, 7, 35)]


def test_near_misses(lint):
    unscaled_first = TRAIN.replace(
        "                grad_norm = torch",
        "                scaler.unscale_(optimizer)\n                grad_norm = torch",
    )
    no_scaler = """\
    import torch

    for batch in loader:
        loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
    """
    other_branch = """\
    import torch

    for batch in loader:
        loss = model(**batch).loss
        if use_amp:
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
        optimizer.zero_grad()
    """
    accelerate = """\
    for batch in loader:
        with accelerator.accumulate(model):
            accelerator.backward(model(**batch).loss)
            if accelerator.sync_gradients:
                accelerator.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()
    """
    for source in (unscaled_first, no_scaler, other_branch, accelerate):
        assert lint("AMP003", source) == []


PIPELINE = """\
import torch
from torch.cuda.amp import GradScaler


class PipelineRunner:
    def __init__(self, args, model, optimizer):
        self.model = model
        self.optimizer = optimizer
        self.use_fp16 = args.fp16
        self.scaler = GradScaler()

    def backward_stage(self, loss):
        if self.use_fp16:
            self.scaler.scale(loss).backward()
        else:
            loss.backward()

    def optimizer_step(self):
        # gradients are clipped only on the fp32 path; the scaler unscales in step()
        if {clip_test}:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.scaler.step(self.optimizer)
        self.scaler.update()

    def train(self, loader):
        for batch in loader:
            loss = self.model(**batch).loss
            self.backward_stage(loss)
            self.optimizer_step()
            self.optimizer.zero_grad()
"""


def test_clip_under_the_opposite_test_in_another_method_is_silent(lint):
    # OpenChatKit's pipeline: the scaled backward runs under `if self.use_fp16:` in one method,
    # the clip under `if not self.use_fp16:` in another: never both in one step
    assert lint("AMP003", PIPELINE.format(clip_test="not self.use_fp16")) == []


def test_clip_under_the_same_test_in_another_method_fires(lint, where):
    diagnostics = lint("AMP003", PIPELINE.format(clip_test="self.use_fp16"))
    assert where(diagnostics) == [(21, 12, 21, 72)]
