"""TRN004: ``torch.cuda.empty_cache()`` on every training step."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from memlint.documents.kinds import DocumentKind
from memlint.lint.context import RuleContext
from memlint.model.diagnostics import Severity
from memlint.python.index import index_for
from memlint.python.loops import Event, TrainingLoop, step_loops
from memlint.python.prefilter import Called
from memlint.python.syntax import dotted
from memlint.python.training import RUNS_BACKWARD
from memlint.rules.base import Example, Finding, Rule

_EMPTY_CACHE = {
    "torch.cuda.empty_cache",
    "torch.cuda.memory.empty_cache",
    "torch.xpu.empty_cache",
    "torch.mps.empty_cache",
}

_SCRIPT = """\
import gc

import torch


def train(model, loader, optimizer, epochs, eval_every=1000):
    for epoch in range(epochs):
        for step, batch in enumerate(loader):
            try:
                loss = model(**batch).loss
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            except torch.cuda.OutOfMemoryError:
                optimizer.zero_grad()
                gc.collect()
                torch.cuda.empty_cache()
                continue
{extra}
"""


# in the style of LLM-Distillery's student model: validation when the step count passes a mark
_DISTILLER = """\
import torch


class Student:
    def __init__(self, model, optimizer, validation_every_steps: int, grad_accum: int):
        self.model, self.optimizer = model, optimizer
        self.validation_every_steps = validation_every_steps
        self.next_val_step = validation_every_steps
        self.grad_accum = grad_accum
        self.num_trained_steps = 0

    def train_chunk(self, batches, validation_batches):
        for batch in batches:
            loss = self.model(**batch).loss / self.grad_accum
            loss.backward()
            self.num_trained_steps += 1
            if self.num_trained_steps % self.grad_accum == 0:
                self.optimizer.step()
                self.optimizer.zero_grad()
            if self.num_trained_steps >= self.next_val_step:
                self._validate(validation_batches)

    def _validate(self, validation_batches):
        self.model.eval()
        with torch.no_grad():
            for batch in validation_batches:
                self.model(**batch)
        self.model.train()
        self.next_val_step += self.validation_every_steps
        torch.cuda.empty_cache()
"""


class EmptyCacheInTrainingLoop(Rule):
    """## What it does
    Finds ``torch.cuda.empty_cache()`` (and the ``xpu`` / ``mps`` ones) that runs on every
    pass of a training loop. Calls in an ``except`` handler (recovering from an
    out-of-memory error), calls under an interval condition (``if step % 1000 == 0:``, or a
    step count compared with a mark the code moves on: ``if step >= self.next_val_step:``
    beside ``self.next_val_step += every``) and calls that run on one pass only (``if step ==
    1:``, a loop counter compared for equality) are not reported.

    ## Why it matters
    ``empty_cache`` returns the caching allocator's free blocks to the driver. It frees no
    memory your tensors could use — the allocator reuses its cached blocks, and when an
    allocation fails it releases them and retries by itself before reporting out of memory —
    so it neither lowers the peak nor prevents an out-of-memory error in this process. What it does
    is make the next step allocate all those blocks again with ``cudaMalloc``, which
    synchronises the device: every step pays for it. It only helps *other* processes on the
    same GPU.

    ## Fix
    Remove it from the step. To fight fragmentation set
    ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``; to free memory between phases
    (after evaluation, before saving) call it there, once.
    """

    code = "TRN004"
    name = "empty-cache-in-training-loop"
    severity = Severity.INFO
    kinds = frozenset({DocumentKind.PYTHON})
    python_needs = (Called("empty_cache"), RUNS_BACKWARD)  # in a loop that runs backward() (``step_loops``)

    VALID = (
        Example(
            _SCRIPT.format(
                extra="            if step % eval_every == 0:\n"
                "                evaluate(model)\n"
                "                torch.cuda.empty_cache()"
            ),
            title="Only after an out-of-memory error, or every eval_every steps",
        ),
        Example(
            _DISTILLER,
            path="classes/student/model.py",
            title="At the end of a validation that runs when the step count passes a mark the loop moves on",
        ),
    )
    INVALID = (
        Example(
            _SCRIPT.format(extra="            torch.cuda.empty_cache()"),
            lines=(19,),
            message="every step",
            title="empty_cache() after every step",
        ),
    )

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        index = index_for(ctx.python)
        if index is None:
            return
        py = index.py
        reported: set[int] = set()
        for loop in step_loops(index):
            for event in loop.events:
                call = event.call
                if call is None or id(call) in reported or event.in_except or event.modulo_guards:
                    continue
                if not (index.qualified(call) & _EMPTY_CACHE):
                    continue
                if _runs_on_one_pass(loop, event) or _runs_past_an_advancing_mark(index, event):
                    continue
                reported.add(id(call))
                yield Finding(
                    range=py.range_of(call),
                    message=(
                        f"`{py.code_of(call)}` runs every step: it frees no memory this process can use, and the next "
                        "step must cudaMalloc the released blocks again, synchronising the GPU"
                    ),
                )


def _runs_on_one_pass(loop: TrainingLoop, event: Event) -> bool:
    """Under ``if batch_idx == 1 and epoch == 0:`` (MOSS's finetune script frees the cache once,
    after the first batch): a counter of a loop around the call, compared for equality, holds
    on one pass of that loop, not on every step."""
    counters = {name for node in (loop.loop, *event.loops) if isinstance(node, cst.For)
                for name in _target_names(node.target)}
    for guard in event.guards:
        if guard.branch != "body":
            continue
        for test in _conjuncts(guard.node.test):
            if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 \
                    and isinstance(test.comparisons[0].operator, cst.Equal):
                sides = (test.left, test.comparisons[0].comparator)
                if any(isinstance(side, cst.Name) and side.value in counters for side in sides):
                    return True
    return False


_ORDERINGS = (cst.GreaterThan, cst.GreaterThanEqual, cst.LessThan, cst.LessThanEqual)


def _runs_past_an_advancing_mark(index, event: Event) -> bool:
    """Under ``if self.num_trained_steps >= self.next_val_step:`` where the module moves the mark
    on (``self.next_val_step += self.validation_every_steps``: LLM-Distillery's validation, which
    frees the cache when it ends): a step counter compared with a mark the code advances holds
    once per period, as ``step % period == 0`` does."""
    advanced = _advanced_marks(index)
    if not advanced:
        return False
    for guard in event.guards:
        if guard.branch != "body":
            continue
        for test in _conjuncts(guard.node.test):
            if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 \
                    and isinstance(test.comparisons[0].operator, _ORDERINGS):
                sides = (test.left, test.comparisons[0].comparator)
                if any(dotted(side) in advanced for side in sides):
                    return True
    return False


def _advanced_marks(index) -> frozenset[str]:
    """The names the module moves on by an amount: ``self.next_val_step += period`` (the index's
    list of the module's augmented assignments, kept once per module)."""
    return frozenset(
        name for node in index.nodes_of(cst.AugAssign)
        if isinstance(node.operator, cst.AddAssign) and (name := dotted(node.target)) is not None
    )


def _conjuncts(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _conjuncts(test.left) + _conjuncts(test.right)
    return [test]


def _target_names(target: cst.BaseExpression) -> list[str]:
    """``step`` of ``for step, batch in enumerate(loader)``."""
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [name for element in target.elements for name in _target_names(element.value)]
    return []
