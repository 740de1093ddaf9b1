"""ACC002: a schedule counted in optimizer steps but stepped every micro-batch."""

from __future__ import annotations

SCRIPT = """\
import argparse
import math

import torch
from transformers import get_linear_schedule_with_warmup


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gradient_accumulation_steps", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    accum = args.gradient_accumulation_steps

    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-5)
    total_steps = len(loader) // args.gradient_accumulation_steps * args.epochs
    scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=100, num_training_steps=total_steps)

    for epoch in range(args.epochs):
        for step, batch in enumerate(loader):
            loss = model(**batch).loss / accum
            loss.backward()
            scheduler.step()
            if (step + 1) % accum == 0:
                optimizer.step()
                optimizer.zero_grad()
"""


def test_scheduler_stepped_per_micro_batch_through_an_alias_of_the_divisor(lint, where):
    diagnostics = lint("ACC002", SCRIPT)
    assert where(diagnostics) == [(23, 12, 23, 28)]
    message = diagnostics[0].message
    assert "optimizer steps every `accum` (line 25)" in message
    assert "divides by `args.gradient_accumulation_steps` (line 16)" in message
    assert diagnostics[0].related[0].range.start.line == 16


def test_torch_scheduler_with_a_continue_shape(lint, where):
    source = """\
    import torch
    from torch.optim.lr_scheduler import OneCycleLR

    ACCUM = 8
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    sched = OneCycleLR(opt, max_lr=0.1, total_steps=EPOCHS * len(loader) // ACCUM)
    for epoch in range(EPOCHS):
        for i, (x, y) in enumerate(loader):
            (criterion(net(x), y) / ACCUM).backward()
            sched.step()
            if (i + 1) % ACCUM:
                continue
            opt.step()
            opt.zero_grad()
    """
    assert where(lint("ACC002", source)) == [(10, 8, 10, 20)]


def test_near_misses(lint):
    with_the_optimizer = SCRIPT.replace(
        "            scheduler.step()\n            if (step + 1) % accum == 0:\n                optimizer.step()\n",
        "            if (step + 1) % accum == 0:\n                optimizer.step()\n                scheduler.step()\n",
    )
    counted_in_micro_batches = SCRIPT.replace(
        "total_steps = len(loader) // args.gradient_accumulation_steps * args.epochs",
        "total_steps = len(loader) * args.epochs",
    )
    no_accumulation = """\
    scheduler = get_cosine_schedule_with_warmup(optimizer, 500, len(loader) * epochs // accum)
    for batch in loader:
        model(**batch).loss.backward()
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
    """
    plateau = SCRIPT.replace("scheduler.step()", "scheduler.step(loss.item())")
    for source in (with_the_optimizer, counted_in_micro_batches, no_accumulation, plateau):
        assert lint("ACC002", source) == []
