"""Launchers that find their files from their own folder (``$(dirname "$0")``,
``${BASH_SOURCE[0]}``, ``$(cd ... && pwd)``, ``realpath``/``readlink -f``) and ``cd`` before the
launch: VLM-R1's ``run_scripts/run_grpo_gui_defect_detection.sh`` names its ZeRO-3 config as
``${REPO_HOME}/src/open-r1-multimodal/local_scripts/zero3.json`` with ``REPO_HOME`` the folder
above the script, and runs ``src/open_r1/grpo_jsonl.py`` after ``cd ${REPO_HOME}/src/open-r1-multimodal``."""

from __future__ import annotations

from pathlib import Path

import pytest
from facts_testing import dedent, facts_of, one, span, where

from memlint.facts.shell_paths import anchored_path
from memlint.lint.engine import run_context
from memlint.project.project import Project
from memlint.project.settings import Settings

from tests.facts.facts_testing import write

VLM_R1 = dedent('''
    PROJECT_ROOT="$( cd "$( dirname "${BASH_SOURCE[0]}" )/.." && pwd )"
    export REPO_HOME="${PROJECT_ROOT}"
    echo "REPO_HOME: $REPO_HOME"
    model_path="/training/models/Qwen2.5-VL-7B-Instruct"
    export EXP_NAME="Qwen2.5-VL-3B-Instruct-rec" # TODO: change this to your own experiment name
    cd ${REPO_HOME}/src/open-r1-multimodal

    export DEBUG_MODE="true"
    mkdir -p ${REPO_HOME}/runs/${EXP_NAME}/log
    torchrun --nproc_per_node="8" \\
        --nnodes="1" \\
        --master_port="12349" \\
      src/open_r1/grpo_jsonl.py \\
        --output_dir ${REPO_HOME}/checkpoints/rl/${EXP_NAME} \\
        --model_name_or_path $model_path \\
        --per_device_train_batch_size 8 \\
        --gradient_checkpointing true \\
        --bf16 \\
        --deepspeed ${REPO_HOME}/src/open-r1-multimodal/local_scripts/zero3.json \\

    echo "Training completed for ${EXP_NAME}"
''')


def test_the_script_folder_idiom_and_cd_locate_the_launch_and_its_config():
    facts = one(VLM_R1, "run_scripts/run_grpo.sh")
    assert facts.launches.value == "../src/open-r1-multimodal/src/open_r1/grpo_jsonl.py"
    assert [r.value for r in facts.references] == ["../src/open-r1-multimodal/local_scripts/zero3.json"]
    assert where(facts.references[0]) == span(
        VLM_R1, "--deepspeed «${REPO_HOME}/src/open-r1-multimodal/local_scripts/zero3.json»")
    assert facts.world_size.value == 8


@pytest.mark.parametrize("idiom, folder", [
    ('$(dirname "$0")', "."),
    ("`dirname $0`", "."),
    ('"$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"', "."),
    ('$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" &> /dev/null && pwd)', "."),
    ('$(dirname "$(realpath "$0")")', "."),
    ('$(dirname $(readlink -f $0))', "."),
    ('$(dirname $(dirname $0))', ".."),
    ('"$(cd "$(dirname "$0")/../.." >/dev/null 2>&1 && pwd)"', "../.."),
])
def test_each_spelling_of_the_script_folder(idiom: str, folder: str):
    assert anchored_path(idiom, "finetune.sh", {}.get) == (folder, False)


@pytest.mark.parametrize("idiom", ["$(pwd)", '$(dirname "$1")', "$(cd .. && pwd)", "$HOME/configs",
                                   '$(git rev-parse --show-toplevel)'])
def test_what_depends_on_the_caller_is_no_script_folder(idiom: str):
    assert anchored_path(idiom, "finetune.sh", {}.get) is None


def test_a_variable_built_on_another_and_an_accelerate_config_beside_the_script():
    script = dedent('''
        #!/usr/bin/env bash
        set -euo pipefail
        SCRIPT=$(realpath "$0")
        SCRIPT_DIR=$(dirname "$SCRIPT")
        CONFIGS="$SCRIPT_DIR/../configs"
        accelerate launch --config_file "$CONFIGS/deepspeed_zero2.yaml" --num_processes 4 \\
            train_sft.py --per_device_train_batch_size 2
    ''')
    facts = one(script, "scripts/sft.sh")
    assert [r.value for r in facts.references] == ["../configs/deepspeed_zero2.yaml"]
    assert facts.launches.value == "train_sft.py"  # no cd: where the caller stands, as before


def test_a_folder_the_script_cannot_know_leaves_paths_as_written():
    script = dedent('''
        cd "$WORKDIR"
        deepspeed llava/train/train_mem.py --deepspeed ./scripts/zero3.json --model_name_or_path lmsys/vicuna-7b-v1.5
    ''')
    facts = one(script, "scripts/v1_5/finetune.sh")
    assert facts.launches.value == "llava/train/train_mem.py"
    assert [r.value for r in facts.references] == ["./scripts/zero3.json"]


def test_an_absolute_folder_is_where_the_paths_below_it_are_read():
    # the author's clone: the store maps the joined paths to the project's files by their tails;
    # a bare file name stays as written (a tail needs a folder), looked up as before
    script = dedent('''
        WORKDIR=$(pwd)
        cd /workspace/LLaVA
        deepspeed llava/train/train_mem.py --deepspeed ./scripts/zero3.json --model_name_or_path lmsys/vicuna-7b-v1.5
        deepspeed train_mem.py --deepspeed ../zero3.json --model_name_or_path lmsys/vicuna-7b-v1.5
    ''')
    first, second = facts_of(script, "scripts/v1_5/finetune.sh")
    assert first.launches.value == "/workspace/LLaVA/llava/train/train_mem.py"
    assert [r.value for r in first.references] == ["/workspace/LLaVA/scripts/zero3.json"]
    assert second.launches.value == "train_mem.py"
    assert [r.value for r in second.references] == ["../zero3.json"]


def test_a_cd_into_a_subfolder_of_where_the_caller_stands():
    script = dedent('''
        cd training
        torchrun --nproc_per_node 8 finetune.py --deepspeed configs/ds_zero3.json
    ''')
    facts = one(script, "run.sh")
    assert facts.launches.value == "training/finetune.py"
    assert [r.value for r in facts.references] == ["training/configs/ds_zero3.json"]


GRPO_PY = dedent('''
    from dataclasses import dataclass, field

    from open_r1.trainer import VLMGRPOTrainer, GRPOConfig
    from trl import ModelConfig, ScriptArguments, TrlParser


    @dataclass
    class GRPOScriptArguments(ScriptArguments):
        max_pixels: int = field(default=12845056)


    def main(script_args, training_args, model_args):
        trainer = VLMGRPOTrainer(model=model_args.model_name_or_path, args=training_args)
        trainer.train()


    if __name__ == "__main__":
        parser = TrlParser((GRPOScriptArguments, GRPOConfig, ModelConfig))
        script_args, training_args, model_args = parser.parse_args_and_config()
        main(script_args, training_args, model_args)
''')


def test_the_run_shards_as_the_config_the_idiom_names(tmp_path: Path):
    write(tmp_path, {
        "run_scripts/run_grpo.sh": VLM_R1.replace("/training/models/Qwen2.5-VL-7B-Instruct", "Qwen/Qwen2.5-7B"),
        "src/open-r1-multimodal/src/open_r1/grpo_jsonl.py": GRPO_PY,
        "src/open-r1-multimodal/src/open_r1/trainer/__init__.py": "from .grpo_trainer import VLMGRPOTrainer\n",
        "src/open-r1-multimodal/local_scripts/zero3.json": '{"zero_optimization": {"stage": 3}, "bf16": {"enabled": "auto"}}\n',
    })
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False)
    [run] = Project(settings).runs_for(tmp_path / "run_scripts/run_grpo.sh", run_context(settings))
    assert run.plan.get("zero_stage").value == 3
    assert run.setup is not None and run.setup.micro_batch == 8
    assert not [a for a in run.assumed if "parallelism" in a.fact]
