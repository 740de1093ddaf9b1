#!/bin/bash
# tatsu-lab/stanford_alpaca#189: one A100 80GB, LLaMA-7B (HF conversion), FSDP full_shard on a single process
torchrun --nproc_per_node=1 --master_port=5050 train.py \
    --model_name_or_path huggyllama/llama-7b \
    --data_path ./alpaca_data_few.json \
    --bf16 True \
    --output_dir ./Dmodel7b \
    --num_train_epochs 3 \
    --per_device_train_batch_size 1 \
    --per_device_eval_batch_size 1 \
    --gradient_accumulation_steps 8 \
    --evaluation_strategy "no" \
    --save_strategy "steps" \
    --save_steps 2000 \
    --save_total_limit 1 \
    --learning_rate 2e-5 \
    --weight_decay 0. \
    --warmup_ratio 0.03 \
    --lr_scheduler_type "cosine" \
    --logging_steps 1 \
    --fsdp "full_shard auto_wrap" \
    --fsdp_transformer_layer_cls_to_wrap 'LlamaDecoderLayer'
