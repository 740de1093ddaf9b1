"""A project's own YAML config whose TrainingArguments are one section of it (GLM-4's
``finetune/configs/sft.yaml``: ``training_args:`` holding ``per_device_train_batch_size`` and
``deepspeed: configs/ds_zero_3.json``, read by ``finetune.py`` into
``Seq2SeqTrainingArguments(**training_args)``). The section's fields are those of the run that
passes the file to its script, and the DeepSpeed config it names is used -- by that run, or at
least by the config file that names it, not "by no launcher, script or recipe"."""

from __future__ import annotations

from tests.facts.facts_testing import dedent, facts_of, span, where
from tests.project.test_config_launchers import _project, _runs

FINETUNE = dedent('''
    import dataclasses as dc
    from pathlib import Path
    from typing import Annotated, Optional

    import typer
    import yaml
    from peft import PeftConfig, get_peft_config, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer, Seq2SeqTrainer, Seq2SeqTrainingArguments

    app = typer.Typer()


    @dc.dataclass
    class FinetuningConfig:
        max_input_length: int
        max_output_length: int
        training_args: Seq2SeqTrainingArguments = dc.field(
            default_factory=lambda: Seq2SeqTrainingArguments(output_dir="./output"))
        peft_config: Optional[PeftConfig] = None

        @classmethod
        def from_file(cls, path: str) -> "FinetuningConfig":
            kwargs = yaml.safe_load(Path(path).read_text())
            kwargs["training_args"] = Seq2SeqTrainingArguments(**kwargs["training_args"])
            if kwargs.get("peft_config") is not None:
                kwargs["peft_config"] = get_peft_config(config_dict=kwargs["peft_config"])
            return cls(**kwargs)


    @app.command()
    def main(
        data_dir: Annotated[str, typer.Argument(help="the dataset folder")],
        model_dir: Annotated[str, typer.Argument(help="a Hub id or a local checkpoint")],
        config_file: Annotated[str, typer.Argument(help="the fine-tuning config")],
    ):
        ft_config = FinetuningConfig.from_file(config_file)
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype="auto")
        if ft_config.peft_config is not None:
            model = get_peft_model(model, ft_config.peft_config)
        trainer = Seq2SeqTrainer(model=model, args=ft_config.training_args, train_dataset=load(data_dir))
        trainer.train()


    if __name__ == "__main__":
        app()
''')

SFT = dedent('''
    max_input_length: 512
    max_output_length: 512

    training_args:
      # see `transformers.Seq2SeqTrainingArguments`
      output_dir: ./output
      max_steps: 3000
      learning_rate: 5e-5
      per_device_train_batch_size: 2
      gradient_accumulation_steps: 4
      bf16: true
      save_strategy: steps
      save_steps: 500
      logging_steps: 10
      # set your deepspeed config here
      deepspeed: configs/ds_zero_3.json
''')

LORA = SFT.replace("deepspeed: configs/ds_zero_3.json", "deepspeed: configs/ds_zero_2.json").replace(
    "learning_rate: 5e-5", "learning_rate: 5e-4") + dedent('''

    peft_config:
      peft_type: LORA
      task_type: CAUSAL_LM
      r: 8
      lora_alpha: 32
''')

README = dedent('''
    # Fine-tuning

    ```shell
    OMP_NUM_THREADS=1 torchrun --standalone --nnodes=1 --nproc_per_node=8 finetune.py data/AdvertiseGen/ meta-llama/Llama-2-7b-hf configs/lora.yaml
    ```
''')

DS_ZERO2 = '{"zero_optimization": {"stage": 2}, "bf16": {"enabled": "auto"}, "train_micro_batch_size_per_gpu": "auto"}\n'
DS_ZERO3 = '{"zero_optimization": {"stage": 3}, "bf16": {"enabled": "auto"}, "train_micro_batch_size_per_gpu": "auto"}\n'


def test_the_trainer_arguments_section_states_its_fields_and_names_the_deepspeed_config():
    [facts] = facts_of(SFT, "configs/sft.yaml")
    assert facts.framework is None  # the script that reads the file trains, not the file
    assert facts.micro_batch.value == 2
    assert where(facts.micro_batch) == span(SFT, "per_device_train_batch_size: «2»")
    assert facts.grad_accum.value == 4
    assert facts.mixed.value == "bf16"
    assert [r.value for r in facts.references] == ["configs/ds_zero_3.json"]
    assert where(facts.references[0]) == span(SFT, "deepspeed: «configs/ds_zero_3.json»")


def test_a_config_without_such_a_section_states_nothing():
    plain = dedent('''
        data_config:
          train_file: train.jsonl
          num_proc: 1
        combine: true
    ''')
    assert facts_of(plain, "configs/data.yaml") == []


def test_the_launch_that_passes_the_file_runs_with_its_section_and_deepspeed_config(tmp_path):
    settings = _project(tmp_path, {
        "finetune.py": FINETUNE,
        "README.md": README,
        "configs/lora.yaml": LORA,
        "configs/sft.yaml": SFT,
        "configs/ds_zero_2.json": DS_ZERO2,
        "configs/ds_zero_3.json": DS_ZERO3,
    })
    [run] = _runs(settings, "finetune.py")
    assert run.plan.value("model") == "meta-llama/Llama-2-7b-hf"
    assert run.plan.value("zero_stage") == 2  # lora.yaml's training_args.deepspeed
    assert run.plan.value("micro_batch") == 2
    assert run.plan.value("grad_accum") == 4
    from memlint.project.project import Project

    # sft.yaml, which no command passes, still names ds_zero_3.json: no config is unused
    assert Project(settings).runs.unused_configs() == []
