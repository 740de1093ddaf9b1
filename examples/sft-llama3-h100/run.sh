#!/usr/bin/env bash
# One H100: full fine-tuning of Llama-3.1-8B at 4k context.
set -euo pipefail

accelerate launch --num_processes 1 train.py \
    --output_dir checkpoints/llama3-sft \
    --per_device_train_batch_size 8 \
    --gradient_accumulation_steps 2 \
    --max_length 4096 \
    --learning_rate 2e-5 \
    --bf16 \
    --logging_steps 10
