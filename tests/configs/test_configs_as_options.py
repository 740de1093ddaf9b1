"""A project that writes a config's items as command-line options before its parser reads them
(ms-swift's ``parse_yaml_args``) hands argparse text, which it converts: a YAML 1.1 string such
as ``1e-4`` arrives as a number (memlint.facts.project_arguments.project_writes_configs_as_options,
memlint.configs.trl_config_option)."""

from __future__ import annotations

# in the style of ms-swift's swift/cli/main.py, swift/utils/utils.py and its SFT arguments
CLI_MAIN = '''\
import json
import os
import sys

import yaml


def parse_yaml_args(argv):
    if not argv:
        return
    config = None
    if argv[0].endswith(".json"):
        with open(argv[0], "r") as f:
            config = json.load(f)
    elif argv[0].endswith((".yaml", ".yml")):
        with open(argv[0], "r") as f:
            config = yaml.safe_load(f)
    if config is None:
        return
    env = config.pop("ENV", None)
    for k, v in (env or {}).items():
        os.environ[k] = str(v)
    config_argv = []
    for k, v in config.items():
        config_argv.append(f"--{k}")
        if isinstance(v, list):
            config_argv += v
        else:
            config_argv.append(json.dumps(v) if isinstance(v, dict) else str(v))
    argv[0:1] = config_argv


def cli_main():
    argv = sys.argv[1:]
    parse_yaml_args(argv)
    from swift.pipelines import sft_main
    sft_main(argv)
'''

ARGUMENTS = '''\
from dataclasses import dataclass, field
from typing import List, Optional

from transformers import HfArgumentParser, Seq2SeqTrainingArguments


@dataclass
class SftArguments(Seq2SeqTrainingArguments):
    model: Optional[str] = None
    tuner_type: str = "lora"
    lora_rank: int = 8
    lora_alpha: int = 32
    target_modules: List[str] = field(default_factory=lambda: ["all-linear"])
    dataset: List[str] = field(default_factory=list)
    max_length: Optional[int] = None


def parse_args(class_type, argv=None):
    parser = HfArgumentParser([class_type])
    args, remaining = parser.parse_args_into_dataclasses(argv, return_remaining_strings=True)
    return args


def sft_main(argv):
    args = parse_args(SftArguments, argv)
    return args
'''

SFT_YAML = """\
model: Qwen/Qwen2.5-7B-Instruct
tuner_type: lora
lora_rank: 8
lora_alpha: 32
dataset:
  - AI-ModelScope/alpaca-gpt4-data-en#500
max_length: 2048
per_device_train_batch_size: 1
learning_rate: 1e-4
gradient_accumulation_steps: 8
output_dir: output
"""


def codes(diagnostics):
    return sorted((d.code, d.range.start.line) for d in diagnostics)


def test_a_config_the_project_writes_as_options_gets_its_numbers_converted(lint):
    files = {"swift/cli/main.py": CLI_MAIN, "swift/pipelines.py": ARGUMENTS, "examples/yaml/sft.yaml": SFT_YAML}
    # before: CFG002 "`learning_rate` must be a number (got "1e-4")"; argparse reads "1e-4" as 0.0001
    assert codes(lint(files, "examples/yaml/sft.yaml")) == []


def test_near_miss_without_the_options_writer_the_string_stays_a_string(lint):
    # the same classes parsed straight from the file (HfArgumentParser.parse_yaml_file): no conversion
    files = {"swift/pipelines.py": ARGUMENTS + "\n\ndef from_file(path):\n"
             "    return HfArgumentParser([SftArguments]).parse_yaml_file(path)\n",
             "examples/yaml/sft.yaml": SFT_YAML}
    assert codes(lint(files, "examples/yaml/sft.yaml")) == [("CFG002", 9)]


def test_near_miss_a_plain_trainer_file_beside_the_writer_keeps_its_finding(lint):
    # a TrainingArguments file with none of the project's own fields is not the project's format
    trainer = "output_dir: out\nper_device_train_batch_size: 4\nlearning_rate: 2e-5\nbf16: true\n"
    files = {"swift/cli/main.py": CLI_MAIN, "swift/pipelines.py": ARGUMENTS, "recipes/trainer.yaml": trainer}
    assert codes(lint(files, "recipes/trainer.yaml")) == [("CFG002", 3)]
