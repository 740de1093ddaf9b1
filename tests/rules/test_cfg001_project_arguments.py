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
    # without the project's code, the Megatron keys are still read (mcore_adapter's arguments, under
    # USE_MCA=1: memlint.configs.mcore_adapter); the KTransformers rule file the schema's release
    # predates is unknown to it
    unknown = lint("CFG001", MEGATRON, path="examples/megatron_bridge/qwen3_moe_full.yaml")
    assert {d.range.start.line for d in unknown} == {12}


# A fine-tuning framework that builds its parser in one helper (ms-swift's shape, abridged):
# ``parse_args(class_type, argv)`` runs ``HfArgumentParser([class_type])``; each pipeline names
# its class in ``args_class`` and the base pipeline calls ``parse_args(self.args_class, argv)``;
# a Ray driver hands its own ``class_type`` on through ``parse_args_from_dict``.
FRAMEWORK_UTILS = """\
import sys
from typing import List, Optional, Type, TypeVar

from transformers import HfArgumentParser

_T = TypeVar("_T")


def parse_args(class_type: Type[_T], argv: Optional[List[str]] = None):
    parser = HfArgumentParser([class_type])
    if argv is None:
        argv = sys.argv[1:]
    args, remaining = parser.parse_args_into_dataclasses(argv, return_remaining_strings=True)
    return args, remaining
"""

FRAMEWORK_ARGUMENTS = """\
from dataclasses import dataclass
from typing import Literal, Optional

from transformers import Seq2SeqTrainingArguments


@dataclass
class TunerArguments:
    tuner_type: Literal["lora", "full"] = "lora"
    lora_rank: int = 8
    lora_alpha: int = 32


@dataclass
class MegatronMixin:
    warmup_iters: int = 0
    gradient_accumulation_fusion: bool = True


@dataclass
class SftArguments(TunerArguments, MegatronMixin, Seq2SeqTrainingArguments):
    model: Optional[str] = None
    max_length: Optional[int] = None


@dataclass
class GRPOArguments(SftArguments):
    num_generations: int = 8
    max_prompt_length: int = 512
    max_completion_length: int = 512
"""

FRAMEWORK_PIPELINE = """\
from framework.utils import parse_args


class Pipeline:
    args_class = None

    def __init__(self, argv=None):
        self.args, _ = self._parse_args(argv)

    def _parse_args(self, argv):
        return parse_args(self.args_class, argv)
"""

FRAMEWORK_SFT = """\
from framework.arguments import SftArguments
from framework.pipeline import Pipeline


class SftPipeline(Pipeline):
    args_class = SftArguments

    def run(self):
        ...
"""

FRAMEWORK_DRIVER = """\
from framework.arguments import GRPOArguments
from framework.utils import parse_args


def parse_args_from_dict(class_type, cfg):
    argv = [item for key, value in cfg.items() for item in (f"--{key}", str(value))]
    args, _ = parse_args(class_type, argv)
    return args


def main(cfg):
    return parse_args_from_dict(GRPOArguments, cfg)
"""

FRAMEWORK = {
    "framework/utils.py": FRAMEWORK_UTILS,
    "framework/arguments.py": FRAMEWORK_ARGUMENTS,
    "framework/pipeline.py": FRAMEWORK_PIPELINE,
    "framework/sft.py": FRAMEWORK_SFT,
    "requirements.txt": "transformers>=4.33,<5.17.0\ntrl>=0.15,<1.0\n",
}

SFT_YAML = """\
model: Qwen/Qwen2.5-7B-Instruct
tuner_type: lora
lora_rank: 8
max_length: 2048
num_train_epochs: 1
per_device_train_batch_size: 1
gradient_accumulation_steps: 8
learning_rate: 1.0e-4
warmup_iters: 10
logging_steps: 5
output_dir: output
"""

GRPO_YAML = """\
model: Qwen/Qwen2.5-1.5B-Instruct
num_generations: 8
max_prompt_length: 512
max_completion_length: 1024
beta: 0.001
per_device_train_batch_size: 1
gradient_accumulation_steps: 4
learning_rate: 1.0e-6
logging_steps: 1
output_dir: output
"""


def test_classes_a_parser_helper_is_handed_through_a_pipeline_attribute_are_the_projects(lint):
    assert lint("CFG001", SFT_YAML, path="examples/sft.yaml", files=FRAMEWORK) == []
    unknown = lint("CFG001", SFT_YAML, path="examples/sft.yaml", files={"requirements.txt": FRAMEWORK["requirements.txt"]})
    assert [d.range.start.line for d in unknown] == [9]  # warmup_iters: "did you mean warmup_steps?"


def test_classes_a_helper_hands_on_to_the_parser_helper_are_the_projects(lint):
    files = {**FRAMEWORK, "framework/ray_driver.py": FRAMEWORK_DRIVER}
    assert lint("CFG004", GRPO_YAML, path="examples/grpo.yaml", files=files) == []
    # the pipelines alone never parse GRPOArguments: the key TRL's GRPOConfig dropped in 0.28
    # stays reported (``max_completion_length`` GRPOConfig still reads)
    removed = lint("CFG004", GRPO_YAML, path="examples/grpo.yaml", files=FRAMEWORK)
    assert [d.range.start.line for d in removed] == [3]


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
    # without the code that reads it, a class that declares every key of the file still owns it
    assert lint("CFG001", TRAIN_CONFIG, path=path, files={"finetune/arguments.py": TRAIN_ARGS}) == []
    # a class that lacks one of the file's keys and is built from something else (the command
    # line's namespace) parses no file: the project's keys look unknown to HfArgumentParser
    lacking = TRAIN_ARGS.replace('    padding_mode: str = "padding"\n', "")
    from_the_command_line = TRAIN.replace("TrainArgs(**train_config)", "TrainArgs(**vars(parsed))")
    files = {"finetune/arguments.py": lacking, "finetune/train.py": from_the_command_line}
    assert {d.range.start.line for d in lint("CFG001", TRAIN_CONFIG, path=path, files=files)} >= {5, 10}


# llm-finetune-lab's src/llm_ft/config.py, trimmed: the dataclass reads its YAML itself, in a
# classmethod, and the presets under configs/ are its files, not TRL's
FINETUNING_CONFIG = """\
from dataclasses import dataclass
from typing import Optional

import yaml


@dataclass
class FineTuningConfig:
    model_name: str = "Qwen/Qwen2.5-0.5B-Instruct"
    method: str = "qlora"
    rank: int = 16
    alpha: int = 32
    batch_size: int = 1
    gradient_accumulation_steps: int = 8
    max_length: int = 256
    learning_rate: float = 2e-4
    num_epochs: int = 2
    load_in_4bit: bool = True
    bf16: Optional[bool] = None

    @classmethod
    def from_yaml(cls, path: str) -> "FineTuningConfig":
        with open(path, "r") as f:
            data = yaml.safe_load(f)
        return cls(**data)
"""

LORA_PRESET = """\
# LoRA Fine-Tuning - 12GB VRAM
model_name: "mistralai/Mistral-7B-Instruct-v0.3"
method: "lora"
rank: 16
alpha: 32
batch_size: 2
gradient_accumulation_steps: 4
max_length: 512
num_epochs: 3
learning_rate: 2.0e-4
load_in_4bit: false
"""


def test_a_dataclass_that_reads_its_file_in_a_classmethod_defines_its_keys(lint):
    path = "configs/lora_12gb.yaml"
    assert lint("CFG001", LORA_PRESET, path=path, files={"src/llm_ft/config.py": FINETUNING_CONFIG}) == []
    # a classmethod that builds the class from the command line's namespace reads no file, and a
    # class that lacks one of the file's keys (`load_in_4bit`) is not the file's shape
    from_options = FINETUNING_CONFIG.replace("data = yaml.safe_load(f)", "data = vars(parse_options(path))").replace(
        "    load_in_4bit: bool = True\n", "")
    found = lint("CFG001", LORA_PRESET, path=path, files={"src/llm_ft/config.py": from_options})
    assert [d.range.start.line for d in found] == [9]  # num_epochs (0-based line 9): did you mean num_train_epochs?


# ssbuild's chatglm_finetuning (abridged): its YAMLs are parsed by HfArgumentParser with the argument
# classes of a training library of its own (deep_training), which is installed, not part of the
# project. Those classes may declare any key (`max_seq_length`, an `optim` of their own), so memlint,
# which cannot read them, does not call a key unknown or a value invalid.
LIBRARY_CLASSES_TRAIN = """\
from transformers import HfArgumentParser
from deep_training.data_helper import ModelArguments, DataArguments, TrainingArgumentsHF
from aigc_zoo.model_zoo.chatglm.llm_model import PetlArguments as LoraArguments

from config import train_info_args


def main():
    parser = HfArgumentParser((ModelArguments, TrainingArgumentsHF, DataArguments, LoraArguments))
    model_args, training_args, data_args, lora_args = parser.parse_dict(train_info_args, allow_extra_keys=True)
    return training_args
"""

LIBRARY_CLASSES_RECIPE = """\
output_dir: ./outputs_hf
num_train_epochs: 20
per_device_train_batch_size: 2
gradient_accumulation_steps: 1
learning_rate: 2.0e-05
optim: adam_hybrid_cl
max_seq_length: 512
max_target_length: 100
use_fast_tokenizer: false
"""


def test_keys_of_argument_classes_from_an_unread_library_are_not_unknown(lint):
    files = {"training/train_hf.py": LIBRARY_CLASSES_TRAIN}
    for code in ("CFG001", "CFG002"):
        assert lint(code, LIBRARY_CLASSES_RECIPE, path="scripts/config/train_hf.yaml", files=files) == [], code


def test_the_libraries_memlint_reads_still_judge_their_keys(lint):
    # the same parser over transformers' own TrainingArguments: an unknown key stays one
    train = LIBRARY_CLASSES_TRAIN.replace(
        "from deep_training.data_helper import ModelArguments, DataArguments, TrainingArgumentsHF",
        "from transformers import TrainingArguments as TrainingArgumentsHF\n"
        "from .arguments import ModelArguments, DataArguments").replace(
        "from aigc_zoo.model_zoo.chatglm.llm_model import PetlArguments as LoraArguments",
        "from peft import LoraConfig as LoraArguments")
    arguments = ("from dataclasses import dataclass\n\n\n@dataclass\nclass ModelArguments:\n"
                 "    model_name_or_path: str = 'THUDM/chatglm-6b'\n\n\n@dataclass\nclass DataArguments:\n"
                 "    max_target_length: int = 128\n    use_fast_tokenizer: bool = False\n")
    files = {"training/train_hf.py": train, "training/arguments.py": arguments}
    found = lint("CFG001", LIBRARY_CLASSES_RECIPE, path="scripts/config/train_hf.yaml", files=files)
    assert [d.range.start.line for d in found] == [7]  # max_seq_length
    assert [d.range.start.line for d in lint("CFG002", LIBRARY_CLASSES_RECIPE, path="scripts/config/train_hf.yaml",
                                             files=files)] == [6]  # optim: adam_hybrid_cl


# avnlp/llm-finetuning's med_question_answering/medqa (abridged): a pydantic model of the
# project's own, built from the YAML (`MedQATrainConfig(**yaml.safe_load(open(config_path)))`),
# whose values the script hands to GRPOConfig one by one. The file looked like a GRPOConfig file:
# CFG001 on `max_seq_length`, a CFG002 on `5e-6` (pydantic reads it as the float it declares).
PYDANTIC_CONFIG = """\
from pydantic import BaseModel


class MedQATrainConfig(BaseModel):
    model_name: str = "unsloth/Qwen3-4B-unsloth-bnb-4bit"
    max_seq_length: int = 10240
    lora_rank: int = 32
    learning_rate: float = 5e-6
    warmup_ratio: float = 0.1
    per_device_train_batch_size: int = 1
    gradient_accumulation_steps: int = 1
    num_generations: int = 4
    output_dir: str = "outputs"
"""

PYDANTIC_TRAIN = """\
import yaml
from trl import GRPOConfig, GRPOTrainer

from .train_config import MedQATrainConfig


def main(config_path: str):
    config = MedQATrainConfig(**yaml.safe_load(open(config_path)))
    args = GRPOConfig(learning_rate=config.learning_rate, num_generations=config.num_generations,
                      per_device_train_batch_size=config.per_device_train_batch_size, output_dir=config.output_dir)
    return args
"""

PYDANTIC_YAML = """\
model_name: "unsloth/Qwen3-4B-unsloth-bnb-4bit"
max_seq_length: 10240
lora_rank: 32
learning_rate: 5e-6
warmup_ratio: 0.1
per_device_train_batch_size: 1
gradient_accumulation_steps: 1
num_generations: 4
output_dir: "outputs"
"""


def test_a_pydantic_model_built_from_the_file_defines_its_keys(lint):
    files = {"medqa/train_config.py": PYDANTIC_CONFIG, "medqa/train.py": PYDANTIC_TRAIN}
    for code in ("CFG001", "CFG002", "CFG004"):
        assert lint(code, PYDANTIC_YAML, path="medqa/train_config.yaml", files=files) == [], code
    # a plain class (no dataclass, no model) declares nothing a config is read into
    plain = PYDANTIC_CONFIG.replace("(BaseModel)", "").replace("from pydantic import BaseModel\n", "")
    found = lint("CFG001", PYDANTIC_YAML, path="medqa/train_config.yaml",
                 files={"medqa/train_config.py": plain, "medqa/train.py": PYDANTIC_TRAIN.replace("(**", "(*")})
    assert [d.range.start.line for d in found] == [2]
