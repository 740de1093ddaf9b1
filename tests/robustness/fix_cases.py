"""Realistic projects, one per rule that offers a fix, for the ``--fix`` guarantees.

Each :class:`FixCase` names the file the fix rewrites, the rule whose finding it fixes, and
whether the fix is safe (``--fix``) or unsafe (``--fix --unsafe-fixes``). A plain module so
the tests import it by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ACCUMULATION = '''\
"""Fine-tune Qwen2.5-0.5B on a local corpus, accumulating gradients over micro-batches."""
import argparse

import torch
from torch.utils.data import DataLoader
from transformers import AutoModelForCausalLM as AutoLM

from data import build_dataset


def parse_args():
    parser = argparse.ArgumentParser(description="causal LM fine-tuning")
    parser.add_argument("--model", default="Qwen/Qwen2.5-0.5B")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--grad-accum", type=int, default=8)
    parser.add_argument("--lr", type=float, default=2e-5)
    return parser.parse_args()


def main():
    args = parse_args()
    model = AutoLM.from_pretrained(args.model, torch_dtype=torch.bfloat16).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    loader = DataLoader(build_dataset(), batch_size=args.batch_size, shuffle=True)

    model.train()
    for step, batch in enumerate(loader):
        batch = {k: v.cuda() for k, v in batch.items()}
        loss = model(**batch).loss
        loss.backward()
        if (step + 1) % args.grad_accum == 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)


if __name__ == "__main__":
    main()
'''

LATE_CHECKPOINTING = '''\
"""LoRA on Llama-3.2-1B with a hand-written loop."""
from dataclasses import dataclass

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM


@dataclass
class Config:
    model: str = "meta-llama/Llama-3.2-1B"
    rank: int = 16
    lr: float = 2e-4


cfg = Config()
model = AutoModelForCausalLM.from_pretrained(cfg.model, torch_dtype=torch.bfloat16).cuda()
model = get_peft_model(model, LoraConfig(r=cfg.rank, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"))
optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
model.gradient_checkpointing_enable()

model.train()
for batch in loader:
    loss = model(**batch).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
'''

MANUAL_CHECKPOINT = '''\
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint as ckpt


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        return x + self.mlp(x)


class Encoder(nn.Module):
    def __init__(self, dim=1024, depth=24):
        super().__init__()
        self.blocks = nn.ModuleList(Block(dim) for _ in range(depth))

    def forward(self, x):
        for block in self.blocks:
            x = ckpt(block, x) if self.training else block(x)
        return x


model = Encoder().cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
for x, y in loader:
    loss = torch.nn.functional.mse_loss(model(x.cuda()), y.cuda())
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
'''

DEPRECATED_AMP = '''\
import torch
from torch.cuda.amp import autocast as amp_autocast, GradScaler

from model import build_model

model = build_model().cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
scaler = GradScaler(2.0**14)

for x, y in loader:
    with amp_autocast(True, torch.float16):
        loss = torch.nn.functional.cross_entropy(model(x.cuda()), y.cuda())
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
'''

CLIP_BEFORE_UNSCALE = '''\
import torch

model = build_model().cuda()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
scaler = torch.amp.GradScaler("cuda")

for images, labels in loader:
    with torch.autocast("cuda", dtype=torch.float16):
        loss = torch.nn.functional.cross_entropy(model(images.cuda()), labels.cuda())
    scaler.scale(loss).backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
'''

DEEPSPEED_OLD_SPELLINGS = '''\
{
  "train_micro_batch_size_per_gpu": 4,
  "gradient_accumulation_steps": 4,
  "bfloat16": {"enabled": true},
  "zero_optimization": {
    "stage": 3,
    "stage3_gather_fp16_weights_on_model_save": true
  }
}
'''

AXOLOTL_SPELLING = """\
base_model: Qwen/Qwen2.5-0.5B
learning_rate: 0.0001
micro-batch-size: 2
Sequence_Len: 1024
"""

ZERO2 = """\
{
  "train_batch_size": 128,
  "train_micro_batch_size_per_gpu": 4,
  "gradient_accumulation_steps": 4,
  "gradient_clipping": 1.0,
  "bf16": {"enabled": true},
  "zero_optimization": {
    "stage": 2,
    "overlap_comm": true
  }
}
"""

TRAINER_ARGS = """\
{
  "output_dir": "checkpoints/llama-3.2-3b",
  "learning_rate": 2e-05,
  "num_train_epochs": 2,
  "deepspeed": "ds_config.json"
}
"""


@dataclass(frozen=True)
class FixCase:
    name: str
    files: dict[str, str]
    target: str  # the file the fix rewrites
    code: str  # the rule whose finding the fix removes
    unsafe: bool = False
    settings: str = 'gpu = "a100-80gb"\n'
    flags: tuple[str, ...] = field(default=())

    def fix_flags(self) -> list[str]:
        return ["--fix", "--unsafe-fixes"] if self.unsafe else ["--fix"]


CASES = (
    FixCase("ACC001-divide-the-loss", {"train.py": ACCUMULATION}, "train.py", "ACC001"),
    FixCase("CKP001-checkpointing-before-peft", {"train_lora.py": LATE_CHECKPOINTING}, "train_lora.py", "CKP001"),
    FixCase("CKP002-use-reentrant", {"encoder.py": MANUAL_CHECKPOINT}, "encoder.py", "CKP002"),
    FixCase("AMP004-torch-amp", {"train.py": DEPRECATED_AMP}, "train.py", "AMP004"),
    FixCase("AMP003-unscale-before-clip", {"train.py": CLIP_BEFORE_UNSCALE}, "train.py", "AMP003", unsafe=True),
    FixCase("CFG003-deepspeed-renames", {"ds_config.json": DEEPSPEED_OLD_SPELLINGS}, "ds_config.json", "CFG003"),
    FixCase("CFG001-axolotl-spelling", {"qwen.yml": AXOLOTL_SPELLING}, "qwen.yml", "CFG001"),
    FixCase("CFG010-train-batch-size", {"ds_config.json": ZERO2}, "ds_config.json", "CFG010", unsafe=True,
            settings='gpu = "a100-80gb"\ngpus = 4\n'),
    FixCase("CFG014-trainer-and-deepspeed", {"training_args.json": TRAINER_ARGS, "ds_config.json": ZERO2},
            "ds_config.json", "CFG014", unsafe=True, settings='gpu = "a100-80gb"\ngpus = 8\n'),
)
