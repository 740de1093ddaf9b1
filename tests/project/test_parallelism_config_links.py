"""The run's DeepSpeed or Accelerate config, however the project names it, decides whether the
GPUs shard: a project's own key for it (LMFlow's ``configs/iterative_dpo.yaml``:
``accelerate_config_file: configs/accelerate_dsz2_config.yaml``) links it like ``deepspeed:``
does, and a config the run names that is not in the project (LMFlow's
``scripts/archive/run_finetune_with_qlora.sh``: ``--deepspeed configs/archive/ds_config_zero2.json``,
a file moved away) makes a DeepSpeed run of unknown stage, not plain data parallelism: no
out-of-memory verdict that only DDP would make."""

from __future__ import annotations

import json
from pathlib import Path

from memlint.lint.engine import Linter, run_context
from memlint.project.project import Project
from memlint.project.settings import Settings

from tests.facts.facts_testing import dedent, write
from tests.project.test_truncation_limits import TRAIN_PY

DPO_YAML = dedent('''
    # general
    model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
    output_dir: ./output_models/iterative_dpo
    ## pipeline
    ### training
    {config_key}: {config_path}
    bf16: True
    num_train_epochs: 2
    per_device_train_batch_size: 1
    gradient_accumulation_steps: 16
    gradient_checkpointing: True
    max_length: 2048
    optim: adamw_torch
''')

ACCELERATE_DSZ2 = dedent('''
    compute_environment: LOCAL_MACHINE
    deepspeed_config:
      offload_optimizer_device: none
      offload_param_device: none
      zero3_init_flag: false
      zero_stage: 2
    distributed_type: DEEPSPEED
    mixed_precision: bf16
    num_machines: 1
    num_processes: 8
''')

FINETUNE_PY = dedent('''
    import sys
    from dataclasses import dataclass, field

    import torch
    from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainingArguments


    @dataclass
    class ModelArguments:
        model_name_or_path: str = field(default="meta-llama/Llama-2-13b-hf")


    def main():
        parser = HfArgumentParser((ModelArguments, TrainingArguments))
        model_args, training_args = parser.parse_args_into_dataclasses()
        model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path, torch_dtype=torch.bfloat16)
        Trainer(model=model, args=training_args).train()


    if __name__ == "__main__":
        main()
''')

FINETUNE_SH = dedent('''
    #!/bin/bash
    model_name_or_path=meta-llama/Llama-2-13b-hf
    deepspeed_args="--master_port=11000"
    exp_id=finetune_with_lora
    deepspeed ${deepspeed_args} \\
      examples/finetune.py \\
        --model_name_or_path ${model_name_or_path} \\
        --num_train_epochs 0.01 \\
        --learning_rate 1e-4 \\
        --per_device_train_batch_size 4 \\
        --deepspeed configs/archive/ds_config_zero2.json \\
        --bf16 \\
        --gradient_checkpointing True \\
        --model_max_length 512 \\
        --run_name ${exp_id}
''')


def _settings(root: Path, files: dict[str, str]) -> Settings:
    write(root, files)
    (root / ".git").mkdir(exist_ok=True)
    return Settings(root=root).with_overrides(gpu="h100", gpus=8, cache=False)


def _diagnostics(settings: Settings) -> list:
    """Every file's findings: a memory finding sits on the line that decides it (the launch's
    batch size, the DeepSpeed config's stage)."""
    linter = Linter(settings)
    return [d for path in sorted(settings.root.rglob("*.*")) if ".git" not in path.parts
            for d in linter.lint_path(path)]


def test_a_project_key_naming_an_accelerate_config_links_it(tmp_path: Path):
    settings = _settings(tmp_path, {
        "configs/iterative_dpo.yaml": DPO_YAML.format(config_key="accelerate_config_file",
                                                      config_path="configs/accelerate_dsz2_config.yaml"),
        "configs/accelerate_dsz2_config.yaml": ACCELERATE_DSZ2,
    })
    [run] = Project(settings).runs_for(tmp_path / "configs/iterative_dpo.yaml", run_context(settings))
    assert run.plan.get("zero_stage").value == 2
    assert run.plan.get("zero_stage").origin.path.endswith("accelerate_dsz2_config.yaml")
    assert not [a for a in run.assumed if "parallelism" in a.fact]


def test_a_key_that_names_no_parallelism_config_links_nothing(tmp_path: Path):
    settings = _settings(tmp_path, {
        "configs/iterative_dpo.yaml": DPO_YAML.format(config_key="generation_config_file",
                                                      config_path="configs/accelerate_dsz2_config.yaml"),
        "configs/accelerate_dsz2_config.yaml": ACCELERATE_DSZ2,
    })
    [run] = Project(settings).runs_for(tmp_path / "configs/iterative_dpo.yaml", run_context(settings))
    assert run.plan.get("zero_stage") is None
    assert [a.fact for a in run.assumed if "parallelism" in a.fact] == ["parallelism"]


def test_a_project_key_naming_a_missing_config_is_an_unread_stage(tmp_path: Path):
    settings = _settings(tmp_path, {
        "configs/iterative_dpo.yaml": DPO_YAML.format(config_key="accelerate_config_file",
                                                      config_path="configs/accelerate_dsz3_config.yaml"),
    })
    [run] = Project(settings).runs_for(tmp_path / "configs/iterative_dpo.yaml", run_context(settings))
    [assumed] = [a for a in run.assumed if "parallelism" in a.fact]
    assert assumed.fact == "unread_parallelism" and "accelerate_dsz3_config.yaml" in assumed.value


def test_a_launch_naming_a_missing_deepspeed_config_gets_no_ddp_verdict(tmp_path: Path):
    settings = _settings(tmp_path, {"examples/finetune.py": FINETUNE_PY, "scripts/run_finetune.sh": FINETUNE_SH})
    [run] = Project(settings).runs_for(tmp_path / "scripts/run_finetune.sh", run_context(settings))
    assert [a.fact for a in run.assumed if "parallelism" in a.fact] == ["unread_parallelism"]
    assert run.setup is not None and run.setup.micro_batch == 4
    codes = [d.code for d in _diagnostics(settings)]
    assert "CFG015" in codes  # the missing file is named
    assert "MEM001" not in codes and "MEM002" not in codes


def test_the_same_launch_with_its_config_in_place_is_judged_by_it(tmp_path: Path):
    stage0 = {"zero_optimization": {"stage": 0}, "bf16": {"enabled": "auto"},
              "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto"}
    settings = _settings(tmp_path, {"examples/finetune.py": FINETUNE_PY, "scripts/run_finetune.sh": FINETUNE_SH,
                                    "configs/archive/ds_config_zero2.json": json.dumps(stage0, indent=2)})
    diagnostics = [d for d in _diagnostics(settings) if d.code == "MEM001"]
    assert [d.severity.name for d in diagnostics] == ["ERROR"]  # 13B weights, gradients and AdamW states on every GPU


# LLaVA-pp's LLaMA3-V_full_finetune.sh, run from its scripts/ folder outside the LLaVA clone the
# README copies it into: the ZeRO-3 config it names is not there, and the length is a truncation limit
# (LLaVA's train.py: batches padded to their longest sample, as test_truncation_limits writes it)
TRUNCATING_PY = TRAIN_PY.replace("{padding}", "")

FULL_FINETUNE_SH = dedent('''
    #!/bin/bash
    deepspeed train.py \\
        --deepspeed ./scripts/zero3.json \\
        --model_name_or_path meta-llama/Meta-Llama-3-8B-Instruct \\
        --bf16 True \\
        --per_device_train_batch_size 16 \\
        --model_max_length 4096 \\
        --gradient_checkpointing True \\
        --output_dir ./checkpoints/llava-full
''')


def test_a_verdict_two_assumptions_overturn_together_is_not_given(tmp_path: Path):
    # neither ZeRO-3 alone (the 4,096-token logits) nor short batches alone (DDP's optimizer states)
    # makes the run fit; both together do: the missing config and the data decide, not memlint
    settings = _settings(tmp_path, {"train.py": TRUNCATING_PY, "scripts/full_finetune.sh": FULL_FINETUNE_SH})
    codes = [d.code for d in _diagnostics(settings)]
    assert "CFG015" in codes and "MEM001" not in codes


def test_with_the_config_in_place_only_the_data_is_left_to_decide(tmp_path: Path):
    zero3 = {"zero_optimization": {"stage": 3}, "bf16": {"enabled": "auto"},
             "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto"}
    settings = _settings(tmp_path, {"train.py": TRUNCATING_PY, "scripts/full_finetune.sh": FULL_FINETUNE_SH,
                                    "scripts/zero3.json": json.dumps(zero3, indent=2)})
    [finding] = [d for d in _diagnostics(settings) if d.code == "MEM001"]
    assert finding.severity.name == "WARNING" and "if a batch holds a sample of 4096 tokens" in finding.message
