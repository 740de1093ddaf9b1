"""Full fine-tuning of Llama-3.1-8B with Accelerate + FSDP on 8 H100s (see launch.sh)."""

import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader
from transformers import AutoModelForCausalLM, get_cosine_schedule_with_warmup

from dataset import build_dataset

MODEL = "meta-llama/Llama-3.1-8B"
MICRO_BATCH = 4
SEQ_LEN = 4096
ACCUM = 4


def main():
    accelerator = Accelerator(gradient_accumulation_steps=ACCUM)
    model = AutoModelForCausalLM.from_pretrained(MODEL, torch_dtype=torch.float32)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
    loader = DataLoader(build_dataset(SEQ_LEN), batch_size=MICRO_BATCH, shuffle=True)
    scheduler = get_cosine_schedule_with_warmup(optimizer, 100, 10_000)
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)

    model.train()
    for batch in loader:
        with accelerator.accumulate(model):
            loss = model(**batch).loss
            accelerator.backward(loss)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()


if __name__ == "__main__":
    main()
