"""MEM001 on an Unsloth run: Llama-3-8B in 4 bits with LoRA, batch 2 x 2,048 tokens, fits the
15 GB of a T4 (Unsloth's free Colab notebooks train exactly this), because Unsloth loads in 4
bits, checkpoints and fuses the cross-entropy by default; the same run in bf16 does not."""

from __future__ import annotations

NOTEBOOK = """\
from datasets import load_dataset
from transformers import TrainingArguments
from trl import SFTTrainer
from unsloth import FastLanguageModel, is_bfloat16_supported

from prompts import formatting_prompts_func

max_seq_length = 2048
model, tokenizer = FastLanguageModel.from_pretrained(
    model_name="unsloth/llama-3-8b",
    max_seq_length=max_seq_length,
    dtype=None,{load}
)
model = FastLanguageModel.get_peft_model(
    model,
    r=16,
    target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
    lora_alpha=16,
    lora_dropout=0,
    bias="none",
    use_gradient_checkpointing="unsloth",
)
trainer = SFTTrainer(
    model=model,
    tokenizer=tokenizer,
    train_dataset=load_dataset("yahma/alpaca-cleaned", split="train").map(formatting_prompts_func, batched=True),
    dataset_text_field="text",
    max_seq_length=max_seq_length,
    args=TrainingArguments(
        per_device_train_batch_size=2,
        gradient_accumulation_steps=4,
        warmup_steps=5,
        max_steps=60,
        learning_rate=2e-4,
        fp16=not is_bfloat16_supported(),
        bf16=is_bfloat16_supported(),
        optim="adamw_8bit",
        output_dir="outputs",
    ),
)
trainer.train()
"""

T4 = {"gpu": "t4", "gpus": 1}


def test_the_4_bit_default_run_fits_a_t4(lint):
    run = NOTEBOOK.format(load="")
    assert lint("MEM001", run, path="llama3_8b_alpaca.py", settings=T4) == []
    assert lint("MEM003", run, path="llama3_8b_alpaca.py", settings=T4) == []  # estimated, not skipped


def test_the_same_run_in_16_bits_does_not(lint):
    [diagnostic] = lint("MEM001", NOTEBOOK.format(load="\n    load_in_4bit=False,"), path="llama3_8b_alpaca.py",
                        settings=T4)
    assert "Tesla T4" in diagnostic.message and "(largest part: weights 15." in diagnostic.message
