"""A script whose docstring says how to run it (TRL's examples): each command there is a launch
of the script, its options applied through the script's argument parser, located in the
docstring. A command for another script, or prose that mentions python, launches nothing."""

from __future__ import annotations

from pathlib import Path

from facts_testing import dedent, facts_of, span, where

from memlint.lint.engine import run_context
from memlint.project.settings import Settings
from memlint.project.project import Project

# as TRL writes its example scripts (examples/scripts/kto.py), trimmed
KTO = dedent('''
    # /// script
    # dependencies = ["trl[peft]"]
    # ///

    """
    Run the KTO training script with the commands below. In general, the optimal configuration
    for KTO will be similar to that of DPO -- don't use python 2.

    # Full training:
    python trl/scripts/kto.py \\
        --dataset_name trl-lib/kto-mix-14k \\
        --model_name_or_path Qwen/Qwen2.5-1.5B \\
        --per_device_train_batch_size 16 \\
        --gradient_accumulation_steps 1 \\
        --output_dir kto-aligned-model

    # QLoRA, on 2 GPUs:
    accelerate launch --num_processes 2 trl/scripts/kto.py \\
        --model_name_or_path Qwen/Qwen2.5-1.5B \\
        --per_device_train_batch_size 8 \\
        --use_peft \\
        --load_in_4bit \\
        --lora_r 16

    To merge the adapter afterwards, run `python scripts/merge.py --adapter kto-aligned-model-lora`.
    """

    from datasets import load_dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trl import KTOConfig, KTOTrainer, ModelConfig, ScriptArguments, TrlParser, get_peft_config


    if __name__ == "__main__":
        parser = TrlParser((ScriptArguments, KTOConfig, ModelConfig))
        script_args, training_args, model_args = parser.parse_args_and_config()
        model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path)
        tokenizer = AutoTokenizer.from_pretrained(model_args.model_name_or_path)
        dataset = load_dataset(script_args.dataset_name)
        trainer = KTOTrainer(
            model,
            args=training_args,
            train_dataset=dataset[script_args.dataset_train_split],
            processing_class=tokenizer,
            peft_config=get_peft_config(model_args),
        )
        trainer.train()
''')


def test_each_docstring_command_for_this_script_is_a_launch_of_it():
    script, full, qlora = facts_of(KTO, "examples/scripts/kto.py")
    assert script.kind == "python" and script.launches is None
    for launch in (full, qlora):
        assert launch.kind == "shell"
        assert launch.launches.value == "kto.py"  # this file, whatever folder the command says
    assert where(full.launches) == span(KTO, "python «trl/scripts/kto.py» \\")
    assert full.cli_args["model_name_or_path"].value == "Qwen/Qwen2.5-1.5B"
    assert where(full.cli_args["per_device_train_batch_size"]) == span(KTO, "--per_device_train_batch_size «16»")
    assert qlora.world_size.value == 2
    assert qlora.cli_args["load_in_4bit"].value == "true"
    # prose ("don't use python 2") and the merge command for another script launch nothing


def test_a_docstring_without_commands_adds_nothing():
    text = KTO.replace("python trl/scripts/kto.py", "see the docs").replace(
        "accelerate launch --num_processes 2 trl/scripts/kto.py", "or the README")
    [script] = facts_of(text, "examples/scripts/kto.py")
    assert script.launches is None


def test_the_runs_of_a_documented_script_are_its_commands(tmp_path: Path):
    path = tmp_path / "examples" / "scripts" / "kto.py"
    path.parent.mkdir(parents=True)
    path.write_text(KTO, encoding="utf-8")
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", cache=False)
    project = Project(settings)
    runs = project.runs_for(path, run_context(settings))
    assert len(runs) == 2  # the two commands; not a third run without options
    full, qlora = runs
    assert full.plan.value("model") == "Qwen/Qwen2.5-1.5B"
    assert full.plan.value("micro_batch") == 16
    assert full.plan.get("micro_batch").origin.range.start.line == span(KTO, "--per_device_train_batch_size «16»")[0]
    assert qlora.plan.value("micro_batch") == 8
    assert qlora.plan.value("quantization") == "nf4"
    assert qlora.plan.value("world_size") == 2


# TRL's examples/scripts/ppo/ppo.py, trimmed: the commands are a usage string after the imports,
# and the policy comes from PPOConfig's --sft_model_path
PPO = dedent('''
    import shutil

    from transformers import AutoModelForCausalLM, AutoTokenizer, HfArgumentParser

    from trl import ModelConfig, ScriptArguments
    from trl.experimental.ppo import PPOConfig, PPOTrainer


    """
    python -i examples/scripts/ppo/ppo.py \\
        --dataset_name trl-internal-testing/descriptiveness-sentiment-trl-style \\
        --per_device_train_batch_size 64 \\
        --model_name_or_path EleutherAI/pythia-1b-deduped \\
        --sft_model_path EleutherAI/pythia-1b-deduped

    accelerate launch --config_file examples/accelerate_configs/deepspeed_zero3.yaml \\
        examples/scripts/ppo/ppo.py \\
        --per_device_train_batch_size 1 \\
        --gradient_accumulation_steps 16 \\
        --model_name_or_path EleutherAI/pythia-1b-deduped \\
        --sft_model_path EleutherAI/pythia-1b-deduped
    """


    if __name__ == "__main__":
        parser = HfArgumentParser((ScriptArguments, PPOConfig, ModelConfig))
        script_args, training_args, model_args = parser.parse_args_into_dataclasses()
        tokenizer = AutoTokenizer.from_pretrained(model_args.model_name_or_path, padding_side="left")
        policy = AutoModelForCausalLM.from_pretrained(training_args.sft_model_path)
        trainer = PPOTrainer(args=training_args, processing_class=tokenizer, model=policy)
        trainer.train()
''')


def test_a_usage_string_after_the_imports_gives_launches_too():
    script, single, accelerate = facts_of(PPO, "examples/scripts/ppo/ppo.py")
    assert script.kind == "python"
    assert single.launches.value == accelerate.launches.value == "ppo.py"
    assert single.cli_args["sft_model_path"].value == "EleutherAI/pythia-1b-deduped"
    assert where(single.launches) == span(PPO, "python -i «examples/scripts/ppo/ppo.py» \\")
    # a string inside a function, or assigned to a name, is no usage string
    inside = PPO.replace('\n"""\npython -i', '\nUSAGE = """\npython -i')
    assert len(facts_of(inside, "examples/scripts/ppo/ppo.py")) == 1


# TRL's examples/scripts/distillation.py, trimmed: the parser's dataclasses are a tuple in a variable
DISTILLATION = dedent('''
    """
    python examples/scripts/distillation.py \\
        --model_name_or_path Qwen/Qwen2.5-0.5B-Instruct \\
        --teacher_model_name_or_path Qwen/Qwen2.5-1.5B-Instruct \\
        --per_device_train_batch_size 4 \\
        --gradient_accumulation_steps 8 \\
        --output_dir distilled-model
    """

    import argparse


    def main(script_args, training_args, model_args):
        from datasets import load_dataset

        from trl.experimental.distillation import DistillationTrainer

        dataset = load_dataset(script_args.dataset_name)
        trainer = DistillationTrainer(
            model=model_args.model_name_or_path,
            teacher_model=training_args.teacher_model_name_or_path,
            args=training_args,
            train_dataset=dataset[script_args.dataset_train_split],
        )
        trainer.train()


    def make_parser(subparsers: argparse._SubParsersAction | None = None, prog: str | None = None):
        from trl import ModelConfig, ScriptArguments, TrlParser
        from trl.experimental.distillation import DistillationConfig

        dataclass_types = (ScriptArguments, DistillationConfig, ModelConfig)
        if subparsers is not None:
            parser = subparsers.add_parser("distillation", dataclass_types=dataclass_types)
        else:
            parser = TrlParser(dataclass_types, prog=prog)
        return parser


    if __name__ == "__main__":
        parser = make_parser()
        script_args, training_args, model_args = parser.parse_args_and_config(fail_with_unknown_args=False)
        main(script_args, training_args, model_args)
''')


def test_parser_dataclasses_held_in_a_variable_take_the_commands_options(tmp_path: Path):
    path = tmp_path / "examples" / "scripts" / "distillation.py"
    path.parent.mkdir(parents=True)
    path.write_text(DISTILLATION, encoding="utf-8")
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", cache=False)
    [run] = Project(settings).runs_for(path, run_context(settings))
    assert run.plan.value("model") == "Qwen/Qwen2.5-0.5B-Instruct"
    assert run.plan.value("micro_batch") == 4 and run.plan.value("grad_accum") == 8
