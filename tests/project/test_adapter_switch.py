"""A project's arguments class declares its adapter's parameters beside the switch that turns
the adapter on (LLaVA-NeXT's ``llava/train/train.py``: ``lora_enable: bool = False``,
``lora_r: int = 64``, PEFT applied only under ``if training_args.lora_enable:``). The rank's
default is a parameter of an adapter the script may build, not the choice of one: the run is a
full fine-tune unless the launch turns the switch on."""

from __future__ import annotations

from pathlib import Path

from memlint.lint.engine import run_context
from memlint.project.project import Project
from memlint.project.settings import Settings

from tests.facts.facts_testing import dedent, write

TRAIN_PY = dedent('''
    from dataclasses import dataclass, field
    from typing import Optional

    import torch
    import transformers
    from peft import LoraConfig, get_peft_model


    @dataclass
    class ModelArguments:
        model_name_or_path: Optional[str] = field(default="Qwen/Qwen2-7B-Instruct")


    @dataclass
    class TrainingArguments(transformers.TrainingArguments):
        model_max_length: int = field(default=4096, metadata={"help": "Maximum sequence length."})
        lora_enable: bool = False
        lora_r: int = 64
        lora_alpha: int = 16
        lora_dropout: float = 0.05


    def train():
        parser = transformers.HfArgumentParser((ModelArguments, TrainingArguments))
        model_args, training_args = parser.parse_args_into_dataclasses()
        model = transformers.AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path,
                                                                  torch_dtype=torch.bfloat16)
        if training_args.lora_enable:
            lora_config = LoraConfig(r=training_args.lora_r, lora_alpha=training_args.lora_alpha,
                                     target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                                     lora_dropout=training_args.lora_dropout, task_type="CAUSAL_LM")
            model = get_peft_model(model, lora_config)
        trainer = transformers.Trainer(model=model, args=training_args)
        trainer.train()


    if __name__ == "__main__":
        train()
''')

LAUNCH = dedent('''
    #!/bin/bash
    torchrun --nproc_per_node=8 train.py \\
        --model_name_or_path Qwen/Qwen2-7B-Instruct \\
        --bf16 True \\
        --per_device_train_batch_size 4 \\
        --gradient_checkpointing True{extra}
''')


def _setup(tmp_path: Path, extra: str = "", train: str = TRAIN_PY):
    write(tmp_path, {"train.py": train, "run.sh": LAUNCH.format(extra=extra)})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False)
    [run] = Project(settings).runs_for(tmp_path / "run.sh", run_context(settings))
    assert run.setup is not None, run.problem
    return run.setup


def test_a_rank_default_under_an_off_switch_is_a_full_fine_tune(tmp_path: Path):
    assert _setup(tmp_path).lora is None


def test_the_launch_that_turns_the_switch_on_trains_the_adapter_of_the_default_rank(tmp_path: Path):
    lora = _setup(tmp_path, " \\\n    --lora_enable True").lora
    assert lora is not None and lora.r == 64
    assert set(lora.targets) == {"q_proj", "k_proj", "v_proj", "o_proj"}


def test_a_rank_the_launch_passes_is_the_rank(tmp_path: Path):
    lora = _setup(tmp_path, " \\\n    --lora_enable True --lora_r 16").lora
    assert lora is not None and lora.r == 16


# artidoro/qlora's qlora.py: no adapter switch, adapters unless `full_finetune`; the model is
# built by a helper that gets `argparse.Namespace(**vars(model_args), **vars(training_args))`,
# and the class's default rank is the adapter's
NO_SWITCH = dedent('''
    from dataclasses import dataclass, field
    from typing import Optional
    import argparse

    import torch
    import transformers
    from peft import LoraConfig, get_peft_model


    @dataclass
    class ModelArguments:
        model_name_or_path: Optional[str] = field(default="Qwen/Qwen2-7B-Instruct")


    @dataclass
    class TrainingArguments(transformers.Seq2SeqTrainingArguments):
        model_max_length: int = field(default=4096, metadata={"help": "Maximum sequence length."})
        full_finetune: bool = field(default=False, metadata={"help": "Finetune the entire model without adapters."})
        lora_r: int = field(default=64, metadata={"help": "Lora R dimension."})
        lora_alpha: float = field(default=16, metadata={"help": "Lora alpha."})


    def get_accelerate_model(args):
        model = transformers.AutoModelForCausalLM.from_pretrained(args.model_name_or_path, torch_dtype=torch.bfloat16)
        if not args.full_finetune:
            config = LoraConfig(r=args.lora_r, lora_alpha=args.lora_alpha, target_modules=["q_proj", "v_proj"],
                                task_type="CAUSAL_LM")
            model = get_peft_model(model, config)
        return model


    def train():
        parser = transformers.HfArgumentParser((ModelArguments, TrainingArguments))
        model_args, training_args = parser.parse_args_into_dataclasses()
        args = argparse.Namespace(**vars(model_args), **vars(training_args))
        model = get_accelerate_model(args)
        trainer = transformers.Seq2SeqTrainer(model=model, args=training_args)
        trainer.train()


    if __name__ == "__main__":
        train()
''')


def test_a_class_without_an_adapter_switch_chooses_the_adapter_by_its_rank(tmp_path: Path):
    lora = _setup(tmp_path, train=NO_SWITCH).lora
    assert lora is not None and lora.r == 64
