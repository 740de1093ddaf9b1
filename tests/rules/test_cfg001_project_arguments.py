"""CFG001: the fields of the project's own argument classes are known keys."""

from __future__ import annotations

# alignment-handbook's shape (abridged): src/alignment/configs.py extends TRL's classes, and
# scripts/sft.py parses the recipe YAML with TrlParser((ScriptArguments, SFTConfig, ModelConfig)).
CONFIGS = """\
from dataclasses import dataclass, field
from typing import Any, Optional

import trl


@dataclass
class DatasetMixtureConfig:
    datasets: list[dict[str, Any]] = field(default_factory=list)
    seed: int = 0
    test_split_size: Optional[float] = None


@dataclass
class ScriptArguments(trl.ScriptArguments):
    dataset_name: Optional[str] = field(default=None, metadata={"help": "Dataset name."})
    dataset_mixture: Optional[dict[str, Any]] = field(default=None, metadata={"help": "Datasets to mix."})


@dataclass
class SFTConfig(trl.SFTConfig):
    chat_template: Optional[str] = field(default=None, metadata={"help": "The chat template to use."})
"""

SFT = """\
from alignment import ModelConfig, ScriptArguments, SFTConfig, get_model, get_tokenizer
from trl import SFTTrainer, TrlParser


def main(script_args, training_args, model_args):
    model = get_model(model_args, training_args)
    tokenizer = get_tokenizer(model_args, training_args)
    trainer = SFTTrainer(model=model, args=training_args, processing_class=tokenizer)
    trainer.train()


if __name__ == "__main__":
    parser = TrlParser((ScriptArguments, SFTConfig, ModelConfig))
    script_args, training_args, model_args = parser.parse_args_and_config()
    main(script_args, training_args, model_args)
"""

RECIPE = """\
model_name_or_path: Qwen/Qwen2.5-1.5B
torch_dtype: bfloat16
chat_template: "{% for message in messages %}{{ message['content'] }}{% endfor %}"
dataset_mixture:
  datasets:
    - id: HuggingFaceH4/deita-10k-v0-sft
      split: train_sft
bf16: true
gradient_checkpointing: true
learning_rate: 2.0e-05
max_length: 2048
output_dir: data/qwen-sft
per_device_train_batch_size: 4
num_train_epochs: 3
"""

FILES = {"src/alignment/configs.py": CONFIGS, "scripts/sft.py": SFT}


def test_fields_of_the_projects_argument_classes_are_known(lint):
    assert lint("CFG001", RECIPE, path="recipes/qwen/sft/config.yaml", files=FILES) == []


def test_without_the_project_code_they_are_unknown(lint):
    diagnostics = lint("CFG001", RECIPE, path="recipes/qwen/sft/config.yaml")
    assert sorted(d.range.start.line for d in diagnostics) == [3]


def test_a_key_neither_the_project_nor_trl_defines_is_still_reported(lint):
    source = RECIPE.replace("max_length:", "max_seq_length:")  # TRL renamed it max_length
    diagnostics = lint("CFG001", source, path="recipes/qwen/sft/config.yaml", files=FILES)
    assert [d.range.start.line for d in diagnostics] == [11]
    assert "did you mean `max_length`?" in diagnostics[0].message


def test_a_dataclass_the_project_never_parses_adds_no_keys(lint):
    files = {"src/alignment/configs.py": CONFIGS}
    diagnostics = lint("CFG001", RECIPE, path="recipes/qwen/sft/config.yaml", files=files)
    assert sorted(d.range.start.line for d in diagnostics) == [3]
