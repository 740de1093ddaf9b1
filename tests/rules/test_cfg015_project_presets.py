"""CFG015 and the config names a project maps to files it ships (``deepspeed: zero2``)."""

from __future__ import annotations

# A fine-tuning framework (ms-swift's shape, abridged): `--deepspeed zero2` is a name its
# argument class maps to the DeepSpeed JSON it ships under `myft/config/`
ARGUMENTS = """\
import os
from dataclasses import dataclass
from typing import Optional

from transformers import Seq2SeqTrainingArguments


@dataclass
class SftArguments(Seq2SeqTrainingArguments):
    model: Optional[str] = None

    def _init_deepspeed(self):
        if not self.deepspeed:
            return
        folder = os.path.join(os.path.dirname(__file__), "config")
        for name in ["zero0", "zero1", "zero2", "zero3", "zero3_offload"]:
            if self.deepspeed == name:
                self.deepspeed = os.path.join(folder, f"{name}.json")
                break
"""

ZERO2 = """\
{
  "bf16": {"enabled": "auto"},
  "zero_optimization": {"stage": 2, "overlap_comm": true, "contiguous_gradients": true},
  "gradient_accumulation_steps": "auto",
  "train_micro_batch_size_per_gpu": "auto"
}
"""

SFT = """\
model: Qwen/Qwen2.5-7B-Instruct
per_device_train_batch_size: 1
gradient_accumulation_steps: 8
learning_rate: 1.0e-4
num_train_epochs: 1
logging_steps: 5
output_dir: output
deepspeed: zero2
"""


def test_a_name_the_projects_code_maps_to_a_config_it_ships_is_not_missing(lint):
    files = {"myft/arguments.py": ARGUMENTS, "myft/config/zero2.json": ZERO2}
    assert lint("CFG015", SFT, path="examples/deepspeed/sft.yaml", files=files) == []


def test_a_shipped_config_whose_name_the_code_never_uses_is_still_a_path(lint):
    # TrainingArguments opens `zero2` as a file: shipping zero2.json elsewhere does not help
    files = {"myft/arguments.py": ARGUMENTS.replace('"zero2", ', ""), "myft/config/zero2.json": ZERO2}
    diagnostics = lint("CFG015", SFT, path="examples/deepspeed/sft.yaml", files=files)
    assert [d.range.start.line for d in diagnostics] == [8]


def test_a_name_with_no_config_behind_it_is_missing(lint):
    diagnostics = lint("CFG015", SFT, path="examples/deepspeed/sft.yaml", files={"myft/arguments.py": ARGUMENTS})
    assert [d.range.start.line for d in diagnostics] == [8]
