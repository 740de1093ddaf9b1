"""Packed pre-training batches: documents concatenated and cut into seq_len blocks."""

import torch
from datasets import load_dataset
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler
from transformers import AutoTokenizer


def packed_loader(model_id, seq_len, batch_size):
    tokenizer = AutoTokenizer.from_pretrained(model_id)
    raw = load_dataset("HuggingFaceFW/fineweb-edu", "sample-10BT", split="train[:1%]")
    ids = [t for row in raw for t in tokenizer(row["text"])["input_ids"] + [tokenizer.eos_token_id]]
    blocks = torch.tensor(ids[: len(ids) // seq_len * seq_len]).view(-1, seq_len)
    rows = [{"input_ids": b, "labels": b} for b in blocks]
    return DataLoader(rows, batch_size=batch_size, sampler=DistributedSampler(rows))
