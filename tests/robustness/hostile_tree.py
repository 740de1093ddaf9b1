"""A training project as people write it, and the same project with hostile files beside it.

Used by ``tests/robustness/test_hostile_files.py`` (the findings) and ``bench/hostile_check_speed.py``
(the time): a DeepSpeed config with a 5,000-digit batch size, a FIFO, a symlink to
``/dev/zero``, a symlink loop, a YAML alias bomb, a binary named ``.py``, a 400,000-line
generated module that imports torch, and JSON nested 100,000 levels deep.
"""

from __future__ import annotations

import os
from pathlib import Path

# An HF Trainer script with a DeepSpeed config (the config's ZeRO stage does not exist), a TRL
# YAML run that does not fit the A10G, and a hand-written AMP loop with deprecated spellings.
PROJECT = {
    "train.py": '''\
import argparse

from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

from data import load_dataset_for


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="Qwen/Qwen2.5-0.5B")
    parser.add_argument("--batch-size", type=int, default=4)
    args = parser.parse_args()
    model = AutoModelForCausalLM.from_pretrained(args.model)
    training_args = TrainingArguments(
        output_dir="out",
        per_device_train_batch_size=args.batch_size,
        gradient_accumulation_steps=4,
        bf16=True,
        deepspeed="ds_config.json",
    )
    Trainer(model=model, args=training_args, train_dataset=load_dataset_for(args.model)).train()


if __name__ == "__main__":
    main()
''',
    "ds_config.json": '''\
{
  "train_micro_batch_size_per_gpu": "auto",
  "gradient_accumulation_steps": "auto",
  "bf16": {"enabled": "auto"},
  "zero_optimization": {"stage": 4, "overlap_comm": true}
}
''',
    "configs/sft.yaml": '''\
model_name_or_path: meta-llama/Llama-3.1-8B
per_device_train_batch_size: 8
max_length: 4096
bf16: true
output_dir: out/sft
''',
    "loops/train_amp.py": '''\
import torch
from torch.cuda.amp import GradScaler, autocast

from models import build_model

model = build_model().cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
scaler = GradScaler()

for x, y in loader:
    with autocast(dtype=torch.float16):
        loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
''',
}

HUGE_BATCH = "9" * 5_000


def write_project(root: Path) -> Path:
    for name, text in PROJECT.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return root


def _alias_bomb() -> str:
    lines = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for level in range(1, 12):
        previous, current = chr(ord("a") + level - 1), chr(ord("a") + level)
        lines.append(f"{current}: &{current} [{', '.join([f'*{previous}'] * 9)}]")
    return "\n".join(lines) + "\n"


def write_hostile_files(root: Path) -> dict[str, str]:
    """The hostile files beside the project; returns each one's name -> what it is."""
    hostile = root / "hostile"
    hostile.mkdir()
    (hostile / "ds_huge.json").write_text(
        f'{{\n  "train_micro_batch_size_per_gpu": {HUGE_BATCH},\n  "zero_optimization": {{"stage": 2}}\n}}\n')
    (hostile / "bomb.yaml").write_text(_alias_bomb())
    (hostile / "model.py").write_bytes(bytes(range(256)) * 64)  # a checkpoint named .py
    with (hostile / "generated_table.py").open("w") as handle:  # 400,000 lines, under 4 MiB
        handle.write("import torch\n")
        handle.writelines(f"w{i % 1000}=0\n" for i in range(399_999))
    (hostile / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (hostile / "loop_a.yaml").symlink_to("loop_b.yaml")
    (hostile / "loop_b.yaml").symlink_to("loop_a.yaml")
    (hostile / "zero.json").symlink_to("/dev/zero")
    os.mkfifo(hostile / "pipe.yaml")
    return {
        "ds_huge.json": "a DeepSpeed config with a 5,000-digit batch size",
        "bomb.yaml": "a YAML alias bomb",
        "model.py": "a binary file named .py",
        "generated_table.py": "a 400,000-line module that imports torch",
        "deep.json": "JSON nested 100,000 levels deep",
        "loop_a.yaml": "a symlink loop",
        "zero.json": "a symlink to /dev/zero",
        "pipe.yaml": "a FIFO",
    }
