"""A LoRA script that parses a project subclass of ``transformers.TrainingArguments`` imported from
the project's full fine-tuning module (ToolBench's ``train_lora.py`` imports ``TrainingArguments``
from ``train.py``, where it extends the library's): the class is the library's for the parser, so
the launch's ``--per_device_train_batch_size 4 --gradient_checkpointing True`` state the run, and
the subclass's own defaults (``model_max_length``) count where the launch passes nothing."""

from __future__ import annotations

from pathlib import Path

from facts_testing import checked_project, dedent, only_run, write
from test_entry_points import TRAIN as TRAIN_PY  # FastChat-like: TrainingArguments with model_max_length 512

from memlint.facts.imported_arguments import library_argument_bases
from memlint.lint.engine import Linter
from memlint.project.settings import Settings

TRAIN_LORA_PY = dedent('''
    from dataclasses import dataclass, field
    import typing

    import transformers
    from peft import LoraConfig, get_peft_model
    from transformers import Trainer

    from convtrain.train import (
        DataArguments,
        ModelArguments,
        TrainingArguments,
    )


    @dataclass
    class LoraArguments:
        lora_r: int = 8
        lora_alpha: int = 16
        lora_target_modules: typing.List[str] = field(default_factory=lambda: ["q_proj", "v_proj"])


    def train():
        parser = transformers.HfArgumentParser((ModelArguments, DataArguments, TrainingArguments, LoraArguments))
        model_args, data_args, training_args, lora_args = parser.parse_args_into_dataclasses()
        model = transformers.AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path)
        lora_config = LoraConfig(r=lora_args.lora_r, lora_alpha=lora_args.lora_alpha,
                                 target_modules=lora_args.lora_target_modules, task_type="CAUSAL_LM")
        if training_args.gradient_checkpointing:
            model.enable_input_require_grads()
        model = get_peft_model(model, lora_config)
        tokenizer = transformers.AutoTokenizer.from_pretrained(
            model_args.model_name_or_path, model_max_length=training_args.model_max_length)
        trainer = Trainer(model=model, tokenizer=tokenizer, args=training_args)
        trainer.train()


    if __name__ == "__main__":
        train()
''')

LAUNCH_SH = dedent('''
    export PYTHONPATH=./
    deepspeed --master_port=20001 convtrain/train_lora.py \\
        --model_name_or_path huggyllama/llama-7b \\
        --data_path data/train.json \\
        --bf16 True \\
        --output_dir lora_out \\
        --per_device_train_batch_size 4 \\
        --gradient_accumulation_steps 2 \\
        --gradient_checkpointing True \\
        --deepspeed ds_configs/stage2.json
''')

STAGE2 = '{"zero_optimization": {"stage": 2}, "bf16": {"enabled": "auto"}, ' \
         '"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto"}\n'


def _settings(root: Path, train_py: str = TRAIN_PY) -> Settings:
    return checked_project(root, {
        "convtrain/__init__.py": "",
        "convtrain/train.py": train_py,
        "convtrain/train_lora.py": TRAIN_LORA_PY,
        "scripts/train_lora.sh": LAUNCH_SH,
        "ds_configs/stage2.json": STAGE2,
    })


def _run(settings: Settings):
    return only_run(settings, "scripts/train_lora.sh")


def test_the_launch_options_of_an_imported_subclass_state_the_run(tmp_path: Path):
    settings = _settings(tmp_path)
    run = _run(settings)
    setup = run.setup
    assert (setup.micro_batch, setup.grad_ckpt_every, setup.grad_accum) == (4, 1, 2)
    assert setup.lora is not None and setup.lora.r == 8
    assert setup.seq_len == 512  # the subclass's own default
    assert run.plan.get("seq_len").origin.path.endswith("convtrain/train.py")
    assert not [a for a in run.assumed if a.fact in ("micro_batch", "grad_ckpt")]
    memory = [d for d in Linter(settings).lint_path(tmp_path / "scripts/train_lora.sh") if d.code == "MEM001"]
    assert memory == []  # 7B LoRA in bf16, 4 x 512 tokens checkpointed, under ZeRO-2 on an H100


def test_a_base_imported_under_another_name_or_from_another_project_module(tmp_path: Path):
    aliased = TRAIN_PY.replace("import transformers\n", "import transformers\nfrom transformers import "
                               "TrainingArguments as HfTrainingArguments\n").replace(
        "class TrainingArguments(transformers.TrainingArguments):", "class TrainingArguments(HfTrainingArguments):")
    settings = _settings(tmp_path, aliased)
    assert _run(settings).setup.micro_batch == 4
    # the base is the project's own arguments class one module further
    write(tmp_path, {"convtrain/common.py": dedent('''
        from dataclasses import dataclass

        from transformers import Seq2SeqTrainingArguments


        @dataclass
        class BaseTrainingArguments(Seq2SeqTrainingArguments):
            report_to: str = "none"
    ''')})
    hop = TRAIN_PY.replace("from transformers import Trainer\n",
                           "from transformers import Trainer\n\nfrom convtrain.common import BaseTrainingArguments\n")
    hop = hop.replace("class TrainingArguments(transformers.TrainingArguments):",
                      "class TrainingArguments(BaseTrainingArguments):")
    settings = _settings(tmp_path, hop)
    assert _run(settings).setup.micro_batch == 4


def test_a_project_class_that_extends_no_library_arguments_binds_nothing(tmp_path: Path):
    plain = TRAIN_PY.replace("class TrainingArguments(transformers.TrainingArguments):",
                             "class TrainingArguments:")

    def source(module: str) -> tuple[str, str] | None:
        return ("convtrain/train.py", plain) if module == "convtrain.train" else None

    assert library_argument_bases(TRAIN_LORA_PY, source) == {}
    assert library_argument_bases(TRAIN_LORA_PY, lambda m: ("convtrain/train.py", TRAIN_PY)
                                  if m == "convtrain.train" else None) == {
        "TrainingArguments": "transformers.TrainingArguments"}
