"""Continued pre-training of Qwen2.5-1.5B with FSDP in fp16 on V100s (no bfloat16 there)."""

import argparse
import functools
import os

import torch
import torch.distributed as dist
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import MixedPrecision, ShardingStrategy
from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy
from torch.utils.checkpoint import checkpoint
from transformers import AutoModelForCausalLM
from transformers.models.qwen2.modeling_qwen2 import Qwen2DecoderLayer

from corpus import packed_loader

FP16 = MixedPrecision(param_dtype=torch.float16, reduce_dtype=torch.float16, buffer_dtype=torch.float16)


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="Qwen/Qwen2.5-1.5B")
    parser.add_argument("--micro-batch", type=int, default=2)
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--accum", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--max-grad-norm", type=float, default=1.0)
    return parser.parse_args()


def checkpointed_forward(layers, hidden, position_embeddings):
    """Recompute every decoder layer in backward instead of keeping its activations."""
    for layer in layers:
        hidden = checkpoint(layer, hidden, position_embeddings=position_embeddings)[0]
    return hidden


def main():
    args = parse_args()
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)

    model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.float32)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.1)
    wrap = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={Qwen2DecoderLayer})
    model = FSDP(
        model,
        auto_wrap_policy=wrap,
        mixed_precision=FP16,
        sharding_strategy=ShardingStrategy.FULL_SHARD,
        device_id=local_rank,
    )
    scaler = torch.amp.GradScaler("cuda")
    loader = packed_loader(args.model, seq_len=args.seq_len, batch_size=args.micro_batch)

    model.train()
    for step, batch in enumerate(loader):
        batch = {k: v.cuda(non_blocking=True) for k, v in batch.items()}
        loss = model(**batch).loss / args.accum
        scaler.scale(loss).backward()
        optimizer.zero_grad(set_to_none=True)
        if (step + 1) % args.accum == 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
            scaler.step(optimizer)
            scaler.update()
        if dist.get_rank() == 0 and step % 100 == 0:
            print(f"step {step} loss {loss.detach().float() * args.accum:.4f}")


if __name__ == "__main__":
    main()
