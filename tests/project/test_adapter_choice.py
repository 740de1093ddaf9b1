"""A script that chooses its PEFT method by the value of one option (LLM-Adapters'
``finetune.py``, copied into NVlabs/DoRA: ``adapter_name: str = "lora"``, then ``if adapter_name
== "lora": LoraConfig(...) elif adapter_name == "dora": DoraConfig(...) elif ...``). The launch's
``--adapter_name dora`` takes back the LoRA its default builds and picks the method it names;
``--lora_r $1`` leaves the rank unknown, not the adapter."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlint.lint.engine import Linter, run_context
from memlint.project.project import Project
from memlint.project.settings import Settings

from tests.facts.facts_testing import dedent, facts_of, write

FINETUNE_PY = dedent('''
    import os
    from typing import List

    import fire
    import torch
    import transformers
    from datasets import load_dataset
    from peft import (  # noqa: E402
        LoraConfig,
        DoraConfig,
        PrefixTuningConfig,
        get_peft_model,
        prepare_model_for_int8_training,
    )
    from transformers import AutoModelForCausalLM, AutoTokenizer


    def train(
            base_model: str = "",
            data_path: str = "yahma/alpaca-cleaned",
            output_dir: str = "./lora-alpaca",
            adapter_name: str = "lora",
            batch_size: int = 128,
            micro_batch_size: int = 4,
            num_epochs: int = 3,
            learning_rate: float = 3e-4,
            cutoff_len: int = 256,
            use_gradient_checkpointing: bool = False,
            lora_r: int = 8,
            lora_alpha: int = 16,
            lora_dropout: float = 0.05,
            target_modules: List[str] = None,
            num_virtual_tokens: int = 30,
    ):
        gradient_accumulation_steps = batch_size // micro_batch_size
        model = AutoModelForCausalLM.from_pretrained(
            base_model,
            load_in_8bit=False,
            torch_dtype=torch.float16,
            device_map={"": int(os.environ.get("LOCAL_RANK") or 0)},
        )
        tokenizer = AutoTokenizer.from_pretrained(base_model)
        model = prepare_model_for_int8_training(model, use_gradient_checkpointing=use_gradient_checkpointing)
        if adapter_name == "lora":
            config = LoraConfig(
                r=lora_r,
                lora_alpha=lora_alpha,
                target_modules=target_modules,
                lora_dropout=lora_dropout,
                bias="none",
                task_type="CAUSAL_LM",
            )
        elif adapter_name == "dora":
            config = DoraConfig(
                r=lora_r,
                lora_alpha=lora_alpha,
                target_modules=target_modules,
                lora_dropout=lora_dropout,
                bias="none",
                task_type="CAUSAL_LM",
            )
        elif adapter_name == "prefix-tuning":
            config = PrefixTuningConfig(num_virtual_tokens=num_virtual_tokens, task_type="CAUSAL_LM")
        model = get_peft_model(model, config)

        def tokenize(prompt, add_eos_token=True):
            result = tokenizer(prompt, truncation=True, max_length=cutoff_len, padding=False, return_tensors=None)
            result["labels"] = result["input_ids"].copy()
            return result

        data = load_dataset("json", data_files=data_path)
        train_data = data["train"].shuffle().map(lambda point: tokenize(point["instruction"] + point["output"]))
        trainer = transformers.Trainer(
            model=model,
            train_dataset=train_data,
            args=transformers.TrainingArguments(
                per_device_train_batch_size=micro_batch_size,
                gradient_accumulation_steps=gradient_accumulation_steps,
                num_train_epochs=num_epochs,
                learning_rate=learning_rate,
                fp16=True,
                optim="adamw_torch",
                output_dir=output_dir,
            ),
        )
        trainer.train()


    if __name__ == "__main__":
        fire.Fire(train)
''')

LAUNCH = dedent('''
    CUDA_VISIBLE_DEVICES=$4 python finetune.py \\
        --base_model 'meta-llama/Llama-2-7b-hf' \\
        --data_path 'commonsense_170k.json' \\
        --output_dir $3 \\
        --batch_size 16  --micro_batch_size 16 --num_epochs 3 \\
        --learning_rate 1e-4 --cutoff_len 256{extra} \\
        --target_modules '["q_proj", "k_proj", "v_proj", "up_proj", "down_proj"]'
''')


def _project(tmp_path: Path, extra: str) -> Settings:
    write(tmp_path, {"finetune.py": FINETUNE_PY, "llama_7B.sh": LAUNCH.format(extra=extra)})
    (tmp_path / ".git").mkdir(exist_ok=True)
    return Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False)


def _run(tmp_path: Path, extra: str):
    settings = _project(tmp_path, extra)
    [run] = Project(settings).runs_for(tmp_path / "llama_7B.sh", run_context(settings))
    return run


def test_each_method_binds_to_the_value_that_chooses_it():
    [script] = facts_of(FINETUNE_PY, "finetune.py")
    assert script.lora_r.value == 8  # the default, "lora", builds the LoRA
    assert script.peft_method is None
    bindings = script.cli_bindings["adapter_name"]
    assert "unlessis=lora:lora_r=8" in bindings
    assert "is=dora:peft_method=DoraConfig" in bindings
    assert "is=prefix-tuning:peft_method=PrefixTuningConfig" in bindings


def test_the_method_the_launch_names_is_not_estimated_as_a_full_fine_tune(tmp_path: Path):
    run = _run(tmp_path, " --adapter_name dora --lora_r 32")
    assert run.problem is not None and "the PEFT method `DoraConfig`" in run.problem
    findings = [d for d in Linter(_project(tmp_path, " --adapter_name dora --lora_r 32")).lint_path(
        tmp_path / "llama_7B.sh") if d.code.startswith("MEM")]
    assert [d.code for d in findings] == ["MEM003"]  # before: MEM001, a 7B full fine-tune in fp16 with Adam


@pytest.mark.parametrize(("extra", "rank"), [("", 8), (" --adapter_name lora", 8), (" --adapter_name lora --lora_r 32", 32)])
def test_the_default_choice_or_the_one_the_launch_repeats_trains_the_lora(tmp_path: Path, extra: str, rank: int):
    run = _run(tmp_path, extra)
    assert run.setup is not None, run.problem
    assert run.setup.lora is not None and run.setup.lora.r == rank
    assert "up_proj" in run.setup.lora.targets


def test_a_rank_the_launch_leaves_unknown_keeps_the_adapter(tmp_path: Path):
    run = _run(tmp_path, " --adapter_name lora --lora_r $1 --lora_alpha $2")
    assert run.setup is not None, run.problem
    assert run.setup.lora is not None and run.setup.lora.r == 8  # before: no LoRA, a full fine-tune
    rank = run.plan.get("lora_r")
    assert rank.assumed and "cannot read" in rank.note
    findings = [d for d in Linter(_project(tmp_path, " --adapter_name lora --lora_r $1 --lora_alpha $2")).lint_path(
        tmp_path / "llama_7B.sh") if d.code in ("MEM001", "MEM002")]
    assert findings == []  # a 7B LoRA at 16 x 256 tokens fits an H100


# sagerpascal/deepspeed-llm's finetune_conversation/finetune_llama.py, trimmed: an HfArgumentParser
# dataclass picks the method, a helper returns the config and SFTTrainer gets it as peft_config
TRL_HELPER_PY = dedent('''
    from dataclasses import dataclass, field
    from typing import Optional

    import torch
    from peft import AdaLoraConfig, LoHaConfig, LoraConfig
    from transformers import AutoModelForCausalLM, HfArgumentParser, TrainingArguments
    from trl import SFTTrainer


    @dataclass
    class ScriptArguments:
        model_name: Optional[str] = field(default="meta-llama/Llama-2-7b-hf")
        lora_method: Optional[str] = field(default="lora", metadata={"help": "lora, adalora or loha"})
        lora_r: Optional[int] = field(default=64)
        lora_alpha: Optional[int] = field(default=16)
        max_seq_length: Optional[int] = field(default=512)
        per_device_train_batch_size: Optional[int] = field(default=4)


    parser = HfArgumentParser(ScriptArguments)
    script_args = parser.parse_args_into_dataclasses()[0]


    def create_and_prepare_model(args):
        model = AutoModelForCausalLM.from_pretrained(args.model_name, torch_dtype=torch.bfloat16)
        if script_args.lora_method == "lora":
            peft_config = LoraConfig(target_modules=["q_proj", "k_proj", "v_proj", "o_proj"], r=script_args.lora_r,
                                     lora_alpha=script_args.lora_alpha, task_type="CAUSAL_LM")
        elif script_args.lora_method == "adalora":
            peft_config = AdaLoraConfig(target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                                        target_r=script_args.lora_r, lora_alpha=script_args.lora_alpha,
                                        task_type="CAUSAL_LM")
        elif script_args.lora_method == "loha":
            peft_config = LoHaConfig(target_modules=["q_proj", "k_proj", "v_proj", "o_proj"], r=script_args.lora_r,
                                     alpha=script_args.lora_alpha, task_type="CAUSAL_LM")
        else:
            raise ValueError("unknown lora config")
        return model, peft_config


    model, peft_config = create_and_prepare_model(script_args)
    training_arguments = TrainingArguments(output_dir="./results", bf16=True, optim="paged_adamw_32bit",
                                           per_device_train_batch_size=script_args.per_device_train_batch_size)
    trainer = SFTTrainer(model=model, train_dataset=dataset, peft_config=peft_config, args=training_arguments)
    trainer.train()
''')


def test_a_method_config_a_helper_returns_for_the_trainer_is_the_runs(tmp_path: Path):
    [script] = facts_of(TRL_HELPER_PY, "finetune_llama.py")
    assert "is=adalora:peft_method=AdaLoraConfig" in script.cli_bindings["lora_method"]
    write(tmp_path, {"finetune_llama.py": TRL_HELPER_PY,
                     "run_finetune.sh": "python finetune_llama.py --lora_method adalora --max_seq_length 400\n"})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=1, cache=False)
    [run] = Project(settings).runs_for(tmp_path / "run_finetune.sh", run_context(settings))
    assert run.problem is not None and "`AdaLoraConfig`" in run.problem  # before: a full fine-tune, paged states


def test_methods_a_condition_memlint_cannot_read_picks_name_none_of_them():
    # peft's examples/stable_diffusion/train_dreambooth.py, trimmed: `lora`, `loha` and `lokr` are
    # argparse subcommands (add_subparsers(dest="adapter")), whose choice memlint does not read
    script = dedent('''
        import argparse

        from peft import LoHaConfig, LoKrConfig, LoraConfig, get_peft_model
        from transformers import AutoModelForCausalLM, Trainer, TrainingArguments


        def create_unet_adapter_config(args: argparse.Namespace):
            if args.adapter == "lora":
                config = LoraConfig(r=args.rank, lora_alpha=args.alpha, target_modules=["q_proj", "v_proj"])
            elif args.adapter == "loha":
                config = LoHaConfig(r=args.rank, alpha=args.alpha, target_modules=["q_proj", "v_proj"])
            elif args.adapter == "lokr":
                config = LoKrConfig(r=args.rank, alpha=args.alpha, target_modules=["q_proj", "v_proj"])
            return config


        def main(args):
            model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-hf")
            model = get_peft_model(model, create_unet_adapter_config(args))
            Trainer(model=model, args=TrainingArguments(output_dir="out", bf16=True), train_dataset=data).train()


        if __name__ == "__main__":
            parser = argparse.ArgumentParser()
            subparsers = parser.add_subparsers(dest="adapter")
            subparsers.add_parser("lora")
            subparsers.add_parser("loha")
            subparsers.add_parser("lokr")
            main(parser.parse_args())
    ''')
    [script] = facts_of(script, "train_dreambooth.py")
    assert script.peft_method is None  # before: LoKrConfig, one of three branches memlint cannot tell apart
