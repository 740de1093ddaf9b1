"""A launcher that copies a recipe into place and launches the copy (SPPO's ``pipeline.sh``:
``cp recipes/sppo/config_full.yaml "$new_config_file"`` with a name built from the dataset, then
``accelerate launch run_sppo.py "$new_config_file" --per_device_train_batch_size=$BATCH``): the
run reads the source's settings (its gradient checkpointing, its sequence limits), not nothing."""

from __future__ import annotations

from pathlib import Path



from memlint.facts.shell_writes import copied_from
from memlint.lint.engine import Linter, run_context
from memlint.project.project import Project
from memlint.project.settings import Settings
from tests.facts.facts_testing import dedent, write

PIPELINE_SH = dedent('''
    set -e
    MODEL="mistralai/Mistral-7B-Instruct-v0.2"
    DATASET="UCLA-AGI/data-mistral-7b-instruct-sppo-iter1"
    BATCH_SIZE=8
    while [[ "$#" -gt 0 ]]; do
        case $1 in
        --model) MODEL="$2"; shift ;;
        --dataset) DATASET="$2"; shift ;;
        esac
        shift
    done

    dataset_name=$(echo "$DATASET" | cut -d '/' -f2)
    new_config_file="recipes/sppo/config_full_${dataset_name}.yaml"
    cp recipes/sppo/config_full.yaml "$new_config_file"
    python3 scripts/update_dataset.py --dataset $DATASET --config "$new_config_file"

    accelerate launch --config_file recipes/accelerate_configs/deepspeed_zero3.yaml \\
        sppo/run_sppo.py "$new_config_file" \\
        --per_device_train_batch_size=$BATCH_SIZE \\
        --model_name_or_path=$MODEL
''')

CONFIG_FULL = dedent('''
    model_name_or_path: mistralai/Mistral-7B-Instruct-v0.2
    torch_dtype: null
    bf16: true
    beta: 0.01
    gradient_accumulation_steps: 1
    gradient_checkpointing: true
    gradient_checkpointing_kwargs:
      use_reentrant: false
    learning_rate: 5.0e-7
    max_length: 1024
    max_prompt_length: 512
    optim: adamw_torch
    output_dir: checkpoints/sppo-iter1
    per_device_train_batch_size: 8
''')

RUN_SPPO = dedent('''
    import sys

    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer, ModelConfig, TrlParser


    def main():
        parser = TrlParser((ModelConfig, DPOConfig))
        model_args, training_args = parser.parse_args_and_config()
        model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path)
        tokenizer = AutoTokenizer.from_pretrained(model_args.model_name_or_path)
        trainer = DPOTrainer(model=model, args=training_args, processing_class=tokenizer)
        trainer.train()


    if __name__ == "__main__":
        main()
''')

ZERO3 = dedent('''
    compute_environment: LOCAL_MACHINE
    distributed_type: DEEPSPEED
    deepspeed_config:
      zero_stage: 3
    mixed_precision: bf16
    num_processes: 8
''')


def _settings(root: Path, pipeline: str = PIPELINE_SH) -> Settings:
    write(root, {"scripts/pipeline.sh": pipeline, "recipes/sppo/config_full.yaml": CONFIG_FULL,
                 "sppo/run_sppo.py": RUN_SPPO, "recipes/accelerate_configs/deepspeed_zero3.yaml": ZERO3,
                 "scripts/update_dataset.py": "import sys\nimport yaml\n"})
    (root / ".git").mkdir(exist_ok=True)
    return Settings(root=root).with_overrides(gpu="h100", gpus=8, cache=False, offline=True)


def test_the_launched_copy_reads_the_source_recipe(tmp_path: Path):
    settings = _settings(tmp_path)
    runs = [r for r in Project(settings).runs_for(tmp_path / "scripts/pipeline.sh", run_context(settings))
            if r.setup is not None]
    [run] = runs
    ckpt = run.plan.get("grad_ckpt")
    assert ckpt is not None and ckpt.origin.path.endswith("recipes/sppo/config_full.yaml")
    assert run.setup.grad_ckpt_every == 1 and run.setup.micro_batch == 8
    memory = [d for d in Linter(settings).lint_path(tmp_path / "scripts/pipeline.sh") if d.code == "MEM001"]
    assert memory == []  # 7B DPO, 8 x 1,024 tokens checkpointed, ZeRO-3 on 8 H100s


def test_which_copies_name_a_source():
    text = PIPELINE_SH
    line = text.splitlines().index("accelerate launch --config_file recipes/accelerate_configs/deepspeed_zero3.yaml \\") + 1
    assert copied_from(text, line, '"$new_config_file"') == "recipes/sppo/config_full.yaml"
    assert copied_from(text, 3, '"$new_config_file"') is None  # the copy comes later
    assert copied_from("cp $SRC/config.yaml out.yaml\nrun out.yaml\n", 2, "out.yaml") is None  # source unknown
    assert copied_from("cp -f a.yaml b.yaml\ncp c.yaml b.yaml\nrun\n", 3, "./b.yaml") == "c.yaml"  # the last copy
