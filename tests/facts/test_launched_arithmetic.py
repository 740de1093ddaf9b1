"""Values a script works out from its options, redone with the options a launch passes.

alpaca-lora's ``gradient_accumulation_steps = batch_size // micro_batch_size`` over
``fire.Fire(train)`` parameters, an argparse ``args.total_batch // args.micro_batch // world_size``
with ``world_size`` read from ``WORLD_SIZE``, a parsed dataclass's fields divided by the process
count: a launch passing ``--micro_batch_size 8`` runs 16x accumulation, not the defaults' 32x,
and MEM001's remedy starts from the run's own accumulation."""

from __future__ import annotations

from pathlib import Path

from facts_testing import dedent, one, write
from test_function_clis import FINETUNE

from memlint.facts.launch_options import facts_from_cli, hidden_by_cli
from memlint.lint.engine import Linter, run_context
from memlint.project.project import Project
from memlint.project.settings import Settings

# alpaca-lora's finetune.py (fire options, 8-bit LoRA), as ``tests/facts/test_function_clis`` trims it
FIRE_FINETUNE = FINETUNE

FIRE_LAUNCH = dedent('''
    #!/bin/bash
    torchrun --nproc_per_node 8 finetune.py \\
        --base_model huggyllama/llama-7b \\
        --batch_size 256 \\
        --micro_batch_size 64 \\
        --cutoff_len 2048
''')

# Chinese-Vicuna's finetune_chat.py style: argparse options, WORLD_SIZE read from the environment
ARGPARSE_FINETUNE = dedent('''
    import argparse
    import os

    import torch
    from torch.utils.data import DataLoader
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

    parser = argparse.ArgumentParser()
    parser.add_argument("--model_path", type=str, default="huggyllama/llama-7b")
    parser.add_argument("--micro_batch", type=int, default=4)
    parser.add_argument("--total_batch", type=int, default=128)
    parser.add_argument("--cutoff_len", type=int, default=512)
    args = parser.parse_args()

    MICRO_BATCH_SIZE = args.micro_batch
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    GRADIENT_ACCUMULATION_STEPS = max(args.total_batch // (MICRO_BATCH_SIZE * world_size), 1)

    model = AutoModelForCausalLM.from_pretrained(args.model_path, torch_dtype=torch.bfloat16)
    training_args = TrainingArguments("out", per_device_train_batch_size=MICRO_BATCH_SIZE,
                                      gradient_accumulation_steps=GRADIENT_ACCUMULATION_STEPS, bf16=True)
    Trainer(model=model, args=training_args, train_dataset=train_data).train()
''')

# a parsed dataclass whose global batch is split over the processes into the micro-batch
DATACLASS_TRAIN = dedent('''
    import os
    from dataclasses import dataclass, field

    from torch.utils.data import DataLoader
    from transformers import AutoModelForCausalLM, HfArgumentParser
    import torch


    @dataclass
    class ScriptArguments:
        model_name: str = field(default="Qwen/Qwen2.5-7B")
        global_batch_size: int = field(default=64, metadata={"help": "sequences per optimizer step"})
        learning_rate: float = 1e-5


    def main():
        (script_args,) = HfArgumentParser(ScriptArguments).parse_args_into_dataclasses()
        world_size = int(os.environ["WORLD_SIZE"])
        model = AutoModelForCausalLM.from_pretrained(script_args.model_name, torch_dtype=torch.bfloat16)
        optimizer = torch.optim.AdamW(model.parameters(), lr=script_args.learning_rate)
        loader = DataLoader(dataset, batch_size=script_args.global_batch_size // world_size, shuffle=True)
        for batch in loader:
            model(**batch).loss.backward()
            optimizer.step()
            optimizer.zero_grad()


    if __name__ == "__main__":
        main()
''')


def _applied(script_src: str, script_path: str, command: str) -> dict:
    script = one(script_src, script_path)
    launcher = one(command, "run.sh")
    return {name: fact for name, fact in facts_from_cli(script, launcher).items()}


def _project(root: Path, files: dict[str, str]) -> Settings:
    write(root, files)
    (root / ".git").mkdir(exist_ok=True)
    return Settings(root=root).with_overrides(gpu="h100", gpus=8, cache=False, offline=True)


def test_fire_options_redo_the_accumulation_the_script_works_out():
    script = one(FIRE_FINETUNE, "finetune.py")
    assert script.grad_accum.value == 32  # 128 // 4 by default
    applied = _applied(FIRE_FINETUNE, "finetune.py", FIRE_LAUNCH)
    assert applied["micro_batch"].value == 64
    assert applied["grad_accum"].value == 4  # 256 // 64, as launched
    assert applied["grad_accum"].origin.path == "run.sh"
    assert "batch_size // micro_batch_size" in applied["grad_accum"].note
    # passing only the global batch redoes it with the micro-batch's default
    assert _applied(FIRE_FINETUNE, "finetune.py", "python finetune.py --batch_size=256\n")["grad_accum"].value == 64
    # --micro_batch_size 0 would divide by zero; a word is no number: neither crashes nor guesses
    assert "grad_accum" not in _applied(FIRE_FINETUNE, "finetune.py", "python finetune.py --micro_batch_size 0\n")
    assert "grad_accum" not in _applied(FIRE_FINETUNE, "finetune.py", "python finetune.py --batch_size all\n")


def test_an_option_passed_with_an_unknown_value_hides_what_it_derives():
    script = one(FIRE_FINETUNE, "finetune.py")
    launcher = one("torchrun --nproc_per_node 8 finetune.py --micro_batch_size $MICRO\n", "run.sh")
    assert "grad_accum" not in facts_from_cli(script, launcher)
    assert {"grad_accum", "micro_batch"} <= hidden_by_cli(script, launcher)


def test_argparse_arithmetic_over_the_launched_process_count():
    script = one(ARGPARSE_FINETUNE, "finetune_chat.py")
    assert script.micro_batch.value == 4
    assert script.grad_accum is None  # WORLD_SIZE is unknown without a launch
    # torchrun starts 4 processes: 128 // (3 * 4) = 10
    applied = _applied(ARGPARSE_FINETUNE, "finetune_chat.py",
                       "torchrun --nproc_per_node=4 finetune_chat.py --micro_batch 3 --total_batch 128\n")
    assert applied["micro_batch"].value == 3 and applied["grad_accum"].value == 10
    # a bare python run has no WORLD_SIZE: the script's fallback of 1 holds, 32 // (2 * 1) = 16
    single = _applied(ARGPARSE_FINETUNE, "finetune_chat.py", "python finetune_chat.py --micro_batch 2 --total_batch 32\n")
    assert single["grad_accum"].value == 16
    # no batch option passed: the launch's 8 processes alone redo it, located at --nproc_per_node
    launcher = one("torchrun --nproc_per_node 8 finetune_chat.py --model_path huggyllama/llama-7b\n", "run.sh")
    by_count = facts_from_cli(one(ARGPARSE_FINETUNE, "finetune_chat.py"), launcher)["grad_accum"]
    assert by_count.value == 4 and by_count.origin.path == "run.sh"


def test_a_dataclass_global_batch_split_over_the_processes_is_the_micro_batch():
    script = one(DATACLASS_TRAIN, "train.py")
    assert script.micro_batch is None  # os.environ["WORLD_SIZE"]: only a launch knows it
    assert any(b.startswith("calc:micro_batch@") for b in script.cli_bindings["global_batch_size"])
    applied = _applied(DATACLASS_TRAIN, "train.py",
                       "torchrun --nproc_per_node 8 train.py --global_batch_size 128 --model_name Qwen/Qwen2.5-7B\n")
    assert applied["micro_batch"].value == 16
    # a launch that leaves the option: the default 64 over its 4 processes
    assert _applied(DATACLASS_TRAIN, "train.py", "torchrun --nproc_per_node 4 train.py\n")["micro_batch"].value == 16


def test_the_remedy_starts_from_the_launched_accumulation(tmp_path):
    settings = _project(tmp_path, {"finetune.py": FIRE_FINETUNE, "run.sh": FIRE_LAUNCH})
    [run] = Project(settings).runs_for(settings.root / "run.sh", run_context(settings))
    assert run.plan.value("micro_batch") == 64 and run.plan.value("grad_accum") == 4
    [found] = [d for d in Linter(settings).lint_path(settings.root / "run.sh") if d.code == "MEM001"]
    # halving the launched micro-batch doubles the launched accumulation: 4x -> 8x (the defaults'
    # 128 // 4 = 32x gave "64x", a global batch of 32 x 64 = 2048 sequences instead of 256)
    assert "micro-batch 32 with 8x gradient accumulation" in found.message


# alpaca-lora's own lines: the accumulation divided by the process count under ``if ddp:``
_ACCUMULATION = "    gradient_accumulation_steps = batch_size // micro_batch_size\n"
_DDP = """\
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    ddp = world_size != 1
    if ddp:
        gradient_accumulation_steps = gradient_accumulation_steps // world_size
"""
ALPACA_DDP = FIRE_FINETUNE.replace(_ACCUMULATION, _ACCUMULATION + _DDP)


def test_a_reassignment_under_ddp_is_redone_for_each_launch():
    script = one(ALPACA_DDP, "finetune.py")
    assert script.grad_accum is None  # the process count decides, and no launch is known
    model = "--base_model huggyllama/llama-7b"
    # a bare python run sets no WORLD_SIZE: 128 // 8, no division
    single = _applied(ALPACA_DDP, "finetune.py", f"python finetune.py {model} --micro_batch_size=8\n")
    assert single["grad_accum"].value == 16
    # four processes: 128 // 8 // 4
    four = _applied(ALPACA_DDP, "finetune.py", f"torchrun --nproc_per_node 4 finetune.py {model} --micro_batch_size=8\n")
    assert four["grad_accum"].value == 4 and four["micro_batch"].value == 8
    assert "WORLD_SIZE != 1" in four["grad_accum"].note
    # four processes and the defaults: 128 // 4 // 4, located at the process count
    defaults = _applied(ALPACA_DDP, "finetune.py", f"torchrun --nproc_per_node 4 finetune.py {model}\n")
    assert defaults["grad_accum"].value == 8 and "nproc_per_node" in defaults["grad_accum"].note


def test_constants_divided_by_the_process_count_follow_the_launch():
    # Chinese-Vicuna's finetune.py: the batch sizes are constants, only WORLD_SIZE varies
    script_src = ALPACA_DDP.replace("    batch_size: int = 128,\n    micro_batch_size: int = 4,\n", "").replace(
        _ACCUMULATION, "    batch_size, micro_batch_size = 128, 4\n" + _ACCUMULATION)
    script = one(script_src, "finetune.py")
    assert script.grad_accum is None and script.micro_batch.value == 4
    launched = _applied(script_src, "finetune.py", "torchrun --nproc_per_node 2 finetune.py --base_model huggyllama/llama-7b\n")
    assert launched["grad_accum"].value == 16  # 128 // 4 // 2
    single = _applied(script_src, "finetune.py", "python finetune.py --base_model huggyllama/llama-7b\n")
    assert single["grad_accum"].value == 32  # no WORLD_SIZE in a bare python run: no division


def test_an_accumulation_set_only_when_the_global_batch_exceeds_the_micro_batch():
    script_src = dedent('''
        import argparse

        from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

        parser = argparse.ArgumentParser()
        parser.add_argument("--model", default="Qwen/Qwen2.5-1.5B")
        parser.add_argument("--per_device_batch", type=int, default=8)
        parser.add_argument("--global_batch", type=int, default=64)
        args = parser.parse_args()

        accumulation = 1
        if args.global_batch > args.per_device_batch:
            accumulation = args.global_batch // args.per_device_batch

        model = AutoModelForCausalLM.from_pretrained(args.model)
        training_args = TrainingArguments("out", per_device_train_batch_size=args.per_device_batch,
                                          gradient_accumulation_steps=accumulation)
        Trainer(model=model, args=training_args, train_dataset=dataset).train()
    ''')
    assert one(script_src).grad_accum.value == 8  # 64 > 8 by default: 64 // 8
    assert _applied(script_src, "train.py", "python train.py --global_batch 256\n")["grad_accum"].value == 32
    # the micro-batch alone reaches the global batch: the condition fails and no accumulation is set
    launched = _applied(script_src, "train.py", "python train.py --per_device_batch 64\n")
    assert launched["micro_batch"].value == 64 and launched["grad_accum"].value == 1
