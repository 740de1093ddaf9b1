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


# LLaMA-Factory's shape (abridged): hparams/parser.py hands its parsers module-level lists of
# the classes (``HfArgumentParser(_TRAIN_MBRIDGE_ARGS)``), and the Megatron-Bridge and
# KTransformers settings are fields of its own classes.
HPARAMS = """\
from dataclasses import dataclass, field
from typing import Optional


@dataclass
class ModelArguments:
    model_name_or_path: Optional[str] = field(default=None)
    use_kt: bool = field(default=False, metadata={"help": "Whether to use KTransformers."})
    kt_optimize_rule: Optional[str] = field(default=None, metadata={"help": "The KTransformers rule."})


@dataclass
class MegatronBridgeArguments:
    tensor_model_parallel_size: int = field(default=1)
    sequence_parallel: bool = field(default=False)
    use_distributed_optimizer: bool = field(default=True)
"""

PARSER = """\
from transformers import HfArgumentParser, Seq2SeqTrainingArguments

from .hparams import MegatronBridgeArguments, ModelArguments

_TRAIN_ARGS = [ModelArguments, Seq2SeqTrainingArguments]
_TRAIN_MBRIDGE_ARGS = [ModelArguments, Seq2SeqTrainingArguments, MegatronBridgeArguments]


def get_train_args(path):
    parser = HfArgumentParser(_TRAIN_ARGS)
    return parser.parse_yaml_file(path)


def get_mbridge_args(path):
    parser = HfArgumentParser(_TRAIN_MBRIDGE_ARGS)
    return parser.parse_yaml_file(path)
"""

MEGATRON = """\
model_name_or_path: Qwen/Qwen3-30B-A3B-Instruct-2507
stage: sft
do_train: true
finetuning_type: full
dataset: identity
template: qwen3
cutoff_len: 4096
tensor_model_parallel_size: 4
sequence_parallel: true
use_distributed_optimizer: true
use_kt: true
kt_optimize_rule: examples/kt_optimize_rules/Qwen3Moe-sft-amx.yaml
output_dir: saves/qwen3-moe/full/sft
per_device_train_batch_size: 1
learning_rate: 1.0e-5
"""


def test_classes_handed_to_a_parser_in_a_list_of_the_module_are_the_projects(lint):
    files = {"src/llamafactory/hparams/__init__.py": HPARAMS, "src/llamafactory/hparams/parser.py": PARSER}
    assert lint("CFG001", MEGATRON, path="examples/megatron_bridge/qwen3_moe_full.yaml", files=files) == []
    # without the project's code, those keys are unknown to LLaMA-Factory's schema
    unknown = lint("CFG001", MEGATRON, path="examples/megatron_bridge/qwen3_moe_full.yaml")
    assert {d.range.start.line for d in unknown} >= {8, 9, 10}


# A project that reads its JSON config itself and builds its own dataclass from it (the shape
# of MFTCoder's pefts/mft_accelerate.py): many keys look like TrainingArguments', some are
# the project's alone (``padding_mode``, ``max_train_steps``), some are ones TRL removed.
TRAIN_ARGS = """\
from dataclasses import dataclass
from typing import List, Optional, Union


@dataclass
class FinetuneArgs:
    data_paths: Union[str, List[str]]
    output_dir: str
    pretrained_model_path: str
    padding_mode: str = "padding"
    per_device_train_batch_size: int = 8
    gradient_accumulation_steps: int = 1
    learning_rate: float = 5e-5
    num_train_epochs: int = 4
    max_train_steps: Optional[int] = None
    max_prompt_length: Optional[int] = 2048
    lr_scheduler_type: str = "cosine"
    warmup_ratio: float = 0.03
"""

TRAIN = """\
import argparse
import json

from finetune.arguments import FinetuneArgs as TrainArgs
from finetune.trainer import run


def prepare_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--train_config", type=str, required=True)
    parser.add_argument("--output_dir", type=str, default=None)
    parsed = parser.parse_args()
    with open(parsed.train_config, "r") as f:
        train_config = json.load(f)
    args = TrainArgs(**train_config)
    if parsed.output_dir:
        args.output_dir = parsed.output_dir
    return args


if __name__ == "__main__":
    run(prepare_args())
"""

TRAIN_CONFIG = """\
{
    "data_paths": "[data/code_exercises]",
    "output_dir": "runs/lora",
    "pretrained_model_path": "models/base",
    "padding_mode": "pack",
    "per_device_train_batch_size": 2,
    "gradient_accumulation_steps": 4,
    "learning_rate": 1e-4,
    "num_train_epochs": 2,
    "max_train_steps": null,
    "max_prompt_length": 1024,
    "lr_scheduler_type": "cosine",
    "warmup_ratio": 0.03
}
"""


def test_a_dataclass_built_from_a_loaded_config_defines_its_keys(lint):
    files = {"finetune/arguments.py": TRAIN_ARGS, "finetune/train.py": TRAIN}
    path = "finetune/configs/lora_train_config.json"
    assert lint("CFG001", TRAIN_CONFIG, path=path, files=files) == []
    assert lint("CFG004", TRAIN_CONFIG, path=path, files=files) == []
    # without the code that reads it, the project's keys look unknown to HfArgumentParser
    alone = lint("CFG001", TRAIN_CONFIG, path=path, files={"finetune/arguments.py": TRAIN_ARGS})
    assert {d.range.start.line for d in alone} >= {5, 10}
    # a class built from something else (the command line's namespace) parses no file
    from_the_command_line = TRAIN.replace("TrainArgs(**train_config)", "TrainArgs(**vars(parsed))")
    files = {"finetune/arguments.py": TRAIN_ARGS, "finetune/train.py": from_the_command_line}
    assert {d.range.start.line for d in lint("CFG001", TRAIN_CONFIG, path=path, files=files)} >= {5, 10}
