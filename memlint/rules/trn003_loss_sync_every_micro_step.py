"""TRN003: ``loss.item()`` (a GPU sync) on every micro-batch of an accumulation loop."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from memlint.documents.kinds import DocumentKind
from memlint.lint.context import RuleContext
from memlint.model.diagnostics import Severity
from memlint.python.dataflow import names_in
from memlint.python.index import index_for
from memlint.python.loops import accumulation_of, step_loops
from memlint.python.syntax import method_name, positional, receiver, root_name
from memlint.python.training import RUNS_BACKWARD
from memlint.rules.base import Example, Finding, Rule

_SYNCING_METHODS = ("item", "tolist", "cpu", "numpy")
_SYNCING_BUILTINS = ("float", "int", "bool")

_SCRIPT = """\
import torch
from tqdm import tqdm

GRAD_ACCUM = 16
LOG_EVERY = 50


def train(model, loader, optimizer):
    running = torch.zeros((), device="cuda")
    progress = tqdm(loader)
    for step, batch in enumerate(progress):
        loss = model(**batch).loss / GRAD_ACCUM
        loss.backward()
{log}
        if (step + 1) % GRAD_ACCUM == 0:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
"""


class LossSyncEveryMicroStep(Rule):
    """## What it does
    In a gradient-accumulation loop, finds ``loss.item()``, ``loss.tolist()``,
    ``loss.cpu()``, ``loss.numpy()`` or ``float(loss)`` on the backpropagated loss that runs
    on every micro-batch. Calls under a logging interval (``if step % log_every == 0:``) or
    under the step's own condition are not reported.

    ## Why it matters
    Each of these copies a value from the GPU, so the CPU waits until every queued kernel
    has finished: the launch queue drains on every micro-batch and the GPU idles while
    Python prepares the next one. With *k* micro-batches per step that is *k* syncs per
    step where one would do; the cost is largest for small micro-batches and models, where
    it can take a visible share of the step time.

    ## Fix
    Accumulate on the device (``running += loss.detach()``) and call ``.item()`` when you
    log, once per optimizer step or every N steps.
    """

    code = "TRN003"
    name = "loss-sync-every-micro-step"
    severity = Severity.INFO
    kinds = frozenset({DocumentKind.PYTHON})
    python_needs = RUNS_BACKWARD  # its loops run backward()

    VALID = (
        Example(
            _SCRIPT.format(
                log="        running += loss.detach()\n"
                "        if step % LOG_EVERY == 0:\n"
                "            progress.set_postfix(loss=running.item() / LOG_EVERY)"
            ),
            title="Accumulate on the GPU, read it when logging",
        ),
    )
    INVALID = (
        Example(
            _SCRIPT.format(log="        progress.set_postfix(loss=loss.item() * GRAD_ACCUM)"),
            lines=(14,),
            message="every micro-batch",
            title="A progress bar that reads the loss on every micro-batch",
        ),
    )

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        index = index_for(ctx.python)
        if index is None:
            return
        py = index.py
        reported: set[int] = set()
        for loop in step_loops(index):
            accumulation = accumulation_of(index, loop)
            if accumulation is None:
                continue
            losses = set()
            for _, backward in loop.backwards:
                losses |= names_in(backward.loss)
            divisor = py.code_of(accumulation.divisor)
            for event in loop.events:
                call = event.call
                if call is None or id(call) in reported or not accumulation.accumulates(event):
                    continue
                synced = _synced_tensor(call)
                if synced is None or root_name(synced) not in losses or _feeds_another_sync(index, call):
                    continue
                reported.add(id(call))
                yield Finding(
                    range=py.range_of(call),
                    message=(
                        f"`{py.code_of(call)}` waits for the GPU on every micro-batch, `{divisor}` times per optimizer "
                        "step; accumulate `loss.detach()` on the device and read it when you log"
                    ),
                )


def _synced_tensor(call: cst.Call) -> cst.BaseExpression | None:
    """The tensor a call copies to the host: ``loss`` in ``loss.item()`` or ``float(loss)``."""
    name = method_name(call)
    if isinstance(call.func, cst.Attribute) and name in _SYNCING_METHODS and not call.args:
        return receiver(call)
    if isinstance(call.func, cst.Name) and name in _SYNCING_BUILTINS and len(positional(call)) == 1:
        return positional(call)[0].value
    return None


def _feeds_another_sync(index, call: cst.Call) -> bool:
    """``loss.detach().cpu()`` in ``loss.detach().cpu().item()``, ``loss.item()`` in
    ``float(loss.item())``: one copy to the host, reported once, at the outer call."""
    parent = index.parent(call)
    outer = index.parent(parent) if isinstance(parent, (cst.Attribute, cst.Arg)) else None
    if not isinstance(outer, cst.Call):
        return False
    if isinstance(parent, cst.Attribute):
        return outer.func is parent and _synced_tensor(outer) is not None
    return _synced_tensor(outer) is call
