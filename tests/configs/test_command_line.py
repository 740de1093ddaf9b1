"""A launcher running a framework's entry point that is not in the project: its options are read
as that framework's config (LLaMA-Factory arguments, TrainingArguments fields), located in the
launcher."""

from __future__ import annotations

from pathlib import Path

from memlint.estimate import Precision, Sharding
from memlint.facts.resolve import RunContext
from memlint.project.settings import Settings
from memlint.project.project import Project

from .helpers import write_files

LLAMAFACTORY_LAUNCH = """\
#!/bin/bash
# LLaMA-Factory's train_bash.py comes with the package; only the launch line is ours
deepspeed --include localhost:0,1,2,3 --master_port=9901 src/train_bash.py \\
    --deepspeed ds_config.json \\
    --stage sft \\
    --do_train \\
    --model_name_or_path Qwen/Qwen2.5-7B \\
    --dataset alpaca_en \\
    --template qwen \\
    --finetuning_type full \\
    --output_dir saves/qwen-full \\
    --per_device_train_batch_size 2 \\
    --gradient_accumulation_steps 8 \\
    --learning_rate 1e-5 \\
    --bf16 \\
    --cutoff_len 2048
"""

ZERO2 = '{"zero_optimization": {"stage": 2}, "bf16": {"enabled": "auto"}, "train_micro_batch_size_per_gpu": "auto"}'


def _run(tmp_path: Path, files: dict[str, str], entry: str = "run.sh"):
    write_files(tmp_path, files)
    project = Project(Settings(root=tmp_path))
    [run] = project.runs_for(tmp_path / entry, RunContext())
    return run


def _line(run, name: str) -> int:
    return run.plan.get(name).origin.range.start.line


def test_llamafactory_options_of_an_entry_point_outside_the_project(tmp_path):
    run = _run(tmp_path, {"run.sh": LLAMAFACTORY_LAUNCH, "ds_config.json": ZERO2})
    assert run.problem is None
    plan = run.plan
    assert plan.value("framework") == "llamafactory"
    assert plan.value("model") == "Qwen/Qwen2.5-7B" and _line(run, "model") == 7
    assert plan.get("model").origin.path.endswith("run.sh")
    assert plan.value("seq_len") == 2048 and _line(run, "seq_len") == 16
    assert plan.value("micro_batch") == 2 and plan.value("grad_accum") == 8
    # LLaMA-Factory's own defaults apply: checkpointing on, full fine-tuning upcast to fp32
    assert plan.value("grad_ckpt") == 1 and plan.get("grad_ckpt").assumed
    assert plan.value("load_dtype") == "fp32"
    assert run.setup.sharding is Sharding.ZERO2 and run.setup.world_size == 4
    assert run.setup.precision is Precision.MIXED_BF16  # DeepSpeed bf16 ("auto" from --bf16)


HF_MODULE_LAUNCH = """\
#!/bin/bash
accelerate launch --num_processes=1 -m tuning.sft_trainer \\
    --model_name_or_path mistralai/Mistral-7B-v0.1 \\
    --torch_dtype float16 \\
    --packing True \\
    --max_seq_len 4096 \\
    --dataset_text_field output \\
    --peft_method lora \\
    --r 16 \\
    --target_modules q_proj k_proj v_proj o_proj \\
    --lora_dropout 0.0 \\
    --per_device_train_batch_size 4 \\
    --gradient_checkpointing True \\
    --output_dir results/exp_0
"""


def test_training_arguments_options_of_an_installed_module(tmp_path):
    run = _run(tmp_path, {"run.sh": HF_MODULE_LAUNCH})
    plan = run.plan
    assert plan.value("framework") == "hf-trainer"
    assert "not in the project" in plan.get("framework").note
    assert plan.value("load_dtype") == "fp16" and _line(run, "load_dtype") == 4
    assert plan.value("seq_len") == 4096  # --max_seq_len: argparse's prefix of --max_seq_length
    assert plan.value("lora_r") == 16 and plan.value("lora_targets") == ("q_proj", "k_proj", "v_proj", "o_proj")
    assert run.setup.lora is not None and run.setup.lora.r == 16
    assert run.setup.grad_ckpt and run.setup.micro_batch == 4
    # an SFT-looking command line is not assumed to build TRL's SFTConfig: no bf16 default
    assert plan.get("mixed") is None and run.setup.precision is Precision.FP16


def test_a_script_in_the_project_keeps_its_own_bindings(tmp_path):
    """Only an unreadable entry point has its options read as a config: a script in the project
    decides what its options mean (here ``--r`` is not a LoRA rank)."""
    script = (
        "import argparse\nimport torch\nfrom transformers import AutoModelForCausalLM\n\n"
        "parser = argparse.ArgumentParser()\nparser.add_argument('--r', type=float, default=0.1)\n"
        "parser.add_argument('--model_name_or_path', default='gpt2')\nargs = parser.parse_args()\n"
        "model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path)\n"
        "optimizer = torch.optim.AdamW(model.parameters(), lr=args.r)\n"
    )
    launch = "torchrun --nproc_per_node 2 train.py --model_name_or_path gpt2 --r 16 --output_dir o\n"
    run = _run(tmp_path, {"run.sh": launch, "train.py": script})
    assert run.plan.get("lora_r") is None and run.setup.lora is None
    assert run.plan.value("model") == "gpt2"


def test_options_that_make_up_no_config_state_nothing(tmp_path):
    launch = "torchrun --nproc_per_node 8 pretrain.py --data /data/shards --steps 1000 --seed 3\n"
    run = _run(tmp_path, {"run.sh": launch})
    assert run.plan.get("model") is None and run.problem is not None


def test_a_preprocessing_script_in_the_project_is_not_read_as_training_options(tmp_path):
    """The same option names passed to a script memlint read and found not to train (a
    tokenization step) state no run: only an entry point outside the project is read so."""
    script = (
        "import argparse\nfrom transformers import AutoTokenizer\n\n"
        "parser = argparse.ArgumentParser()\nparser.add_argument('--model_name_or_path')\n"
        "parser.add_argument('--max_length', type=int, default=2048)\nparser.add_argument('--output_dir')\n"
        "args = parser.parse_args()\ntokenizer = AutoTokenizer.from_pretrained(args.model_name_or_path)\n"
    )
    launch = ("python scripts/tokenize.py --model_name_or_path meta-llama/Llama-3.1-8B --max_length 4096 "
              "--per_device_train_batch_size 8 --output_dir data/tokenized\n")
    run = _run(tmp_path, {"run.sh": launch, "scripts/tokenize.py": script})
    assert run.plan.get("model") is None and run.setup is None


def test_a_script_that_trains_through_the_projects_own_module_takes_the_launch_options(tmp_path):
    """FastChat's train_mem.py only imports ``train`` from the project's package and calls it:
    the options of the launch state the run. The tokenization step above, which calls none of
    the project's code, still states none."""
    train_mem = (
        "from fastchat.train.llama2_flash_attn_monkey_patch import replace_llama_attn_with_flash_attn\n"
        "replace_llama_attn_with_flash_attn()\n\n"
        "from fastchat.train.train import train\n\n"
        "if __name__ == \"__main__\":\n    train()\n"
    )
    launch = ("torchrun --nproc_per_node=4 --master_port=20001 fastchat/train/train_mem.py \\\n"
              "    --model_name_or_path meta-llama/Llama-2-7b-hf --bf16 True \\\n"
              "    --per_device_train_batch_size 2 --gradient_accumulation_steps 16 \\\n"
              "    --model_max_length 2048 --gradient_checkpointing True --output_dir output_vicuna\n")
    run = _run(tmp_path, {"run.sh": launch, "fastchat/train/train_mem.py": train_mem,
                          "fastchat/train/__init__.py": "", "fastchat/__init__.py": ""})
    assert run.plan.value("model") == "meta-llama/Llama-2-7b-hf"
    assert run.plan.value("micro_batch") == 2
