"""A launcher that keeps the script's options in a double-quoted string (mPLUG-Owl's
``scripts/train_it.sh``: ``options=" \\ --pretrained-ckpt ... --seq-length ${max_length} ..."``,
then ``python -m torch.distributed.launch ... ./pipeline/train.py $@ ${options}
${multimodal_options}``). Bash splits an unquoted ``$options`` into words, each variable inside
expanded as it stood when the string was written; a string built from another
(``ARGS="$ARGS --deepspeed ..."``) appends to the words it had. A quoted ``"$options"`` is one
word: the script gets a single argument, not the options."""

from __future__ import annotations

from tests.facts.facts_testing import dedent, facts_of, span, where
from tests.project.test_config_launchers import _project, _runs

LAUNCHER = dedent('''
    #!/bin/bash
    # usage: bash scripts/finetune.sh [extra options for train.py]
    DISTRIBUTED_ARGS="--nproc_per_node 8 --nnodes 1 --master_port 29501"

    max_length=2048
    micro_batch_size=4
    SAVE_PATH="./output/sft_lora/"

    options=" \\
        --model-name-or-path meta-llama/Llama-2-7b-hf \\
        --seq-length ${max_length} \\
        --micro-batch-size ${micro_batch_size} \\
        --save-path ${SAVE_PATH} \\
        --gradient-checkpointing \\
        --bf16"
    if [ "$USE_DS" = 1 ]; then
        echo "with DeepSpeed"
    fi
    options="${options} --deepspeed configs/ds_zero2.json"

    data_options=" \\
        --data-path data/sft.json
        "

    mkdir -p ${SAVE_PATH}
    python -m torch.distributed.launch $DISTRIBUTED_ARGS ./pipeline/train.py $@ ${options} ${data_options} 2>&1 | tee ${SAVE_PATH}/train.log
''')

TRAIN = dedent('''
    import argparse

    import torch
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

    from pipeline.data import build_dataset

    parser = argparse.ArgumentParser()
    parser.add_argument("--model-name-or-path", type=str, default=None)
    parser.add_argument("--seq-length", type=int, default=1024)
    parser.add_argument("--micro-batch-size", type=int, default=1)
    parser.add_argument("--save-path", type=str, default="out")
    parser.add_argument("--data-path", type=str, default=None)
    parser.add_argument("--deepspeed", type=str, default=None)
    parser.add_argument("--gradient-checkpointing", action="store_true")
    parser.add_argument("--bf16", action="store_true")
    parser.add_argument("--local_rank", type=int, default=-1)


    def main():
        args, _ = parser.parse_known_args()
        model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, torch_dtype=torch.bfloat16)
        training_args = TrainingArguments(
            output_dir=args.save_path,
            per_device_train_batch_size=args.micro_batch_size,
            gradient_checkpointing=args.gradient_checkpointing,
            bf16=args.bf16,
            deepspeed=args.deepspeed,
        )
        train_data = build_dataset(args.data_path, max_length=args.seq_length)
        Trainer(model=model, args=training_args, train_dataset=train_data).train()


    if __name__ == "__main__":
        main()
''')

DS_ZERO2 = '{"zero_optimization": {"stage": 2}, "bf16": {"enabled": "auto"}, "train_micro_batch_size_per_gpu": "auto"}\n'


def test_an_unquoted_options_string_is_split_into_the_launchs_words():
    (facts,) = facts_of(LAUNCHER, "scripts/finetune.sh")
    args = facts.cli_args
    assert args["model_name_or_path"].value == "meta-llama/Llama-2-7b-hf"
    assert where(args["model_name_or_path"]) == span(LAUNCHER, "--model-name-or-path «meta-llama/Llama-2-7b-hf»")
    assert args["seq_length"].value == "2048"
    assert where(args["seq_length"]) == span(LAUNCHER, "max_length=«2048»")  # the value ${max_length} expands to
    assert args["micro_batch_size"].value == "4"
    assert args["gradient_checkpointing"].value == "true"
    assert args["data_path"].value == "data/sft.json"
    # the string appended to keeps its first words and adds its own, each located where written
    assert args["deepspeed"].value == "configs/ds_zero2.json"
    assert where(args["deepspeed"]) == span(LAUNCHER, '--deepspeed «configs/ds_zero2.json»"')
    assert [r.value for r in facts.references] == ["configs/ds_zero2.json"]
    assert facts.world_size.value == 8


def test_a_quoted_options_string_is_one_word():
    quoted = LAUNCHER.replace("./pipeline/train.py $@ ${options}", './pipeline/train.py "${options}"')
    (facts,) = facts_of(quoted, "scripts/finetune.sh")
    assert "model_name_or_path" not in facts.cli_args and "deepspeed" not in facts.cli_args
    one_word = facts.cli_args["#1"].value
    assert one_word.split()[:4] == ["--model-name-or-path", "meta-llama/Llama-2-7b-hf", "--seq-length", "2048"]
    assert facts.cli_args["data_path"].value == "data/sft.json"  # the unquoted one still splits


def test_a_quoted_launcher_options_variable_is_one_word_too():
    quoted = LAUNCHER.replace("python -m torch.distributed.launch $DISTRIBUTED_ARGS",
                              'torchrun "$DISTRIBUTED_ARGS"')
    (facts,) = facts_of(quoted, "scripts/finetune.sh")
    assert facts.world_size is None  # torchrun is given one word, not --nproc_per_node 8


def test_the_run_takes_its_model_batch_and_deepspeed_config_from_the_string(tmp_path):
    settings = _project(tmp_path, {
        "scripts/finetune.sh": LAUNCHER,
        "pipeline/__init__.py": "",
        "pipeline/train.py": TRAIN,
        "pipeline/data.py": "def build_dataset(path, max_length):\n    return []\n",
        "configs/ds_zero2.json": DS_ZERO2,
    })
    [run] = _runs(settings, "pipeline/train.py")
    assert run.plan.value("model") == "meta-llama/Llama-2-7b-hf"
    assert run.plan.value("micro_batch") == 4
    assert run.plan.value("zero_stage") == 2
    assert run.plan.value("grad_ckpt")
