"""``LoraConfig(r=training_args.lora_r or 64)`` over a field of an arguments class another module
defines, under ``if training_args.lora_enable:`` (s1ckrain/Qwen3-VL-finetune's ``train_qwen.py``):
the adapter is read whatever the rank's source, so a launch with ``--lora_enable True`` trains
LoRA, not the whole model."""

from __future__ import annotations

from pathlib import Path

from facts_testing import dedent

from memlint.lint.engine import run_context
from memlint.project.project import Project
from memlint.project.settings import Settings

from tests.facts.facts_testing import write

ARGUMENTS = dedent('''
    from dataclasses import dataclass, field
    from typing import Optional

    import transformers


    @dataclass
    class ModelArguments:
        model_name_or_path: Optional[str] = field(default="Qwen/Qwen2.5-7B-Instruct")


    @dataclass
    class TrainingArguments(transformers.TrainingArguments):
        model_max_length: int = field(default=2048)
        lora_enable: bool = field(default=False)
        lora_r: int = field(default=64)
        lora_alpha: int = field(default=128)
''')

TRAIN = dedent('''
    import transformers
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from argument import ModelArguments, TrainingArguments


    def train():
        parser = transformers.HfArgumentParser((ModelArguments, TrainingArguments))
        model_args, training_args = parser.parse_args_into_dataclasses()
        model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path)
        if training_args.lora_enable:
            for p in model.parameters():
                p.requires_grad = False
            lora_config = LoraConfig(
                r=training_args.lora_r or 64,
                lora_alpha=training_args.lora_alpha or 128,
                target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
            )
            model = get_peft_model(model, lora_config)
        trainer = transformers.Trainer(model=model, args=training_args)
        trainer.train()


    if __name__ == "__main__":
        train()
''')

LAUNCH = dedent('''
    args="
        --model_name_or_path Qwen/Qwen2.5-7B-Instruct \\
        --lora_enable True \\
        --bf16 \\
        --per_device_train_batch_size 1 \\
        --gradient_accumulation_steps 4 \\
        --model_max_length 2048 \\
        --gradient_checkpointing True \\
        --output_dir ./output"
    torchrun --nproc_per_node=8 train/train_qwen.py ${args}
''')


def _run(tmp_path: Path, launch: str):
    write(tmp_path, {"train/argument.py": ARGUMENTS, "train/train_qwen.py": TRAIN, "scripts/sft_lora.sh": launch})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False)
    [run] = Project(settings).runs_for(tmp_path / "scripts/sft_lora.sh", run_context(settings))
    return run


def test_the_switch_on_the_launch_trains_an_adapter_of_the_written_fallback_rank(tmp_path: Path):
    # before: no rank could be read, so no adapter: the run was sized as a full fine-tune
    run = _run(tmp_path, LAUNCH)
    assert run.plan.value("lora_r") == 64
    assert run.plan.value("lora_targets") == ("q_proj", "k_proj", "v_proj", "o_proj")


def test_a_rank_the_launch_passes_wins(tmp_path: Path):
    run = _run(tmp_path, LAUNCH.replace("--lora_enable True", "--lora_enable True --lora_r 16"))
    assert run.plan.value("lora_r") == 16


def test_without_the_switch_the_model_is_trained_whole(tmp_path: Path):
    run = _run(tmp_path, LAUNCH.replace("--lora_enable True \\\n", ""))
    assert run.plan.get("lora_r") is None
