"""A hand-written mixed-precision training loop for GPT-2 medium on one V100.

It works, mostly. It also makes several of the mistakes memlint exists to catch.
"""

import argparse
import math

import torch
from torch.cuda.amp import autocast
from torch.utils.data import DataLoader
from transformers import AutoModelForCausalLM, AutoTokenizer, get_linear_schedule_with_warmup

from data import load_corpus


def get_args():
    parser = argparse.ArgumentParser(description="GPT-2 fine-tuning")
    parser.add_argument("--model", default="openai-community/gpt2-medium")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--accum-steps", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=3e-5)
    return parser.parse_args()


def main():
    args = get_args()
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)

    dataset = load_corpus(tokenizer, max_length=args.seq_len)
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True)
    updates = args.epochs * math.ceil(len(loader) / args.accum_steps)
    scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=100, num_training_steps=updates)

    model.train()
    for epoch in range(args.epochs):
        for step, batch in enumerate(loader):
            batch = {k: v.cuda() for k, v in batch.items()}
            with autocast():
                outputs = model(**batch)
                loss = outputs.loss
            loss.backward()
            if (step + 1) % args.accum_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
            scheduler.step()
            torch.cuda.empty_cache()  # "fixes" the OOM we had at batch 16
            print(f"epoch {epoch} step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
