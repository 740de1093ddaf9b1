"""TRN005: training steps that run with the model in eval mode."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from memlint.documents.kinds import DocumentKind
from memlint.lint.context import RuleContext
from memlint.model.diagnostics import Related, Severity
from memlint.python.index import ModuleIndex, index_for
from memlint.python.loops import Event, step_loops, training_loops, updating_backwards
from memlint.python.syntax import argument, dotted, is_false, iter_nodes, method_name, receiver, root_name
from memlint.python.training import RUNS_BACKWARD, model_holder, trained_models, untrained_by_every_optimizer
from memlint.rules._project_code import method, project_definition
from memlint.rules.base import Example, Finding, Rule

_SCRIPT = """\
import argparse

import torch
from transformers import AutoModelForSequenceClassification

parser = argparse.ArgumentParser()
parser.add_argument("--eval_steps", type=int, default=500)
args = parser.parse_args()


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    losses = [model(**batch).loss for batch in loader]
    return torch.stack(losses).mean().item()


model = AutoModelForSequenceClassification.from_pretrained("bert-base-uncased", num_labels=2).cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
for epoch in range(3):
    model.train()
    for step, batch in enumerate(train_loader):
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if step % args.eval_steps == 0:
            print(f"eval loss {{evaluate(model, eval_loader):.3f}}"){after}
"""


class TrainingInEvalMode(Rule):
    """## What it does
    Finds training steps that run with the trained model in eval mode:

    * ``model.eval()`` — directly or inside an evaluation helper — in a loop that runs
      ``backward()``, with no ``model.train()`` in that loop to switch back (a
      ``model.train()`` once per epoch does not undo an evaluation in the middle of the epoch);
    * a model from ``from_pretrained`` trained in a hand-written loop that never calls
      ``.train()``: ``from_pretrained`` returns the model in eval mode.

    A method of the module's own class that switches the model, or the part of it that trains,
    back to train mode (``discriminator.train_custom()`` calling ``self.classifier_head.train()``)
    counts as the loop's ``train()``.

    ## Why it matters
    In eval mode dropout is off (including LoRA's ``lora_dropout``) and batch norm uses its
    running statistics instead of the batch's and stops updating them. Everything after the
    first evaluation trains a different model than the one configured — without
    regularisation, with frozen normalisation statistics — and nothing reports it: the loss
    even looks better.

    ## Fix
    Call ``model.train()`` after evaluating (at the end of the evaluation helper, or right
    after the call), and once before the training loop.
    """

    code = "TRN005"
    name = "training-in-eval-mode"
    severity = Severity.WARNING
    kinds = frozenset({DocumentKind.PYTHON})
    python_needs = RUNS_BACKWARD  # its loops run backward()

    VALID = (
        Example(_SCRIPT.format(after="\n            model.train()"), title="Back to train mode right after evaluating"),
    )
    INVALID = (
        Example(
            _SCRIPT.format(after=""),
            lines=(28,),
            message="eval mode",
            title="Evaluation every 500 steps leaves the rest of the epoch in eval mode",
        ),
        Example(
            """\
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("facebook/opt-350m").cuda()
model = get_peft_model(model, LoraConfig(r=8, lora_dropout=0.1, task_type="CAUSAL_LM"))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
for batch in loader:
    loss = model(**batch).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
""",
            lines=(5,),
            message="never calls",
            title="from_pretrained returns an eval-mode model and the loop never calls model.train()",
        ),
    )

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        index = index_for(ctx.python)
        if index is None:
            return
        trained = trained_models(index)
        yield from self._evaluations_left_on(ctx, index, trained)
        yield from self._never_trained(ctx, index, trained)

    def _evaluations_left_on(self, ctx, index: ModuleIndex, trained: set[str]) -> Iterator[Finding]:
        py = index.py
        reported: set[int] = set()
        training = updating_backwards(index)
        for loop in training_loops(index):
            if not any(id(b.call) in training for _, b in loop.backwards):
                continue  # gradients computed to inspect them, not to train
            if any(_is_train_call(e.node) or _own_train_mode_method(index, e.node) for e in loop.events):
                continue
            if any(_runs_abstract_method(index, e) or _runs_inherited_step(index, e) for e in loop.events):
                continue  # a class memlint does not read here writes that step: it may switch the mode itself
            models = trained | _models_run_with_grad(index, loop)
            for event in loop.events:
                if not _is_eval_of_trained(index, event, models) or id(event.site) in reported:
                    continue
                reported.add(id(event.site))
                via = "" if event.depth == 0 else f" (through `{py.code_of(event.site)}`)"
                backward = loop.backwards[0][1].call
                yield Finding(
                    range=py.range_of(event.site),
                    message=(
                        f"`{py.code_of(event.node)}`{via} switches the model to eval mode inside the training loop and "
                        "nothing in the loop calls model.train(): later steps train with dropout off and batch norm "
                        "frozen"
                    ),
                    related=(Related(ctx.path, py.range_of(backward), "training continues here"),),
                )

    def _never_trained(self, ctx, index: ModuleIndex, trained: set[str]) -> Iterator[Finding]:
        loops = [
            loop
            for loop in step_loops(index)
            if any(b.kind in ("tensor", "scaled") or _is_accelerate(b) for _, b in loop.backwards)
        ]
        if not loops or any(_is_train_call(n) for n in index.nodes):
            return
        for node in index.calls:
            if method_name(node) != "from_pretrained":
                continue
            if any(q.startswith("peft.") for q in index.qualified(node)):
                continue
            if _own_loader_keeps_train_mode(ctx, index, node):
                continue
            holder = model_holder(index, node)
            if holder is None or (holder not in trained and holder.split(".")[0] not in trained):
                continue
            if "." not in holder and untrained_by_every_optimizer(index, holder, node):
                continue  # the same name, another object: a frozen reference model beside the trained one
            py = index.py
            yield Finding(
                range=py.range_of(node),
                message=(
                    f"`{py.code_of(node.func)}` returns the model in eval mode and this script never calls "
                    f"`{holder}.train()`: every step trains with dropout off; call it before the training loop"
                ),
                related=(Related(ctx.path, py.range_of(loops[0].backwards[0][1].call), "training happens here"),),
            )
            return


def _own_loader_keeps_train_mode(ctx, index: ModuleIndex, call: cst.Call) -> bool:
    """``Cls.from_pretrained(...)`` of a project class that defines its own ``from_pretrained``,
    which builds the model without transformers' loader and never calls ``.eval()`` (FlagScale's
    ``PI0Policy.from_pretrained`` returns ``PI0Policy(...)``): the module stays in train mode, as
    every new ``nn.Module`` does."""
    if not isinstance(call.func, cst.Attribute):
        return False
    cls = project_definition(ctx, index, call.func.value)
    if not isinstance(cls, cst.ClassDef):
        return False
    loader = method(cls, "from_pretrained")
    if loader is None:
        return False
    for node in iter_nodes(loader):
        if isinstance(node, cst.Call) and method_name(node) in ("eval", "from_pretrained"):
            return False  # it switches to eval, or hands over to the library's loader
    return True


def _models_run_with_grad(index: ModuleIndex, loop) -> set[str]:
    """Objects the loop calls outside ``no_grad`` (``model(**batch)``): the models it trains.
    A teacher called under ``torch.no_grad()`` is not among them."""
    out = set()
    for event in loop.events:
        call = event.call
        if call is not None and isinstance(call.func, (cst.Name, cst.Attribute)) and not index.under_no_grad(call):
            name = dotted(call.func)
            if name is not None:
                out.add(name)
    return out


def _is_accelerate(backward) -> bool:
    target = receiver(backward.call)
    return backward.kind == "framework" and target is not None and "accelerator" in (root_name(target) or "").lower()


def _is_train_call(node: cst.CSTNode) -> bool:
    if not (isinstance(node, cst.Call) and method_name(node) == "train" and receiver(node) is not None):
        return False
    return not is_false(argument(node, 0, "mode"))


def _own_train_mode_method(index: ModuleIndex, node: cst.CSTNode) -> bool:
    """``discriminator.train_custom()``: a method a class of this module defines that switches the
    model, or the part of it that trains, back to train mode (``self.classifier_head.train()``;
    transformers' PPLM discriminator, whose encoder stays frozen)."""
    if not isinstance(node, cst.Call) or receiver(node) is None:
        return False
    name = method_name(node)
    if not name or name == "train":
        return False
    for statement in index.py.module.body:
        body = method(statement, name) if isinstance(statement, cst.ClassDef) else None
        if body is not None and any(isinstance(n, cst.Call) and _is_train_call(n) and root_name(receiver(n)) == "self"
                                    for n in iter_nodes(body.body)):
            return True
    return False


def _is_eval_of_trained(index: ModuleIndex, event: Event, trained: set[str]) -> bool:
    call = event.call
    if call is None or method_name(call) != "eval" or call.args or receiver(call) is None:
        return False
    name = root_name(receiver(call))
    if event.depth > 0 and name is not None and _builds_its_own(index, name, call):
        return False  # the helper's own model (a checkpoint loaded to evaluate), not the trained one
    if name in trained or (name == "self" and (dotted(receiver(call)) or "") in trained):
        return True
    if event.depth > 0 and isinstance(event.site, cst.Call):  # evaluate(model, ...)
        return any(isinstance(a.value, cst.Name) and a.value.value in trained for a in event.site.args)
    return False


def _builds_its_own(index: ModuleIndex, name: str, call: cst.Call) -> bool:
    """Is ``name``, where a helper calls ``name.eval()``, a model that helper builds itself
    (``agent = Model(envs).to(device)`` and a ``load_state_dict`` of the saved checkpoint,
    ``copy.deepcopy(model)``, ``from_pretrained(path)``) rather than one its caller trains? Every
    assignment that reaches the call must build a new object."""
    helper = index.flow_of(call)
    if not isinstance(helper, cst.FunctionDef):
        return False
    parameters = {p.name.value for p in (*helper.params.posonly_params, *helper.params.params, *helper.params.kwonly_params)}
    definitions = index.reaching(name, call)
    return bool(definitions) and all(_builds_a_new_model(d.value, parameters) for d in definitions)


def _builds_a_new_model(value: cst.BaseExpression | None, parameters: set[str]) -> bool:
    """``Model(...)``, ``Model(...).to(device)``, ``AutoModel.from_pretrained(...)``,
    ``copy.deepcopy(model)``: a call whose innermost callee makes an object (a class, by the
    naming convention, or a constructor helper), under any chain of methods on the result. A
    class handed one of the helper's parameters first (``DDP(model)``) wraps that model: its
    ``eval()`` switches the wrapped one."""
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and isinstance(value.func.value, cst.Call):
        value = value.func.value  # Model(...).to(device).eval() -> Model(...)
    if not isinstance(value, cst.Call):
        return False
    callee = dotted(value.func)
    if callee is None:
        return False
    last = callee.rsplit(".", 1)[-1]
    if last in _MAKES_A_NEW_MODEL:
        return True
    first = value.args[0].value if value.args and value.args[0].keyword is None else None
    wraps_a_parameter = isinstance(first, cst.Name) and first.value in parameters
    return last[:1].isupper() and not wraps_a_parameter


# callees that return a new model rather than the one they are handed
_MAKES_A_NEW_MODEL = frozenset({"from_pretrained", "from_config", "deepcopy"})


def _runs_abstract_method(index: ModuleIndex, event: Event) -> bool:
    """``self.rollout(...)`` where this module's class declares ``rollout`` abstract
    (``@abstractmethod`` or a body that only raises ``NotImplementedError``): the step it
    stands for is written in a subclass memlint does not read here, so "nothing in the loop
    calls model.train()" cannot be said (alpaca_farm's RLTrainer: PPO's ``rollout`` calls
    ``policy.eval()`` on purpose, "give up dropout throughout")."""
    call = event.call
    if call is None:
        return False
    helper = index.helper_for(call)
    if helper is None or not isinstance(call.func, cst.Attribute):
        return False
    if any((dotted(d.decorator) or "").split(".")[-1] == "abstractmethod" for d in helper.decorators):
        return True
    statements = list(helper.body.body) if isinstance(helper.body, cst.IndentedBlock) else []
    if helper.get_docstring() is not None:
        statements = statements[1:]
    return len(statements) == 1 and _raises_not_implemented(statements[0])


def _runs_inherited_step(index: ModuleIndex, event: Event) -> bool:
    """``self.training_step(model, inputs)`` that no class of this module defines: the base class
    in another file does, and the HF Trainer's (which copies of its loop inherit) starts with
    ``model.train()``. MeZO's trainer evaluates with ``model.eval()`` between such steps."""
    call = event.call
    return call is not None and isinstance(call.func, cst.Attribute) and dotted(call.func.value) == "self" \
        and call.func.attr.value in ("training_step", "train_step") and index.helper_for(call) is None


def _raises_not_implemented(statement: cst.CSTNode) -> bool:
    if not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1):
        return False
    raised = statement.body[0]
    if not isinstance(raised, cst.Raise) or raised.exc is None:
        return False
    exc = raised.exc.func if isinstance(raised.exc, cst.Call) else raised.exc
    return dotted(exc) == "NotImplementedError"
