"""CFG012: a ZeRO stage-3 setting in a config that runs another stage."""

from __future__ import annotations

import re
from typing import Iterator

from memlint.configs import schema
from memlint.configs.deepspeed import zero_stage
from memlint.documents.kinds import DocumentKind
from memlint.lint.context import RuleContext
from memlint.model.diagnostics import Severity
from memlint.rules.base import Example, Finding, Rule

_SAME_AS = re.compile(r"Same as `stage3_")


def stage3_only(key: str) -> bool:
    """Keys only the stage-3 optimizer reads: ``stage3_*`` and the aliases the schema
    describes as "Same as `stage3_...`"."""
    if key.startswith("stage3_"):
        return True
    node = schema.schema_at("deepspeed", ("zero_optimization", key)) or {}
    return bool(_SAME_AS.search(str(node.get("description", ""))))


class Stage3KeyIgnored(Rule):
    """## What it does
    Reports ``zero_optimization`` keys that only ZeRO stage 3 reads — ``stage3_*`` settings
    such as ``stage3_max_live_parameters`` and ``stage3_prefetch_bucket_size``, and their
    unprefixed aliases — in a config that runs stage 0, 1 or 2.

    ## Why it matters
    DeepSpeed ignores them there without a word. A config copied from a ZeRO-3 example and
    switched to stage 2 keeps knobs that look like they bound memory (live parameters,
    prefetch buckets) but do nothing; the stage is usually not what the author believes.

    ## Fix
    Remove the keys, or set ``"stage": 3`` if stage 3 was meant.
    """

    code = "CFG012"
    name = "stage3-key-ignored"
    severity = Severity.WARNING
    kinds = frozenset({DocumentKind.DEEPSPEED})

    VALID = (
        Example(
            '{\n  "bf16": {"enabled": "auto"},\n  "zero_optimization": {\n    "stage": 3,\n'
            '    "overlap_comm": true,\n    "stage3_max_live_parameters": 1e9,\n'
            '    "stage3_prefetch_bucket_size": "auto"\n  }\n}\n',
            path="zero3.json",
        ),
    )
    INVALID = (
        Example(
            '{\n  "bf16": {"enabled": "auto"},\n  "zero_optimization": {\n    "stage": 2,\n'
            '    "overlap_comm": true,\n    "reduce_bucket_size": "auto",\n'
            '    "stage3_max_live_parameters": 1e9,\n    "stage3_max_reuse_distance": 1e9,\n'
            '    "stage3_gather_16bit_weights_on_model_save": true\n  }\n}\n',
            path="zero2.json",
            lines=(7, 8, 9),
            message="only ZeRO stage 3 reads",
            title="ZeRO-3 knobs left in a stage-2 config",
        ),
    )

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        data = ctx.structured
        if data is None or not isinstance(data.get("zero_optimization"), dict):
            return
        stage, _ = zero_stage(data)
        if not isinstance(stage, int) or stage >= 3:
            return
        for key in data.get("zero_optimization"):
            if isinstance(key, str) and stage3_only(key):
                yield Finding(data.range_of(("zero_optimization", key), key=True),
                              f"`{key}` is a setting only ZeRO stage 3 reads; this config runs stage {stage}, "
                              "so DeepSpeed ignores it (remove it, or set \"stage\": 3)")
