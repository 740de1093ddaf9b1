"""CFG002: a config value of the wrong type, outside its allowed values or range."""

from __future__ import annotations

from memlint.model.diagnostics import Severity
from memlint.rules._config import SchemaRule
from memlint.rules.base import Example


class InvalidConfigValue(SchemaRule):
    """## What it does
    Reports config values the tool will not accept: a string where a number belongs, a ZeRO
    stage that does not exist, an optimizer name that is not one of the Trainer's, ``"auto"``
    where neither the HF Trainer nor Accelerate fills it in. For values that may take several
    forms, the message names the forms allowed instead of listing every failed alternative.

    A DeepSpeed boolean written as a string (``"enabled": "true"``) is read as DeepSpeed reads it:
    its pydantic sections take ``"true"``/``"false"`` for the booleans they spell, and before
    0.17.1 ``fp16``/``bf16`` were used as written and tested for truth, so ``"false"`` turned the
    mode on. Such a value is an info, or a warning where the pinned DeepSpeed turns the mode on.

    A TrainingArguments / TRL ``optim`` (and any other enum-typed key) is judged against the
    Transformers release the project pins: ``optim: adamw_hf`` is right on 4.34 and an error,
    "removed in Transformers 4.50", on a later pin.

    ## Why it matters
    The tools find these at start-up, after the job was queued and the checkpoint loaded —
    or never: YAML 1.1 reads ``learning_rate: 2e-5`` as the *string* ``"2e-5"`` (there is no
    dot), and DeepSpeed silently replaces an ``"auto"`` it does not expect with its default.
    (A recipe a launch hands to a TrlParser script with ``--config`` is the exception: TrlParser
    makes its values argparse defaults, and argparse converts the string ``"2e-5"`` to a float. So
    is a LLaMA-Factory config from 0.9.4 on, which it loads with OmegaConf, whose YAML loader reads
    ``2e-5`` as a number.)

    ## Fix
    Write the value the message asks for (``2.0e-5``, an integer, one of the listed names).
    """

    code = "CFG002"
    name = "invalid-config-value"
    severity = Severity.ERROR
    category = "invalid"

    VALID = (
        Example(
            "output_dir: outputs/llama-2-7b-sft\nper_device_train_batch_size: 4\nlearning_rate: 2.0e-5\n"
            "optim: adamw_hf\nlr_scheduler_type: cosine\nbf16: true\n",
            path="configs/training_args.yaml",
            files={"requirements.txt": "torch==2.1.0\ntransformers==4.34.0\n"},
            title="`adamw_hf` is an optimizer of the pinned Transformers 4.34 (4.50 removed it)",
        ),
        Example(
            "### model\nmodel_name_or_path: Qwen/Qwen2.5-7B-Instruct\n\n### method\nstage: sft\ndo_train: true\n"
            "finetuning_type: lora\nlora_target: all\n\n### dataset\ndataset: alpaca_en_demo\ntemplate: qwen\n"
            "cutoff_len: 2048\n\n### train\nper_device_train_batch_size: 1\ngradient_accumulation_steps: 8\n"
            "learning_rate: 1.0e-4\nnum_train_epochs: 3.0\nlr_scheduler_type: cosine\nbf16: true\n"
            "output_dir: saves/qwen2.5-7b/lora/sft\n",
            path="examples/train_lora/qwen2.5_lora_sft.yaml",
            title="LLaMA-Factory writes `1.0e-4`, which YAML reads as a number",
        ),
    )
    INVALID = (
        Example(
            "output_dir: outputs/qwen2.5-7b-sft\nper_device_train_batch_size: 1\ngradient_accumulation_steps: 8\n"
            "learning_rate: 2e-5\nlr_scheduler_type: cosine\nbf16: true\n",
            path="configs/training_args.yaml",
            lines=(4,),
            message="YAML 1.1 reads `2e-5` as a string",
            title="`2e-5` is a string in YAML 1.1, as HfArgumentParser.parse_yaml_file reads it",
        ),
        Example(
            '{\n  "train_micro_batch_size_per_gpu": 2,\n  "gradient_accumulation_steps": 8,\n'
            '  "bf16": {"enabled": true},\n  "zero_optimization": {\n    "stage": 4,\n'
            '    "overlap_comm": "auto"\n  }\n}\n',
            path="ds_config.json",
            lines=(6, 7),
            message="`zero_optimization.",
            title='There is no ZeRO stage 4, and nothing fills "auto" in for `overlap_comm`',
        ),
    )
