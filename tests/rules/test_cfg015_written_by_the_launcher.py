"""CFG015 and the files a launcher writes itself before it launches the run."""

from __future__ import annotations

# Online-RLHF's run_loop.sh, trimmed: each iteration writes its DPO config with a here-document
RUN_LOOP = """\
#!/bin/bash
source ~/.bashrc
conda activate rlhflow

initial_model="RLHFlow/LLaMA3-SFT"
base_path="./iter_dpo"
mkdir -p $base_path

run_iteration() {
    local iteration=$1
    local model_path=$2
    cat <<EOT > dpo_config.yaml
run_name: $iteration
output_dir: $base_path/$iteration
model_name_or_path: $model_path
ref_model: $model_path
learning_rate: 5.0e-7
max_length: 2048
max_prompt_length: 1000
bf16: true
per_device_train_batch_size: 1
gradient_accumulation_steps: 16
EOT

    accelerate launch --config_file ./configs/zero2.yaml dpo_iteration/run_dpo.py dpo_config.yaml
}

run_iteration "LLaMA3_iter1" $initial_model
"""

FILES = {"configs/zero2.yaml": "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\n"
                               "deepspeed_config:\n  zero_stage: 2\nnum_processes: 8\n",
         "dpo_iteration/run_dpo.py": "from trl import DPOConfig, DPOTrainer\n"}


def test_a_config_the_launcher_writes_with_a_here_document_is_not_missing(lint):
    assert lint("CFG015", RUN_LOOP, path="run_loop.sh", files=FILES) == []


def test_other_writes_before_the_launch(lint):
    for write in ("python make_config.py --lr 5e-7 | tee dpo_config.yaml",
                  "cp configs/templates/dpo.yaml ./dpo_config.yaml",
                  "echo 'bf16: true' >> dpo_config.yaml"):
        script = RUN_LOOP.replace("    cat <<EOT > dpo_config.yaml", f"    {write}\n    cat <<EOT > /dev/null")
        assert lint("CFG015", script, path="run_loop.sh", files=FILES) == [], write


# Megatron-DeepSpeed's run_evalharness_deepspeed.slurm: the here-document goes to a variable the
# script set to the path the launch then names as written
EVALHARNESS = """\
#!/bin/bash
#SBATCH --nodes=1
config_json="./ds_config.json"
cat <<EOT > $config_json
{
  "train_micro_batch_size_per_gpu": 1,
  "zero_optimization": {"stage": 0},
  "bf16": {"enabled": true}
}
EOT

deepspeed --num_gpus 1 ./tasks/eval_harness/evaluate.py --deepspeed --deepspeed_config ds_config.json
"""


def test_a_here_document_written_through_a_variable_set_to_the_path(lint):
    files = {"tasks/eval_harness/evaluate.py": "import deepspeed\n"}
    assert lint("CFG015", EVALHARNESS, path="examples/run_evalharness.slurm", files=files) == []
    # the variable names another file: the one the launch names is still missing
    other = EVALHARNESS.replace('config_json="./ds_config.json"', 'config_json="./ds_config_eval.json"')
    assert len(lint("CFG015", other, path="examples/run_evalharness.slurm", files=files)) == 1


def test_near_miss_a_write_of_another_file_or_after_the_launch(lint):
    other = RUN_LOOP.replace("cat <<EOT > dpo_config.yaml", "cat <<EOT > dpo_config_iter.yaml")
    [finding] = lint("CFG015", other, path="run_loop.sh", files=FILES)
    assert finding.message.startswith("`dpo_config.yaml` does not exist")
    launch = "    accelerate launch --config_file ./configs/zero2.yaml dpo_iteration/run_dpo.py dpo_config.yaml\n"
    after = RUN_LOOP.replace(launch, "").replace("    cat <<EOT > dpo_config.yaml", launch + "    cat <<EOT > dpo_config.yaml")
    assert [d.range.start.line for d in lint("CFG015", after, path="run_loop.sh", files=FILES)] == [12]
    commented = RUN_LOOP.replace("    cat <<EOT > dpo_config.yaml", "    # cat <<EOT > dpo_config.yaml\n    cat <<EOT")
    assert len(lint("CFG015", commented, path="run_loop.sh", files=FILES)) == 1


# An installer's helper functions (the shape of unsloth's studio/setup.sh): the folder is the
# function's first argument, read with the ``set -u`` idiom ``${1:-}`` (an empty default that
# only keeps an unset argument from aborting the script), never an empty folder.
SETUP = """\
#!/usr/bin/env bash
set -euo pipefail

LLAMA_DIR="${LLAMA_DIR:-$HOME/.cache/llama.cpp}"

installed_prebuilt_release() {
    local install_dir=${1:-}
    local metadata_path="$install_dir/PREBUILT_INFO.json"
    [ -f "$metadata_path" ] || return 0
    python - "$metadata_path" <<'PY' 2>/dev/null || true
import json
import sys
print(json.load(open(sys.argv[1])).get("release_tag", ""))
PY
}

release=$(installed_prebuilt_release "$LLAMA_DIR")
python scripts/install_prebuilt.py --config "${CONFIG:-configs/prebuilt.json}"
"""


def test_an_empty_default_is_no_value(lint):
    """``${1:-}`` leaves the folder unknown: no missing ``/PREBUILT_INFO.json`` at the root. A
    default that says something (``${CONFIG:-configs/prebuilt.json}``) is still looked up."""
    diagnostics = lint("CFG015", SETUP, path="studio/setup.sh", files={"scripts/install_prebuilt.py": "import json\n"})
    assert [d.message.split("`")[1] for d in diagnostics] == ["configs/prebuilt.json"]


# accelerate's examples/slurm/submit_multinode_fsdp.sh, trimmed: the clone's location is a variable
# whose default is the author's path; the config is the project's own under that clone
SUBMIT = """\
#!/bin/bash
#SBATCH --nodes=4
#SBATCH --gres=gpu:4
export GPUS_PER_NODE=4
export ACCELERATE_DIR="${ACCELERATE_DIR:-/accelerate}"

export LAUNCHER="accelerate launch \\
    --config_file ${ACCELERATE_DIR}/examples/slurm/fsdp_config.yaml \\
    --num_processes $((SLURM_NNODES * GPUS_PER_NODE)) \\
    --num_machines $SLURM_NNODES \\
    "
export SCRIPT="${ACCELERATE_DIR}/examples/complete_nlp_example.py"
srun $LAUNCHER $SCRIPT --mixed_precision fp16
"""


def test_an_absolute_path_under_the_authors_clone_names_the_projects_file(lint):
    files = {"examples/slurm/fsdp_config.yaml": "distributed_type: FSDP\nnum_processes: 16\n",
             "examples/complete_nlp_example.py": "from accelerate import Accelerator\n"}
    assert lint("CFG015", SUBMIT, path="examples/slurm/submit_multinode_fsdp.sh", files=files) == []
    # only a tail of a folder and the file counts: a bare file name elsewhere is no match, and a
    # path none of whose folders the project has is a file of the machine that runs the job
    elsewhere = SUBMIT.replace("${ACCELERATE_DIR}/examples/slurm/fsdp_config.yaml", "/home/train/fsdp_config.yaml")
    [finding] = lint("CFG015", elsewhere, path="examples/slurm/submit_multinode_fsdp.sh",
                     files={**files, "fsdp_config.yaml": "distributed_type: FSDP\n"})
    assert finding.message.startswith("`/home/train/fsdp_config.yaml` is an absolute path on the machine that runs")
    # under the clone's own folders, a file the project lacks is missing
    moved = SUBMIT.replace("${ACCELERATE_DIR}/examples/slurm/fsdp_config.yaml", "/accelerate/examples/slurm/fsdp2.yaml")
    [finding] = lint("CFG015", moved, path="examples/slurm/submit_multinode_fsdp.sh", files=files)
    assert finding.message.startswith("`/accelerate/examples/slurm/fsdp2.yaml` does not exist")


# SkyThought keeps a copy of LLaMA-Factory under skythought/train/ and launches it from the author's
# cluster path: the clone's layout continues below the launcher's own folder, not the project root
CLUSTER_LAUNCH = """\
cd /lustre/fsw/users/alice/runs/LLaMA-Factory
source /lustre/fsw/users/alice/anaconda3/bin/activate
torchrun --nnodes $NNODES --node_rank $NODE_RANK --nproc_per_node 8 \\
    /lustre/fsw/users/alice/runs/LLaMA-Factory/src/train.py \\
    --deepspeed /lustre/fsw/users/alice/runs/LLaMA-Factory/examples/deepspeed/ds_z3_config.json \\
    --stage sft --model_name_or_path Qwen/Qwen2.5-7B-Instruct --do_train --finetuning_type full \\
    --per_device_train_batch_size 1 --cutoff_len 8192 --bf16 --output_dir saves/qwen-7b/full/sft
"""


def test_an_absolute_path_under_the_authors_clone_of_a_vendored_copy(lint):
    files = {"skythought/train/LLaMA-Factory/examples/deepspeed/ds_z3_config.json":
             '{"zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": "auto"}\n',
             "skythought/train/LLaMA-Factory/src/train.py": "from llamafactory.train.tuner import run_exp\nrun_exp()\n"}
    assert lint("CFG015", CLUSTER_LAUNCH, path="skythought/train/LLaMA-Factory/single_node.sh", files=files) == []
    del files["skythought/train/LLaMA-Factory/examples/deepspeed/ds_z3_config.json"]
    [finding] = lint("CFG015", CLUSTER_LAUNCH, path="skythought/train/LLaMA-Factory/single_node.sh", files=files)
    assert "ds_z3_config.json` does not exist" in finding.message
