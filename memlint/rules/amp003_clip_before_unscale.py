"""AMP003: gradients clipped while still multiplied by the GradScaler's loss scale."""

from __future__ import annotations

from typing import Iterator, cast

import libcst as cst

from memlint.documents.kinds import DocumentKind
from memlint.lint.context import RuleContext
from memlint.model.diagnostics import Applicability, Edit, Fix, Position, Range, Related, Severity, split_lines
from memlint.python.index import ModuleIndex, index_for
from memlint.python.loops import Event, flow_events
from memlint.python.syntax import method_name, receiver
from memlint.python.training import RUNS_BACKWARD, backward_of, backwards, is_clip_grad, step_of
from memlint.rules.base import Example, Finding, Rule

_LOOP = """\
import argparse

import torch
from tqdm import tqdm

parser = argparse.ArgumentParser()
parser.add_argument("--max_grad_norm", type=float, default=1.0)
args = parser.parse_args()

scaler = torch.amp.GradScaler("cuda")
for step, batch in enumerate(tqdm(loader)):
    with torch.autocast("cuda", dtype=torch.float16):
        loss = model(**batch).loss
    scaler.scale(loss).backward()
{clip}
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
"""

_CLIP = "    torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)"


class ClipBeforeUnscale(Rule):
    """## What it does
    Finds ``clip_grad_norm_`` / ``clip_grad_value_`` called after
    ``scaler.scale(loss).backward()`` and before ``scaler.step(optimizer)`` with no
    ``scaler.unscale_(optimizer)`` in between. ``accelerator.clip_grad_norm_`` unscales by
    itself and is not reported, and so does Apex: ``with amp.scale_loss(loss, optimizer) as
    scaled_loss: scaled_loss.backward()`` unscales the gradients when the ``with`` exits, so
    ``clip_grad_norm_(amp.master_params(optimizer), ...)`` after it is Apex's own idiom.

    ## Why it matters
    After a scaled backward every gradient is multiplied by the loss scale (65536 at the
    start, adjusted as training goes). ``clip_grad_norm_(params, max_norm=1.0)`` then compares
    the *scaled* norm with 1.0, so it clips on practically every step, to a norm of 1.0 in
    scaled units; ``scaler.step()`` divides by the scale afterwards and the update has norm
    ``max_norm / scale`` — the clipping threshold is divided by 65536. Training crawls or
    stalls, and the gradient norm you log is the scaled one.

    ## Fix
    Call ``scaler.unscale_(optimizer)`` right before clipping; ``scaler.step`` then knows the
    gradients are already unscaled. The fix inserts that line (unsafe: it changes the
    gradients the optimizer sees — which is the point — so it is offered, not applied by
    ``--fix``).
    """

    code = "AMP003"
    name = "clip-before-unscale"
    severity = Severity.WARNING
    kinds = frozenset({DocumentKind.PYTHON})
    python_needs = RUNS_BACKWARD  # its loops run backward()
    fix_applicability = Applicability.UNSAFE

    VALID = (
        Example(
            _LOOP.format(clip="    scaler.unscale_(optimizer)\n" + _CLIP),
            title="unscale_ before clipping, as the PyTorch AMP examples do",
        ),
        Example(
            """\
from accelerate import Accelerator

accelerator = Accelerator(mixed_precision="fp16")
for batch in loader:
    loss = model(**batch).loss
    accelerator.backward(loss)
    if accelerator.sync_gradients:
        accelerator.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad()
""",
            title="Accelerate unscales inside clip_grad_norm_",
        ),
        Example(
            """\
import torch
from apex import amp


def train(args, model, optimizer, scheduler, train_dataloader):
    model, optimizer = amp.initialize(model, optimizer, opt_level=args.fp16_opt_level)
    for step, batch in enumerate(train_dataloader):
        loss = model(**batch)[0]
        if args.gradient_accumulation_steps > 1:
            loss = loss / args.gradient_accumulation_steps
        if args.fp16:
            with amp.scale_loss(loss, optimizer) as scaled_loss:
                scaled_loss.backward()
        else:
            loss.backward()
        if (step + 1) % args.gradient_accumulation_steps == 0:
            if args.fp16:
                torch.nn.utils.clip_grad_norm_(amp.master_params(optimizer), args.max_grad_norm)
            else:
                torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
            optimizer.step()
            scheduler.step()
            model.zero_grad()
""",
            path="run_squad.py",
            title="Apex unscales when `amp.scale_loss` exits (the transformers legacy examples' idiom)",
        ),
    )
    INVALID = (
        Example(
            _LOOP.format(clip=_CLIP),
            lines=(15,),
            message="still multiplied by the loss scale",
            title="Clipping the scaled gradients",
        ),
    )

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        index = index_for(ctx.python)
        if index is None:
            return
        reported: set[int] = set()
        scaled_in = {id(index.flow_of(b.call)) for b in backwards(index) if b.kind == "scaled"}
        if not scaled_in:
            return
        running = scaled_in | index.runners_of(scaled_in, 3)
        for flow in index.flows:
            if id(flow) not in running:
                continue  # no scaled backward runs here
            events = flow_events(index, flow)
            for clip, scaled, step in _clips_of_scaled_gradients(index, events):
                if id(clip.node) in reported:
                    continue
                reported.add(id(clip.node))
                yield self._finding(ctx, index, clip, scaled, step)

    def _finding(self, ctx, index: ModuleIndex, clip: Event, scaled: Event, step: Event | None) -> Finding:
        py = index.py
        # the events were found as a scaled backward and a scaler step: their nodes are those calls
        backward = backward_of(index, cast(cst.Call, scaled.node))
        scale_call = backward.scale_call if backward is not None else None
        scaler_expr = receiver(scale_call) if scale_call is not None else None
        scaler = py.code_of(scaler_expr) if scaler_expr is not None else "scaler"
        stepped = step_of(index, cast(cst.Call, step.node)) if step is not None else None
        optimizer = stepped.optimizer if stepped is not None else None
        message = (
            f"`{py.code_of(clip.node)}` clips gradients still multiplied by the loss scale "
            f"(`{py.code_of(scaled.node)}`, line {py.range_of(scaled.node).start.line}): the threshold is in "
            f"scaled units; call `{scaler}.unscale_({optimizer or 'optimizer'})` first"
        )
        fix = None
        statement = index.statement_of(clip.node)
        if optimizer is not None and clip.depth == 0 and isinstance(statement, cst.SimpleStatementLine):
            line = py.range_of(statement).start.line
            indent = split_lines(py.text)[line - 1][: py.range_of(statement).start.column]
            at = Position(line, 0)
            fix = Fix(
                f"call {scaler}.unscale_({optimizer}) before clipping",
                (Edit(ctx.path, Range(at, at), f"{indent}{scaler}.unscale_({optimizer})\n"),),
                Applicability.UNSAFE,
            )
        return Finding(
            range=py.range_of(clip.node),
            message=message,
            fix=fix,
            related=(Related(ctx.path, py.range_of(scaled.node), "the loss is scaled here"),),
        )


def _exclusive(index: ModuleIndex, a: Event, b: Event) -> bool:
    """Never both in one pass: on opposite branches of the same ``if``, or under opposite tests
    of the same condition in two places (``if self.use_fp16: self.optimizer.scale(loss).backward()``
    in one method, ``if not self.use_fp16: clip_grad_norm_(...)`` in another of the same class)."""
    branches = {g.node: g.branch for g in a.guards if g.branch in ("body", "orelse")}
    if any(g.node in branches and branches[g.node] != g.branch for g in b.guards if g.branch in ("body", "orelse")):
        return True
    required = {
        (text, truth, _owner(index, g.node, text))
        for g in a.guards
        for text, truth in index.branch_conditions(g.node, g.branch)
    }
    return any(
        (text, not truth, _owner(index, g.node, text)) in required
        for g in b.guards
        for text, truth in index.branch_conditions(g.node, g.branch)
    )


def _owner(index: ModuleIndex, node: cst.CSTNode, text: str) -> int:
    """A test of ``self.x`` means the same in every method of one class, not across classes."""
    if not text.startswith("self."):
        return 0
    owner = index.class_of(node)
    return id(owner) if owner is not None else 0


def _unscaled_on_exit(backward) -> bool:
    """Apex's ``with amp.scale_loss(loss, optimizer) as scaled_loss: scaled_loss.backward()``
    unscales the gradients into the master parameters when the ``with`` exits, so clipping
    ``amp.master_params(optimizer)`` after it is Apex's documented idiom, not a clip in scaled
    units."""
    return backward.scale_call is not None and method_name(backward.scale_call) == "scale_loss"


def _clips_of_scaled_gradients(index: ModuleIndex, events: list[Event]) -> list[tuple[Event, Event, Event | None]]:
    """(clip, the scaled backward before it, the scaler step after it) for each clip that
    no ``unscale_`` precedes."""
    pending: Event | None = None
    found: list[tuple[Event, Event]] = []
    out: list[tuple[Event, Event, Event | None]] = []
    for event in events:
        call = event.call
        if call is None:
            continue
        backward = backward_of(index, call)
        if backward is not None:
            if backward.kind == "scaled" and not _unscaled_on_exit(backward):
                pending = event
            continue
        name = method_name(call)
        if name == "unscale_" or name == "update":
            pending = None
        elif pending is not None and is_clip_grad(index, call) and not _exclusive(index, pending, event):
            found.append((event, pending))
        else:
            step = step_of(index, call)
            if step is not None and step.kind == "scaled":
                out.extend((clip, scaled, event) for clip, scaled in found)
                found = []
                pending = None
    out.extend((clip, scaled, None) for clip, scaled in found)
    return out
