"""TRN001: a training loop that never zeroes the gradients it steps with."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from memlint.documents.kinds import DocumentKind
from memlint.lint.context import RuleContext
from memlint.model.diagnostics import Related, Severity
from memlint.python.index import index_for
from memlint.python.loops import flow_events, step_loops
from memlint.python.training import RUNS_BACKWARD, zero_grad_target
from memlint.rules.base import Example, Finding, Rule

_SCRIPT = """\
import argparse

import torch
from torch import nn
from tqdm import tqdm

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=20)
args = parser.parse_args()

model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10)).cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
criterion = nn.CrossEntropyLoss()

for epoch in range(args.epochs):
    for images, labels in tqdm(train_loader, desc=f"epoch {{epoch}}"):
{zero}        loss = criterion(model(images.cuda()), labels.cuda())
        loss.backward()
        optimizer.step()
"""


class MissingZeroGrad(Rule):
    """## What it does
    Finds a training loop whose passes run ``backward()`` and an optimizer step but never
    reset the gradients: no ``optimizer.zero_grad()``, ``model.zero_grad()``,
    ``p.grad = None`` or ``p.grad.zero_()`` in the loop or in the helpers it calls. A
    ``zero_grad`` that only runs before the loop, or once per epoch around a per-batch
    step, does not count. DeepSpeed's ``engine.step()`` zeroes by itself and is not reported,
    nor is a conditional step in a loop over one batch's micro-batches whose enclosing loop
    zeroes the gradients each pass (gradient accumulation written as two loops).

    ## Why it matters
    ``backward()`` adds to ``.grad``; it never overwrites it. Without a reset, step *n*
    applies the sum of the gradients of all *n* batches so far: the update grows every step,
    the loss diverges or oscillates, and the run is wasted. Nothing raises an error.

    ## Fix
    Call ``optimizer.zero_grad(set_to_none=True)`` once per optimizer step — after
    ``optimizer.step()`` or before the forward.
    """

    code = "TRN001"
    name = "missing-zero-grad"
    severity = Severity.ERROR
    kinds = frozenset({DocumentKind.PYTHON})
    python_needs = RUNS_BACKWARD  # its loops run backward()

    VALID = (
        Example(_SCRIPT.format(zero="        optimizer.zero_grad()\n"), title="Gradients reset on every step"),
        Example(
            """\
import torch


def closure_step(model, optimizer, x, y):
    def closure():
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss

    for _ in range(100):
        optimizer.step(closure)
""",
            title="LBFGS: the closure zeroes and backpropagates inside step()",
        ),
        Example(
            """\
import torch


def train(model, optimizer, loader, micro_batch_size, accumulate_steps):
    for batch in loader:
        model.zero_grad()
        input_ids, labels = batch["input_ids"].cuda(), batch["labels"].cuda()
        for start in range(0, input_ids.size(0), micro_batch_size):
            end = start + micro_batch_size
            loss = model(input_ids[start:end], labels=labels[start:end]).loss
            (loss / accumulate_steps).backward()
            if end >= input_ids.size(0):
                optimizer.step()
""",
            title="Two loops: the batch zeroes, its micro-batches accumulate, the last one steps",
        ),
    )
    INVALID = (
        Example(_SCRIPT.format(zero=""), lines=(19,), message="never", title="No zero_grad at all"),
        Example(
            _SCRIPT.format(zero="").replace(
                "for epoch in range(args.epochs):\n", "for epoch in range(args.epochs):\n    optimizer.zero_grad()\n"
            ),
            lines=(20,),
            message="never",
            title="zero_grad once per epoch while the optimizer steps every batch",
        ),
        Example(
            _SCRIPT.format(zero="").replace(
                "for epoch in range(args.epochs):\n", "for epoch in range(args.epochs):\n    optimizer.zero_grad()\n"
            ).replace("    for images, labels in tqdm(train_loader, desc=f\"epoch {{epoch}}\"):",
                      "    for step, (images, labels) in enumerate(tqdm(train_loader)):").replace(
                "        optimizer.step()", "        if (step + 1) % 8 == 0:\n            optimizer.step()"),
            lines=(21,),
            message="never",
            title="Accumulation over 8 batches, but zero_grad only once per epoch",
        ),
    )

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        index = index_for(ctx.python)
        if index is None:
            return
        py = index.py
        for loop in step_loops(index):
            steps = [(e, s) for e, s in loop.steps if s.kind in ("direct", "scaled")]
            if not steps or any(s.kind == "framework" for _, s in loop.steps):
                continue
            if any(zero_grad_target(index, e.node) is not None for e in loop.events):
                continue
            event, step = steps[0]
            if _created_in(index, loop, step.optimizer):
                continue  # a fresh optimizer (and usually fresh tensors) on every pass
            outer = _zeroed_outside(index, loop)
            if outer is not None and _accumulated_within_a_step(index, loop, step.call, outer):
                continue
            where = (
                f" (it only runs outside this loop, line {py.range_of(outer).start.line})" if outer is not None else ""
            )
            backward = loop.backwards[0][1].call
            yield Finding(
                range=py.range_of(step.call),
                message=(
                    f"`{py.code_of(step.call)}` runs every pass of this loop but the gradients are never "
                    f"reset{where}: each `{py.code_of(backward)}` adds to the gradients of all earlier steps; "
                    "call optimizer.zero_grad() once per step"
                ),
                related=(Related(ctx.path, py.range_of(backward), "gradients accumulate here"),),
            )


def _zeroed_outside(index, loop):
    """A zero_grad elsewhere in the loop's function (before the loop, in an outer loop)."""
    for event in flow_events(index, index.flow_of(loop.loop)):
        if zero_grad_target(index, event.node) is not None:
            return event.node
    return None


def _accumulated_within_a_step(index, loop, step, zero) -> bool:
    """A step under an ``if`` of an inner ``range`` loop over one batch's micro-batches, whose enclosing loop
    zeroes the gradients on each of its passes: gpt-accelera's ``for ex_idx in range(0, n, micro):
    ...backward(); if ...: ... else: optimizer.step()`` steps on the last chunk, after
    ``model.zero_grad()`` at the top of each batch. Which pass the condition picks is not read, so
    the loop is not judged."""
    chunks = isinstance(loop.loop, cst.For) and isinstance(loop.loop.iter, cst.Call) and \
        isinstance(loop.loop.iter.func, cst.Name) and loop.loop.iter.func.value == "range"
    conditional = any(isinstance(a, cst.If) for a in _between(index, step, loop.loop))
    return chunks and conditional and any(isinstance(a, (cst.For, cst.While)) and index.contains(a, zero)
                               for a in index.ancestors(loop.loop))


def _between(index, node, outer):
    """The ancestors of ``node`` below ``outer``."""
    for ancestor in index.ancestors(node):
        if ancestor is outer:
            return
        yield ancestor


def _created_in(index, loop, optimizer: str) -> bool:
    return any(index.contains(loop.loop, d.statement) for d in index.all_definitions(optimizer, loop.loop))
