"""TRN002: a zero_grad that erases gradients before the optimizer step uses them."""

from __future__ import annotations

from typing import Iterator

from memlint.documents.kinds import DocumentKind
from memlint.lint.context import RuleContext
from memlint.model.diagnostics import Related, Severity
from memlint.python.index import index_for
from memlint.python.loops import (
    Event,
    TrainingLoop,
    accumulation_of,
    clears_step_gradients,
    step_loops,
    zeroed_every_micro_step,
)
from memlint.python.training import (
    RUNS_BACKWARD,
    backward_of,
    step_of,
    zero_grad_target,
)
from memlint.rules.base import Example, Finding, Rule

_SCRIPT = """\
import torch
from tqdm import tqdm


def train(model, loader, optimizer, scheduler, accum_steps: int = 4):
    model.train()
    for step, batch in enumerate(tqdm(loader)):
{body}
"""

_ORDERED = """\
        outputs = model(**batch)
        loss = outputs.loss / accum_steps
        loss.backward()
        if (step + 1) % accum_steps == 0:
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()"""

_ZERO_EVERY_MICRO_STEP = """\
        optimizer.zero_grad()
        outputs = model(**batch)
        loss = outputs.loss / accum_steps
        loss.backward()
        if (step + 1) % accum_steps == 0:
            optimizer.step()
            scheduler.step()"""

_ZERO_BEFORE_STEP = """\
        loss = model(**batch).loss
        loss.backward()
        optimizer.zero_grad()
        optimizer.step()
        scheduler.step()"""


class ZeroGradDiscardsGradients(Rule):
    """## What it does
    Finds a ``zero_grad`` (or ``p.grad = None``) that runs between a ``backward()`` and the
    optimizer step meant to use its gradients:

    * in one pass — ``loss.backward(); optimizer.zero_grad(); optimizer.step()``;
    * under gradient accumulation — ``optimizer.zero_grad()`` on every micro-batch while
      ``optimizer.step()`` runs only every *k*-th one.

    A ``zero_grad`` on another optimizer (a GAN's generator and critic) is not reported.

    ## Why it matters
    In the first shape the step sees no gradient: since PyTorch 2.0 ``zero_grad()`` sets
    them to ``None`` and the optimizer skips those parameters, so **nothing trains** while the
    loop runs at full cost. In the second, each micro-batch erases the gradients of the ones
    before it: only the last micro-batch of every *k* reaches the step, the effective batch is
    *k* times smaller than intended, and (when the loss is divided by *k*) the learning rate is
    effectively divided by *k* too.

    ## Fix
    Zero the gradients right after the step (or before the forward of the first micro-batch
    of each accumulation window), under the same condition as the step.
    """

    code = "TRN002"
    name = "zero-grad-discards-gradients"
    severity = Severity.ERROR
    kinds = frozenset({DocumentKind.PYTHON})
    python_needs = RUNS_BACKWARD  # its loops run backward()

    VALID = (Example(_SCRIPT.format(body=_ORDERED), title="zero_grad after the step, under the same condition"),)
    INVALID = (
        Example(
            _SCRIPT.format(body=_ZERO_EVERY_MICRO_STEP),
            lines=(8,),
            message="every micro-batch",
            title="Gradient accumulation that zeroes on every micro-batch",
        ),
        Example(
            _SCRIPT.format(body=_ZERO_BEFORE_STEP),
            lines=(10,),
            message="before",
            title="zero_grad between backward() and step()",
        ),
    )

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        index = index_for(ctx.python)
        if index is None:
            return
        reported: set[int] = set()
        for loop in step_loops(index):
            for finding_node, finding in _between(ctx, index, loop) + _every_micro_step(ctx, index, loop):
                if id(finding_node) not in reported:
                    reported.add(id(finding_node))
                    yield finding


def _between(ctx, index, loop: TrainingLoop) -> list:
    py = index.py
    out = []
    last_backward: Event | None = None
    zeros: list[Event] = []
    for event in loop.events:
        call = event.call
        if call is not None and backward_of(index, call) is not None:
            last_backward, zeros = event, []
            continue
        if zero_grad_target(index, event.node) is not None:
            if last_backward is not None:
                zeros.append(event)
            continue
        step = step_of(index, call) if call is not None else None
        if step is None or step.kind == "framework" or last_backward is None:
            continue
        for zero in zeros:
            runs_with_step = {g.key for g in zero.guards} <= {g.key for g in event.guards}
            if runs_with_step and clears_step_gradients(index, zero, step):
                message = (
                    f"`{py.code_of(zero.node)}` runs after `{py.code_of(last_backward.node)}` (line "
                    f"{py.range_of(last_backward.node).start.line}) and before `{py.code_of(call)}`: the step sees "
                    "no gradients (None since zero_grad's set_to_none default), so nothing is updated"
                )
                out.append(
                    (
                        zero.node,
                        Finding(
                            range=py.range_of(zero.node),
                            message=message,
                            related=(Related(ctx.path, py.range_of(call), "the step"),),
                        ),
                    )
                )
        zeros = []
    return out


def _every_micro_step(ctx, index, loop: TrainingLoop) -> list:
    accumulation = accumulation_of(index, loop)
    if accumulation is None:
        return []
    py = index.py
    divisor = py.code_of(accumulation.divisor)
    out = []
    for event in zeroed_every_micro_step(index, accumulation):
        message = (
            f"`{py.code_of(event.node)}` runs on every micro-batch but the optimizer steps only every `{divisor}` "
            f"(line {py.range_of(accumulation.step.node).start.line}): each micro-batch erases the gradients of the "
            "ones before it and only the last one trains; zero the gradients after the step, under its condition"
        )
        out.append(
            (
                event.node,
                Finding(
                    range=py.range_of(event.node),
                    message=message,
                    related=(Related(ctx.path, py.range_of(accumulation.step.node), "the step"),),
                ),
            )
        )
    return out
