"""CFG004: a config key the tool has removed."""

from __future__ import annotations

from memlint.model.diagnostics import Severity
from memlint.rules._config import SchemaRule
from memlint.rules.base import Example


class RemovedConfigKey(SchemaRule):
    """## What it does
    Reports DeepSpeed config sections that DeepSpeed has removed (``amp``,
    ``compression_training``, ``curriculum_learning`` at the top level, ``elasticity``, ...),
    with DeepSpeed's own message about what replaced each.

    ## Why it matters
    DeepSpeed refuses some removed sections at start-up and silently ignores others: a leftover
    ``compression_training`` block trains the model unquantised, a ``nebula`` block falls back
    to local checkpoints.

    ## Fix
    Delete the section, or move to the replacement the message names.
    """

    code = "CFG004"
    name = "removed-config-key"
    severity = Severity.ERROR
    category = "removed"

    VALID = (
        Example(
            '{\n  "train_micro_batch_size_per_gpu": 8,\n  "fp16": {"enabled": true, "loss_scale": 0},\n'
            '  "zero_optimization": {"stage": 1}\n}\n',
            path="ds_config.json",
            title="Mixed precision through DeepSpeed's own fp16 block",
        ),
    )
    INVALID = (
        Example(
            '{\n  "train_micro_batch_size_per_gpu": 8,\n  "amp": {"enabled": true, "opt_level": "O1"},\n'
            '  "zero_optimization": {"stage": 1}\n}\n',
            path="ds_config.json",
            lines=(3,),
            message="was removed from DeepSpeed",
            title="The Apex AMP integration is gone",
        ),
    )
