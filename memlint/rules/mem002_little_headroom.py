"""MEM002: the run fits, but within the allocator's fragmentation margin."""

from __future__ import annotations

from typing import Iterator

from memlint.diagnostics import Severity
from memlint.rules._memory import assumption_clause, describe_dominant, fix_hint, gib, memory_finding, resting_assumptions
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
    only just: within the fragmentation margin (``headroom``, 5 % of the usable memory by
    default).

    ## Why it matters
    PyTorch's caching allocator rounds and splits blocks, and a long run fragments memory:
    ``torch.cuda.memory_reserved`` grows above ``max_memory_allocated``. A step that needs
    97 % of the GPU on paper can fail with "CUDA out of memory" after hours, when a longer
    batch or a fragmented heap tips it over. Leaving a few GiB free is cheaper than a
    restarted job.

    ## Settings
    ``headroom`` in ``[tool.memlint]`` sets the margin (a fraction of the usable memory).
    """

    code = "MEM002"
    name = "little-headroom"
    severity = Severity.WARNING
    kinds = frozenset({"run"})

    VALID = (
        Example(_YAML.format(model="Qwen/Qwen2.5-3B", batch=12), path="sft.yaml", settings={"gpu": "a100-80gb"},
                title="The same run at micro-batch 12 leaves a fifth of the GPU free"),
    )
    INVALID = (
        Example(_YAML.format(model="Qwen/Qwen2.5-3B", batch=14), path="sft.yaml", settings={"gpu": "a100-80gb"},
                lines=(2,), message="headroom",
                title="Qwen2.5-3B at micro-batch 14 x 2048 tokens needs ~97 % of an A100-80GB"),
    )

    def check(self, ctx) -> Iterator[Finding]:
        cap = ctx.capacity
        if cap is None:
            return
        for run in ctx.runs:
            budget = ctx.budget(run)
            if budget is None or budget.fits is not True or budget.comfortable:
                continue
            share = budget.peak_bytes / cap.usable_bytes * 100
            message = (
                f"estimated peak {gib(budget.peak_bytes)} per GPU is {share:.0f}% of the {gib(cap.usable_bytes)} "
                f"usable on {cap.gpu_name}, inside the {cap.headroom_fraction:.0%} fragmentation headroom "
                f"(largest part: {describe_dominant(budget)}){fix_hint(ctx, run, 'frees')}"
            )
            assumed = resting_assumptions(ctx, run)
            yield memory_finding(ctx, run, budget, message + assumption_clause(assumed), assumed)
