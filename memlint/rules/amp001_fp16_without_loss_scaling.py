"""AMP001: float16 training whose backward() runs without a GradScaler."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import libcst as cst

from memlint.catalog.gpus import UnknownGpu, lookup_gpu
from memlint.documents.kinds import DocumentKind
from memlint.lint.context import RuleContext
from memlint.model.diagnostics import Related, Severity
from memlint.python.call_chains import HelperBranches
from memlint.python.index import ModuleIndex, index_for
from memlint.python.loops import TrainingLoop, step_loops, training_loops, updating_backwards
from memlint.python.syntax import dotted
from memlint.python.training import (
    RUNS_BACKWARD,
    Backward,
    autocast_regions,
    backwards,
    bf16_support_choice,
    dtype_choices,
    is_peft_wrap,
    is_scaler_constructor,
    scaler_disabled,
    trained_models,
)
from memlint.rules.base import Example, Finding, Rule

_AUTOCAST_LOOP = """\
import argparse

import torch
from torch.cuda.amp import autocast as ac{extra_import}
from tqdm import tqdm

from mymodels import build_model, build_loader

parser = argparse.ArgumentParser()
parser.add_argument("--lr", type=float, default=3e-4)
args = parser.parse_args()

model = build_model().cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
loader = build_loader(batch_size=32){scaler}

for epoch in range(10):
    for images, labels in tqdm(loader):
        images, labels = images.cuda(), labels.cuda()
        optimizer.zero_grad(set_to_none=True)
        with ac():
            loss = torch.nn.functional.cross_entropy(model(images), labels)
{update}
"""

# nanoGPT's bench.py, trimmed: float16 only where the GPU reports no bfloat16
_BF16_FALLBACK = """\
from contextlib import nullcontext

import torch

from model import GPT, GPTConfig

device = "cuda"
dtype = "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"
device_type = "cuda" if "cuda" in device else "cpu"
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
ctx = nullcontext() if device_type == "cpu" else torch.amp.autocast(device_type=device_type, dtype=ptdtype)

model = GPT(GPTConfig(block_size=1024, n_layer=12, n_head=12, n_embd=768)).to(device)
optimizer = model.configure_optimizers(weight_decay=1e-2, learning_rate=1e-4, betas=(0.9, 0.95), device_type=device_type)
X, Y = get_batch("train")
for k in range(20):
    with ctx:
        logits, loss = model(X, Y)
    X, Y = get_batch("train")
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
"""

# nanoVLM's train.py, trimmed: the autocast dtype decided by the device's type
_DEVICE_CHOICE = """\
from dataclasses import dataclass

import torch
from torch.optim import AdamW as Optimizer


@dataclass
class TrainConfig:
    lr: float = 1e-4
    gradient_accumulation_steps: int = 4


def get_device():
    if torch.cuda.is_available():
        return torch.device("cuda")
    return torch.device("mps") if torch.backends.mps.is_available() else torch.device("cpu")


def train(cfg: TrainConfig, model, loader):
    device = get_device()
    model.to(device)
    optimizer = Optimizer(model.parameters(), lr=cfg.lr)
    for step, (input_ids, labels) in enumerate(loader):
        input_ids, labels = input_ids.to(device), labels.to(device)
        autocast_context = torch.autocast(
            device_type=device.type,
            dtype={choice},
        )
        with autocast_context:
            _, loss = model(input_ids, targets=labels)
        loss = loss / cfg.gradient_accumulation_steps
        loss.backward()
        if (step + 1) % cfg.gradient_accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
"""
_PLAIN_UPDATE = "        loss.backward()\n        optimizer.step()"
_SCALED_UPDATE = "        scaler.scale(loss).backward()\n        scaler.step(optimizer)\n        scaler.update()"


@dataclass(frozen=True)
class _Source:
    """Why the run computes in float16, and where the code says so."""

    node: cst.CSTNode
    description: str
    certain: bool  # False when the code can also pick another dtype at run time
    # the ``torch.cuda.is_bf16_supported()`` check that picks float16 only where it is false
    fallback: cst.Call | None = None
    # the loop's call of the helper that holds it, where what that call passes turns it on
    through: cst.Call | None = None


class Fp16WithoutLossScaling(Rule):
    """## What it does
    Finds training in float16 whose ``backward()`` runs without loss scaling. Float16 comes
    from an autocast region (``torch.autocast("cuda", dtype=torch.float16)``,
    ``torch.amp.autocast("cuda")`` and ``torch.cuda.amp.autocast()``, whose default dtype on
    CUDA is float16) around the forward of the trained loss, or from a model whose weights
    are float16 (``.half()``, ``.to(torch.float16)``,
    ``from_pretrained(..., torch_dtype=torch.float16)``, FSDP
    ``MixedPrecision(param_dtype=torch.float16)``) that an optimizer then trains.

    It reports ``loss.backward()`` when no ``GradScaler`` scales it — including a scaler that
    is created but bypassed — and ``optimizer.step()`` called directly after
    ``scaler.scale(loss).backward()`` instead of ``scaler.step(optimizer)``. bfloat16,
    inference under ``torch.no_grad()`` / ``inference_mode()``, and loops where Accelerate
    (``accelerator.backward``), DeepSpeed's engine, Lightning or the Hugging Face Trainer
    scale the loss are not reported, nor is float16 picked only as the fallback of
    ``torch.cuda.is_bf16_supported()`` when the target GPU (``--gpu``) has bfloat16 (without a
    target the finding says that float16 runs only where the check is false), and neither is a ``backward()`` that updates no parameter
    (no optimizer, engine or Trainer step with it: a test that compares the gradients of two
    implementations under float16 autocast trains nothing). An autocast in a helper behind one of
    its parameters (``if use_amp: with autocast():``, ``autocast(enabled=use_amp)``) counts
    for the loops whose call turns it on: by what the call passes, the parameter's default, or
    a parameter of the caller that its one caller sets. A dtype chosen by a test the script
    decides by itself (``torch.bfloat16 if cfg.precision == "bf16-mixed" else torch.float16``
    over ``cfg = Settings()``, whose default no option or variable reaches) is that one dtype, and
    a plain ``optimizer.step()`` on the other branch of the test that scales the backward
    (``if scaler.is_enabled(): ... else: optimizer.step()``) is not reported.

    ## Why it matters
    Float16 has 5 exponent bits: values below 2⁻²⁴ (about 6e-8) are zero and values below
    6e-5 lose precision. Gradients of activations are often that small, so without scaling
    many of them silently underflow to zero and the run learns slower or stalls, with no
    error. ``GradScaler`` multiplies the loss (by 65536 at first) before ``backward()`` so the
    gradients stay representable, then ``scaler.step(optimizer)`` divides them back and skips
    the steps whose gradients overflowed to inf/NaN. Calling ``optimizer.step()`` directly
    after a scaled backward applies gradients that are still 65536 times too large and
    applies the overflowed steps too, which turns the weights into NaN.

    Weights stored in float16 also lose every update smaller than their precision (an update
    below about 1/2048 of a weight's magnitude rounds away), and ``GradScaler`` refuses to
    unscale float16 gradients ("Attempting to unscale FP16 gradients").

    ## Fix
    Keep the weights in float32, run the forward under
    ``torch.autocast("cuda", dtype=torch.float16)``, and use
    ``scaler = torch.amp.GradScaler("cuda")`` with ``scaler.scale(loss).backward()``,
    ``scaler.step(optimizer)`` and ``scaler.update()``; or use bfloat16 where the GPU has it
    (Ampere and newer), which needs no scaling. No automatic fix: the change touches the
    backward, the step and (for float16 weights) how the model is loaded.
    """

    code = "AMP001"
    name = "fp16-without-loss-scaling"
    severity = Severity.WARNING
    kinds = frozenset({DocumentKind.PYTHON})
    python_needs = RUNS_BACKWARD  # its loops run backward()

    VALID = (
        Example(
            _AUTOCAST_LOOP.format(
                extra_import=", GradScaler",
                scaler="\nscaler = GradScaler()",
                update=_SCALED_UPDATE,
            ),
            title="fp16 autocast with a GradScaler that scales the backward and steps the optimizer",
        ),
        Example(
            """\
import torch

def train(model, loader, optimizer):
    model.train()
    for batch in loader:
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
""",
            title="bfloat16 has float32's exponent range: no loss scaling needed",
        ),
        Example(
            """\
import torch
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B", torch_dtype=torch.float16).cuda()
model.eval()
with torch.inference_mode():
    out = model.generate(**inputs, max_new_tokens=64)
""",
            path="generate.py",
            title="float16 inference: nothing is trained",
        ),
        Example(
            """\
import argparse

import deepspeed

from modeling import BertForSequenceClassification


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fp16", action="store_true")
    parser.add_argument("--gradient_accumulation_steps", type=int, default=1)
    parser = deepspeed.add_config_arguments(parser)
    args = parser.parse_args()
    model = BertForSequenceClassification.from_pretrained("bert-base-uncased", num_labels=2)
    if args.fp16:
        model.half()
    model, optimizer, _, _ = deepspeed.initialize(args=args, model=model, model_parameters=model.parameters())
    for step, batch in enumerate(train_dataloader):
        loss = model(*batch)
        loss = loss / args.gradient_accumulation_steps
        if args.fp16:
            optimizer.backward(loss)
        else:
            loss.backward()
        if (step + 1) % args.gradient_accumulation_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
""",
            path="run_glue_classifier.py",
            title="`.half()` only with --fp16, where DeepSpeed's optimizer scales; the plain backward runs in fp32",
        ),
        Example(
            """\
import torch
from apex import amp

model = build_model().cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-5)
model, optimizer = amp.initialize(model, optimizer, opt_level="O2")
for batch in loader:
    loss = model(**batch).loss
    with amp.scale_loss(loss, optimizer) as scaled_loss:
        scaled_loss.backward()
    optimizer.step()
    optimizer.zero_grad()
""",
            path="run_squad.py",
            title="Apex AMP: amp.initialize patches optimizer.step to unscale and skip overflowed steps",
        ),
        Example(
            _BF16_FALLBACK,
            path="bench.py",
            settings={"gpu": "h100"},
            title="Float16 only where `is_bf16_supported()` is false: the target GPU (H100) computes in bfloat16",
        ),
        Example(
            _DEVICE_CHOICE.format(choice='torch.bfloat16 if device.type in ["cuda", "cpu"] else torch.float16'),
            path="train.py",
            title="Float16 only off CUDA (Apple's MPS): on a CUDA device the device-type test picks bfloat16",
        ),
    )
    INVALID = (
        Example(
            _DEVICE_CHOICE.format(choice='torch.float16 if device.type == "cuda" else torch.float32'),
            path="train.py",
            lines=(32,),
            message="float16 autocast (line",
            title="Float16 exactly where the device is CUDA, and a plain backward()",
        ),
        Example(
            _BF16_FALLBACK,
            path="bench.py",
            lines=(21,),
            message="is_bf16_supported()",
            title="Float16 where `is_bf16_supported()` is false, and no target GPU said to have bfloat16",
        ),
        Example(
            _AUTOCAST_LOOP.format(extra_import="", scaler="", update=_PLAIN_UPDATE),
            lines=(23,),
            message="without loss scaling",
            title="torch.cuda.amp.autocast() (float16 on CUDA) and a plain backward()",
        ),
        Example(
            _AUTOCAST_LOOP.format(
                extra_import=", GradScaler",
                scaler="\nscaler = GradScaler()",
                update=_PLAIN_UPDATE,
            ),
            lines=(24,),
            message="bypasses it",
            title="A GradScaler is created but the backward does not use it",
        ),
        Example(
            _AUTOCAST_LOOP.format(
                extra_import=", GradScaler",
                scaler="\nscaler = GradScaler()",
                update="        scaler.scale(loss).backward()\n        optimizer.step()",
            ),
            lines=(25,),
            message="scaler.step(optimizer)",
            title="The backward is scaled but the optimizer steps on the scaled gradients",
        ),
    )

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        index = index_for(ctx.python)
        if index is None:
            return
        training = updating_backwards(index)
        trained = [b for b in backwards(index) if b.kind != "framework" and id(b.call) in training]
        if not trained:
            return
        constructed = [c for c in index.calls if is_scaler_constructor(index, c)]
        scalers = [c for c in constructed if not scaler_disabled(c)]
        loops = training_loops(index)
        helpers = HelperBranches(index)
        for backward in trained:
            if backward.kind != "tensor" or _scaled_elsewhere(index, backward, loops):
                continue
            sources = _fp16_sources(index, backward, loops, helpers)
            if sources and all(s.fallback is not None for s in sources) and _target_has_bf16(ctx):
                continue  # `bfloat16 if torch.cuda.is_bf16_supported() else float16`: bf16 on the target
            if sources:
                yield self._unscaled(ctx, backward, sources, scalers)
        # Apex's amp.initialize patches optimizer.step to unscale and skip overflowed steps: a
        # plain step after `with amp.scale_loss(...)` is Apex's own idiom (also where `amp` comes
        # from an import this module does not show: copies of the HF Trainer's `if self.use_apex:`)
        apex = any(index.calls_named(c, "apex.amp.scale_loss") or dotted(c.func) == "amp.scale_loss"
                   for c in index.calls)
        if (scalers or not constructed) and not apex:  # a scaler passed in from elsewhere counts too
            yield from self._unscaled_steps(ctx, index)

    def _unscaled(self, ctx, backward: Backward, sources: list[_Source], scalers) -> Finding:
        py = ctx.python
        source = sources[0]
        line = py.range_of(source.node).start.line
        where = (
            f"{source.description} (line {line})"
            if source.certain
            else f"{source.description}, which can pick float16 (line {line})"
        )
        if all(s.fallback is not None for s in sources) and source.fallback is not None:
            check = py.range_of(source.fallback).start.line
            where = (f"{source.description} (line {line}), float16 where `torch.cuda.is_bf16_supported()` "
                     f"(line {check}) is false: on GPUs without bfloat16 (before Ampere)")
        if source.through is not None:
            where += f", switched on by what the call on line {py.range_of(source.through).start.line} passes"
        if scalers:
            scaler_line = py.range_of(scalers[0]).start.line
            tail = (
                f"a GradScaler is created on line {scaler_line} but `{py.code_of(backward.call)}` bypasses it; "
                "use `scaler.scale(loss).backward()` and `scaler.step(optimizer)`"
            )
        elif any(s.description.startswith("float16 weights") for s in sources) and _peft_wrapped(ctx):
            # PEFT casts the adapters it adds to float32 (``autocast_adapter_dtype=True``): their
            # updates keep their small steps, and GradScaler unscales their float32 gradients
            tail = ('the LoRA adapters PEFT trains stay float32 (autocast_adapter_dtype), but the gradients that '
                    'reach them flow back through the float16 base model, where those below 6e-8 flush to zero; '
                    'scale the loss with torch.amp.GradScaler("cuda"), or train in bfloat16')
        elif any(s.description.startswith("float16 weights") for s in sources):
            # GradScaler refuses float16 gradients ("Attempting to unscale FP16 gradients")
            tail = ('float16 gradients below 6e-8 flush to zero and float16 weights lose small updates; keep '
                    'float32 weights, autocast the forward to float16 and scale the loss with '
                    'torch.amp.GradScaler("cuda") (it refuses float16 gradients), or train in bfloat16')
        else:
            tail = 'float16 gradients below 6e-8 flush to zero; use torch.amp.GradScaler("cuda")'
        message = f"`{py.code_of(backward.call)}` trains in float16 without loss scaling: {where}; {tail}"
        return Finding(
            range=py.range_of(backward.call),
            message=message,
            related=tuple(Related(ctx.path, py.range_of(s.node), "float16 comes from here") for s in sources[:3]),
        )

    def _unscaled_steps(self, ctx, index: ModuleIndex) -> Iterator[Finding]:
        py = index.py
        seen: set[int] = set()
        for loop in step_loops(index):
            scaled = [b for _, b in loop.backwards if b.kind == "scaled"]
            if not scaled or any(s.kind == "scaled" for _, s in loop.steps):
                continue
            for _, step in loop.steps:
                if step.kind != "direct" or id(step.call) in seen:
                    continue
                if all(index.exclusive(step.call, backward.call) for backward in scaled):
                    continue  # ``if scaler.is_enabled(): scaler.step(...) else: optimizer.step()``
                seen.add(id(step.call))
                yield Finding(
                    range=py.range_of(step.call),
                    message=(
                        f"`{py.code_of(step.call)}` after `{py.code_of(scaled[0].call)}` applies gradients still "
                        f"multiplied by the loss scale and does not skip steps that overflowed to inf/NaN; "
                        f"call `scaler.step({step.optimizer})` and `scaler.update()` instead"
                    ),
                    related=(Related(ctx.path, py.range_of(scaled[0].call), "the loss is scaled here"),),
                )


def _peft_wrapped(ctx: RuleContext) -> bool:
    """Does the module wrap a model with PEFT (``get_peft_model``, ``PeftModel.from_pretrained``)?"""
    index = index_for(ctx.python)
    return index is not None and any(is_peft_wrap(index, call) for call in index.calls)


def _target_has_bf16(ctx: RuleContext) -> bool:
    """Does the target GPU (``--gpu``, ``gpu`` in the settings) compute in bfloat16?"""
    if not ctx.settings.gpu:
        return False
    try:
        return bool(lookup_gpu(ctx.settings.gpu).bf16)
    except UnknownGpu:
        return False


def _loops_running(loops: list[TrainingLoop], node: cst.CSTNode) -> list[TrainingLoop]:
    return [loop for loop in loops if any(e.node is node for e in loop.events)]


def _innermost(loops: list[TrainingLoop]) -> list[TrainingLoop]:
    """The loops that hold no other loop of the list (an epoch loop holds its batch loop)."""

    def holds(outer: TrainingLoop, inner: TrainingLoop) -> bool:
        return outer is not inner and any(inner.loop in e.loops for e in outer.events)

    return [loop for loop in loops if not any(holds(loop, other) for other in loops)]


def _scaled_elsewhere(index: ModuleIndex, backward: Backward, loops) -> bool:
    """A scaled backward on another branch of the same function or loop: this one is the
    fallback when the scaler is off (``if scaler is not None: ... else: loss.backward()``)."""
    flow = index.flow_of(backward.call)
    for other in backwards(index):
        if other.kind == "scaled" and index.flow_of(other.call) is flow:
            return True
    for loop in _loops_running(loops, backward.call):
        if any(b.kind == "scaled" for _, b in loop.backwards):
            return True
    return False


def _fp16_sources(index: ModuleIndex, backward: Backward, loops, helpers: HelperBranches) -> list[_Source]:
    sources: list[_Source] = []
    running = _innermost(_loops_running(loops, backward.call))
    for region in autocast_regions(index):
        autocast = region.autocast
        if autocast.disabled or "fp16" not in autocast.cuda_dtypes or index.under_no_grad(autocast.call):
            continue
        if index.exclusive(autocast.call, backward.call):
            continue
        encloses = index.contains(region.node, backward.call)
        # an event in a helper counts where the calls that lead to it leave its branch on
        reached = [(e, helpers.decided(e, autocast.enabled))
                   for loop in running for e in loop.events if index.contains(region.node, e.node)]
        live = [(e, on) for e, on in reached if on is not False]
        runs_in_loop = bool(live)
        # every way there passes what turns it on (``loss_step(..., mixed_precision=True)``)
        through = live[0][0].chain[0] if live and all(on for _, on in live) else None
        is_forward = isinstance(region.node, cst.FunctionDef) and region.node.name.value == "forward"
        # straight-line code: the forward under autocast, then the backward after the `with`
        # (not a `with` further down, which a backward outside any loop never follows)
        same_flow_no_loop = (not running and index.flow_of(region.node) is index.flow_of(backward.call)
                             and index.start(region.node) < index.start(backward.call))
        if encloses or runs_in_loop or is_forward or same_flow_no_loop:
            certain = autocast.cuda_dtypes == frozenset({"fp16"})
            fallback = None if certain else bf16_support_choice(index, autocast.dtype)
            label = (
                "float16 autocast"
                if autocast.dtype is not None
                else f"`{index.py.code_of(autocast.call.func)}()` autocasts to float16 on CUDA"
            )
            sources.append(_Source(autocast.call, label, certain, fallback[1] if fallback else None,
                                   through if runs_in_loop and not (encloses or is_forward) else None))
    trained = trained_models(index)
    for choice in dtype_choices(index):
        if "fp16" not in choice.dtypes or index.under_no_grad(choice.node):
            continue
        if index.exclusive(choice.node, backward.call):
            continue  # `if args.fp16: model.half()` and a backward under `else:` never meet
        certain = choice.dtypes == frozenset({"fp16"})
        if not index.connected(index.flow_of(choice.node), index.flow_of(backward.call)):
            continue  # converted in a function that has nothing to do with this backward
        if choice.model is not None:
            if choice.model in trained or choice.model.split(".")[0] in trained:
                sources.append(_Source(choice.node, f"float16 weights from `{choice.what}`", certain))
        elif choice.what in ("MixedPrecision(param_dtype=...)", "torch.set_default_dtype"):
            sources.append(_Source(choice.node, f"float16 parameters from `{choice.what}`", certain))
    return sources
