"""Slurm jobs that build the launch as a string and run it through ``srun ... bash -c "..."``:
the command string's own commands are read, its string variables spliced in (the BigScience
template's ``$LAUNCHER ... $CMD``; a job that unsets a variable first). The launched module of a
``src/`` layout the job puts on ``PYTHONPATH``, and an Accelerate FSDP config that checkpoints the layers while the Trainer's
own flag is off, make the run the job submits."""

from __future__ import annotations

from pathlib import Path

from facts_testing import dedent, facts_of

from memlint.lint.engine import run_context
from memlint.project.project import Project
from memlint.project.settings import Settings
from tests.facts.facts_testing import write

SUBMIT = dedent('''
    #!/bin/bash
    #SBATCH --job-name=s1-sft
    #SBATCH --nodes=4
    #SBATCH --gpus-per-node=4
    set -euo pipefail

    PROJECT_DIR=/cluster/projects/nn12068k/someone/llm-training-experiments
    cd $PROJECT_DIR
    export PYTHONPATH=${PROJECT_DIR}/src:${PYTHONPATH}

    NUM_NODES=$SLURM_NNODES
    OUTPUT_DIR=checkpoints/s1_qwen32b
    ACCEL_CMD="accelerate launch \\
        --config_file ${PROJECT_DIR}/configs/accelerate_fsdp.yaml \\
        --num_processes=16 \\
        --num_machines=${NUM_NODES} \\
        --machine_rank=\\${SLURM_PROCID} \\
        -m s1.sft_hf \\
        --model Qwen/Qwen2.5-32B-Instruct \\
        --output-dir ${OUTPUT_DIR} \\
        --per-device-batch-size 1 \\
        --sequence-length 16384"

    srun --nodes=${NUM_NODES} --ntasks-per-node=1 --export=ALL \\
        bash -c "unset ROCR_VISIBLE_DEVICES; ${ACCEL_CMD}"
''')

TEMPLATE = dedent('''
    #!/bin/bash
    #SBATCH --nodes=4
    GPUS_PER_NODE=8
    export LAUNCHER="python -u -m torch.distributed.run \\
        --nproc_per_node $GPUS_PER_NODE \\
        --nnodes $SLURM_NNODES \\
        --max_restarts 0 \\
        "
    export CMD=" \\
        train.py \\
        --output_dir output/llama-30b \\
        --max_seq_len 8192 \\
        --deepspeed_config configs/ds_config_zero1.json
        "
    bash -c "$LAUNCHER --node_rank $SLURM_PROCID $CMD" 2>&1 | tee -a main_log.txt
''')


def test_a_launch_in_a_string_run_after_another_command():
    [facts] = [f for f in facts_of(SUBMIT, "scripts/s1/submit_s1_sft_hf.slurm") if f.launches is not None]
    # the job puts ${PROJECT_DIR}/src first on PYTHONPATH: the module is src/s1/sft_hf.py
    assert facts.launches.value.endswith("llm-training-experiments/src/s1/sft_hf.py")
    assert facts.world_size.value == 16
    assert facts.cli_args["model"].value == "Qwen/Qwen2.5-32B-Instruct"
    assert [r.value for r in facts.references] == [
        "/cluster/projects/nn12068k/someone/llm-training-experiments/configs/accelerate_fsdp.yaml"]


def test_the_launcher_and_command_variables_around_a_literal_option():
    [facts] = [f for f in facts_of(TEMPLATE, "finetune/train_slurm.sh") if f.launches is not None]
    assert facts.launches.value == "train.py"
    assert facts.cli_args["max_seq_len"].value == "8192"
    assert [r.value for r in facts.references] == ["configs/ds_config_zero1.json"]


APPENDED = dedent('''
    #!/usr/bin/bash
    #SBATCH -J mixtral
    #SBATCH -N 4
    #SBATCH --ntasks-per-node=1
    #SBATCH --gres=gpu:8

    TRAIN_DATASETS=(
        1:SkyPile-150B-2022
        0.1:SkyPile-150B-2023
    )

    TRAIN_PARAMS=""
    TRAIN_PARAMS+=" --enable_lora"
    TRAIN_PARAMS+=" --lora_rank 64"
    TRAIN_PARAMS+=" --model_name_or_path mistralai/Mixtral-8x7B-v0.1"
    TRAIN_PARAMS+=" --train_datasets ${TRAIN_DATASETS[*]}"
    TRAIN_PARAMS+=" --output_dir outputs/$SLURM_JOB_ID"
    TRAIN_PARAMS+=" --per_device_train_batch_size 16"
    TRAIN_PARAMS+=" --gradient_checkpointing"
    TRAIN_PARAMS+=" --bf16"
    TRAIN_PARAMS+=" --deepspeed ds-config/config.json"

    TORCHRUN_PARAMS='--nproc_per_node 8 --node_rank=$SLURM_NODEID --nnodes=$SLURM_JOB_NUM_NODES --rdzv_endpoint=$MASTER_ADDR:$MASTER_PORT'
    srun --label --export=ALL bash -c "
        MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1);
        MASTER_PORT=55511;
        torchrun $TORCHRUN_PARAMS train.py $TRAIN_PARAMS
    "
''')


def test_options_appended_to_a_variable_and_a_single_quoted_launcher_string():
    """Chinese-Mixtral-8x7B's ``scripts/train-pt.sh``: ``TRAIN_PARAMS+=" --opt value"`` line by line,
    ``TORCHRUN_PARAMS='...'`` in single quotes, both spliced into the ``bash -c`` string srun runs."""
    [facts] = [f for f in facts_of(APPENDED, "scripts/train-pt.sh") if f.launches is not None]
    assert facts.launches.value == "train.py"
    assert facts.world_size.value == 32  # 8 processes on each of the 4 nodes
    model = facts.cli_args["model_name_or_path"]
    assert model.value == "mistralai/Mixtral-8x7B-v0.1" and model.origin.range.start.line == 15
    assert facts.cli_args["per_device_train_batch_size"].value == "16"
    assert {"enable_lora", "gradient_checkpointing", "bf16"} <= set(facts.cli_args)
    assert {"train_datasets", "output_dir"} <= set(facts.cli_unknown)  # an array, a job's variable
    assert [r.value for r in facts.references] == ["ds-config/config.json"]


SFT_HF = dedent('''
    """S1 SFT with the HF Trainer under Accelerate's FSDP (configs/accelerate_fsdp.yaml)."""
    import argparse
    import os

    import torch
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments


    def parse_args():
        p = argparse.ArgumentParser()
        p.add_argument("--model", default="Qwen/Qwen2.5-32B-Instruct")
        p.add_argument("--output-dir", required=True)
        p.add_argument("--per-device-batch-size", type=int, default=1)
        p.add_argument("--sequence-length", type=int, default=32768)
        return p.parse_args()


    def main():
        args = parse_args()
        model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.bfloat16)
        training_args = TrainingArguments(
            output_dir=args.output_dir,
            per_device_train_batch_size=args.per_device_batch_size,
            bf16=True,
            # AC is handled via fsdp_activation_checkpointing in the accelerate FSDP config
            gradient_checkpointing=False,
        )
        dataset = load_padded(args.sequence_length)
        Trainer(model=model, args=training_args, train_dataset=dataset).train()


    if __name__ == "__main__":
        main()
''')

FSDP = dedent('''
    compute_environment: LOCAL_MACHINE
    distributed_type: FSDP
    mixed_precision: bf16
    num_machines: 4
    num_processes: 16
    fsdp_config:
      fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
      fsdp_transformer_layer_cls_to_wrap: Qwen2DecoderLayer
      fsdp_sharding_strategy: FULL_SHARD
      fsdp_state_dict_type: FULL_STATE_DICT
      fsdp_use_orig_params: true
      fsdp_activation_checkpointing: true
''')


def test_the_submitted_run_of_a_src_module_checkpoints_through_fsdp(tmp_path: Path):
    write(tmp_path, {"scripts/s1/submit_s1_sft_hf.slurm": SUBMIT, "src/s1/__init__.py": "",
                     "src/s1/sft_hf.py": SFT_HF, "configs/accelerate_fsdp.yaml": FSDP})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False)
    [run] = Project(settings).runs_for(tmp_path / "scripts/s1/submit_s1_sft_hf.slurm", run_context(settings))
    # before: the launch was not read, and the script alone was sized as plain data parallelism
    # without checkpointing (an 880 GiB MEM001 error on the real project)
    assert run.plan.value("model") == "Qwen/Qwen2.5-32B-Instruct"
    assert run.plan.value("fsdp") == "full" and run.plan.value("world_size") == 16
    assert run.plan.value("grad_ckpt")
    assert run.plan.value("seq_len") == 16384


def test_a_module_launch_without_src_on_the_path_is_read_from_where_it_runs():
    # tevatron's README: `deepspeed --module tevatron.retriever.driver.train` after `pip install -e .`;
    # no PYTHONPATH names src/, so the module is looked up where the launch runs (as before)
    text = SUBMIT.replace("export PYTHONPATH=${PROJECT_DIR}/src:${PYTHONPATH}\n", "")
    [facts] = [f for f in facts_of(text, "scripts/s1/submit_s1_sft_hf.slurm") if f.launches is not None]
    assert facts.launches.value.endswith("llm-training-experiments/s1/sft_hf.py")
