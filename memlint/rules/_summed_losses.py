"""Is a training loss a sum over the batch's samples, not their mean? Then accumulating it over
micro-batches without a division is the design: the sum over the nominal batch.

YOLOv5 and YOLOv7 scale their loss by the batch size (``utils/loss.py``: ``ComputeLoss.__call__``
ends ``return loss * bs, ...``; the script's line says "loss scaled by batch_size") and accumulate
to a nominal batch of 64 (``accumulate = max(round(nbs / total_batch_size), 1)``), with
hyperparameters tuned for that sum. A criterion built with ``reduction="sum"`` is the same. ACC001
asks this before it reports a missing division.

Read, never run: the loss's definitions before the backward, the call that made it, and -- for a
project's own loss function or class (``compute_loss = ComputeLoss(model)``) -- the ``return`` of
that function or of the class's ``__call__`` in the module the script imports it from.
"""

from __future__ import annotations

import libcst as cst

from memlint.lint.context import RuleContext
from memlint.python.index import ModuleIndex
from memlint.python.syntax import iter_nodes, string_value
from memlint.rules._project_code import method, project_definition

# names a loss is multiplied by when it is turned into a sum over the batch's samples
_BATCH_SIZES = frozenset({"bs", "batch_size", "batchsize", "nb", "n_samples", "num_samples"})


def sum_over_samples(ctx: RuleContext, index: ModuleIndex, loss: cst.BaseExpression, at: cst.CSTNode) -> bool:
    """Was ``loss`` (at the backward ``at``) made as a sum over the samples?"""
    if not isinstance(loss, cst.Name):
        return False
    for definition in index.reaching(loss.value, at):
        made = definition.whole_value if definition.whole_value is not None else definition.value
        if isinstance(made, cst.Call) and _summing_call(ctx, index, made, definition.position):
            return True
    return False


def _summing_call(ctx: RuleContext, index: ModuleIndex, call: cst.Call, position: int | None) -> bool:
    if _sum_reduction(call):
        return True
    if not isinstance(call.func, cst.Name):
        return False
    # ``criterion(...)``: what the name was built from in this module
    for definition in index.all_definitions(call.func.value, call):
        built = definition.value
        if isinstance(built, cst.Call):
            if _sum_reduction(built):
                return True
            body = project_definition(ctx, index, built.func)
            if isinstance(body, cst.ClassDef):
                return _returns_a_sum(method(body, "__call__") or method(body, "forward"), position)
    body = project_definition(ctx, index, call.func)
    return isinstance(body, cst.FunctionDef) and _returns_a_sum(body, position)


def _sum_reduction(call: cst.Call) -> bool:
    return any(arg.keyword is not None and arg.keyword.value == "reduction" and string_value(arg.value) == "sum"
               for arg in call.args)


def _returns_a_sum(function: cst.FunctionDef | None, position: int | None) -> bool:
    """Does every ``return`` give (at ``position`` of a tuple) a value multiplied by the batch size?"""
    if function is None:
        return False
    returns = [node for node in iter_nodes(function.body) if isinstance(node, cst.Return)]  # not nested functions
    if not returns:
        return False
    for statement in returns:
        value = statement.value
        if isinstance(value, cst.Tuple):
            index = position if position is not None else 0
            if index >= len(value.elements):
                return False
            value = value.elements[index].value
        if not _times_batch_size(value):
            return False
    return True


def _times_batch_size(value: cst.BaseExpression | None) -> bool:
    if not (isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Multiply)):
        return False
    return any(isinstance(side, cst.Name) and side.value.lower() in _BATCH_SIZES for side in (value.left, value.right))
