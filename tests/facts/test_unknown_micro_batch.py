"""A micro-batch the launch passes as a value memlint cannot evaluate is unknown, not the
default the option replaces (VILA's ``scripts/NVILA-Lite/align.sh``: ``--per_device_train_batch_size
$PER_DEVICE_TRAIN_BATCH_SIZE``, computed by the sourced ``scripts/setups/train.sh`` from the SLURM
node count). The run is estimated at micro-batch 1: an overflow there is reported as a lower
bound, a fit is no verdict."""

from __future__ import annotations

from pathlib import Path

from facts_testing import dedent, write

from memlint.lint.engine import Linter, run_context
from memlint.model.diagnostics import Severity
from memlint.project.project import Project
from memlint.project.settings import Settings

SETUP = dedent('''
    #!/bin/bash
    DEFAULT_GPUS_PER_NODE=8
    NNODES=${SLURM_JOB_NUM_NODES:-1}
    GPUS_PER_NODE=${SLURM_JOB_GPUS_PER_NODE:-$DEFAULT_GPUS_PER_NODE}
    GLOBAL_TRAIN_BATCH_SIZE=${GLOBAL_TRAIN_BATCH_SIZE:-$DEFAULT_GLOBAL_TRAIN_BATCH_SIZE}
    GRADIENT_ACCUMULATION_STEPS=${GRADIENT_ACCUMULATION_STEPS:-$DEFAULT_GRADIENT_ACCUMULATION_STEPS}
    PER_DEVICE_TRAIN_BATCH_SIZE=$((GLOBAL_TRAIN_BATCH_SIZE / NNODES / GPUS_PER_NODE / GRADIENT_ACCUMULATION_STEPS))
''')

LAUNCH = dedent('''
    #!/bin/bash
    DEFAULT_GLOBAL_TRAIN_BATCH_SIZE=2048
    DEFAULT_GRADIENT_ACCUMULATION_STEPS=1
    STAGE_PATH=${1:-"MODEL"}

    source scripts/setups/train.sh

    torchrun \\
        --nnodes=$NNODES --nproc_per_node=$GPUS_PER_NODE \\
        train.py \\
            --deepspeed scripts/zero3.json \\
            --model_name_or_path $STAGE_PATH \\
            --bf16 True \\
            --output_dir runs/align \\
            --per_device_train_batch_size $PER_DEVICE_TRAIN_BATCH_SIZE \\
            --gradient_accumulation_steps $GRADIENT_ACCUMULATION_STEPS \\
            --model_max_length 4096 \\
            --gradient_checkpointing True
''')

TRAIN = dedent('''
    from dataclasses import dataclass, field
    from typing import Optional

    import transformers


    @dataclass
    class ModelArguments:
        model_name_or_path: Optional[str] = field(default="Qwen/Qwen2.5-7B-Instruct")


    @dataclass
    class TrainingArguments(transformers.TrainingArguments):
        model_max_length: int = field(default=2048)


    def train():
        parser = transformers.HfArgumentParser((ModelArguments, TrainingArguments))
        model_args, training_args = parser.parse_args_into_dataclasses()
        model = transformers.AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path)
        trainer = transformers.Trainer(model=model, args=training_args)
        trainer.train()


    if __name__ == "__main__":
        train()
''')

ZERO3 = '{"zero_optimization": {"stage": 3}, "bf16": {"enabled": "auto"}, ' \
        '"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto"}\n'


def _settings(tmp_path: Path, model: str, zero: str = ZERO3) -> Settings:
    write(tmp_path, {"scripts/setups/train.sh": SETUP, "scripts/align.sh": LAUNCH.replace("MODEL", model),
                     "train.py": TRAIN, "scripts/zero3.json": zero})
    (tmp_path / ".git").mkdir()
    return Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False)


def _memory(settings: Settings) -> list:
    linter = Linter(settings)
    return [d for name in ("scripts/align.sh", "scripts/zero3.json", "train.py")
            for d in linter.lint_path(settings.root / name) if d.code.startswith("MEM")]


def test_an_unknown_micro_batch_is_estimated_at_one_not_the_default(tmp_path: Path):
    settings = _settings(tmp_path, "Qwen/Qwen2.5-7B-Instruct")
    [run] = Project(settings).runs_for(tmp_path / "scripts/align.sh", run_context(settings))
    assert run.setup.micro_batch == 1
    assert run.lower_bound is not None and "$PER_DEVICE_TRAIN_BATCH_SIZE" in run.lower_bound
    assert not any("TrainingArguments default" in note for note in run.assumptions)
    assert _memory(settings) == []  # fits at 1: no verdict either way


def test_an_overflow_at_micro_batch_one_is_a_lower_bound(tmp_path: Path):
    # no sharding: a 32B model's full fine-tuning overflows an H100 whatever the batch
    settings = _settings(tmp_path, "Qwen/Qwen2.5-32B-Instruct", zero='{"zero_optimization": {"stage": 0}}\n')
    [finding] = _memory(settings)
    assert finding.code == "MEM001" and finding.severity == Severity.ERROR
    assert finding.message.startswith("estimated peak at least ")
    assert ("a lower bound: the micro-batch is unknown (`--per_device_train_batch_size "
            "$PER_DEVICE_TRAIN_BATCH_SIZE`, align.sh:") in finding.message


def test_a_setting_states_the_unknown_micro_batch(tmp_path: Path):
    settings = _settings(tmp_path, "Qwen/Qwen2.5-7B-Instruct").with_overrides(micro_batch=32)
    [run] = Project(settings).runs_for(tmp_path / "scripts/align.sh", run_context(settings))
    assert run.setup.micro_batch == 32 and run.lower_bound is None


def test_a_literal_micro_batch_is_read_as_before(tmp_path: Path):
    settings = _settings(tmp_path, "Qwen/Qwen2.5-7B-Instruct")
    launcher = tmp_path / "scripts/align.sh"
    launcher.write_text(launcher.read_text().replace("$PER_DEVICE_TRAIN_BATCH_SIZE", "4"))
    [run] = Project(settings).runs_for(launcher, run_context(settings))
    assert run.setup.micro_batch == 4 and run.lower_bound is None
