"""Full fine-tuning of Llama-3.2-3B with the HF Trainer and DeepSpeed ZeRO-2 on 4 x A100 40GB."""

import argparse

from datasets import load_dataset
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    DataCollatorForLanguageModeling,
    Trainer,
    TrainingArguments,
)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="meta-llama/Llama-3.2-3B")
    parser.add_argument("--per-device-batch", type=int, default=4)
    parser.add_argument("--accum", type=int, default=8)
    parser.add_argument("--max-length", type=int, default=2048)
    parser.add_argument("--deepspeed", default="configs/ds_zero2.json")
    return parser.parse_args()


def main():
    args = parse_args()
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype="bfloat16")

    def tokenize(rows):
        return tokenizer(rows["text"], truncation=True, max_length=args.max_length)

    data = load_dataset("HuggingFaceH4/ultrachat_200k", split="train_sft").map(tokenize, batched=True)
    training_args = TrainingArguments(
        output_dir="checkpoints/llama-3.2-3b-sft",
        per_device_train_batch_size=args.per_device_batch,
        gradient_accumulation_steps=args.accum,
        gradient_checkpointing=True,
        bf16=True,
        learning_rate=1e-5,
        deepspeed=args.deepspeed,
        logging_steps=10,
    )
    Trainer(
        model=model,
        args=training_args,
        train_dataset=data,
        data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False),
    ).train()


if __name__ == "__main__":
    main()
