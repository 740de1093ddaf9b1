"""LoRA fine-tuning of Llama-3.2-1B on a single T4 (Colab / a g4dn instance), hand-written loop.

Copied from an A100 notebook and moved to a T4: the bf16 settings came along.
"""

import math
from dataclasses import dataclass

import torch
from peft import LoraConfig, get_peft_model
from torch.utils.data import DataLoader
from transformers import AutoModelForCausalLM, AutoTokenizer, get_cosine_schedule_with_warmup

from data import build_splits


@dataclass
class Config:
    model_id: str = "meta-llama/Llama-3.2-1B-Instruct"
    batch_size: int = 4
    max_length: int = 1024
    lora_r: int = 16
    lora_alpha: int = 32
    lr: float = 2e-4
    epochs: int = 2
    eval_every: int = 200


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    losses = []
    for batch in loader:
        batch = {k: v.to("cuda") for k, v in batch.items()}
        losses.append(model(**batch).loss.item())
    return sum(losses) / max(len(losses), 1)


def main(cfg: Config):
    tokenizer = AutoTokenizer.from_pretrained(cfg.model_id)
    train_set, eval_set = build_splits(tokenizer, max_length=cfg.max_length)
    train_loader = DataLoader(train_set, batch_size=cfg.batch_size, shuffle=True)
    eval_loader = DataLoader(eval_set, batch_size=cfg.batch_size)

    model = AutoModelForCausalLM.from_pretrained(cfg.model_id, torch_dtype=torch.bfloat16, device_map="cuda")
    lora = LoraConfig(
        r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha,
        target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
        lora_dropout=0.05,
        task_type="CAUSAL_LM",
    )
    model = get_peft_model(model, lora)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    model.gradient_checkpointing_enable()  # the T4 is short on memory
    total_steps = cfg.epochs * len(train_loader)
    scheduler = get_cosine_schedule_with_warmup(optimizer, math.ceil(0.03 * total_steps), total_steps)

    model.train()
    step = 0
    for epoch in range(cfg.epochs):
        for batch in train_loader:
            batch = {k: v.to("cuda") for k, v in batch.items()}
            loss = model(**batch).loss
            loss.backward()
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            if step % cfg.eval_every == 0:
                print(f"epoch {epoch} step {step} eval loss {evaluate(model, eval_loader):.4f}")
    model.save_pretrained("lora-llama-3.2-1b")


if __name__ == "__main__":
    main(Config())
