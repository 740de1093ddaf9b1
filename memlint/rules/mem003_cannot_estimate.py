"""MEM003: a run's memory cannot be estimated (unknown model, unsupported architecture)."""

from __future__ import annotations

from typing import Iterator

from memlint.documents.kinds import DocumentKind
from memlint.lint.context import RuleContext
from memlint.model.diagnostics import Severity
from memlint.rules._config import shown_location
from memlint.rules.base import Example, Finding, Rule

_SCRIPT = """\
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

model = AutoModelForCausalLM.from_pretrained("{model}")
args = TrainingArguments(output_dir="out", per_device_train_batch_size=4, bf16=True)
Trainer(model=model, args=args).train()
"""


class CannotEstimate(Rule):
    """## What it does
    Tells you when a training run memlint found cannot be checked for memory: its model is
    neither in memlint's catalogue, nor a local ``config.json``, nor in the local Hugging Face
    cache, or its architecture has no memory recipe yet. memlint never downloads anything, so
    it says so instead of guessing. A document that launches or defines no training (a script
    that uploads a package, serves or samples from a model, prepares data; a test; a module
    that only defines a ``Trainer`` subclass, which another script builds; a run with
    ``do_train: false``) gets no note: there is nothing to check. Nor is a run estimated whose
    script freezes the model it loads and trains modules of its own on top of it (decoding heads,
    a probe: ``for p in model.base_model.parameters(): p.requires_grad = False``, no adapter, no
    gradient turned back on): the note names the freeze, once, in the script. Nor is a run that
    splits its model or its sequences in a way the estimate does not model: Megatron's tensor and
    pipeline parallelism, accelerate's ``ParallelismConfig(cp_size=..., tp_size=...)``, PyTorch's
    ``parallelize_module(model, mesh["tp"], plan)`` (whose degree is the device mesh's, known
    only when it runs): the note names the split where it is written, in the script when a README
    command runs it.

    ## Why it matters
    A silent linter looks like a passing one. Knowing that the out-of-memory check did not
    run — and how to make it run — matters as much as the check.

    ## Fix
    Point ``model`` in ``[tool.memlint]`` (or the ``from_pretrained`` argument) at a local
    ``config.json`` or model directory, or download the config once with
    ``huggingface-cli download <id> config.json``.
    """

    code = "MEM003"
    name = "cannot-estimate"
    severity = Severity.INFO
    judges_runs = True
    python_needs = None  # judges runs from their facts

    VALID = (
        Example(_SCRIPT.format(model="Qwen/Qwen2.5-7B"), settings={"gpu": "h100"},
                title="A model from the catalogue is estimated"),
    )
    INVALID = (
        Example("model_name_or_path: acme-labs/secret-model-13b\nper_device_train_batch_size: 2\n"
                "bf16: true\noutput_dir: out\n",
                path="train_args.yaml", settings={"gpu": "h100"}, lines=(1,), message="unknown model",
                title="A model id memlint has never seen and cannot find offline"),
    )

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        # one note per file and reason: a launcher that starts the same script once per rank
        # (``python train.py --rank 0 & python train.py --rank 1 & ...``) is one unchecked run to
        # its reader, not eight; the note names the other lines
        notes: dict[tuple[str, str], list] = {}
        for run in ctx.runs:
            if ctx.capacity_for(run) is None:
                continue
            if run.problem is None or not run.trains:
                continue  # estimated, or nothing to estimate: the run trains nothing
            where = run.problem_fact.origin if run.problem_fact and run.problem_fact.origin else run.plan.anchor
            problem = run.problem
            if where is not run.plan.anchor and ctx.kind_of(where.path) in (
                    DocumentKind.PYTHON, DocumentKind.PYTHON_OTHER) and not ctx.facts_of(where.path):
                # a module the script imports its value from (``config.py``: ``MODEL_CHECKPOINT =
                # "..."``), which states no run of its own and is linted with none: the note stands
                # at the run, and says where the value is written
                problem = f"{problem} (written at {shown_location(ctx, where)})"
                where = run.plan.anchor
            lines = notes.setdefault((where.path, problem), [])
            if all(w.range != where.range for w in lines):
                lines.append(where)
        for (_, problem), places in notes.items():
            first, others = places[0], sorted({w.range.start.line for w in places[1:]})
            also = ""
            if others:
                shown = ", ".join(str(line) for line in others[:5]) + (", ..." if len(others) > 5 else "")
                also = f" (the same for the launch{'es' if len(others) > 1 else ''} on line{'s' if len(others) > 1 else ''} {shown})"
            yield Finding(range=first.range, path=first.path, message=f"memory not checked: {problem}{also}")
