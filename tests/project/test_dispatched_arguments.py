"""A script whose arguments classes live in the project's own modules, one chosen by a literal
key from a dict of classes (LMFlow's ``examples/dpo_train.py``: ``PipelineArguments =
AutoArguments.get_pipeline_args_class("dpo_aligner")``, a static method returning
``PIPELINE_ARGUMENT_MAPPING[pipeline_name]`` in ``src/lmflow/args.py``): the chosen class's
defaults (micro-batch 4, 1024 tokens, checkpointing on) are what runs, not TrainingArguments'.
When a class cannot be read, TrainingArguments' defaults are assumptions the finding names."""

from __future__ import annotations

from pathlib import Path

from memlint.facts.launchers import extract_launchers
from memlint.documents.parsed import parse_document
from memlint.documents.reading import document_from_text
from memlint.lint.engine import Linter, run_context
from memlint.project.project import Project
from memlint.project.settings import Settings

from tests.facts.facts_testing import dedent, write

ARGS_PY = dedent('''
    """Model, data and pipeline arguments."""
    from dataclasses import dataclass, field
    from typing import Optional

    from transformers import TrainingArguments


    @dataclass
    class ModelArguments:
        model_name_or_path: Optional[str] = field(default=None)
        use_lora: bool = field(default=False)
        lora_r: int = field(default=8)
        use_qlora: bool = field(default=False)
        load_in_4bit: Optional[bool] = field(default=True, metadata={"help": "whether to load the model in 4bit"})


    @dataclass
    class DatasetArguments:
        dataset_path: Optional[str] = field(default=None)


    @dataclass
    class FinetunerArguments(TrainingArguments):
        eval_dataset_path: Optional[str] = field(default=None)


    @dataclass
    class DPOAlignerArguments:
        beta: Optional[float] = field(default=0.1, metadata={"help": "the beta parameter for DPO loss"})
        per_device_train_batch_size: Optional[int] = field(default=4, metadata={"help": "train batch size per device"})
        gradient_accumulation_steps: Optional[int] = field(default=4)
        gradient_checkpointing: Optional[bool] = field(default=True)
        max_length: Optional[int] = field(default=1024, metadata={"help": "max length of each sample"})


    PIPELINE_ARGUMENT_MAPPING = {
        "finetuner": FinetunerArguments,
        "dpo_aligner": DPOAlignerArguments,
    }


    class AutoArguments:
        """Automatically choose arguments from FinetunerArguments or EvaluatorArguments."""

        def get_pipeline_args_class(pipeline_name: str):
            return PIPELINE_ARGUMENT_MAPPING[pipeline_name]
''')

DPO_TRAIN_PY = dedent('''
    #!/usr/bin/env python
    import os
    import sys

    from transformers import HfArgumentParser

    from lmflow.args import (
        AutoArguments,
        DatasetArguments,
        ModelArguments,
    )
    from lmflow.pipeline.auto_pipeline import AutoPipeline

    if __name__ == "__main__":
        pipeline_name = "dpo_aligner"
        PipelineArguments = {chooser}
        parser = HfArgumentParser((ModelArguments, DatasetArguments, PipelineArguments))
        model_args, data_args, pipeline_args = parser.parse_args_into_dataclasses()
        aligner = AutoPipeline.get_pipeline(pipeline_name=pipeline_name, model_args=model_args,
                                            data_args=data_args, pipeline_args=pipeline_args)
        aligner.align(model=None, dataset=None, reward_model=None)
''')

RUN_SH = dedent('''
    #!/bin/bash
    model_name_or_path=meta-llama/Llama-2-7b-hf
    deepspeed_args="--master_port=11000 --num_gpus 8"
    exp_id=dpo
    project_dir=$(cd "$(dirname $0)"/..; pwd)
    log_dir=${project_dir}/log/${exp_id}

    deepspeed ${deepspeed_args} \\
      examples/dpo_train.py \\
        --model_name_or_path ${model_name_or_path} \\
        --output_dir output_models/dpo \\
        --learning_rate 1e-6 \\
        {extra}--logging_steps 20 \\
        | tee ${log_dir}/train.log
''')


def _settings(root: Path, chooser: str, extra: str = "") -> Settings:
    write(root, {
        "src/lmflow/__init__.py": "",
        "src/lmflow/args.py": ARGS_PY,
        "src/lmflow/pipeline/__init__.py": "",
        "src/lmflow/pipeline/auto_pipeline.py": "class AutoPipeline:\n    pass\n",
        "examples/dpo_train.py": DPO_TRAIN_PY.format(chooser=chooser),
        "scripts/run_dpo_align.sh": RUN_SH.replace("{extra}", extra),
    })
    (root / ".git").mkdir(exist_ok=True)
    return Settings(root=root).with_overrides(gpu="h100", gpus=8, cache=False)


def _run(settings: Settings):
    [run] = Project(settings).runs_for(settings.root / "scripts/run_dpo_align.sh", run_context(settings))
    assert run.setup is not None, run.problem
    return run


def test_a_variable_of_launcher_options_is_no_script():
    [facts] = extract_launchers(parse_document(document_from_text("scripts/run_dpo_align.sh",
                                                                  RUN_SH.replace("{extra}", ""))))
    assert facts.launches.value == "examples/dpo_train.py"
    assert facts.world_size.value == 8


def test_the_class_chosen_from_the_dict_gives_the_defaults(tmp_path: Path):
    run = _run(_settings(tmp_path, 'AutoArguments.get_pipeline_args_class(pipeline_name)'))
    setup = run.setup
    assert (setup.micro_batch, setup.seq_len, setup.grad_ckpt_every, setup.grad_accum) == (4, 1024, 1, 4)
    assert run.plan.get("micro_batch").origin.path.endswith("src/lmflow/args.py")
    # the model class's 4-bit default is read only by the project's model code: no QLoRA, no LoRA
    assert setup.lora is None
    assert not [a for a in run.assumed if a.fact in ("micro_batch", "grad_ckpt")]


def test_the_launch_turns_lora_on_with_its_rank(tmp_path: Path):
    run = _run(_settings(tmp_path, 'AutoArguments.get_pipeline_args_class("dpo_aligner")',
                         "--use_lora 1 \\\n    --lora_r 16 \\\n    "))
    assert run.setup.lora is not None and run.setup.lora.r == 16 and run.setup.micro_batch == 4


def test_a_class_memlint_cannot_read_leaves_the_defaults_assumed(tmp_path: Path):
    settings = _settings(tmp_path, 'getattr(sys.modules["lmflow.args"], pipeline_name)')
    run = _run(settings)
    assert run.setup.micro_batch == 8  # TrainingArguments' default, assumed
    assumed = {a.fact: a.value for a in run.assumed}
    assert "PipelineArguments" in assumed["micro_batch"] and "PipelineArguments" in assumed["grad_ckpt"]
    memory = [d for d in Linter(settings).lint_path(tmp_path / "scripts/run_dpo_align.sh")
              if d.code in ("MEM001", "MEM002")]
    assert memory and all(d.severity.name == "WARNING" for d in memory)
    assert all("This rests on an assumption" in d.message and "PipelineArguments" in d.message for d in memory)
