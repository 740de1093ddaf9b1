"""Perplexity of the fine-tuned checkpoint on the held-out split."""

import math

import torch
from datasets import load_dataset
from transformers import AutoModelForCausalLM, AutoTokenizer

CHECKPOINT = "checkpoints/llama-3.1-8b-sft"


@torch.no_grad()
def perplexity(model, tokenizer, texts, max_length=4096):
    losses = []
    for text in texts:
        batch = tokenizer(text, return_tensors="pt", truncation=True, max_length=max_length).to(model.device)
<<<<<<< HEAD
        losses.append(model(**batch, labels=batch["input_ids"]).loss.item())
=======
        out = model(**batch, labels=batch["input_ids"])
        losses.append(out.loss.float().item())
>>>>>>> origin/main
    return math.exp(sum(losses) / len(losses))


if __name__ == "__main__":
    tokenizer = AutoTokenizer.from_pretrained(CHECKPOINT)
    model = AutoModelForCausalLM.from_pretrained(CHECKPOINT, torch_dtype=torch.bfloat16, device_map="cuda")
    texts = load_dataset("HuggingFaceH4/ultrachat_200k", split="test_sft")["prompt"][:500]
    print(f"perplexity: {perplexity(model, tokenizer, texts):.2f}")
