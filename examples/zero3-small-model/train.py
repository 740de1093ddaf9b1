"""Full fine-tuning of Qwen2.5-1.5B with the HF Trainer and DeepSpeed, on 8 GPUs (launch.sh)."""

import argparse

from datasets import load_dataset
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    DataCollatorForLanguageModeling,
    Trainer,
    TrainingArguments,
)

MODEL_ID = "Qwen/Qwen2.5-1.5B"


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--max_length", type=int, default=2048)
    parser.add_argument("--deepspeed_config", default="ds_zero3.json")
    return parser.parse_args()


def main():
    args = parse_args()
    tokenizer = AutoTokenizer.from_pretrained(MODEL_ID)
    model = AutoModelForCausalLM.from_pretrained(MODEL_ID, torch_dtype="bfloat16")

    def tokenize(batch):
        return tokenizer(batch["text"], truncation=True, max_length=args.max_length)

    data = load_dataset("wikitext", "wikitext-103-raw-v1", split="train").map(tokenize, batched=True)
    training_args = TrainingArguments(
        output_dir="checkpoints/qwen-1.5b",
        per_device_train_batch_size=args.batch_size,
        gradient_accumulation_steps=4,
        gradient_checkpointing=True,
        bf16=True,
        deepspeed=args.deepspeed_config,
        num_train_epochs=1,
    )
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=data,
        data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False),
    )
    trainer.train()


if __name__ == "__main__":
    main()
