"""CFG004: a config key the tool has removed."""

from __future__ import annotations

from memlint.model.diagnostics import Severity
from memlint.rules._config import SchemaRule
from memlint.rules.base import Example


class RemovedConfigKey(SchemaRule):
    """## What it does
    Reports config keys the tool has removed: DeepSpeed sections (``amp``,
    ``compression_training``, ``curriculum_learning`` at the top level, ``elasticity``, ...)
    with DeepSpeed's own message about what replaced each and the release that removed it
    (0.19.7 or 0.19.8, read from each release's source), and TrainingArguments, TRL and
    Axolotl keys, judged against the release the project pins (``requirements*.txt``,
    ``pyproject.toml``, ``setup.py``/``setup.cfg`` read without running them, lock files,
    ``environment.yml``). The history of each key (the releases that read it) comes from the
    tools' real releases (``schemas/history/``).

    A key removed before the pinned release is an error that says when
    ("removed in Transformers 4.51 (last read by 4.50); you pin ..."). A key the pinned
    release still reads is no error: an info says which later release removed it, so an
    upgrade does not drop it silently. A range pin that admits both (``trl>=0.19.1`` for a key
    TRL 0.20 removed) gives a warning that says both: the pin's older releases read the key, a
    fresh install (the newest release the pin admits) does not. Without a pin, the newest
    release decides. An Axolotl key written with no value (``fsdp:``, as Axolotl's example
    configs leave the keys they do not use) is not reported: Axolotl reads its config through a
    ``DictDefault``, where such a key reads as one never written. A TrainingArguments or TRL
    file's is: ``HfArgumentParser`` refuses a key its dataclasses lack whatever its value.

    ## Why it matters
    DeepSpeed refuses some removed sections at start-up and silently ignores others: a leftover
    ``compression_training`` block trains the model unquantised, a ``nebula`` block falls back
    to local checkpoints. ``HfArgumentParser`` refuses a file with a removed key after the job
    waited in the queue; Axolotl ignores it silently, so the setting it held is lost.

    ## Fix
    Delete the key, or move to the replacement the message names, or pin the release that
    reads it.
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
            "output_dir: outputs/llama-3-8b-sft\nper_device_train_batch_size: 2\ngradient_accumulation_steps: 16\n"
            "learning_rate: 2.0e-5\nevaluation_strategy: steps\neval_steps: 200\nbf16: true\n",
            path="configs/training_args.yaml",
            files={"requirements.txt": "torch==2.5.1\ntransformers==4.52.4\ndatasets==3.6.0\n"},
            lines=(5,),
            message="was removed in Transformers 4.51 (last read by 4.50); you pin `transformers==4.52.4`",
            title="`evaluation_strategy` was renamed `eval_strategy`; the pinned Transformers no longer reads it",
        ),
        Example(
            '{\n  "train_micro_batch_size_per_gpu": 8,\n  "amp": {"enabled": true, "opt_level": "O1"},\n'
            '  "zero_optimization": {"stage": 1}\n}\n',
            path="ds_config.json",
            lines=(3,),
            message="was removed in DeepSpeed 0.19.8",
            title="The Apex AMP integration is gone",
        ),
        Example(
            "output_dir: outputs/llama-2-7b-sft\nper_device_train_batch_size: 4\ngradient_accumulation_steps: 8\n"
            "learning_rate: 2.0e-5\nevaluation_strategy: steps\neval_steps: 500\nbf16: true\n",
            path="configs/training_args.yaml",
            files={"requirements.txt": "torch==2.1.0\ntransformers==4.40.2\ndatasets==2.14.5\n"},
            lines=(5,),
            message="is read by the Transformers 4.40 you pin",
            title="The pinned Transformers 4.40 reads `evaluation_strategy`: only an info that 4.51 removed it",
        ),
    )
