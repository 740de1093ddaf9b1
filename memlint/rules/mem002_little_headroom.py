"""MEM002: the run fits, but with little memory to spare."""

from __future__ import annotations

from typing import Iterator

from memlint.lint.context import RuleContext
from memlint.model.diagnostics import Severity
from memlint.rules._memory import (
    assumption_clause,
    describe_dominant,
    fix_hint,
    gib,
    memory_finding,
    resting_assumptions,
    rests_on_unread_config,
)
from memlint.rules.base import Example, Finding, Rule

_YAML = """\
model_name_or_path: {model}
per_device_train_batch_size: {batch}
gradient_accumulation_steps: 8
gradient_checkpointing: true
max_length: 2048
bf16: true
optim: adamw_torch_fused
output_dir: checkpoints/sft
"""


class LittleHeadroom(Rule):
    """## What it does
    Reports a run whose estimated per-GPU peak fits the target GPU's usable memory, but
    only just: within the last ``headroom`` of it (5 % of the usable memory by default).

    ## Why it matters
    The usable memory already leaves out the CUDA context and what the caching allocator
    loses to fragmentation, as measured on a real GPU (``docs/accuracy.md``). What the
    estimate cannot see is the data: a batch of longer sequences, an evaluation step, a
    checkpoint save. A step that needs the last few percent on paper fails with "CUDA out of
    memory" after hours, when such a batch comes. Leaving a few GiB free is cheaper than a
    restarted job.

    ## Settings
    ``headroom`` in ``[tool.memlint]`` sets the margin (a fraction of the usable memory);
    ``fragmentation`` and ``cuda-context-gib`` set what the usable memory leaves out.
    """

    code = "MEM002"
    name = "little-headroom"
    severity = Severity.WARNING
    judges_runs = True
    python_needs = None  # judges runs from their facts

    VALID = (
        Example(_YAML.format(model="Qwen/Qwen2.5-3B", batch=12), path="sft.yaml", settings={"gpu": "a100-80gb"},
                title="The same run at micro-batch 12 leaves more than the last 5 % free"),
    )
    INVALID = (
        Example(_YAML.format(model="Qwen/Qwen2.5-3B", batch=13), path="sft.yaml", settings={"gpu": "a100-80gb"},
                lines=(2,), message="inside the last",
                title="Qwen2.5-3B at micro-batch 13 x 2048 tokens needs 96 % of what an A100-80GB can hold"),
    )

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        for run in ctx.runs:
            cap = ctx.capacity_for(run)
            budget = ctx.budget(run) if cap is not None else None
            if cap is None or budget is None or budget.fits is not True or budget.comfortable:
                continue
            share = budget.peak_bytes / cap.usable_bytes * 100
            at_least = f"at least {gib(budget.peak_bytes)} per GPU (a lower bound: {run.lower_bound})" \
                if run.lower_bound is not None else f"{gib(budget.peak_bytes)} per GPU"
            message = (
                f"estimated peak {at_least} is {share:.0f}% of the {gib(cap.usable_bytes)} "
                f"usable on {cap.gpu_name}{ctx.gpu_origin(run)}, inside the last {cap.headroom_fraction:.0%} "
                f"(largest part: {describe_dominant(budget, run)}){fix_hint(ctx, run, 'frees')}"
            )
            assumed = resting_assumptions(ctx, run)
            if rests_on_unread_config(assumed):
                continue
            yield memory_finding(ctx, run, budget, message + assumption_clause(assumed), assumed)
