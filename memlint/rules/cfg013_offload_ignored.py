"""CFG013: a ZeRO offload block under a stage that ignores it."""

from __future__ import annotations

from typing import Iterator

from memlint.configs.deepspeed import OFFLOAD_DEVICES, offload_device, offload_stages, zero_stage
from memlint.documents.kinds import DocumentKind
from memlint.lint.context import RuleContext
from memlint.model.diagnostics import Severity
from memlint.rules.base import Example, Finding, Rule

WHAT = {"offload_optimizer": "optimizer states", "offload_param": "parameters"}


class OffloadIgnored(Rule):
    """## What it does
    Reports ZeRO offload that the configured stage does not perform: ``offload_param`` (or the
    old ``cpu_offload_param``) with a CPU/NVMe device under stages 0-2, and
    ``offload_optimizer`` (or ``cpu_offload``) under stage 0 or without a ZeRO stage. It
    covers DeepSpeed JSON and the ``deepspeed_config`` of an Accelerate config.

    ## Why it matters
    DeepSpeed hands parameter offload to the stage-3 optimizer only, and optimizer offload to
    the ZeRO optimizers of stages 1-3. Under another stage the block is ignored silently: the
    memory it was meant to free stays on the GPU, and the run that "offloads" runs out of
    memory. memlint estimates the run without the offload.

    ## Fix
    Raise the stage (``"stage": 3`` for parameter offload, at least 1 for optimizer offload),
    or remove the block.
    """

    code = "CFG013"
    name = "offload-ignored"
    severity = Severity.WARNING
    kinds = frozenset({DocumentKind.DEEPSPEED, DocumentKind.ACCELERATE})

    VALID = (
        Example(
            '{\n  "bf16": {"enabled": true},\n  "zero_optimization": {\n    "stage": 3,\n'
            '    "offload_optimizer": {"device": "cpu", "pin_memory": true},\n'
            '    "offload_param": {"device": "cpu", "pin_memory": true}\n  }\n}\n',
            path="zero3_offload.json",
        ),
        Example(
            "compute_environment: LOCAL_MACHINE\ndeepspeed_config:\n  offload_optimizer_device: cpu\n"
            "  offload_param_device: none\n  zero_stage: 2\ndistributed_type: DEEPSPEED\n"
            "mixed_precision: bf16\nnum_machines: 1\nnum_processes: 8\n",
            path="accelerate_configs/zero2_offload.yaml",
        ),
    )
    INVALID = (
        Example(
            '{\n  "bf16": {"enabled": true},\n  "zero_optimization": {\n    "stage": 2,\n'
            '    "offload_optimizer": {"device": "cpu", "pin_memory": true},\n'
            '    "offload_param": {"device": "cpu", "pin_memory": true}\n  }\n}\n',
            path="zero2_offload.json",
            lines=(6,),
            message="only with ZeRO stage 3",
            title="Parameter offload needs stage 3",
        ),
        Example(
            "compute_environment: LOCAL_MACHINE\ndeepspeed_config:\n  offload_optimizer_device: cpu\n"
            "  offload_param_device: cpu\n  zero_stage: 2\ndistributed_type: DEEPSPEED\n"
            "mixed_precision: bf16\nnum_machines: 1\nnum_processes: 8\n",
            path="accelerate_configs/zero2_offload.yaml",
            lines=(4,),
            message="only with ZeRO stage 3",
        ),
    )

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        data = ctx.structured
        if data is None or not isinstance(data.value, dict):
            return
        if ctx.kind == "deepspeed":
            stage, _ = zero_stage(data)
            if stage == "auto":
                return
            stage = stage if isinstance(stage, int) else 0
            for key in WHAT:
                device, path = offload_device(data, (), key)
                if device in OFFLOAD_DEVICES and stage not in offload_stages(key):
                    yield Finding(data.range_of(path), self._message(key, stage))
        elif ctx.kind == "accelerate" and isinstance(data.get("deepspeed_config"), dict):
            block = data.get("deepspeed_config")
            if block.get("deepspeed_config_file"):
                return  # the JSON file decides
            stage = block.get("zero_stage")
            if not isinstance(stage, int) or isinstance(stage, bool):
                return
            for key in WHAT:
                option = f"{key}_device"
                if str(block.get(option, "")).lower() in OFFLOAD_DEVICES and stage not in offload_stages(key):
                    yield Finding(data.range_of(("deepspeed_config", option)), self._message(key, stage))

    @staticmethod
    def _message(key: str, stage: int) -> str:
        stages = offload_stages(key)
        needed = "only with ZeRO stage 3" if stages == (3,) else "with ZeRO stages " + ", ".join(map(str, stages))
        return (f"`{key}` works {needed}; under stage {stage} DeepSpeed ignores it and keeps the "
                f"{WHAT[key]} on the GPU (memlint estimates the run without this offload)")
