"""CFG007: a key set twice in the same mapping of a config."""

from __future__ import annotations

from typing import Iterator

from memlint.lint.context import RuleContext
from memlint.model.diagnostics import Severity
from memlint.rules._config import VALIDATED_KINDS
from memlint.rules.base import Example, Finding, Rule


class DuplicateConfigKey(Rule):
    """## What it does
    Reports a key that appears twice in the same mapping of a config, in JSON as in YAML, at
    the second occurrence, naming the line of the first.

    ## Why it matters
    ``json.load`` and ``yaml.safe_load`` keep the last value without a word, so the first
    line a reader sees is not the one that runs (DeepSpeed's own reader refuses duplicates,
    but the HF Trainer and Accelerate load the JSON themselves). A config edited by hand —
    ``micro_batch_size`` lowered at the top while an old value stays at the bottom — runs
    out of memory with a setting that looks right.

    ## Fix
    Keep one of the two.
    """

    code = "CFG007"
    name = "duplicate-config-key"
    severity = Severity.WARNING
    kinds = VALIDATED_KINDS

    VALID = (
        Example(
            "base_model: meta-llama/Llama-3.2-3B\nsequence_len: 4096\nmicro_batch_size: 1\n"
            "gradient_accumulation_steps: 16\nlearning_rate: 0.0001\n",
            path="llama-3b.yml",
        ),
    )
    INVALID = (
        Example(
            "base_model: meta-llama/Llama-3.2-3B\nsequence_len: 4096\nmicro_batch_size: 1\n"
            "gradient_accumulation_steps: 16\nlearning_rate: 0.0001\nnum_epochs: 2\n"
            "micro_batch_size: 8\n",
            path="llama-3b.yml",
            lines=(7,),
            message="first set on line 3",
            title="The micro-batch that runs is the second one",
        ),
        Example(
            '{\n  "train_micro_batch_size_per_gpu": 4,\n  "zero_optimization": {\n    "stage": 3,\n'
            '    "overlap_comm": true,\n    "stage": 2\n  }\n}\n',
            path="ds_config.json",
            lines=(6,),
            message="duplicate key 'stage'",
        ),
    )

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        if ctx.structured is None:
            return
        for problem in ctx.structured.problems:
            if problem.kind == "duplicate-key":
                yield Finding(problem.range, problem.message)
