"""A script that freezes the model it loads and trains what it builds on top of it.

Medusa's decoding heads, a classifier or a probe on a frozen encoder: the script loads a model,
turns its gradients off (``for p in model.base_model.parameters(): p.requires_grad = False``,
``model.requires_grad_(False)``), never turns any back on, and trains modules of its own that
take the frozen model's outputs. memlint's estimate is of the loaded model trained; here none of
its weights has a gradient or an optimizer state, and its activations are kept only where the
script's own modules need them, so a verdict from that estimate says nothing about the run. The
freeze is stated as the fact ``frozen_model``; ``resolve`` reports the run as not estimated unless
another fact already says what trains (adapters, a projector, the last blocks).

Only the model being trained counts (the one loader that is not a reference, a teacher or a
reward model), frozen whole or through the attribute that holds its transformer body
(``base_model``, ``model``, ``transformer``, ``backbone``); freezing a vision tower leaves the
language model training, and a script that turns any gradient back on (``p.requires_grad =
True``, LLaVA's projector) trains a part of the model, which other facts describe.
"""

from __future__ import annotations

from typing import Callable

import libcst as cst

from memlint.facts.script_facts import ScriptFacts
from memlint.facts.script_models import is_frozen_companion
from memlint.python.library import is_model_loader
from memlint.python.syntax import dotted, is_false

# attributes that hold a model's whole transformer body (what stays to train is a head at most)
_BODY = ("base_model", "model", "transformer", "backbone")


def recognise(ctx: ScriptFacts, named: list[tuple[cst.Call, frozenset[str]]],
              in_run: Callable[[cst.CSTNode], bool]) -> None:
    """State ``frozen_model`` where the trained model's weights are all turned off (``named``:
    the script's calls; ``in_run``: whether a node belongs to this run). The loops and calls are
    gathered only for a script with one trained-model loader, the only one this reads."""
    if ctx.model_loaders != 1:
        return
    loops = [loop for loop in ctx.python.nodes_of(cst.For) if in_run(loop)]
    calls = [call for call, _ in named if in_run(call)]
    if _turns_gradients_on(ctx, loops, calls):
        return
    for loop in loops:
        frozen = _frozen_by_loop(loop)
        if frozen is not None and _is_trained_model(ctx, frozen):
            _state(ctx, frozen, loop)
    for call in calls:
        if _sets_requires_grad(call) is False and isinstance(call.func, cst.Attribute) \
                and isinstance(ctx.values.parent(call), cst.Expr) and _is_trained_model(ctx, call.func.value):
            _state(ctx, call.func.value, call)


def _state(ctx: ScriptFacts, frozen: cst.BaseExpression, at: cst.CSTNode) -> None:
    ctx.state("frozen_model", ctx.python.code_of(frozen), at, "its gradients turned off", at=at)


def _frozen_by_loop(loop: cst.For) -> cst.BaseExpression | None:
    """``for p in X.parameters(): p.requires_grad = False`` (or ``for n, p in
    X.named_parameters():``), the assignment its whole body: the ``X`` it freezes."""
    source = loop.iter
    if not (isinstance(source, cst.Call) and isinstance(source.func, cst.Attribute)
            and source.func.attr.value in ("parameters", "named_parameters")):
        return None
    target: cst.BaseExpression = loop.target
    if isinstance(target, cst.Tuple) and len(target.elements) == 2:
        target = target.elements[1].value
    if not isinstance(target, cst.Name) or not isinstance(loop.body, cst.IndentedBlock):
        return None
    body = loop.body.body
    if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine) or len(body[0].body) != 1:
        return None
    statement = body[0].body[0]
    if not (isinstance(statement, cst.Assign) and len(statement.targets) == 1 and is_false(statement.value)):
        return None
    assigned = statement.targets[0].target
    if isinstance(assigned, cst.Attribute) and assigned.attr.value == "requires_grad" \
            and isinstance(assigned.value, cst.Name) and assigned.value.value == target.value:
        return source.func.value
    return None


def _sets_requires_grad(call: cst.Call) -> bool | None:
    """``x.requires_grad_(False)``: False; ``x.requires_grad_()`` / ``(True)``: True; else None."""
    if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "requires_grad_"):
        return None
    if not call.args:
        return True
    return not is_false(call.args[0].value)


def _turns_gradients_on(ctx: ScriptFacts, loops: list[cst.For], calls: list[cst.Call]) -> bool:
    """Does the script turn any gradient back on (``p.requires_grad = True``, ``requires_grad_()``)?"""
    if any(_sets_requires_grad(call) for call in calls):
        return True
    for assign in ctx.python.nodes_of(cst.Assign):
        target = assign.targets[0].target if len(assign.targets) == 1 else None
        if isinstance(target, cst.Attribute) and target.attr.value == "requires_grad" and not is_false(assign.value):
            return True
    return False


def _is_trained_model(ctx: ScriptFacts, expr: cst.BaseExpression) -> bool:
    """Is ``expr`` the loaded model being trained, or the attribute holding its body?"""
    text = dotted(expr)
    if text is None:
        return False
    root, _, attr = text.partition(".")
    if attr and attr not in _BODY:
        return False
    node = expr.value if attr and isinstance(expr, cst.Attribute) else expr
    loaded = ctx.values.definition(node)
    return isinstance(loaded, cst.Call) and any(is_model_loader(n) for n in ctx.values.callee_names(loaded)) \
        and not is_frozen_companion(ctx.values, loaded)
