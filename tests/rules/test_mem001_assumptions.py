"""MEM001: an out-of-memory verdict that rests on an assumed fact says so, and is a warning."""

from __future__ import annotations

from memlint.model.diagnostics import Severity

# alignment-handbook recipes/zephyr-7b-gemma/sft/config_full.yaml (abridged): the README launches
# it with `accelerate launch --config_file recipes/accelerate_configs/zero3.yaml`; the YAML
# itself names no parallelism.
GEMMA_SFT = """\
model_name_or_path: google/gemma-7b
model_revision: main
torch_dtype: bfloat16
attn_implementation: flash_attention_2
bf16: true
do_eval: true
gradient_accumulation_steps: 4
gradient_checkpointing: true
gradient_checkpointing_kwargs:
  use_reentrant: false
learning_rate: 2.0e-05
lr_scheduler_type: cosine
max_length: 2048
num_train_epochs: 3
output_dir: data/zephyr-7b-gemma-sft
per_device_eval_batch_size: 4
per_device_train_batch_size: 4
save_strategy: "no"
"""

ZERO3 = """\
{
  "train_micro_batch_size_per_gpu": "auto",
  "gradient_accumulation_steps": "auto",
  "bf16": {"enabled": "auto"},
  "zero_optimization": {"stage": 3, "stage3_gather_16bit_weights_on_model_save": true}
}
"""

SETTINGS = {"gpu": "h100", "gpus": 8}


def test_assumed_data_parallelism_makes_a_warning_that_says_so(lint):
    [diagnostic] = lint("MEM001", GEMMA_SFT, path="recipes/sft/config_full.yaml", settings=SETTINGS)
    assert diagnostic.severity == Severity.WARNING
    assert "rests on an assumption: plain data parallelism (DDP)" in diagnostic.message
    assert "`deepspeed: ds.json`" in diagnostic.message
    assert diagnostic.data["assumed"][0]["fact"] == "parallelism"


def test_the_stated_zero3_config_fits(lint):
    source = GEMMA_SFT + "deepspeed: ds_zero3.json\n"
    files = {"recipes/sft/ds_zero3.json": ZERO3}
    assert lint("MEM001", source, path="recipes/sft/config_full.yaml", files=files, settings=SETTINGS) == []


def test_a_run_too_large_even_sharded_stays_an_error(lint):
    source = GEMMA_SFT.replace("per_device_train_batch_size: 4", "per_device_train_batch_size: 64").replace(
        "gradient_checkpointing: true", "gradient_checkpointing: false")
    [diagnostic] = lint("MEM001", source, path="recipes/sft/config_full.yaml", settings=SETTINGS)
    assert diagnostic.severity == Severity.ERROR
    assert "assumption" not in diagnostic.message


def test_a_run_too_large_even_under_the_zero3_config_it_cannot_find_says_so(lint):
    # LightSFT-Qwen3-Humaneval's LLaMA-Factory recipe names LLaMA-Factory's ds_z3_config.json in a
    # clone the repository does not hold: the verdict stands either way, and the message leads
    # with the unsharded figure, so it also says what ZeRO-3 would leave
    source = GEMMA_SFT.replace("per_device_train_batch_size: 4", "per_device_train_batch_size: 64").replace(
        "gradient_checkpointing: true", "gradient_checkpointing: false") + "deepspeed: ds_z3_config.json\n"
    [diagnostic] = lint("MEM001", source, path="recipes/sft/config_full.yaml", settings=SETTINGS)
    assert diagnostic.severity == Severity.ERROR
    assert "whatever ZeRO stage `ds_z3_config.json` (which memlint cannot find) asks for, it needs at least" in \
        diagnostic.message
    # the same run with a config memlint reads says nothing of the kind
    [read] = lint("MEM001", source, path="recipes/sft/config_full.yaml", settings=SETTINGS,
                  files={"recipes/sft/ds_z3_config.json": ZERO3})
    assert "cannot find" not in read.message


def test_an_assumed_sequence_length_is_named(lint):
    source = GEMMA_SFT.replace("max_length: 2048\n", "").replace(
        "per_device_train_batch_size: 4", "per_device_train_batch_size: 32")
    [diagnostic] = lint("MEM001", source, path="recipes/sft/config_full.yaml", settings={"gpu": "h100"})
    assert diagnostic.severity == Severity.WARNING
    assert "sequence length" in diagnostic.message and "`seq-len` in [tool.memlint]" in diagnostic.message


# LongLoRA supervised-fine-tune-qlora.py (abridged): its own TrainingArguments subclass sets the
# length; nothing in the project sets the micro-batch, so TrainingArguments' 8 runs.
LONG_SFT = '''\
from dataclasses import dataclass, field
from typing import Optional

import transformers
from transformers import AutoModelForCausalLM, Trainer


@dataclass
class ModelArguments:
    model_name_or_path: Optional[str] = field(default="meta-llama/Llama-3.2-1B")


@dataclass
class TrainingArguments(transformers.TrainingArguments):
    cache_dir: Optional[str] = field(default=None)
    model_max_length: int = field(
        default=8192,
        metadata={"help": "Maximum sequence length. Sequences will be right padded (and possibly truncated)."},
    )
    gradient_checkpointing: bool = field(default=True)


def train():
    parser = transformers.HfArgumentParser((ModelArguments, TrainingArguments))
    model_args, training_args = parser.parse_args_into_dataclasses()
    model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path, torch_dtype="bfloat16")
    trainer = Trainer(model=model, args=training_args)
    trainer.train()


if __name__ == "__main__":
    train()
'''


def test_a_library_default_micro_batch_is_named(lint):
    [diagnostic] = lint("MEM001", LONG_SFT, path="sft.py", settings={"gpu": "l4", "gpus": 1})
    assert diagnostic.severity == Severity.WARNING
    assert "micro-batch 8 (the TrainingArguments default: nothing in the project sets" in diagnostic.message
    assert "default_micro_batch" in [a["fact"] for a in diagnostic.data["assumed"]]


def test_a_micro_batch_the_project_sets_is_no_assumption(lint):
    source = LONG_SFT.replace("    gradient_checkpointing: bool = field(default=True)\n",
                              "    gradient_checkpointing: bool = field(default=True)\n"
                              "    per_device_train_batch_size: int = field(default=8)\n")
    [diagnostic] = lint("MEM001", source, path="sft.py", settings={"gpu": "l4", "gpus": 1})
    assert "TrainingArguments default" not in diagnostic.message


def test_a_default_micro_batch_is_not_named_when_one_sequence_overflows_too(lint):
    source = LONG_SFT.replace("default=8192,", "default=8192 * 16,")
    [diagnostic] = lint("MEM001", source, path="sft.py", settings={"gpu": "l4", "gpus": 1})
    assert "TrainingArguments default" not in diagnostic.message


# a LLaVA-style trainer launched over a cluster's hostfile (Mini-Gemini's Mixtral scripts:
# `deepspeed --hostfile hostfile_4 ...`; its README: "`hostfile_4` for 4 machine training")
MIXTRAL_LAUNCH = """\
#!/bin/bash
# delete --hostfile hostfile_4 and change --per_device_train_batch_size if trained on single machine
deepspeed --hostfile hostfile_4 \\
    scripts/train.py \\
    --deepspeed scripts/zero3.json \\
    --model_name_or_path mistralai/Mixtral-8x7B-Instruct-v0.1 \\
    --bf16 True \\
    --per_device_train_batch_size 4 \\
    --gradient_accumulation_steps 1 \\
    --model_max_length 2048 \\
    --gradient_checkpointing True \\
    --output_dir ./work_dirs/finetune
"""

TRAIN = """\
import transformers


def train():
    parser = transformers.HfArgumentParser((transformers.TrainingArguments,))
    (training_args,) = parser.parse_args_into_dataclasses()
    model = transformers.AutoModelForCausalLM.from_pretrained("mistralai/Mixtral-8x7B-Instruct-v0.1")
    trainer = transformers.Trainer(model=model, args=training_args)
    trainer.train()


if __name__ == "__main__":
    train()
"""


def test_a_launch_over_a_hostfile_rests_on_the_gpu_count_and_is_an_info(lint):
    # the verdict sits on the ZeRO config, which sets the largest part (the sharded optimizer states)
    files = {"scripts/train.py": TRAIN, "scripts/finetune.sh": MIXTRAL_LAUNCH}
    [diagnostic] = lint("MEM001", ZERO3, path="scripts/zero3.json", files=files, settings=SETTINGS)
    # full fine-tuning of 46.7B parameters under ZeRO-3: too much for 8 GPUs, enough for 16
    assert diagnostic.severity == Severity.INFO
    assert "8 GPUs in all (the launch runs on the machines `hostfile_4` lists)" in diagnostic.message
    # the node count stated: no assumption, the verdict stands as an error
    stated = MIXTRAL_LAUNCH.replace("--hostfile hostfile_4", "--hostfile hostfile_4 --num_nodes 1 --num_gpus 8")
    [diagnostic] = lint("MEM001", ZERO3, path="scripts/zero3.json", files={**files, "scripts/finetune.sh": stated},
                        settings=SETTINGS)
    assert diagnostic.severity == Severity.ERROR
