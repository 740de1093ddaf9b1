"""ACC001: gradient accumulation whose ``backward()`` gets the undivided loss."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from memlint.documents.kinds import DocumentKind
from memlint.lint.context import RuleContext
from memlint.model.diagnostics import Applicability, Edit, Fix, Related, Severity
from memlint.python.dataflow import loss_is_divided, normalised_over_group
from memlint.python.index import index_for
from memlint.python.loops import Accumulation, accumulation_of, step_loops, zeroed_every_micro_step
from memlint.python.syntax import argument, as_operand, dotted, iter_nodes, method_name, receiver
from memlint.python.training import RUNS_BACKWARD, Backward
from memlint.rules._summed_losses import sum_over_samples
from memlint.rules.base import Example, Finding, Rule

_LOOP = """\
import argparse

import torch
from torch.utils.data import DataLoader
from tqdm import tqdm
from transformers import AutoModelForCausalLM

parser = argparse.ArgumentParser()
parser.add_argument("--gradient_accumulation_steps", type=int, default=8)
parser.add_argument("--lr", type=float, default=2e-5)
args = parser.parse_args()

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B").cuda()
model.train()
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
loader = DataLoader(dataset, batch_size=4, shuffle=True)

for step, batch in enumerate(tqdm(loader)):
    batch = {{k: v.cuda() for k, v in batch.items()}}
    loss = model(**batch).loss
{backward}
    if (step + 1) % args.gradient_accumulation_steps == 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
"""

_NANOGPT = """\
from dataclasses import dataclass

import torch


@dataclass
class TrainConfig:
    gradient_accumulation_steps: int = 40
    max_iters: int = 600000


def train(model, optimizer, get_batch, config: TrainConfig):
    scaler = torch.amp.GradScaler("cuda")
    for iter_num in range(config.max_iters):
        for micro_step in range(config.gradient_accumulation_steps):
            X, Y = get_batch("train")
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits, loss = model(X, Y)
{scaled}
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
"""


_FABRIC = """\
import lightning as L
import torch
from transformers import AutoModelForCausalLM


class Trainer:
    def __init__(self, config):
        self.fabric = L.Fabric(accelerator="cuda", devices=config.num_gpus, precision="bf16-mixed")
        self.fabric.launch()
        model = AutoModelForCausalLM.from_pretrained(config.model_name)
        optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr)
        self.model, self.opt = self.fabric.setup(model, optimizer)
        self.dataloader = self.fabric.setup_dataloaders(config.dataloader)
        self.grad_accum = config.grad_accum

    def train(self):
        for i, batch in enumerate(self.dataloader):
            is_accumulating = (i + 1) % self.grad_accum != 0
            with self.fabric.no_backward_sync(self.model, enabled=is_accumulating):
                loss = self.model(batch["input_ids"], labels=batch["input_ids"]).loss
{backward}
            if not is_accumulating:
                self.opt.step()
                self.opt.zero_grad()
"""


_ACCELERATE = """\
import torch
from accelerate import Accelerator

MAX_GPU_BATCH_SIZE = 16


def training_function(config, args):
    accelerator = Accelerator(cpu=args.cpu, mixed_precision=args.mixed_precision)
    batch_size = int(config["batch_size"])
    gradient_accumulation_steps = 1
    if batch_size > MAX_GPU_BATCH_SIZE:
        gradient_accumulation_steps = batch_size // MAX_GPU_BATCH_SIZE
        batch_size = MAX_GPU_BATCH_SIZE
    model, optimizer, train_dataloader, lr_scheduler = accelerator.prepare(
        model, optimizer, train_dataloader, lr_scheduler
    )
    for epoch in range(int(config["num_epochs"])):
        model.train()
        for step, batch in enumerate(train_dataloader):
            loss = model(**batch).loss
            accelerator.backward(loss)
            if step % gradient_accumulation_steps == 0:
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()
"""


_BOOSTER = """\
import argparse

import torch
from colossalai.booster import Booster
from colossalai.booster.plugin import LowLevelZeroPlugin

from mydiffusion.data import build_dataloader
from mydiffusion.models import build_unet


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--accumulation-steps", type=int, default=4)
    args = parser.parse_args()
    accumulation_steps = args.accumulation_steps
    booster = Booster(plugin=LowLevelZeroPlugin(stage=2, precision="bf16"))
    model = build_unet()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    model, optimizer, _, dataloader, _ = booster.boost(model, optimizer, dataloader=build_dataloader())
    for step, batch in enumerate(dataloader):
        loss = model(batch["latents"], batch["timesteps"]).mean()
{backward}
        if (step + 1) % accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()


if __name__ == "__main__":
    main()
"""


class AccumulationWithoutLossDivision(Rule):
    """## What it does
    Finds gradient accumulation — an optimizer step that runs only every *k*-th pass of the
    training loop (``if (step + 1) % accum == 0: optimizer.step()``, the
    ``if step % accum != 0: continue`` shape, or an inner ``for micro_step in range(accum)``)
    — where ``backward()`` receives the loss as the model returned it, not divided by *k*.

    Division only counts on the way to ``backward()``: ``loss = loss / accum`` before it,
    ``(loss / accum).backward()``, ``scaler.scale(loss / accum).backward()``, a helper that
    returns the divided loss. Dividing a copy for logging does not. Gradients rescaled before
    the step count too: torchtune's recipes multiply each loss by its token count and call
    ``scale_grads_(model.parameters(), 1 / num_tokens)`` before ``optimizer.step()``, which
    makes the accumulated gradient a per-token mean (so do ``p.grad.div_(k)`` /
    ``p.grad.mul_(...)`` loops). DeepSpeed's engine, Lightning and the Hugging Face Trainer
    divide the loss themselves and are not reported (an engine kept under the model's own name
    counts: ``model.backward(loss)`` on the object the loop calls, as no torch module has a
    ``backward`` method); so does ``accelerator.backward`` when the
    ``Accelerator`` knows the accumulation (``Accelerator(gradient_accumulation_steps=k)`` or
    ``with accelerator.accumulate(model):``). An ``Accelerator`` built without it divides by 1:
    a loop that steps every *k* passes on its own (Accelerate's
    ``by_feature/fsdp_with_peak_mem_tracking.py``, where *k* grows with ``--batch_size``) is
    reported. A loss made by a helper of another module that is handed the accumulation group,
    or a value worked out from it (open-instruct's OLMo-core train module:
    ``masked_mean(loss, mask, None, token_counts[(i // accumulation_steps) * accumulation_steps])``,
    a token sum divided by the token count of the whole group), is taken as normalised over the
    group: the helper's body is out of sight, and it was given what it needs to divide. So is a
    loss from a loss function built by a call handed the count (torchtitan's ``loss_fn =
    rescale_accumulated_loss(cross_entropy, accumulation_steps)``, read by a nested
    ``training_step`` from the function around it). ``torch.autograd.backward([loss])`` is the
    backward of that one loss.
    Nor is a gradient cache (open_clip, GradCache): ``for j in range(k)`` recomputes micro-batch
    ``j`` and joins it with the others' cached outputs (``torch.cat(cached[:j] + [out] +
    cached[j + 1:])``) into one loss over the group, whose backward passes add up to the
    group's gradient. A loop that steps an optimizer on every pass is not reported even when another steps
    only every *k*-th (a step under ``if step % k == 0:`` and another under its ``else:``, as
    in modded-nanogpt's alternating Adam/Muon schedule): dividing the one loss by *k* would
    shrink the gradients of the optimizer that steps every pass.

    The loss may also be handed to an object that runs its backward (ColossalAI's
    ``booster.backward(loss=loss / k, optimizer=optimizer)``): the argument named ``loss``, or
    the first one when an optimizer comes with it, is the loss judged.

    A loop that zeroes the gradients on every pass accumulates nothing (TRN002 reports it), so
    no division is asked of it.

    A loss that is a sum on purpose is not reported either: one scaled by the batch size
    (YOLO's ``loss * bs``) or built with ``reduction="sum"``, one the project's own model returns
    summed over its tokens (VoiceCraft's ``forward``: per-codebook means times their token counts,
    read through ``out["loss"]``), and one the project's own ``compute_loss`` weights by weights
    the caller hands in (``torch.sum(gamma * losses)``, the weights normalised over the whole
    accumulation). Every method of that name in the script's folder and the project modules it
    imports must agree.

    ## Why it matters
    ``backward()`` adds to ``.grad``. Over *k* micro-batches the gradient that reaches
    ``optimizer.step()`` is the **sum** of *k* mean-reduced micro-batch gradients, *k* times
    the gradient of the large batch the accumulation stands for. With SGD that multiplies the
    learning rate by *k*. Adam's update is nearly invariant to the gradient's scale, but
    ``clip_grad_norm_(..., max_norm)`` now clips a norm *k* times larger (so nearly every
    step is clipped), weight decay's weight against the gradient changes, and in fp16 the
    *k*-times larger gradients overflow sooner. Results then change whenever the number of
    accumulation steps changes, which defeats the point of accumulating.

    ## Fix
    Divide the loss by the accumulation steps before ``backward()``. The automatic fix
    (safe) rewrites the ``backward()`` call to ``(loss / ACCUM).backward()`` with the same
    expression the step's condition divides by.
    """

    code = "ACC001"
    name = "accumulation-without-loss-division"
    severity = Severity.WARNING
    kinds = frozenset({DocumentKind.PYTHON})
    python_needs = RUNS_BACKWARD  # its loops run backward()
    fix_applicability = Applicability.SAFE

    VALID = (
        Example(
            _LOOP.format(backward="    (loss / args.gradient_accumulation_steps).backward()"),
            title="The loss is divided by the accumulation steps in the backward call",
        ),
        Example(
            _NANOGPT.format(
                scaled="            loss = loss / config.gradient_accumulation_steps\n"
                "            scaler.scale(loss).backward()"
            ),
            path="train_gpt.py",
            title="nanoGPT-style micro-step loop that divides before scaling",
        ),
        Example(
            """\
from accelerate import Accelerator

accelerator = Accelerator(gradient_accumulation_steps=4)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
for batch in loader:
    with accelerator.accumulate(model):
        loss = model(**batch).loss
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
""",
            title="Accelerate divides the loss in accelerator.backward()",
        ),
        Example(
            """\
import torch
from torchtune import training


class FullFinetuneRecipe:
    def train(self):
        num_tokens = 0
        running_loss = 0
        for idx, batch in enumerate(self._dataloader):
            current_num_tokens = (batch["labels"] != self._loss_fn.ignore_index).sum()
            num_tokens += current_num_tokens
            current_loss = self._loss_step(batch) * current_num_tokens
            running_loss += current_loss.detach()
            current_loss.backward()
            if (idx + 1) % self._gradient_accumulation_steps == 0:
                training.scale_grads_(self._model.parameters(), 1.0 / num_tokens)
                torch.nn.utils.clip_grad_norm_(self._model.parameters(), 1.0)
                self._optimizer.step()
                self._optimizer.zero_grad(set_to_none=True)
                num_tokens = 0
                running_loss = 0
""",
            path="recipes/full_finetune_single_device.py",
            title="torchtune: losses weighted by token count, gradients scaled by 1/num_tokens before the step",
        ),
        Example(
            """\
from open_instruct.model_utils import masked_mean


class GRPOTrainModule:
    def train_batch(self, batches, accumulation_steps, accumulation_token_counts):
        local_step = 0
        for sample_idx, batch in enumerate(batches):
            logprobs = self.forward(batch)
            pg_loss = -batch["advantages"] * logprobs
            batch_start = (sample_idx // accumulation_steps) * accumulation_steps
            loss_denominator = accumulation_token_counts[batch_start]
            loss = masked_mean(pg_loss, batch["response_mask"], None, loss_denominator)
            loss.backward()
            local_step += 1
            if local_step % accumulation_steps == 0:
                self.optim.step()
                self.optim.zero_grad(set_to_none=True)
""",
            path="open_instruct/olmo_core_train_modules.py",
            title="open-instruct: a token sum divided by the token count of the whole accumulation group",
        ),
        Example(
            """\
import torch
from torch import nn

from muon import Muon


def build_optimizers(model: nn.Module):
    hidden = [p for n, p in model.named_parameters() if p.ndim >= 2 and "embed" not in n]
    other = [p for n, p in model.named_parameters() if p.ndim < 2 or "embed" in n]
    adam = torch.optim.Adam(other, lr=0.008, betas=(0.8, 0.95), fused=True)
    muon = Muon(hidden, lr=0.05, momentum=0.95)
    return [muon, adam]


def train(model, loader, num_steps: int):
    optimizers = build_optimizers(model)
    model.train()
    for step in range(num_steps):
        inputs, targets = next(loader)
        model(inputs, targets).backward()
        if step % 2 == 0:
            optimizers[1].step()
            optimizers[1].zero_grad(set_to_none=True)
        else:
            for opt in optimizers:
                opt.step()
            model.zero_grad(set_to_none=True)
""",
            path="train_gpt.py",
            title="modded-nanogpt: Adam steps on every pass, Muon on every other (a schedule, not accumulation "
            "of the whole loss: dividing it would halve Adam's gradients)",
        ),
        Example(
            """\
import torch


def train_one_epoch(model, data, loss, optimizer, scaler, args):
    if args.accum_freq > 1:
        accum_images, accum_texts, accum_features = [], [], {}
    for i, (images, texts) in enumerate(data):
        optimizer.zero_grad()
        if args.accum_freq == 1:
            total_loss = loss(**model(images, texts))
            scaler.scale(total_loss).backward()
        else:
            with torch.no_grad():
                model_out = model(images, texts)
                for key, val in model_out.items():
                    accum_features.setdefault(key, []).append(val)
                accum_images.append(images)
                accum_texts.append(texts)
            if ((i + 1) % args.accum_freq) > 0:
                continue
            optimizer.zero_grad()
            for j in range(args.accum_freq):
                model_out = model(accum_images[j], accum_texts[j])
                inputs = {}
                for key, accumulated in accum_features.items():
                    inputs[key] = torch.cat(accumulated[:j] + [model_out[key]] + accumulated[j + 1:])
                total_loss = loss(**inputs)
                scaler.scale(total_loss).backward()
        scaler.step(optimizer)
        scaler.update()
        if args.accum_freq > 1:
            accum_images, accum_texts, accum_features = [], [], {}
""",
            path="src/open_clip_train/train.py",
            title="open_clip: one contrastive loss over the whole group, recomputed per micro-batch from cached "
            "features (a gradient cache: the backward passes add up to the group's gradient)",
        ),
        Example(
            _BOOSTER.format(backward="        booster.backward(loss=loss / accumulation_steps, optimizer=optimizer)"),
            path="scripts/train_diffusion.py",
            title="ColossalAI: the divided loss handed to the booster by keyword",
        ),
        Example(
            _FABRIC.format(backward="                self.fabric.backward(loss / self.grad_accum)"),
            path="src/pretrain/lightning/trainer.py",
            title="Lightning Fabric: the loss divided by the accumulation count before `fabric.backward`",
        ),
    )
    INVALID = (
        Example(
            _LOOP.format(backward="    loss.backward()"),
            lines=(21,),
            message="undivided loss",
            fixed=_LOOP.format(backward="    (loss / args.gradient_accumulation_steps).backward()"),
            title="The step runs every 8 micro-batches but each backward() gets the full loss",
        ),
        Example(
            _NANOGPT.format(scaled="            scaler.scale(loss).backward()"),
            path="train_gpt.py",
            lines=(19,),
            message="undivided loss",
            fixed=_NANOGPT.format(
                scaled="            scaler.scale(loss / config.gradient_accumulation_steps).backward()"
            ),
            title="A micro-step loop that scales the loss but never divides it",
        ),
        Example(
            _ACCELERATE,
            path="examples/by_feature/fsdp_with_peak_mem_tracking.py",
            lines=(21,),
            message="divides by 1",
            fixed=_ACCELERATE.replace("accelerator.backward(loss)", "accelerator.backward(loss / gradient_accumulation_steps)"),
            title="Accelerate's fsdp_with_peak_mem_tracking.py: accumulation grows with --batch_size, the Accelerator "
            "never hears of it",
        ),
        Example(
            _BOOSTER.format(backward="        booster.backward(loss=loss, optimizer=optimizer)"),
            path="scripts/train_diffusion.py",
            lines=(22,),
            message="undivided loss",
            fixed=_BOOSTER.format(
                backward="        booster.backward(loss=loss / accumulation_steps, optimizer=optimizer)"
            ),
            title="ColossalAI: the booster is handed the undivided loss",
        ),
        Example(
            _FABRIC.format(backward="                self.fabric.backward(loss)"),
            path="src/pretrain/lightning/trainer.py",
            lines=(21,),
            message="divides by nothing",
            fixed=_FABRIC.format(backward="                self.fabric.backward(loss / self.grad_accum)"),
            title="Lightning Fabric: `fabric.backward` scales for mixed precision but divides by nothing",
        ),
    )

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        index = index_for(ctx.python)
        if index is None:
            return
        for loop in step_loops(index):
            accumulation = accumulation_of(index, loop)
            if accumulation is None or _framework_accumulates(loop) or _gradients_rescaled(index, loop):
                continue
            if _loss_of_the_whole_group(index, accumulation) or zeroed_every_micro_step(index, accumulation):
                continue  # (gradients zeroed on every pass sum nothing: TRN002 says so)
            for event, backward in loop.backwards:
                if not accumulation.outside_step_guard(event):
                    continue
                if backward.kind == "framework" and not (
                        _accelerator_without_accumulation(index, backward) or _fabric(index, backward)):
                    continue
                if backward.loss is None or loss_is_divided(index, backward.loss, backward.call, chain=event.chain):
                    continue
                if normalised_over_group(index, backward.loss, backward.call, accumulation.divisor):
                    continue
                if _handed_the_divisor(index, backward.call, accumulation.divisor):
                    continue
                if sum_over_samples(ctx, index, backward.loss, backward.call):
                    continue  # a sum over the samples (YOLO's `loss * bs`): accumulating it is the design
                yield self._finding(ctx, index, accumulation, event, backward)

    def _finding(self, ctx, index, accumulation: Accumulation, event, backward: Backward) -> Finding:
        py = index.py
        divisor = py.code_of(accumulation.divisor)
        step_call = accumulation.step.site
        step_line = py.range_of(step_call).start.line
        message = (
            f"`{py.code_of(backward.call)}` gets the undivided loss, but the optimizer steps only every "
            f"`{divisor}` micro-batches (line {step_line}): the accumulated gradient is the sum of the "
            f"micro-batch gradients, not their mean; divide the loss by `{divisor}`"
        )
        if backward.kind == "framework" and _fabric(index, backward):
            message += (
                " (Lightning Fabric's `backward` divides by nothing: accumulation works with Fabric as in "
                "plain PyTorch)"
            )
        elif backward.kind == "framework":
            message += (
                " (the Accelerator is built without `gradient_accumulation_steps`, so `accelerator.backward` "
                f"divides by 1; or pass `gradient_accumulation_steps={divisor}` to it)"
            )
        fix = None
        if event.depth == 0 and accumulation.step.depth == 0 and backward.loss is not None:
            loss_text = as_operand(py.code_of(backward.loss), backward.loss)
            divided = f"{loss_text} / {as_operand(divisor, accumulation.divisor)}"
            new_text = divided if backward.kind in ("scaled", "framework", "delegated") else f"({divided})"
            fix = Fix(
                f"divide the loss by `{divisor}` before backward()",
                (Edit(ctx.path, py.range_of(backward.loss), new_text),),
                Applicability.SAFE,
            )
        return Finding(
            range=py.range_of(backward.call),
            message=message,
            fix=fix,
            related=(Related(ctx.path, py.range_of(step_call), "the optimizer steps here"),),
        )


_GRAD_SCALERS = {"scale_grads_", "scale_grads"}


def _loss_of_the_whole_group(index, accumulation: Accumulation) -> bool:
    """A gradient cache (open_clip's ``train_one_epoch``, GradCache): the micro-batches' outputs
    are cached without gradients, then ``for j in range(accum):`` recomputes micro-batch ``j``
    and joins it with the others' cached outputs (``torch.cat(cached[:j] + [out] + cached[j +
    1:])``) into one loss over the whole group. Each ``backward()`` then adds the part of that
    one loss's gradient that flows through micro-batch ``j``: their sum is the group's gradient,
    and dividing would shrink it."""
    inner = accumulation.inner
    if inner is None or not isinstance(inner.target, cst.Name):
        return False
    counter = inner.target.value
    before: set[str] = set()
    after: set[str] = set()
    for node in iter_nodes(inner.body):
        if not isinstance(node, cst.Subscript) or len(node.slice) != 1:
            continue
        part = node.slice[0].slice
        if not isinstance(part, cst.Slice):
            continue
        held = index.py.code_of(node.value)
        if part.lower is None and isinstance(part.upper, cst.Name) and part.upper.value == counter:
            before.add(held)  # cached[:j]
        elif part.upper is None and _counter_plus_one(part.lower, counter):
            after.add(held)  # cached[j + 1:]
    return bool(before & after)


def _handed_the_divisor(index, call: cst.Call, divisor: cst.BaseExpression) -> bool:
    """A backward the project writes itself that is handed the accumulation count with the loss
    (FastVideo's ``self.student.backward(loss, ctx, grad_accum_rounds=effective_grad_accum)``,
    whose model plugins run ``(loss / grad_accum_rounds).backward()``): the division is the
    callee's, in another module. ``loss.backward()`` takes no such argument."""
    if not isinstance(call.func, cst.Attribute) or len(call.args) < 2:
        return False
    wanted = index.py.code_of(divisor)
    return any(index.py.code_of(arg.value) == wanted for arg in call.args[1:])


def _counter_plus_one(expr, counter: str) -> bool:
    return (isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Add)
            and isinstance(expr.left, cst.Name) and expr.left.value == counter
            and isinstance(expr.right, cst.Integer) and expr.right.value == "1")


def _gradients_rescaled(index, loop) -> bool:
    """Gradients rescaled in the loop before the step (torchtune's ``scale_grads_(params,
    1 / num_tokens)``, ``p.grad.div_(k)``): the sum becomes a mean there."""
    for event in loop.events:
        call = event.call
        if call is None:
            continue
        name = method_name(call)
        if name in _GRAD_SCALERS:
            return True
        if name in ("div_", "mul_") and _mentions_grad(receiver(call)):
            return True
    return False


def _mentions_grad(expr) -> bool:
    return expr is not None and "grad" in (dotted(expr) or "")


def _accelerator_without_accumulation(index, backward: Backward) -> bool:
    """``accelerator.backward(loss)`` where every ``Accelerator(...)`` of the module is built
    without ``gradient_accumulation_steps`` (or a ``gradient_accumulation_plugin``): it divides
    the loss by 1."""
    target = receiver(backward.call)
    if target is None or "accelerator" not in (dotted(target) or "").lower() or backward.loss is None:
        return False
    built = [c for c in index.calls if any(q.endswith(".Accelerator") and q.startswith("accelerate")
                                             for q in index.qualified(c))]
    return bool(built) and not any(
        argument(c, None, "gradient_accumulation_steps") is not None
        or argument(c, None, "gradient_accumulation_plugin") is not None
        or any(a.star == "**" for a in c.args)
        for c in built
    )


_FABRIC_CLASSES = ("lightning.Fabric", "lightning.fabric.Fabric", "lightning.fabric.fabric.Fabric",
                   "lightning_fabric.Fabric", "lightning_fabric.fabric.Fabric")


def _fabric(index, backward: Backward) -> bool:
    """``fabric.backward(loss)`` on a Lightning Fabric: it runs the precision plugin's scaling
    and the strategy's backward, and leaves the division to the loop, as its own gradient
    accumulation guide writes it ("works the same way with Fabric as in PyTorch"). The object
    is known by its name (``self.fabric``) or by the ``Fabric(...)`` it was built from."""
    target = receiver(backward.call)
    if target is None or backward.loss is None:
        return False
    text = dotted(target)
    if text is None:
        return False
    if "fabric" in text.rsplit(".", 1)[-1].lower():
        return True
    return any(
        isinstance(d.whole_value, cst.Call) and index.qualified(d.whole_value) & set(_FABRIC_CLASSES)
        for d in index.all_definitions(text, target)
    )


def _framework_accumulates(loop) -> bool:
    """``with accelerator.accumulate(model):`` in the loop: Accelerate divides and syncs."""
    return any(event.call is not None and method_name(event.call) == "accumulate" for event in loop.events)
