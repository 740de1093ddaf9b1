"""CFG003: a config key the tool still reads but has deprecated."""

from __future__ import annotations

from memlint.model.diagnostics import Applicability, Severity
from memlint.rules._config import SchemaRule
from memlint.rules.base import Example


class DeprecatedConfigKey(SchemaRule):
    """## What it does
    Reports keys (and forms of values) that the tool marks deprecated — DeepSpeed's
    ``bfloat16`` block and ``cpu_offload``, Accelerate's ``fp16``, Axolotl's
    ``flash_attention``, the ``fsdp_`` prefix inside Axolotl's ``fsdp_config``, Transformers'
    ``gradient_checkpointing`` — and names the key to use. The schemas record each
    replacement from the tool's own source. An Axolotl key written with no value
    (``xformers_attention:``) sets nothing and is not reported.

    ## Why it matters
    Deprecated keys are removed in a later release, and then they are ignored or refused; a
    config that says ``cpu_offload`` may stop offloading after an upgrade and run out of memory.

    ## Fix
    When the rename is mechanical (the new key takes the same value and is not set already),
    the fix renames the key and is safe. Otherwise the message says what to write.
    """

    code = "CFG003"
    name = "deprecated-config-key"
    severity = Severity.WARNING
    category = "deprecated"
    fix_applicability = Applicability.SAFE

    VALID = (
        Example(
            '{\n  "train_micro_batch_size_per_gpu": 4,\n  "gradient_accumulation_steps": 4,\n'
            '  "bf16": {"enabled": true},\n  "zero_optimization": {\n    "stage": 2,\n'
            '    "offload_optimizer": {"device": "cpu", "pin_memory": true}\n  }\n}\n',
            path="ds_config_zero2_offload.json",
            title="Current DeepSpeed spellings",
        ),
    )
    INVALID = (
        Example(
            '{\n  "train_micro_batch_size_per_gpu": 4,\n  "gradient_accumulation_steps": 4,\n'
            '  "bfloat16": {"enabled": true},\n  "zero_optimization": {\n    "stage": 3,\n'
            '    "stage3_gather_fp16_weights_on_model_save": true\n  }\n}\n',
            path="ds_config.json",
            lines=(4, 7),
            message="is deprecated in DeepSpeed",
            fixed='{\n  "train_micro_batch_size_per_gpu": 4,\n  "gradient_accumulation_steps": 4,\n'
            '  "bf16": {"enabled": true},\n  "zero_optimization": {\n    "stage": 3,\n'
            '    "gather_16bit_weights_on_model_save": true\n  }\n}\n',
            title="Old DeepSpeed spellings, renamed by the fix",
        ),
        Example(
            "base_model: Qwen/Qwen2.5-7B\nsequence_len: 4096\nmicro_batch_size: 1\nlearning_rate: 0.00001\n"
            "fsdp_version: 2\nfsdp_config:\n  fsdp_offload_params: false\n  fsdp_state_dict_type: FULL_STATE_DICT\n"
            "  transformer_layer_cls_to_wrap: Qwen2DecoderLayer\n",
            path="qwen-fsdp.yml",
            lines=(7, 8),
            message="prefix",
            fixed="base_model: Qwen/Qwen2.5-7B\nsequence_len: 4096\nmicro_batch_size: 1\nlearning_rate: 0.00001\n"
            "fsdp_version: 2\nfsdp_config:\n  offload_params: false\n  state_dict_type: FULL_STATE_DICT\n"
            "  transformer_layer_cls_to_wrap: Qwen2DecoderLayer\n",
            title="Axolotl strips the deprecated `fsdp_` prefix inside `fsdp_config`",
        ),
    )
