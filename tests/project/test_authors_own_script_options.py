"""A launcher that runs the author's own trainer through a path of their machine (LMOps's
``data_selection/scripts/data_scorer/train.sh``: ``BASE_PATH=${1-"/home/MiniLLM"}``, options
appended with ``OPTS+=" --batch-size 16"``, ``deepspeed ${BASE_PATH}/train.py ${OPTS}``). The
script is not in the project, so only the options could say how it trains; a sixth of them are
named like TrainingArguments' (``--gradient-accumulation-steps``, ``--do-train``, ``--deepspeed``),
the rest are its own (``--batch-size``, ``--lr``, ``--epochs``): they are not read as the HF
Trainer's, and its DeepSpeed config gets no Trainer mismatch errors (the trainer writes the
config's batch keys from its own options)."""

from __future__ import annotations

from pathlib import Path

from memlint.lint.engine import Linter, run_context
from memlint.project.project import Project
from memlint.project.settings import Settings

from tests.facts.facts_testing import dedent, write

LAUNCHER = dedent('''
    #! /bin/bash

    BASE_PATH=${1-"/home/MiniLLM"}
    GPUS_PER_NODE=${3-8}

    DISTRIBUTED_ARGS="--num_gpus $GPUS_PER_NODE --master_port 2030"

    OPTS=""
    OPTS+=" --type data_scorer"
    OPTS+=" --base-path ${BASE_PATH}"
    OPTS+=" --model-path ${BASE_PATH}/checkpoints/fairseq/125M/"
    OPTS+=" --model-type fairseq"
    OPTS+=" --data-dir ${BASE_PATH}/processed_data/data_scorer_train"
    OPTS+=" --lr 0.0001"
    OPTS+=" --batch-size 16"
    OPTS+=" --eval-batch-size 64"
    OPTS+=" --gradient-accumulation-steps 2"
    OPTS+=" --warmup-iters 10"
    OPTS+=" --scheduler-name cosine"
    OPTS+=" --weight-decay 1e-2"
    OPTS+=" --clip-grad 1.0"
    OPTS+=" --epochs 5"
    OPTS+=" --max-length 1024"
    OPTS+=" --do-train"
    OPTS+=" --do-valid"
    OPTS+=" --save ${BASE_PATH}/results/data_scorer"
    OPTS+=" --seed 10"
    OPTS+=" --deepspeed"
    OPTS+=" --deepspeed_config ${BASE_PATH}/configs/deepspeed/ds_config.json"

    export PYTHONPATH=${BASE_PATH}
    CMD="deepspeed ${DISTRIBUTED_ARGS} ${BASE_PATH}/train.py ${OPTS} $@"
    ${CMD}
''')

DS_CONFIG = """{
    "train_micro_batch_size_per_gpu": 1,
    "gradient_accumulation_steps": 1,
    "zero_optimization": {"stage": 1},
    "fp16": {"enabled": true, "loss_scale": 0, "initial_scale_power": 11}
}
"""


def test_the_options_of_the_authors_own_trainer_are_not_the_hf_trainers(tmp_path: Path):
    write(tmp_path, {"data_selection/scripts/data_scorer/train.sh": LAUNCHER,
                     "data_selection/configs/deepspeed/ds_config.json": DS_CONFIG})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False, offline=True)
    runs = Project(settings).runs_for(tmp_path / "data_selection/scripts/data_scorer/train.sh", run_context(settings))
    assert all(r.plan.value("framework") != "hf-trainer" for r in runs)
    findings = Linter(settings).lint_path(tmp_path / "data_selection/scripts/data_scorer/train.sh")
    assert not [d for d in findings if d.code in ("CFG014", "MEM001", "MEM002")]


def test_a_launch_of_the_authors_path_with_trainer_options_is_still_read(tmp_path: Path):
    """The same path with options that are the Trainer's (FastChat-style ``--model_name_or_path
    --per_device_train_batch_size --output_dir ...``) still states the run."""
    launcher = dedent('''
        #!/bin/bash
        deepspeed /home/me/FastChat/fastchat/train/train.py \\
            --model_name_or_path meta-llama/Llama-2-7b-hf \\
            --per_device_train_batch_size 4 \\
            --gradient_accumulation_steps 8 \\
            --bf16 True \\
            --output_dir out \\
            --model_max_length 2048
    ''')
    write(tmp_path, {"scripts/train.sh": launcher})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False, offline=True)
    [run] = Project(settings).runs_for(tmp_path / "scripts/train.sh", run_context(settings))
    assert run.plan.value("framework") == "hf-trainer" and run.plan.value("micro_batch") == 4
