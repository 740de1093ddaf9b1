"""CFG002 on a TRL project (Aria's shape): a recipe a TrlParser script takes with ``--config``,
and the Accelerate configs it is launched with.

TrlParser makes the recipe's values argparse defaults, and argparse converts a string default
through the option's type: ``learning_rate: 5e-5`` (a string to YAML 1.1) is the float 5e-05
there. ``HfArgumentParser.parse_yaml_file`` hands the string on as it is.
"""

from __future__ import annotations

from tests.project.test_direct_launch_forms import ZERO3

CONFIG_PY = """\
from dataclasses import dataclass, field
from typing import Optional

from trl import ModelConfig


@dataclass
class AriaSFTScriptArguments:
    dataset_mixer: Optional[dict[str, float]] = field(default=None, metadata={"help": "Datasets and proportions."})
    max_image_size: int = field(default=980, metadata={"help": "Image size in pixels."})


@dataclass
class AriaModelConfig(ModelConfig):
    tokenizer_path: Optional[str] = field(default=None, metadata={"help": "The tokenizer to load."})
    freeze_vit: bool = field(default=True, metadata={"help": "Keep the vision encoder frozen."})
"""

TRAIN_PY = """\
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import SFTConfig, SFTTrainer, get_peft_config
from trl.commands.cli_utils import TrlParser

from aria.config import AriaModelConfig, AriaSFTScriptArguments


def main():
    parser = TrlParser((AriaSFTScriptArguments, SFTConfig, AriaModelConfig))
    sft_script_args, training_args, model_config = parser.parse_args_and_config()
    model = AutoModelForCausalLM.from_pretrained(model_config.model_name_or_path, torch_dtype=torch.bfloat16)
    tokenizer = AutoTokenizer.from_pretrained(model_config.tokenizer_path)
    trainer = SFTTrainer(model=model, args=training_args, tokenizer=tokenizer,
                         peft_config=get_peft_config(model_config))
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)


if __name__ == "__main__":
    main()
"""

RECIPE = """\
# Model arguments
model_name_or_path: rhymes-ai/Aria
tokenizer_path: rhymes-ai/Aria
torch_dtype: bfloat16
use_peft: true
lora_r: 16

# Data training arguments
dataset_mixer:
  ./datasets/nextqa: 1.0
max_image_size: 980

# Training arguments
output_dir: outputs/aria-lora
resume_from_checkpoint: false # resume from the latest checkpoint in output_dir if set to true
bf16: true
gradient_accumulation_steps: 2
gradient_checkpointing: true
learning_rate: 5e-5
lr_scheduler_type: cosine
max_seq_length: 2048
num_train_epochs: 1
per_device_train_batch_size: 1
"""

# the recipes' accelerate_configs/zero3.yaml as Aria (and TRL, open-r1, SimPO) ship it: accumulation
# and clipping left to the Trainer
ACCELERATE_ZERO3 = ZERO3.replace(
    "  deepspeed_multinode_launcher: standard\n",
    "  deepspeed_multinode_launcher: standard\n  gradient_accumulation_steps: auto\n  gradient_clipping: auto\n")

README = """\
# Fine-tuning Aria

```bash
accelerate launch --config_file recipes/accelerate_configs/zero3.yaml aria/train.py --config recipes/config_lora.yaml
```
"""

REQUIREMENTS = "torch==2.4.0\ntransformers==4.46.0\naccelerate==0.34.1\ntrl==0.9.6\npeft==0.12.0\n"

PROJECT = {"aria/__init__.py": "", "aria/config.py": CONFIG_PY, "aria/train.py": TRAIN_PY,
           "recipes/accelerate_configs/zero3.yaml": ACCELERATE_ZERO3, "README.md": README,
           "requirements.txt": REQUIREMENTS}

RECIPE_PATH = "recipes/config_lora.yaml"
LEARNING_RATE_LINE = RECIPE.splitlines().index("learning_rate: 5e-5") + 1


def lines(diagnostics) -> list[int]:
    return sorted(d.range.start.line for d in diagnostics)


def test_a_recipe_trl_parser_takes_with_config_has_no_invalid_value(lint):
    """`5e-5` is converted by argparse, and `resume_from_checkpoint: false` is what
    Trainer.train takes (no resume)."""
    assert lint("CFG002", RECIPE, path=RECIPE_PATH, files={**PROJECT, RECIPE_PATH: RECIPE}) == []


def test_the_accelerate_config_may_leave_accumulation_and_clipping_to_the_trainer(lint):
    path = "recipes/accelerate_configs/zero3.yaml"
    files = {**{k: v for k, v in PROJECT.items() if k != path}, RECIPE_PATH: RECIPE}
    assert lint("CFG002", ACCELERATE_ZERO3, path=path, files=files) == []
    staged = ACCELERATE_ZERO3.replace("zero_stage: 3", "zero_stage: auto")  # read with int(): no "auto"
    assert lines(lint("CFG002", staged, path=path, files=files)) == [staged.splitlines().index("  zero_stage: auto") + 1]


def test_a_recipe_parse_yaml_file_reads_keeps_the_yaml_1_1_finding(lint):
    """HfArgumentParser.parse_yaml_file(sys.argv[1]) builds the dataclass from the strings as
    YAML read them: the learning rate stays the string "5e-5"."""
    script = TRAIN_PY.replace(
        "from trl.commands.cli_utils import TrlParser\n", "from transformers import HfArgumentParser\n").replace(
        "    parser = TrlParser((AriaSFTScriptArguments, SFTConfig, AriaModelConfig))\n"
        "    sft_script_args, training_args, model_config = parser.parse_args_and_config()\n",
        "    parser = HfArgumentParser((AriaSFTScriptArguments, SFTConfig, AriaModelConfig))\n"
        "    sft_script_args, training_args, model_config = parser.parse_yaml_file(os.path.abspath(sys.argv[1]))\n",
    )
    script = "import os\nimport sys\n\n" + script
    readme = README.replace("aria/train.py --config recipes", "aria/train.py recipes")
    files = {**PROJECT, "aria/train.py": script, "README.md": readme, RECIPE_PATH: RECIPE}
    found = lint("CFG002", RECIPE, path=RECIPE_PATH, files=files)
    assert lines(found) == [LEARNING_RATE_LINE]
    assert "write `5.0e-5`" in found[0].message


def test_without_a_launch_the_loader_is_unknown_and_the_finding_stays(lint):
    files = {k: v for k, v in PROJECT.items() if k != "README.md"}
    assert lines(lint("CFG002", RECIPE, path=RECIPE_PATH, files={**files, RECIPE_PATH: RECIPE})) == [LEARNING_RATE_LINE]


def test_a_string_the_options_type_refuses_is_still_invalid(lint):
    """argparse's `type=int` refuses "1e3" for the batch size."""
    recipe = RECIPE.replace("per_device_train_batch_size: 1", "per_device_train_batch_size: 1e3")
    found = lint("CFG002", recipe, path=RECIPE_PATH, files={**PROJECT, RECIPE_PATH: recipe})
    assert lines(found) == [len(recipe.splitlines())]


SLURM = """\
#!/bin/bash
#SBATCH --job-name=aria-sft
#SBATCH --nodes=1
#SBATCH --gres=gpu:8

MODEL=$1
TASK=$2
ACCELERATOR=$3

accelerate launch --config_file recipes/accelerate_configs/$ACCELERATOR.yaml \\
    aria/train.py --config recipes/$MODEL/$TASK/config_lora.yaml
"""


def test_a_recipe_a_launchers_template_names_with_config(lint):
    """open-r1's shape: the launcher builds `--config recipes/$MODEL/$TASK/config_lora.yaml` from
    its caller's arguments, and a README calls it."""
    path = "recipes/aria/sft/config_lora.yaml"
    readme = "# Training\n\n```bash\nsbatch slurm/train.slurm aria sft zero3\n```\n"
    files = {**PROJECT, "README.md": readme, "slurm/train.slurm": SLURM, path: RECIPE}
    assert lint("CFG002", RECIPE, path=path, files=files) == []
