"""CFG010: DeepSpeed's batch sizes do not multiply out on the run's GPU count."""

from __future__ import annotations

from typing import Iterator, Sequence

from memlint.configs.deepspeed import positive_int
from memlint.documents.kinds import DocumentKind
from memlint.facts.resolve import ResolvedRun
from memlint.lint.context import RuleContext
from memlint.model.diagnostics import Applicability, Severity
from memlint.rules._config import replace_with, runs_through, world_size
from memlint.rules.base import Example, Finding, Rule


class DeepSpeedBatchSizeMismatch(Rule):
    """## What it does
    Checks DeepSpeed's batch arithmetic: ``train_batch_size`` must equal
    ``train_micro_batch_size_per_gpu × gradient_accumulation_steps × world size``, and when
    only two of the three are given, the third must come out whole. The world size is the
    run's GPU count (from its launcher or Accelerate config, else ``gpus`` in the memlint
    settings) divided by the GPUs that share one copy of the model (a launch's tensor and
    pipeline parallel degrees, ``--pipe_parallel_size 4``); without it, only mismatches that no GPU count could fix are reported. Values
    set to ``"auto"`` are skipped (the HF Trainer computes them consistently).

    ## Why it matters
    DeepSpeed asserts the equation in ``deepspeed.initialize``: the job dies at start-up with
    "train_batch_size is not equal to micro_batch_per_gpu * gradient_acc_step * world_size",
    typically after a config written for 8 GPUs is launched on 4.

    ## Fix
    Set ``train_batch_size`` to the product (or leave it out, DeepSpeed computes it), or to
    ``"auto"`` when the HF Trainer drives DeepSpeed.
    """

    code = "CFG010"
    name = "deepspeed-batch-size-mismatch"
    severity = Severity.ERROR
    kinds = frozenset({DocumentKind.DEEPSPEED})
    python_needs = None  # judges runs from their facts
    judges_runs = True
    fix_applicability = Applicability.UNSAFE

    VALID = (
        Example(
            '{\n  "train_batch_size": 64,\n  "train_micro_batch_size_per_gpu": 4,\n'
            '  "gradient_accumulation_steps": 2,\n  "bf16": {"enabled": true},\n'
            '  "zero_optimization": {"stage": 2}\n}\n',
            path="ds_config.json",
            settings={"gpus": 8},
            title="64 = 4 x 2 x 8 GPUs",
        ),
        Example(
            '{\n  "train_batch_size": "auto",\n  "train_micro_batch_size_per_gpu": "auto",\n'
            '  "gradient_accumulation_steps": "auto",\n  "zero_optimization": {"stage": 3}\n}\n',
            path="ds_config.json",
            settings={"gpus": 4},
            title='"auto" values are filled in by the HF Trainer',
        ),
    )
    INVALID = (
        Example(
            '{\n  "train_batch_size": 64,\n  "train_micro_batch_size_per_gpu": 4,\n'
            '  "gradient_accumulation_steps": 2,\n  "bf16": {"enabled": true},\n'
            '  "zero_optimization": {"stage": 2}\n}\n',
            path="ds_config.json",
            settings={"gpus": 4},
            lines=(2,),
            message="4 (micro-batch) × 2 (accumulation) × 4 GPUs = 32",
            title="A config written for 8 GPUs, launched on 4",
        ),
        Example(
            '{\n  "train_batch_size": 30,\n  "train_micro_batch_size_per_gpu": 4,\n'
            '  "zero_optimization": {"stage": 1}\n}\n',
            path="ds_config.json",
            lines=(2,),
            message="no GPU count",
            title="30 is not a multiple of the micro-batch 4, on any number of GPUs",
        ),
    )

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        if ctx.kind != "deepspeed" or ctx.structured is None or not isinstance(ctx.structured.value, dict):
            return
        data = ctx.structured
        values = {key: data.value.get(key) for key in
                  ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps")}
        if "auto" in values.values():
            return
        total, micro, accum = (positive_int(v) for v in values.values())
        if total is None or (micro is None and accum is None):
            return
        ds_runs: Sequence[ResolvedRun | None] = runs_through(ctx) or [None]
        reported = set()
        for run in ds_runs:
            world, where_from = world_size(ctx, run)
            sequence_parallel = positive_int(data.value.get("sequence_parallel_size")) or 1
            split = run.plan.get("model_split_degree") if run is not None else None
            model_parallel = 1
            if split is not None and isinstance(split.value, int) and split.value > 1:
                model_parallel = split.value
                where_from += f", {model_parallel} of them to each copy of the model (`{split.note}`)"
            if world is not None and world % (sequence_parallel * model_parallel):
                continue  # a world the model-parallel groups do not divide: the launch is not this one
            finding = self._judge(ctx, total, micro, accum, world, where_from, sequence_parallel, model_parallel)
            if finding is not None and finding.message not in reported:
                reported.add(finding.message)
                yield finding

    def _judge(self, ctx, total, micro, accum, world, where_from, sequence_parallel,
               model_parallel=1) -> Finding | None:
        where = ctx.structured.range_of(("train_batch_size",))
        per_rank = (micro or 1) * (accum or 1)
        if world is None:
            if total % per_rank == 0:
                return None
            parts = " × ".join(str(v) for v in (micro, accum) if v is not None)
            return Finding(where, f"train_batch_size {total} is not a multiple of {parts}: no GPU count makes "
                           "DeepSpeed's batch sizes agree, and deepspeed.initialize stops at start-up")
        ranks = max(world // sequence_parallel // model_parallel, 1)
        unit = "data-parallel ranks" if model_parallel > 1 else "GPUs"
        if micro is not None and accum is not None:
            expected = micro * accum * ranks
            if total == expected:
                return None
            detail = f"{micro} (micro-batch) × {accum} (accumulation) × {ranks} {unit} = {expected}"
        else:
            known, what = (micro, "micro-batch") if micro is not None else (accum, "accumulation")
            if total % (known * ranks) == 0:
                return None
            expected = None
            detail = f"a multiple of {known} ({what}) × {ranks} {unit}"
        message = (f"train_batch_size {total} ≠ {detail}: deepspeed.initialize stops at start-up "
                   f"(GPU count from {where_from})")
        fix = None
        if expected:
            message += f"; set it to {expected}"
            fix = replace_with(ctx.path, where, str(expected), f"set train_batch_size to {expected}")
        return Finding(where, message, fix=fix)
