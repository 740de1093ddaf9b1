"""ACC002: an LR scheduler stepped every micro-batch while its length counts optimizer steps."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from memlint.documents.kinds import DocumentKind
from memlint.lint.context import RuleContext
from memlint.model.diagnostics import Related, Severity
from memlint.python.index import ModuleIndex, index_for
from memlint.python.loops import accumulation_of, step_loops
from memlint.python.syntax import dotted, iter_nodes, receiver
from memlint.python.training import RUNS_BACKWARD, is_scheduler_constructor, is_scheduler_step
from memlint.rules.base import Example, Finding, Rule

_SCRIPT = """\
import argparse
import math

import torch
from transformers import get_cosine_schedule_with_warmup

parser = argparse.ArgumentParser()
parser.add_argument("--gradient_accumulation_steps", type=int, default=8)
parser.add_argument("--num_train_epochs", type=int, default=3)
parser.add_argument("--warmup_ratio", type=float, default=0.03)
args = parser.parse_args()

optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
steps_per_epoch = math.ceil(len(train_loader) / args.gradient_accumulation_steps)
max_train_steps = args.num_train_epochs * steps_per_epoch
lr_scheduler = get_cosine_schedule_with_warmup(
    optimizer,
    num_warmup_steps=int(args.warmup_ratio * max_train_steps),
    num_training_steps=max_train_steps,
)

for epoch in range(args.num_train_epochs):
    for step, batch in enumerate(train_loader):
        loss = model(**batch).loss / args.gradient_accumulation_steps
        loss.backward()
        if (step + 1) % args.gradient_accumulation_steps == 0:
            optimizer.step()
{inside}            optimizer.zero_grad()
{outside}"""


class SchedulerStepsEveryMicroBatch(Rule):
    """## What it does
    In a gradient-accumulation loop, finds ``scheduler.step()`` running on every micro-batch
    while ``optimizer.step()`` runs every *k*-th one — when the scheduler's length was
    computed in optimizer steps (divided by the same accumulation steps, as in
    ``num_training_steps = epochs * ceil(len(loader) / accum)``). A scheduler whose length
    counts micro-batches is consistent with per-micro-batch stepping and is not reported.
    Accelerate's prepared schedulers (which step only with the optimizer) are not reported.

    ## Why it matters
    The schedule then advances *k* times per optimizer step: warmup ends after 1/*k* of the
    intended steps, and a cosine or linear decay reaches its end — often a learning rate of
    zero — after 1/*k* of training. The rest of the run trains at the final learning rate,
    usually zero: GPU time with no learning, and a model that looks converged.

    ## Fix
    Call ``scheduler.step()`` next to ``optimizer.step()``, under the same condition.
    """

    code = "ACC002"
    name = "scheduler-steps-every-micro-batch"
    severity = Severity.WARNING
    kinds = frozenset({DocumentKind.PYTHON})
    python_needs = RUNS_BACKWARD  # its loops run backward()

    VALID = (
        Example(
            _SCRIPT.format(inside="            lr_scheduler.step()\n", outside=""),
            title="The scheduler steps with the optimizer",
        ),
    )
    INVALID = (
        Example(
            _SCRIPT.format(inside="", outside="        lr_scheduler.step()\n"),
            lines=(29,),
            message="every micro-batch",
            title="The schedule counts optimizer steps but advances every micro-batch",
        ),
    )

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        index = index_for(ctx.python)
        if index is None:
            return
        py = index.py
        for loop in step_loops(index):
            accumulation = accumulation_of(index, loop)
            if accumulation is None:
                continue
            divisors = _aliases(index, accumulation.divisor)
            for event in loop.events:
                call = event.call
                if call is None or not accumulation.accumulates(event) or not is_scheduler_step(index, call):
                    continue
                length = _length_in_optimizer_steps(index, receiver(call), divisors)
                if length is None:
                    continue
                divisor = py.code_of(accumulation.divisor)
                yield Finding(
                    range=py.range_of(call),
                    message=(
                        f"`{py.code_of(call)}` runs every micro-batch but the optimizer steps every `{divisor}` "
                        f"(line {py.range_of(accumulation.step.node).start.line}), and the schedule's length divides "
                        f"by `{py.code_of(length.right)}` (line {py.range_of(length).start.line}): warmup and decay "
                        f"run `{divisor}` "
                        "times too fast; step the scheduler with the optimizer"
                    ),
                    related=(Related(ctx.path, py.range_of(length), "the schedule length counts optimizer steps"),),
                )


def _aliases(index: ModuleIndex, divisor: cst.BaseExpression) -> set[str]:
    """Spellings of the accumulation steps: ``accum`` and ``args.gradient_accumulation_steps``
    after ``accum = args.gradient_accumulation_steps``."""
    py = index.py
    texts = {py.code_of(divisor)}
    name = dotted(divisor)
    if name is not None:
        for definition in index.all_definitions(name, divisor):
            if definition.value is not None and dotted(definition.value):
                texts.add(py.code_of(definition.value))
    for flow in index.flows:
        for other, definitions in index.definitions.get(id(flow), {}).items():
            if any(d.value is not None and _spelled_as(py, d.value, texts) for d in definitions):
                texts.add(other)
    return texts


def _spelled_as(py, value: cst.BaseExpression, texts: set[str]) -> bool:
    """Is ``value``'s code one of ``texts``? Without generating the code of every value of a
    module (trainer.py: ~5,000 definitions, ~50 ms an edit): a text made of dotted identifiers
    only is the code of a name or an attribute only (any other expression's code has a bracket,
    a quote, a digit first or a space), so other values are compared with the other texts."""
    if type(value) is cst.Name or type(value) is cst.Attribute:
        return py.code_of(value) in texts
    return any(not _is_dotted_text(text) for text in texts) and py.code_of(value) in texts


def _is_dotted_text(text: str) -> bool:
    return all(part.isidentifier() for part in text.split("."))


def _length_in_optimizer_steps(index: ModuleIndex, scheduler, divisors: set[str]) -> cst.BinaryOperation | None:
    """The division by the accumulation steps behind the scheduler's arguments, if any."""
    name = dotted(scheduler)
    if name is None:
        return None
    for definition in index.all_definitions(name, scheduler):
        value = definition.value
        if isinstance(value, cst.Call) and is_scheduler_constructor(index, value):
            for arg in value.args:
                found = _division_by(index, arg.value, divisors, 0)
                if found is not None:
                    return found
    return None


def _division_by(index: ModuleIndex, expr: cst.CSTNode, divisors: set[str], depth: int) -> cst.BinaryOperation | None:
    if depth > 4:
        return None
    py = index.py
    for node in iter_nodes(expr):
        if (
            isinstance(node, cst.BinaryOperation)
            and isinstance(node.operator, (cst.Divide, cst.FloorDivide))
            and py.code_of(node.right).strip("() ") in divisors
        ):
            return node
        if isinstance(node, (cst.Name, cst.Attribute)) and (written := dotted(node)):
            for definition in index.all_definitions(written, node):
                if definition.value is not None and definition.statement is not None:
                    found = _division_by(index, definition.value, divisors, depth + 1)
                    if found is not None:
                        return found
    return None
