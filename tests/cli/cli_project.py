"""A small, realistic project the CLI tests lint: an HF Trainer script with argparse, the
DeepSpeed config it names, its launcher, and a hand-written AMP loop with two mistakes."""

from __future__ import annotations

TRAIN = '''
    """Full fine-tuning of Qwen2.5-7B with the HF Trainer and DeepSpeed ZeRO-2."""
    import argparse

    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments


    def parse_args():
        parser = argparse.ArgumentParser()
        parser.add_argument("--batch_size", type=int, default=4)
        parser.add_argument("--deepspeed", default="ds_config.json")
        return parser.parse_args()


    def main():
        args = parse_args()
        model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-7B", torch_dtype="bfloat16")
        training_args = TrainingArguments(
            output_dir="out",
            per_device_train_batch_size=args.batch_size,
            gradient_checkpointing=True,
            bf16=True,
            deepspeed=args.deepspeed,
        )
        Trainer(model=model, args=training_args, train_dataset=load_data(4096)).train()


    if __name__ == "__main__":
        main()
'''

DS_CONFIG = '''
    {
      "train_micro_batch_size_per_gpu": "auto",
      "gradient_accumulation_steps": "auto",
      "bf16": {"enabled": "auto"},
      "zero_optimization": {"stage": 2, "overlap_comm": true}
    }
'''

LAUNCH = '''
    #!/usr/bin/env bash
    torchrun --nproc_per_node 8 train.py --batch_size 4
'''

LOOP = '''
    import torch
    from torch.utils.data import DataLoader
    from transformers import AutoModelForCausalLM

    ACCUM = 8


    def train(dataset):
        model = AutoModelForCausalLM.from_pretrained("openai-community/gpt2", torch_dtype=torch.float32).cuda()
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-5)
        model.train()
        for step, batch in enumerate(DataLoader(dataset, batch_size=8, shuffle=True)):
            with torch.autocast("cuda", dtype=torch.float16):
                loss = model(**batch).loss
            loss.backward()
            if (step + 1) % ACCUM == 0:
                optimizer.step()
                optimizer.zero_grad()
'''

FILES = {"train.py": TRAIN, "ds_config.json": DS_CONFIG, "launch.sh": LAUNCH, "loop.py": LOOP,
         "memlint.toml": 'gpu = "a100-80gb"\n'}
