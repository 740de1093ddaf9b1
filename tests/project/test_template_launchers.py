"""A config run by a cluster script that builds the config's path from its own options
(open-r1's ``slurm/train.slurm``: ``CONFIG_FILE=recipes/$MODEL/$TASK/config_$CONFIG_SUFFIX.yaml``,
``accelerate launch --config_file recipes/accelerate_configs/$ACCELERATOR.yaml``, run as
``srun bash -c "$LAUNCHER $CMD"``), called from a README with ``sbatch --nodes=1
slurm/train.slurm --model OlympicCoder-7B --task sft --config v00.00 --accelerator zero3``.
The project is open-r1's layout, trimmed."""

from __future__ import annotations

from pathlib import Path

from memlint.documents.parsed import parse_document
from memlint.documents.reading import document_from_text
from memlint.facts.launchers import extract_launchers
from memlint.facts.shell_words import instantiate, match_template, option_variables
from memlint.lint.engine import Linter, run_context
from memlint.project.project import Project
from memlint.project.settings import Settings

from tests.facts.facts_testing import dedent, write

TRAIN_SLURM = dedent('''
    #!/bin/bash
    #SBATCH --job-name=open_r1
    #SBATCH --ntasks-per-node=1
    #SBATCH --exclusive
    #SBATCH --gres=gpu:8
    #SBATCH --partition=hopper-prod  # Adjust this for your cluster
    #SBATCH --output=./logs/%x-%j.out

    if [[ "$*" == *"--help"* ]]; then
      echo "Usage: sbatch slurm/train.slurm [options]"
      exit 0
    fi

    set -x -e
    source openr1/bin/activate

    # Default values
    MODEL=""
    TASK=""
    CONFIG_SUFFIX=""
    ACCELERATOR=""
    OPTIONAL_ARGS=""

    # Parse command line arguments
    while [[ $# -gt 0 ]]; do
      case $1 in
        --model)
          MODEL="$2"
          shift 2
          ;;
        --task)
          TASK="$2"
          shift 2
          ;;
        --config)
          CONFIG_SUFFIX="$2"
          shift 2
          ;;
        --accelerator)
          ACCELERATOR="$2"
          shift 2
          ;;
        --args)
          OPTIONAL_ARGS="$2"
          shift 2
          ;;
        *)
          echo "Unknown option: $1"
          exit 1
          ;;
      esac
    done

    CONFIG_FILE=recipes/$MODEL/$TASK/config_$CONFIG_SUFFIX.yaml
    GRAD_ACC_STEPS=$(grep 'gradient_accumulation_steps' $CONFIG_FILE | awk '{print $2}')
    MODEL=$(grep 'model_name_or_path:' $CONFIG_FILE | awk '{print $2}')

    NUM_NODES=$SLURM_NNODES
    GPUS_PER_NODE=8
    WORLD_SIZE=$(($NUM_NODES*$GPUS_PER_NODE))

    export CMD=" \\
        src/open_r1/$TASK.py --config $CONFIG_FILE $OPTIONAL_ARGS
        "

    export LAUNCHER="ACCELERATE_LOG_LEVEL=info accelerate launch \\
        --config_file recipes/accelerate_configs/$ACCELERATOR.yaml  \\
        --gradient_accumulation_steps $GRAD_ACC_STEPS \\
        --num_machines $NUM_NODES \\
        --num_processes $WORLD_SIZE \\
        --machine_rank $SLURM_PROCID \\
        --rdzv_backend=c10d \\
        "

    SRUN_ARGS=" \\
        --wait=60 \\
        --kill-on-bad-exit=1 \\
        --nodes=$NUM_NODES \\
        "
    srun $SRUN_ARGS bash -c "$LAUNCHER $CMD" 2>&1
''')

SFT = dedent('''
    """Supervised fine-tuning script for decoder language models."""

    from transformers import AutoModelForCausalLM
    from trl import ModelConfig, ScriptArguments, SFTConfig, SFTTrainer, TrlParser


    def main(script_args, training_args, model_args):
        model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path, torch_dtype="bfloat16")
        trainer = SFTTrainer(model=model, args=training_args, train_dataset=load(script_args))
        trainer.train()


    if __name__ == "__main__":
        parser = TrlParser((ScriptArguments, SFTConfig, ModelConfig))
        script_args, training_args, model_args = parser.parse_args_and_config()
        main(script_args, training_args, model_args)
''')


def _accelerate(stage: int) -> str:
    return dedent(f'''
        compute_environment: LOCAL_MACHINE
        debug: false
        deepspeed_config:
          deepspeed_multinode_launcher: standard
          offload_optimizer_device: none
          offload_param_device: none
          zero3_init_flag: {"true" if stage == 3 else "false"}
          zero_stage: {stage}
        distributed_type: DEEPSPEED
        downcast_bf16: 'no'
        machine_rank: 0
        main_training_function: main
        mixed_precision: bf16
        num_machines: 1
        num_processes: 8
        rdzv_backend: static
        same_network: true
        use_cpu: false
    ''')


def _recipe(model: str) -> str:
    # recipes/OlympicCoder-7B/sft/config_v00.00.yaml, trimmed: a 7B full fine-tune at 32k tokens
    return dedent(f'''
        # Config for 1 node of 8 H100s with DeepSpeed ZeRO-3
        model_name_or_path: {model}
        model_revision: main
        torch_dtype: bfloat16
        attn_implementation: flash_attention_2
        dataset_name: open-r1/codeforces-cots
        bf16: true
        gradient_accumulation_steps: 8
        gradient_checkpointing: true
        gradient_checkpointing_kwargs:
          use_reentrant: false
        learning_rate: 4.0e-05
        max_length: 32768
        packing: false
        per_device_train_batch_size: 2
        use_liger_kernel: true
        output_dir: data/OlympicCoder-7B
    ''')


RECIPES_README = dedent('''
    # Post-training recipes

    To train the OlympicCoder models, run:

    ```
    # 7B
    sbatch --nodes=1 slurm/train.slurm --model OlympicCoder-7B --task sft --config v00.00 --accelerator zero3

    # 32B
    sbatch --nodes=16 slurm/train.slurm --model OlympicCoder-32B --task sft --config v00.00 --accelerator zero3
    ```

    In general, run any recipe with:

    ```shell
    sbatch --job-name=open_r1 --nodes=1 slurm/train.slurm --model {model_name} --task {task} --config {config_suffix} --accelerator {accelerator}
    ```
''')

FILES = {
    "slurm/train.slurm": TRAIN_SLURM,
    "src/open_r1/__init__.py": "",
    "src/open_r1/sft.py": SFT,
    "recipes/accelerate_configs/zero2.yaml": _accelerate(2),
    "recipes/accelerate_configs/zero3.yaml": _accelerate(3),
    "recipes/README.md": RECIPES_README,
    "recipes/OlympicCoder-7B/sft/config_v00.00.yaml": _recipe("Qwen/Qwen2.5-Coder-7B-Instruct"),
    "recipes/OlympicCoder-32B/sft/config_v00.00.yaml": _recipe("Qwen/Qwen2.5-Coder-32B-Instruct"),
    "recipes/Qwen2.5-Coder-7B-Instruct/sft/config_long.yaml": _recipe("Qwen/Qwen2.5-Coder-7B-Instruct"),
}
SEVEN_B = "recipes/OlympicCoder-7B/sft/config_v00.00.yaml"
UNCALLED = "recipes/Qwen2.5-Coder-7B-Instruct/sft/config_long.yaml"


def _project(root: Path, files: dict[str, str]) -> Settings:
    write(root, files)
    (root / ".git").mkdir(exist_ok=True)
    return Settings(root=root).with_overrides(gpu="h100", gpus=8, cache=False)


def _runs(settings: Settings, name: str):
    return Project(settings).runs_for(settings.root / name, run_context(settings))


def _memory(settings: Settings, name: str):
    return [d for d in Linter(settings).lint_path(settings.root / name) if d.code in ("MEM001", "MEM002")]


def test_the_script_reads_its_callers_options_into_templates():
    assert option_variables(TRAIN_SLURM) == {"MODEL": "--model", "TASK": "--task", "CONFIG_SUFFIX": "--config",
                                             "ACCELERATOR": "--accelerator", "OPTIONAL_ARGS": "--args"}
    [facts] = extract_launchers(parse_document(document_from_text("slurm/train.slurm", TRAIN_SLURM)))
    assert facts.launches is None  # the script's name comes from --task
    assert facts.template_launches.value == "src/open_r1/{--task}.py"
    assert facts.template_config.value == "recipes/{--model}/{--task}/config_{--config}.yaml"
    assert [r.value for r in facts.template_references] == ["recipes/accelerate_configs/{--accelerator}.yaml"]
    # the launch is written inside the LAUNCHER string and located there, not at `srun`
    line = next(i for i, text in enumerate(TRAIN_SLURM.splitlines(), 1) if text.startswith("export LAUNCHER="))
    assert facts.anchor.range.start.line == line


def test_a_positional_argument_is_a_template_too():
    script = "#!/bin/bash\nSTAGE=$1\ndeepspeed --num_gpus 8 train.py --deepspeed configs/ds_z${STAGE}.json\n"
    [facts] = extract_launchers(parse_document(document_from_text("run.sh", script)))
    assert [r.value for r in facts.template_references] == ["configs/ds_z{1}.json"]


def test_templates_are_filled_and_matched():
    template = "recipes/{--model}/{--task}/config_{--config}.yaml"
    assert instantiate(template, {"--model": "M", "--task": "sft", "--config": "v1"}) == "recipes/M/sft/config_v1.yaml"
    assert instantiate(template, {"--model": "M"}) is None
    assert match_template(template, "recipes/M/sft/config_v00.00.yaml") == {"--model": "M", "--task": "sft",
                                                                          "--config": "v00.00"}
    assert match_template(template, "recipes/accelerate_configs/zero3.yaml") is None


def test_a_config_a_call_names_runs_with_the_calls_accelerate_config(tmp_path):
    settings = _project(tmp_path, FILES)
    [run] = _runs(settings, SEVEN_B)
    assert run.plan.value("zero_stage") == 3  # recipes/accelerate_configs/zero3.yaml, from --accelerator
    assert run.plan.value("micro_batch") == 2  # the recipe's own field
    assert Path(run.plan.documents[1]).name == "sft.py"  # src/open_r1/$TASK.py
    assert not any("launch assumed" in note for note in run.assumptions)
    # a 7B full fine-tune at 2 x 32k tokens (checkpointing, Liger's fused loss) fits 8 H100s under ZeRO-3; as plain
    # DDP (what memlint assumed before) it did not
    assert _memory(settings, SEVEN_B) == []


def test_sbatch_nodes_times_the_scripts_gpus_is_the_world_size(tmp_path):
    settings = _project(tmp_path, FILES)
    [run] = _runs(settings, "recipes/OlympicCoder-32B/sft/config_v00.00.yaml")
    assert run.plan.value("world_size") == 16 * 8


def test_a_config_no_call_names_takes_what_the_calls_agree_on(tmp_path):
    settings = _project(tmp_path, FILES)
    [run] = _runs(settings, UNCALLED)
    assert run.plan.value("zero_stage") == 3  # every real call passes --accelerator zero3
    # (the config's max_seq_length is a truncation limit too: `seq_len_limit`)
    assert [a.fact for a in run.assumed if a.fact != "seq_len_limit"] == ["launch"]
    [note] = [n for n in run.assumptions if "launch assumed" in n]
    assert "recipes/{--model}/{--task}/config_{--config}.yaml" in note and "--accelerator zero3" in note


def test_calls_that_disagree_give_a_config_no_call_names_no_launch(tmp_path):
    readme = RECIPES_README.replace("--model OlympicCoder-32B --task sft --config v00.00 --accelerator zero3",
                                    "--model OlympicCoder-32B --task sft --config v00.00 --accelerator zero2")
    settings = _project(tmp_path, {**FILES, "recipes/README.md": readme})
    runs = _runs(settings, UNCALLED)
    assert all(run.plan.value("zero_stage") is None for run in runs)
    # the named ones still run as their calls say
    [run] = _runs(settings, "recipes/OlympicCoder-32B/sft/config_v00.00.yaml")
    assert run.plan.value("zero_stage") == 2
