"""CFG005: a key the tool requires is missing."""

from __future__ import annotations

from memlint.model.diagnostics import Severity
from memlint.rules._config import SchemaRule
from memlint.rules.base import Example


class MissingConfigKey(SchemaRule):
    """## What it does
    Reports keys a tool requires and the config does not set: Axolotl's ``base_model`` and
    ``learning_rate``, Accelerate's ``distributed_type``, and required keys of nested sections.

    ## Why it matters
    The tool stops at start-up with a validation error; memlint says so before the job is
    queued (and cannot estimate a run whose model is not named).

    ## Fix
    Add the key.
    """

    code = "CFG005"
    name = "missing-config-key"
    severity = Severity.ERROR
    category = "missing"

    VALID = (
        Example(
            "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nmachine_rank: 0\n"
            "mixed_precision: bf16\nnum_machines: 1\nnum_processes: 4\nuse_cpu: false\n",
            path="accelerate_configs/multi_gpu.yaml",
            title="An `accelerate config` file",
        ),
    )
    INVALID = (
        Example(
            "base_model: mistralai/Mistral-7B-Instruct-v0.3\nadapter: lora\nlora_r: 16\nlora_alpha: 32\n"
            "lora_target_linear: true\nsequence_len: 4096\nmicro_batch_size: 2\nnum_epochs: 3\n"
            "optimizer: adamw_torch_fused\nlr_scheduler: cosine\n",
            path="mistral-lora.yml",
            lines=(1,),
            message="requires `learning_rate`",
            title="Axolotl has no default learning rate",
        ),
    )
