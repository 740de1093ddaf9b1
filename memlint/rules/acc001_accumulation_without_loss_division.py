"""ACC001: gradient accumulation whose ``backward()`` gets the undivided loss."""

from __future__ import annotations

from typing import Iterator

from memlint.diagnostics import Edit, Fix, Related, Severity
from memlint.rules._python_helpers import index_for
from memlint.rules._python_helpers.dataflow import loss_is_divided
from memlint.rules._python_helpers.loops import Accumulation, step_loops, accumulation_of
from memlint.rules._python_helpers.syntax import as_operand, method_name
from memlint.rules._python_helpers.training import Backward
from memlint.rules.base import Example, Finding, Rule

_LOOP = """\
import argparse

import torch
from torch.utils.data import DataLoader
from tqdm import tqdm
from transformers import AutoModelForCausalLM

parser = argparse.ArgumentParser()
parser.add_argument("--gradient_accumulation_steps", type=int, default=8)
parser.add_argument("--lr", type=float, default=2e-5)
args = parser.parse_args()

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B").cuda()
model.train()
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
loader = DataLoader(dataset, batch_size=4, shuffle=True)

for step, batch in enumerate(tqdm(loader)):
    batch = {{k: v.cuda() for k, v in batch.items()}}
    loss = model(**batch).loss
{backward}
    if (step + 1) % args.gradient_accumulation_steps == 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
"""

_NANOGPT = """\
from dataclasses import dataclass

import torch


@dataclass
class TrainConfig:
    gradient_accumulation_steps: int = 40
    max_iters: int = 600000


def train(model, optimizer, get_batch, config: TrainConfig):
    scaler = torch.amp.GradScaler("cuda")
    for iter_num in range(config.max_iters):
        for micro_step in range(config.gradient_accumulation_steps):
            X, Y = get_batch("train")
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits, loss = model(X, Y)
{scaled}
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
"""


class AccumulationWithoutLossDivision(Rule):
    """## What it does
    Finds gradient accumulation — an optimizer step that runs only every *k*-th pass of the
    training loop (``if (step + 1) % accum == 0: optimizer.step()``, the
    ``if step % accum != 0: continue`` shape, or an inner ``for micro_step in range(accum)``)
    — where ``backward()`` receives the loss as the model returned it, not divided by *k*.

    Division only counts on the way to ``backward()``: ``loss = loss / accum`` before it,
    ``(loss / accum).backward()``, ``scaler.scale(loss / accum).backward()``, a helper that
    returns the divided loss. Dividing a copy for logging does not. Loops run by Accelerate
    (``accelerator.backward`` / ``accelerator.accumulate``), DeepSpeed's engine, Lightning and
    the Hugging Face Trainer divide the loss themselves and are not reported.

    ## Why it matters
    ``backward()`` adds to ``.grad``. Over *k* micro-batches the gradient that reaches
    ``optimizer.step()`` is the **sum** of *k* mean-reduced micro-batch gradients, *k* times
    the gradient of the large batch the accumulation stands for. With SGD that multiplies the
    learning rate by *k*. Adam's update is nearly invariant to the gradient's scale, but
    ``clip_grad_norm_(..., max_norm)`` now clips a norm *k* times larger (so nearly every
    step is clipped), weight decay's weight against the gradient changes, and in fp16 the
    *k*-times larger gradients overflow sooner. Results then change whenever the number of
    accumulation steps changes, which defeats the point of accumulating.

    ## Fix
    Divide the loss by the accumulation steps before ``backward()``. The automatic fix
    (safe) rewrites the ``backward()`` call to ``(loss / ACCUM).backward()`` with the same
    expression the step's condition divides by.
    """

    code = "ACC001"
    name = "accumulation-without-loss-division"
    severity = Severity.WARNING
    kinds = frozenset({"python"})
    fix_applicability = "safe"

    VALID = (
        Example(
            _LOOP.format(backward="    (loss / args.gradient_accumulation_steps).backward()"),
            title="The loss is divided by the accumulation steps in the backward call",
        ),
        Example(
            _NANOGPT.format(
                scaled="            loss = loss / config.gradient_accumulation_steps\n"
                "            scaler.scale(loss).backward()"
            ),
            path="train_gpt.py",
            title="nanoGPT-style micro-step loop that divides before scaling",
        ),
        Example(
            """\
from accelerate import Accelerator

accelerator = Accelerator(gradient_accumulation_steps=4)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
for batch in loader:
    with accelerator.accumulate(model):
        loss = model(**batch).loss
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
""",
            title="Accelerate divides the loss in accelerator.backward()",
        ),
    )
    INVALID = (
        Example(
            _LOOP.format(backward="    loss.backward()"),
            lines=(21,),
            message="undivided loss",
            fixed=_LOOP.format(backward="    (loss / args.gradient_accumulation_steps).backward()"),
            title="The step runs every 8 micro-batches but each backward() gets the full loss",
        ),
        Example(
            _NANOGPT.format(scaled="            scaler.scale(loss).backward()"),
            path="train_gpt.py",
            lines=(19,),
            message="undivided loss",
            fixed=_NANOGPT.format(
                scaled="            scaler.scale(loss / config.gradient_accumulation_steps).backward()"
            ),
            title="A micro-step loop that scales the loss but never divides it",
        ),
    )

    def check(self, ctx) -> Iterator[Finding]:
        index = index_for(ctx.python)
        if index is None:
            return
        for loop in step_loops(index):
            accumulation = accumulation_of(index, loop)
            if accumulation is None or _framework_accumulates(loop):
                continue
            for event, backward in loop.backwards:
                if backward.kind == "framework" or not accumulation.outside_step_guard(event):
                    continue
                if backward.loss is None or loss_is_divided(index, backward.loss, backward.call, chain=event.chain):
                    continue
                yield self._finding(ctx, index, accumulation, event, backward)

    def _finding(self, ctx, index, accumulation: Accumulation, event, backward: Backward) -> Finding:
        py = ctx.python
        divisor = py.code_of(accumulation.divisor)
        step_call = accumulation.step.site
        step_line = py.range_of(step_call).start.line
        message = (
            f"`{py.code_of(backward.call)}` gets the undivided loss, but the optimizer steps only every "
            f"`{divisor}` micro-batches (line {step_line}): the accumulated gradient is the sum of the "
            f"micro-batch gradients, not their mean; divide the loss by `{divisor}`"
        )
        fix = None
        if event.depth == 0 and accumulation.step.depth == 0:
            loss_text = as_operand(py.code_of(backward.loss), backward.loss)
            divided = f"{loss_text} / {as_operand(divisor, accumulation.divisor)}"
            new_text = divided if backward.kind == "scaled" else f"({divided})"
            fix = Fix(
                f"divide the loss by `{divisor}` before backward()",
                (Edit(ctx.path, py.range_of(backward.loss), new_text),),
                "safe",
            )
        return Finding(
            range=py.range_of(backward.call),
            message=message,
            fix=fix,
            related=(Related(ctx.path, py.range_of(step_call), "the optimizer steps here"),),
        )


def _framework_accumulates(loop) -> bool:
    """``with accelerator.accumulate(model):`` in the loop: Accelerate divides and syncs."""
    return any(event.call is not None and method_name(event.call) == "accumulate" for event in loop.events)
