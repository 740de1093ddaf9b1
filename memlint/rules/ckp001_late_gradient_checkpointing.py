"""CKP001: gradient checkpointing enabled after the optimizer, the engine or PEFT already took the model."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import libcst as cst
from packaging.version import Version

from memlint.documents.kinds import DocumentKind
from memlint.facts.pinned_versions import Pin, pins
from memlint.lint.context import RuleContext
from memlint.model.diagnostics import Applicability, Edit, Fix, Position, Range, Related, Severity, split_lines
from memlint.python.index import ModuleIndex, index_for
from memlint.python.prefilter import Called
from memlint.python.syntax import (
    argument,
    dotted,
    is_false,
    iter_nodes,
    method_name,
    positional,
    receiver,
    string_value,
)
from memlint.python.loops import training_loops
from memlint.python.trained_inputs import trained_module_feeding
from memlint.python.training import (
    CALLS_A_PEFT_WRAP,
    CALLS_AN_OPTIMIZER,
    is_optimizer_object,
    is_peft_wrap,
    optimizer_creations,
    step_of,
)
from memlint.rules.base import Example, Finding, Rule

_ENABLE = ("gradient_checkpointing_enable", "activation_checkpointing_enable")

_SCRIPT = """\
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B", torch_dtype=torch.bfloat16).cuda()
{before}model = get_peft_model(model, LoraConfig(r=16, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"))
optimizer = torch.optim.AdamW(model.parameters(), lr=2e-4)
{after}
model.train()
for batch in loader:
    loss = model(**batch).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
"""


@dataclass(frozen=True)
class _Late:
    enable: cst.Call
    wrap: cst.Call  # get_peft_model(...) before it
    wrap_statement: cst.CSTNode
    base: str | None  # the name get_peft_model wrapped
    optimizer: cst.Call | None  # an optimizer created before the enable
    # the call that hands the wrapped model to the function that enables checkpointing on its
    # parameter (``GRPOTrainerOnline(model=model, ...)``), when the wrap is in the caller
    handover: cst.Call | None = None


class LateGradientCheckpointing(Rule):
    """## What it does
    Finds ``model.gradient_checkpointing_enable()`` (or ``activation_checkpointing_enable``)
    called after the model was handed over: after the optimizer was built from its parameters,
    after ``deepspeed.initialize(model=...)``, after ``accelerator.prepare(model, ...)``, or
    after PEFT wrapped it (``get_peft_model``, ``PeftModel.from_pretrained``). The order people
    are told to use is: enable checkpointing, wrap, then build the optimizer or engine.

    The severity says what is at stake:

    * **warning** — after a PEFT wrap (in the same function, or in the caller that hands the
      wrapped model to a function or class whose code enables checkpointing on it: an online
      RL trainer's ``__init__``), with reentrant checkpointing (no
      ``{"use_reentrant": False}``) and no ``enable_input_require_grads()`` anywhere (nor
      PEFT's ``prepare_model_for_gradient_checkpointing``, which calls it): the checkpointed
      layers get no gradient (below). A model class that feeds the language model
      ``inputs_embeds`` computed by a module it trains (a multimodal model's projector built
      from ``torch.nn`` or its own classes and never frozen, a learned prompt ``nn.Parameter``)
      is not reported: those inputs require grad, so the layers get their gradients (a frozen
      projector, or token embeddings alone, still are). Two calls whose guards never hold together
      (``if use_boft:`` around the wrap, ``if not (use_lora or use_boft):`` around the enable)
      are not an order, nor is a wrap undone before the enable (``model = model.merge_and_unload()``
      folds the adapter into a plain model). When the project pins transformers to
      release 5 or later (``transformers>=5.6.0`` in its requirements, pyproject or lock file)
      and the call does not ask for reentrant checkpointing, this is an **info**: transformers
      5 checkpoints non-reentrantly and makes the embedding output require grad itself;
    * **info** — after the optimizer, ``deepspeed.initialize`` or ``accelerator.prepare`` of a
      model PEFT did not wrap late: only the order differs. ``gradient_checkpointing_enable``
      sets each layer's ``gradient_checkpointing`` flag and checkpoint function and registers a
      forward hook on the input embeddings; it creates, replaces and freezes no parameter, so
      the optimizer's parameter list and the engine's wrapped module stay valid (checked against
      transformers 5.23, PEFT 0.21, and DeepSpeed's engine, which forwards attribute look-ups
      to its module).

    A ``Trainer`` is never reported: it builds its optimizer lazily in ``train()``, after
    enabling checkpointing itself. Nor is a model prepared for evaluation: ``deepspeed.initialize``
    or ``accelerator.prepare`` counts only when it is handed an optimizer (or, for DeepSpeed, the
    parameters to build one, or its returned optimizer is kept) or the module goes on to train
    (an optimizer or engine step, a loop that runs ``backward()``).

    ## Why it matters
    With LoRA the embeddings are frozen, so the hidden states entering the first checkpointed
    layer do not require grad. Reentrant checkpointing (``torch.utils.checkpoint`` with
    ``use_reentrant=True``, transformers 4.x's default) then warns "None of the inputs have
    requires_grad=True. Gradients will be None" and computes **no gradient** for the
    checkpointed layers — where every LoRA weight lives. The run goes on, the loss barely
    moves, and the GPU hours are lost.

    PEFT prevents this by making the embedding output require grad, but ``get_peft_model``
    only does it when checkpointing is already on (``if getattr(model,
    "is_gradient_checkpointing", True)``). In transformers 4.x, ``gradient_checkpointing_enable``
    adds that hook itself only for adapters loaded through transformers' own PEFT integration
    (``_hf_peft_config_loaded``), not for a ``get_peft_model`` wrapper. transformers 5 adds the
    hook for every text model and defaults to non-reentrant checkpointing, so the late call
    is harmless there — but the script then depends on that version.

    In the other orders nothing breaks today, but the script reads as if checkpointing were
    part of building the optimizer or engine, and the next change (a PEFT wrap, a framework
    that snapshots the module's configuration when it wraps it) makes it matter.

    ## Fix
    Enable checkpointing before ``get_peft_model`` (the fix, safe, moves the statement there
    when both are plain statements of the same block), or pass
    ``gradient_checkpointing_kwargs={"use_reentrant": False}``, or call
    ``model.enable_input_require_grads()``. In the other cases, move the call before the
    optimizer, ``deepspeed.initialize`` or ``accelerator.prepare``.
    """

    code = "CKP001"
    name = "late-gradient-checkpointing"
    severity = Severity.WARNING
    kinds = frozenset({DocumentKind.PYTHON})
    # ``model.gradient_checkpointing_enable()`` called after what hands the model over: a PEFT wrap
    # (``_late_enables``), an optimizer built, ``deepspeed.initialize`` or ``accelerator.prepare``
    # (``_ordering_only``)
    python_needs = (Called("checkpointing_enable"),
                    Called(rf"{CALLS_AN_OPTIMIZER.pattern}|{CALLS_A_PEFT_WRAP}|^(?:initialize|prepare)$"))
    fix_applicability = Applicability.SAFE

    VALID = (
        Example(
            _SCRIPT.format(before="model.gradient_checkpointing_enable()\n", after=""),
            title="Checkpointing enabled before get_peft_model: PEFT prepares the inputs",
        ),
        Example(
            """\
import torch
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

model = AutoModelForCausalLM.from_pretrained("gpt2")
model.gradient_checkpointing_enable()
args = TrainingArguments(output_dir="out", per_device_train_batch_size=8, bf16=True)
trainer = Trainer(model=model, args=args, train_dataset=train_dataset)
trainer.train()
""",
            title="A Trainer builds its optimizer lazily in train(): nothing is late",
        ),
        Example(
            """\
import torch
from peft import LoraConfig, PeftModel
from transformers import AutoModelForCausalLM
from trl import GRPOConfig, GRPOTrainer

base = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-1.5B-Instruct", torch_dtype=torch.bfloat16)
model = PeftModel.from_pretrained(base, "outputs/sft_adapter")
model = model.merge_and_unload()
model.gradient_checkpointing_enable()
args = GRPOConfig(output_dir="out", per_device_train_batch_size=8, bf16=True)
trainer = GRPOTrainer(model=model, args=args, reward_funcs=reward, train_dataset=prompts,
                      peft_config=LoraConfig(r=16, target_modules="all-linear"))
trainer.train()
""",
            title="The SFT adapter merged into the base model first: no PEFT wrap is left",
        ),
    )
    INVALID = (
        Example(
            _SCRIPT.format(before="", after="model.gradient_checkpointing_enable()"),
            lines=(8,),
            message="after `get_peft_model",
            fixed=_SCRIPT.format(before="model.gradient_checkpointing_enable()\n", after="").replace(
                "optimizer = torch.optim.AdamW(model.parameters(), lr=2e-4)\n\n",
                "optimizer = torch.optim.AdamW(model.parameters(), lr=2e-4)\n",
            ),
            title="Enabled after get_peft_model and the optimizer",
        ),
        Example(
            """\
import argparse

import deepspeed
from transformers import AutoModelForCausalLM

parser = argparse.ArgumentParser()
parser.add_argument("--model_name_or_path", default="facebook/opt-1.3b")
parser.add_argument("--gradient_checkpointing", action="store_true")
parser = deepspeed.add_config_arguments(parser)
args = parser.parse_args()

model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path)
model, optimizer, _, lr_scheduler = deepspeed.initialize(model=model, args=args, config=ds_config)
if args.gradient_checkpointing:
    model.gradient_checkpointing_enable()
""",
            lines=(15,),
            message="only the order differs",
            title="DeepSpeed-Chat's order: enabled after deepspeed.initialize (an info)",
        ),
        Example(
            _SCRIPT.format(
                before="",
                after='model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})',
            ),
            lines=(8,),
            message="only the order differs",
            title="After PEFT and the optimizer, but non-reentrant: no gradient is lost, only the order differs (an info)",
        ),
    )

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        index = index_for(ctx.python)
        if index is None:
            return
        reported: set[int] = set()
        if not _prepares_inputs(index):
            transformers_5 = _pins_transformers_5(ctx)
            for late in _late_enables(index, _project_packages(ctx)):
                reported.add(id(late.enable))
                if transformers_5 is not None and not _sets_reentrant(index, late.enable):
                    yield self._harmless_on_transformers_5(ctx, index, late, transformers_5)
                else:
                    yield self._finding(ctx, index, late)
        for enable, handover, what in _ordering_only(index):
            if id(enable) in reported:
                continue
            py = index.py
            yield Finding(
                range=py.range_of(enable),
                message=(
                    f"`{py.code_of(enable)}` comes after {what} (line {py.range_of(handover).start.line}); "
                    "only the order differs: enabling checkpointing creates no parameter, so the optimizer and the "
                    "engine keep the right ones. Enable it first, the order that stays safe when a PEFT wrap or "
                    "another framework joins"
                ),
                related=(Related(ctx.path, py.range_of(handover), "the model is handed over here"),),
                severity=Severity.INFO,
            )

    def _harmless_on_transformers_5(self, ctx, index: ModuleIndex, late: _Late, pin: Pin) -> Finding:
        py = index.py
        wrapper = py.code_of(late.wrap.func)
        message = (
            f"`{py.code_of(late.enable)}` comes after `{wrapper}` (line {py.range_of(late.wrap).start.line}); "
            f"your pin `transformers{pin.specifier}` ({pin.where}) runs transformers 5, which checkpoints "
            "non-reentrantly and makes the embedding output require grad itself, so no gradient is lost: only the "
            f"order differs. Enable checkpointing before `{wrapper}`, the order that also trains under transformers 4"
        )
        return Finding(range=py.range_of(late.enable), message=message, fix=_move_fix(ctx, index, late),
                       related=(Related(ctx.path, py.range_of(late.wrap), "PEFT wraps the model here"),),
                       severity=Severity.INFO)

    def _finding(self, ctx, index: ModuleIndex, late: _Late) -> Finding:
        py = index.py
        wrap_line = py.range_of(late.wrap).start.line
        related = [Related(ctx.path, py.range_of(late.wrap), "PEFT wraps the model here")]
        handed = ""
        if late.handover is not None:
            handed = f"; the wrapped model reaches it through `{py.code_of(late.handover.func)}(...)` at line " \
                     f"{py.range_of(late.handover).start.line}"
            related.append(Related(ctx.path, py.range_of(late.handover), "the wrapped model is handed over here"))
        optimizer = ""
        if late.optimizer is not None:
            optimizer = f" and after the optimizer (line {py.range_of(late.optimizer).start.line})"
            related.append(Related(ctx.path, py.range_of(late.optimizer), "the optimizer is created here"))
        wrapper = py.code_of(late.wrap.func)
        message = (
            f"`{py.code_of(late.enable)}` comes after `{wrapper}` (line {wrap_line}{handed}){optimizer}: PEFT prepared no "
            "input gradients, so with reentrant checkpointing (transformers 4.x's default) the checkpointed layers and "
            f"their LoRA weights get no gradient; enable checkpointing before `{wrapper}`"
        )
        return Finding(
            range=py.range_of(late.enable), message=message, fix=_move_fix(ctx, index, late), related=tuple(related)
        )


def _pins_transformers_5(ctx) -> Pin | None:
    """The project's transformers pin when it allows no 4.x release (``transformers>=5.6.0``):
    transformers 5 checkpoints non-reentrantly by default and makes the embedding output require
    grad itself, so a late enable loses no gradient there."""
    pin = pins(ctx.settings.root, ctx.path).get("transformers")
    if pin is None or pin.specifier.contains(_LAST_4X, prereleases=True):
        return None
    floors = [Version(spec.version) for spec in pin.specifier
              if spec.operator in (">=", ">", "==", "~=", "===") and "*" not in spec.version]
    return pin if any(floor >= Version("5") for floor in floors) else None


_LAST_4X = "4.57.6"  # the 4.x line ended with 4.57 (5.0.0 followed); any 4.x a pin allows includes its last


def _sets_reentrant(index: ModuleIndex, enable: cst.Call) -> bool:
    """``gradient_checkpointing_kwargs={"use_reentrant": True}`` written out."""
    return _written_use_reentrant(index, enable) is True


_PREPARE_INPUTS = frozenset({
    "enable_input_require_grads",
    # PeftModel.prepare_model_for_gradient_checkpointing(model) calls enable_input_require_grads
    # (or hooks the input embeddings) on a model that is not quantized: peft/peft_model.py
    "prepare_model_for_gradient_checkpointing",
})


def _prepares_inputs(index: ModuleIndex) -> bool:
    """``model.enable_input_require_grads()`` (or PEFT's
    ``prepare_model_for_gradient_checkpointing``) anywhere: the embedding output requires grad."""
    return any(method_name(n) in _PREPARE_INPUTS for n in index.calls)


def _non_reentrant(index: ModuleIndex, enable: cst.Call) -> bool:
    return _written_use_reentrant(index, enable) is False


def _written_use_reentrant(index: ModuleIndex, enable: cst.Call) -> bool | None:
    """The ``use_reentrant`` the call passes in its checkpointing kwargs (a dict display or
    ``dict(...)``, also through a variable); None when it passes none."""
    kwargs = argument(enable, 0, "gradient_checkpointing_kwargs") or argument(
        enable, None, "activation_checkpointing_kwargs"
    )
    for value in _values(index, kwargs):
        written = None
        if isinstance(value, cst.Dict):
            for element in value.elements:
                if isinstance(element, cst.DictElement) and string_value(element.key) == "use_reentrant":
                    written = element.value
        elif isinstance(value, cst.Call) and method_name(value) == "dict":
            written = argument(value, None, "use_reentrant")
        if written is not None:
            return not is_false(written)
    return None


def _values(index: ModuleIndex, expr: cst.BaseExpression | None) -> list[cst.BaseExpression]:
    if expr is None:
        return []
    text = dotted(expr)
    if text is None:
        return [expr]
    return [d.value for d in index.reaching(text, expr) if d.value is not None] or [expr]


def _project_packages(ctx) -> frozenset[str]:
    """The folders above the linted file in its project (``minigpt4``, ``models`` for
    ``minigpt4/models/mini_gpt4.py``): what the file imports from them is the project's own code."""
    try:
        relative = Path(ctx.path).resolve().relative_to(ctx.settings.root.resolve())
    except (ValueError, OSError):
        return frozenset()
    return frozenset(relative.parts[:-1])


def _late_enables(index: ModuleIndex, project_packages: frozenset[str]) -> Iterator[_Late]:
    """Enables after a PEFT wrap of the same model, with reentrant checkpointing, whose model
    is not fed ``inputs_embeds`` computed by a trained module of its own (those require grad:
    the checkpointed layers get their gradients)."""
    creations = optimizer_creations(index)
    for node in index.calls:
        if not (method_name(node) in _ENABLE and receiver(node) is not None):
            continue
        if _non_reentrant(index, node):
            continue
        model = dotted(receiver(node))
        if model is None:
            continue
        flow = index.flow_of(node)
        before = _unmerged(index, flow, node, _wraps_before(index, flow, node))
        wraps = [(wrap, statement, wrapped, base, None) for wrap, statement, wrapped, base in before
                 if model in (wrapped, base) and not index.exclusive(wrap, node)]
        if not before:
            wraps = _handed_in_wraps(index, flow, node, model)
        for wrap, statement, wrapped, base, handover in wraps:
            if trained_module_feeding(index, model, node, project_packages) is not None:
                break
            optimizer = next(
                (
                    c.call
                    for c in creations
                    if index.flow_of(c.call) is flow
                    and index.before(c.call, node)
                    and any(m.split(".")[0] in (model, wrapped) for m in c.models)
                ),
                None,
            )
            yield _Late(node, wrap, statement, base, optimizer, handover)
            break


def _handed_in_wraps(index: ModuleIndex, flow, enable: cst.Call, model: str):
    """A function (or a class's ``__init__``) that enables checkpointing on a model it is handed
    as a parameter, called with a model its caller wrapped with PEFT before the call (an online
    RL trainer class built around ``get_peft_model``'s result): ``[(wrap, its statement, the
    name it assigns, the name it wraps, the handing call)]``, the first such call's."""
    if not isinstance(flow, cst.FunctionDef) or not index.is_parameter(model, flow) \
            or index.reaching(model, enable):
        return []  # not a parameter, or one the function rebinds before the enable
    for call in _calls_running(index, flow):
        passed, _ = index.passed_at(flow, call, model)
        name = dotted(passed) if passed is not None else None
        if name is None:
            continue
        for wrap, statement, wrapped, base in _wraps_before(index, index.flow_of(call), call):
            if wrapped == name and not index.exclusive(wrap, call):
                return [(wrap, statement, wrapped, base, call)]
    return []


def _calls_running(index: ModuleIndex, function: cst.FunctionDef) -> list[cst.Call]:
    """The module's calls of ``function``; for a class's ``__init__``, the calls of the class."""
    if function.name.value != "__init__":
        return index.calls_of(function)
    owner = index.class_of(function)
    if owner is None:
        return []
    return [call for call in index.calls if type(call.func) is cst.Name and call.func.value == owner.name.value]


def _ordering_only(index: ModuleIndex) -> Iterator[tuple[cst.Call, cst.Call, str]]:
    """``(enable, the earlier call that took the model, how to name it)`` for enables after an
    optimizer built from the model's parameters, ``deepspeed.initialize`` or
    ``accelerator.prepare`` given the model, in the same function."""
    creations = optimizer_creations(index)
    for node in index.calls:
        if not (method_name(node) in _ENABLE and receiver(node) is not None):
            continue
        model = dotted(receiver(node))
        if model is None:
            continue
        flow = index.flow_of(node)
        earlier = []
        for creation in creations:
            if index.flow_of(creation.call) is flow and index.before(creation.call, node) and any(
                m == model or m.split(".")[0] == model for m in creation.models
            ):
                earlier.append((creation.call, "the optimizer"))
        for call in index.calls_of_flow(flow):
            if not index.before(call, node) or index.exclusive(call, node):
                continue
            if index.calls_named(call, "deepspeed.initialize") and _names(argument(call, None, "model"), model):
                if _engine_optimizer(index, call) or _steps(index):
                    earlier.append((call, "`deepspeed.initialize`"))
            elif method_name(call) == "prepare" and "accelerator" in (dotted(receiver(call)) or "").lower() and any(
                _names(arg.value, model) for arg in call.args
            ):
                if any(is_optimizer_object(index, arg.value) for arg in call.args) or _steps(index):
                    earlier.append((call, "`accelerator.prepare`"))
        if earlier:
            call, what = min(earlier, key=lambda e: index.start(e[0]))
            yield node, call, what


def _engine_optimizer(index: ModuleIndex, call: cst.Call) -> bool:
    """Does this ``deepspeed.initialize`` build training: an optimizer handed to it, the
    parameters it builds one for, or the optimizer it returns kept under a name?"""
    if argument(call, None, "optimizer") is not None or argument(call, None, "model_parameters") is not None:
        return True
    statement = index.parent(call)
    if type(statement) is cst.Assign and statement.value is call and len(statement.targets) == 1:
        target = statement.targets[0].target
        if isinstance(target, (cst.Tuple, cst.List)) and len(target.elements) > 1:
            second = target.elements[1].value
            return not (type(second) is cst.Name and second.value.startswith("_"))
    return False


def _steps(index: ModuleIndex) -> bool:
    """Does the module go on to train: an optimizer or engine step, or a loop that runs
    ``backward()``? A model prepared for evaluation (VILA's ``eval_vision_niah.py``:
    ``accelerator.prepare(model)``, then generation) builds no training to be late for."""
    return index.once("ckp001_steps", lambda: bool(training_loops(index)) or any(
        step_of(index, call) is not None for call in index.calls))


def _names(expr: cst.BaseExpression | None, model: str) -> bool:
    return expr is not None and dotted(expr) == model


# the calls that give back the base model with the adapter folded in (or dropped): no wrap is left
_UNWRAPS = frozenset({"merge_and_unload", "unload"})


def _unmerged(index: ModuleIndex, flow, enable: cst.Call, wraps: list) -> list:
    """The wraps not undone before ``enable``: ``model = PeftModel.from_pretrained(base, sft_dir)``
    then ``model = model.merge_and_unload()`` leaves a plain transformers model (math-sft-qwen's
    GRPO script merges its SFT adapter, then enables checkpointing and hands TRL a new LoRA)."""
    body = flow if isinstance(flow, cst.Module) else flow.body
    unwraps = [(node, dotted(node.targets[0].target)) for node in iter_nodes(body)
               if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.value, cst.Call)
               and method_name(node.value) in _UNWRAPS and index.before(node, enable)]
    return [w for w in wraps if not any(name == w[2] and index.before(w[0], node) for node, name in unwraps)]


def _wraps_before(index: ModuleIndex, flow, enable: cst.Call):
    """``(wrap call, its statement, the name it assigns, the name it wraps)``, nearest first."""
    found = []
    body = flow if isinstance(flow, cst.Module) else flow.body
    for node in iter_nodes(body):
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Call) and is_peft_wrap(index, node.value):
            if not index.before(node, enable) or len(node.targets) != 1:
                continue
            args = positional(node.value)
            first = argument(node.value, 0, "model")
            base = dotted(first) if first is not None else None
            found.append(
                (node.value, index.statement_of(node), dotted(node.targets[0].target), base if args or first else None)
            )
    return sorted(found, key=lambda f: index.start(f[0]), reverse=True)


def _move_fix(ctx, index: ModuleIndex, late: _Late) -> Fix | None:
    """Move the enable statement to just before the wrap, when both are plain statements of
    the same block and the model is a plain name."""
    py = index.py
    statement = index.statement_of(late.enable)
    model = receiver(late.enable)
    if not (
        isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(statement.body[0], cst.Expr)
        and statement.body[0].value is late.enable
        and isinstance(late.wrap_statement, cst.SimpleStatementLine)
        and index.parent(statement) is index.parent(late.wrap_statement)
        and late.base is not None
        and isinstance(model, cst.Name)
    ):
        return None
    lines = split_lines(py.text, keepends=True)
    start = py.range_of(statement).start.line
    end = py.range_of(statement).end.line
    target = py.range_of(late.wrap_statement).start
    indent = lines[target.line - 1][: target.column]
    call = py.code_of(late.enable)
    moved = late.base + call[len(py.code_of(model)) :]
    edits = (
        Edit(ctx.path, Range(Position(target.line, 0), Position(target.line, 0)), f"{indent}{moved}\n"),
        Edit(ctx.path, Range(Position(start, 0), Position(end + 1, 0)), ""),
    )
    return Fix(f"enable gradient checkpointing before {py.code_of(late.wrap.func)}", edits, Applicability.SAFE)
