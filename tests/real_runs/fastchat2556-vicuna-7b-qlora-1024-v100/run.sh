#!/bin/bash
# lm-sys/FastChat#2556: QLoRA on Vicuna-7B v1.5, one Tesla V100S 32GB (GPU 3 of the machine)
deepspeed --include localhost:3 --master_port=9901 fastchat/train/train_lora.py \
    --model_name_or_path lmsys/vicuna-7b-v1.5 \
    --lora_r 8 \
    --lora_alpha 16 \
    --lora_dropout 0.05 \
    --data_path ./data/new_sft_train_data.json \
    --fp16 True \
    --output_dir ./checkpoints \
    --num_train_epochs 3 \
    --per_device_train_batch_size 1 \
    --per_device_eval_batch_size 1 \
    --gradient_accumulation_steps 1 \
    --evaluation_strategy "no" \
    --save_strategy "steps" \
    --save_steps 5000 \
    --save_total_limit 100 \
    --learning_rate 2e-5 \
    --weight_decay 0. \
    --warmup_ratio 0.03 \
    --lr_scheduler_type "cosine" \
    --logging_steps 1 \
    --model_max_length 1024 \
    --q_lora True \
    --deepspeed playground/deepspeed_config_s2.json
