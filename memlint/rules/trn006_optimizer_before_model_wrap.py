"""TRN006: the optimizer is created before PEFT or FSDP replaces the parameters it holds."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from memlint.documents.kinds import DocumentKind
from memlint.lint.context import RuleContext
from memlint.model.diagnostics import Related, Severity
from memlint.python.index import ModuleIndex, index_for
from memlint.python.prefilter import Called
from memlint.python.syntax import argument, dotted, iter_nodes, root_name
from memlint.python.training import (
    CALLS_A_PEFT_WRAP,
    CALLS_AN_OPTIMIZER,
    OptimizerCreation,
    is_fsdp_wrap,
    is_peft_wrap,
    optimizer_creations,
)
from memlint.rules.base import Example, Finding, Rule

_PEFT = """\
import torch
from peft import LoraConfig, TaskType, get_peft_model
from transformers import AutoModelForCausalLM


def build(model_name: str, lr: float):
    model = AutoModelForCausalLM.from_pretrained(model_name, torch_dtype=torch.bfloat16)
{first}
    lora = LoraConfig(task_type=TaskType.CAUSAL_LM, r=16, lora_alpha=32, lora_dropout=0.05)
    model = get_peft_model(model, lora)
{second}
    return model, optimizer
"""

_OPTIMIZER = "    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)"
_FSDP_OPTIMIZER = "optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)\n"
_FSDP_WRAP = "model = FSDP(model, use_orig_params=True)\n"

_FSDP = """\
import torch
import torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

dist.init_process_group("nccl")
model = Transformer(args).to(torch.cuda.current_device())
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
model = FSDP(model, use_orig_params=True)
for batch in loader:
    loss = model(batch).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
"""


class OptimizerBeforeModelWrap(Rule):
    """## What it does
    Finds an optimizer created from ``model.parameters()`` before the same function wraps
    the model in a way that replaces its parameters — ``get_peft_model(model, ...)`` /
    ``PeftModel.from_pretrained(model, ...)``, ``FullyShardedDataParallel(model)``,
    ``fully_shard(model)`` — with no optimizer created again afterwards. Wrappers that keep
    the parameters (``DistributedDataParallel``, ``torch.compile``, ``.to(device)``) are fine,
    and so is a wrap of another model bound to the same name after the optimizer was built
    (``model = AutoModelForSequenceClassification.from_pretrained(...)`` then
    ``get_peft_model(model, ...)``).

    ## Why it matters
    The optimizer holds the parameter objects it was given. ``get_peft_model`` freezes them
    (``requires_grad=False``) and adds new LoRA weights the optimizer never sees: every step
    updates nothing and the adapters stay at their initialisation. FSDP flattens and shards
    the parameters into new ones (``fully_shard`` swaps each for a sharded DTensor); the
    optimizer keeps updating the originals, which the model no longer uses — while their
    full-size copies and optimizer states occupy memory. PyTorch's FSDP documentation says
    to initialise the optimizer after wrapping for this reason.

    ## Fix
    Create the optimizer after the wrap, from the wrapped model's parameters.
    """

    code = "TRN006"
    name = "optimizer-before-model-wrap"
    severity = Severity.ERROR
    kinds = frozenset({DocumentKind.PYTHON})
    # an optimizer is called (``is_optimizer_constructor``), and a PEFT or FSDP wrap that comes
    # from an import: ``is_peft_wrap`` and ``is_fsdp_wrap`` know them by these names, which the
    # call or the import that binds it writes (``peft.*``, ``get_peft_model``,
    # ``FullyShardedDataParallel``, ``fully_shard``)
    python_needs = (Called(rf"{CALLS_A_PEFT_WRAP}|^(?:FullyShardedDataParallel|fully_shard)$"), CALLS_AN_OPTIMIZER)

    VALID = (
        Example(_PEFT.format(first="", second=_OPTIMIZER), title="The optimizer holds the LoRA weights"),
        Example(
            _FSDP.replace(_FSDP_OPTIMIZER + _FSDP_WRAP, _FSDP_WRAP + _FSDP_OPTIMIZER),
            title="Wrap with FSDP first, then create the optimizer",
        ),
    )
    INVALID = (
        Example(
            _PEFT.format(first=_OPTIMIZER, second=""),
            lines=(8,),
            message="get_peft_model",
            title="The optimizer is built before get_peft_model: it holds only frozen weights",
        ),
        Example(_FSDP, lines=(7,), message="FSDP", title="The optimizer is built before FSDP replaces the parameters"),
    )

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        index = index_for(ctx.python)
        if index is None:
            return
        py = index.py
        creations = optimizer_creations(index)
        for creation in creations:
            wrap = _later_wrap(index, creation)
            if wrap is None or _recreated_after(index, creation, wrap, creations):
                continue
            if index.exclusive(creation.call, wrap) or not _used_after(index, creation, wrap):
                continue
            kind = "get_peft_model" if is_peft_wrap(index, wrap) else "FSDP"
            consequence = (
                "it freezes these parameters and adds LoRA weights this optimizer does not hold, so nothing trains"
                if kind == "get_peft_model"
                else "FSDP replaces the parameters with sharded ones, so this optimizer updates copies the model "
                "no longer uses"
            )
            yield Finding(
                range=py.range_of(creation.call),
                message=(
                    f"the optimizer is created before `{py.code_of(wrap.func)}(...)` (line "
                    f"{py.range_of(wrap).start.line}): {consequence}; create it after the wrap"
                ),
                related=(Related(ctx.path, py.range_of(wrap), "the model is wrapped here"),),
            )


def _later_wrap(index: ModuleIndex, creation: OptimizerCreation) -> cst.Call | None:
    models = {m.split(".")[0] for m in creation.models if not m.startswith("self.")} | {
        m for m in creation.models if m.startswith("self.")
    }
    if not models:
        return None
    flow = index.flow_of(creation.call)
    body = flow if isinstance(flow, cst.Module) else flow.body
    for node in iter_nodes(body):
        if (
            isinstance(node, cst.Call)
            and index.before(creation.call, node)
            and (is_peft_wrap(index, node) or is_fsdp_wrap(index, node))
        ):
            model = argument(node, 0, "model") or argument(node, 0, "module")
            if model is not None and ((dotted(model) or "") in models or root_name(model) in models) \
                    and not _rebound_between(index, model, creation.call, node):
                return node
    return None


def _rebound_between(index: ModuleIndex, model: cst.BaseExpression, created: cst.Call, wrap: cst.Call) -> bool:
    """Is the name the wrap gets bound again to a model built anew, after the optimizer and on the
    way to the wrap (``model = AutoModelForSequenceClassification.from_pretrained(...)`` then
    ``get_peft_model(model, ...)``: another model than the one whose parameters it holds)?"""
    name = dotted(model)
    if name is None:
        return False
    around = {id(a) for a in index.ancestors(wrap)}  # ``model = get_peft_model(model, ...)`` binds after it
    reaching = [d for d in index.reaching(name, wrap) if id(d.statement) not in around]
    if not reaching:
        return False
    nearest = reaching[-1]
    if not isinstance(nearest.value, cst.Call):
        return False  # ``args, model, ... = fixture``: the same object may come back
    block = next((a for a in index.ancestors(nearest.statement) if isinstance(a, (cst.IndentedBlock, cst.Module))),
                 None)
    return index.before(created, nearest.statement) and id(block) in around


def _recreated_after(index: ModuleIndex, creation: OptimizerCreation, wrap: cst.Call, creations) -> bool:
    return any(
        other is not creation
        and index.flow_of(other.call) is index.flow_of(creation.call)
        and index.before(wrap, other.call)
        for other in creations
    )


def _used_after(index: ModuleIndex, creation: OptimizerCreation, wrap: cst.Call) -> bool:
    """Is the optimizer still used after the wrap (stepped, returned, handed to a trainer)?"""
    if creation.target is None:
        return False
    flow = index.flow_of(creation.call)
    body = flow if isinstance(flow, cst.Module) else flow.body
    for node in iter_nodes(body):
        if (
            isinstance(node, (cst.Name, cst.Attribute))
            and dotted(node) == creation.target
            and index.before(wrap, node)
            and not isinstance(index.parent(node), cst.AssignTarget)
        ):
            return True
    return False
