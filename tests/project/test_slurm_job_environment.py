"""A batch script's launch sized by the variables SLURM sets from its ``#SBATCH`` header.

gritlm's ``scripts/training/train_gritlm_8x7b.sh`` asks for ``#SBATCH --nodes=32`` and
``--gres=gpu:8`` and launches ``accelerate launch --num_processes $(($GPUS_PER_NODE*$NNODES))``
with ``NNODES=$SLURM_NNODES``: 256 processes when the job runs. A caller's ``sbatch --nodes N
script`` gives the job N nodes instead, and the launch counts those."""

from __future__ import annotations

from pathlib import Path

from memlint.documents.parsed import parse_document
from memlint.documents.reading import document_from_text
from memlint.facts.infrastructure import slurm_environment
from memlint.facts.launchers import extract_launchers
from memlint.lint.engine import run_context
from memlint.project.project import Project

from tests.facts.facts_testing import checked_project, dedent

GRITLM_STYLE = dedent('''
    #!/bin/bash
    #SBATCH --job-name=embed
    #SBATCH --nodes=32
    #SBATCH --ntasks-per-node=1          # crucial - only 1 task per dist per node!
    #SBATCH --gres=gpu:8                 # number of gpus
    #SBATCH --time 999:00:00

    cd /home/me/project
    GPUS_PER_NODE=8
    MASTER_ADDR=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n 1)
    NNODES=$SLURM_NNODES
    WORLD_SIZE=$(($GPUS_PER_NODE*$NNODES))

    LAUNCHER="accelerate launch \\
        --num_machines $NNODES \\
        --num_processes $WORLD_SIZE \\
        --main_process_ip "$MASTER_ADDR" \\
        --machine_rank \\$SLURM_PROCID \\
        "
    export CMD=" \\
        -m training.run \\
        --model_name_or_path mistralai/Mistral-7B-v0.1 \\
        --per_device_train_batch_size 4 \\
        --bf16 \\
        "
    srun --jobid $SLURM_JOBID bash -c "$LAUNCHER $CMD"
''')


def _launch(text: str, path: str = "train.slurm"):
    [facts] = extract_launchers(parse_document(document_from_text(path, text)))
    return facts


def test_the_header_says_what_slurm_sets():
    found = slurm_environment(GRITLM_STYLE)
    assert {name: value for name, (value, _, _) in found.items()} == {
        "SLURM_NNODES": "32", "SLURM_JOB_NUM_NODES": "32", "SLURM_NTASKS_PER_NODE": "1",
        "SLURM_GPUS_ON_NODE": "8", "SLURM_GPUS_PER_NODE": "8"}
    _, start, end = found["SLURM_NNODES"]
    assert GRITLM_STYLE[start:end] == "32" and GRITLM_STYLE[:start].endswith("--nodes=")
    _, start, end = found["SLURM_GPUS_ON_NODE"]
    assert GRITLM_STYLE[start:end] == "8" and GRITLM_STYLE[:start].endswith("--gres=gpu:")


def test_a_launch_counts_the_nodes_its_header_requests():
    facts = _launch(GRITLM_STYLE, "scripts/train_8x7b.sh")
    assert facts.world_size.value == 32 * 8
    assert facts.gpus_per_node.value == 8  # --num_processes / --num_machines


def test_srun_torchrun_over_the_jobs_nodes_and_gpus():
    script = dedent('''
        #!/bin/bash
        #SBATCH -N 4
        #SBATCH --gpus-per-node=h100:8
        #SBATCH --cpus-per-task=96

        srun torchrun --nnodes $SLURM_JOB_NUM_NODES --nproc_per_node $SLURM_GPUS_ON_NODE \\
            --rdzv_endpoint $MASTER_ADDR:29500 train.py --batch_size 2
    ''')
    facts = _launch(script)
    assert facts.world_size.value == 4 * 8
    assert facts.gpus_per_node.value == 8


def test_a_node_range_or_a_script_that_sets_the_variable_itself():
    ranged = GRITLM_STYLE.replace("--nodes=32", "--nodes=2-4")
    assert _launch(ranged).world_size is None  # the scheduler picks between 2 and 4 nodes
    own = GRITLM_STYLE.replace("NNODES=$SLURM_NNODES", "SLURM_NNODES=2\nNNODES=$SLURM_NNODES")
    assert _launch(own).world_size.value == 2 * 8


TEMPLATED = dedent('''
    #!/bin/bash
    #SBATCH --job-name=sft
    #SBATCH --nodes=2
    #SBATCH --gres=gpu:8
    #SBATCH --exclusive

    while [[ $# -gt 0 ]]; do
      case $1 in
        --recipe)
          RECIPE="$2"
          shift 2
          ;;
        *)
          exit 1
          ;;
      esac
    done

    srun torchrun --nnodes $SLURM_NNODES --nproc_per_node 8 train.py --config recipes/$RECIPE.yaml
''')

TRAIN = dedent('''
    from datasets import load_dataset
    from trl import ModelConfig, ScriptArguments, SFTConfig, SFTTrainer, TrlParser

    if __name__ == "__main__":
        parser = TrlParser((ScriptArguments, SFTConfig, ModelConfig))
        script_args, training_args, model_args = parser.parse_args_and_config()
        dataset = load_dataset(script_args.dataset_name)
        trainer = SFTTrainer(model=model_args.model_name_or_path, args=training_args,
                             train_dataset=dataset[script_args.dataset_train_split])
        trainer.train()
''')

RECIPE = dedent('''
    model_name_or_path: Qwen/Qwen2.5-7B
    per_device_train_batch_size: 1
    gradient_checkpointing: true
    bf16: true
''')


def test_a_callers_sbatch_nodes_beats_the_header(tmp_path: Path):
    settings = checked_project(tmp_path, {
        "slurm/sft.slurm": TEMPLATED,
        "train.py": TRAIN,
        "recipes/big.yaml": RECIPE,
        "recipes/small.yaml": RECIPE,
        "README.md": dedent('''
            # Recipes

            ```shell
            sbatch --nodes=16 slurm/sft.slurm --recipe big
            sbatch slurm/sft.slurm --recipe small
            ```
        '''),
    })
    project = Project(settings)
    [big] = project.runs_for(settings.root / "recipes/big.yaml", run_context(settings))
    assert big.plan.value("world_size") == 16 * 8
    world = big.plan.get("world_size")
    assert world.origin.path.endswith("README.md") and "sbatch --nodes 16" in world.note
    [small] = project.runs_for(settings.root / "recipes/small.yaml", run_context(settings))
    assert small.plan.value("world_size") == 2 * 8  # the header's two nodes


def test_arithmetic_reads_variables_without_their_dollar():
    script = dedent('''
        #!/bin/bash
        #SBATCH --nodes=2
        #SBATCH --gres=gpu:4
        PER_NODE=4
        TOTAL=$((SLURM_NNODES*PER_NODE))
        accelerate launch --num_machines $SLURM_NNODES --num_processes $TOTAL train.py
    ''')
    assert _launch(script).world_size.value == 2 * 4
    assert _launch(script.replace("PER_NODE=4\n", "")).world_size is None  # PER_NODE unset: unknown
