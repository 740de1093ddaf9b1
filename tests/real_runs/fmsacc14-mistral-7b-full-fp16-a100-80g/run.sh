#!/bin/bash
# foundation-model-stack/fms-acceleration#14, benchmark row 0 (scenario full-finetuning, 1x A100 80GB, effective batch 4).
# The command the benchmark harness (scripts/benchmarks/benchmark.py) builds from defaults.yaml + scenarios.yaml;
# tuning.sft_trainer is fms-hf-tuning's SFT entry point (HF Trainer underneath).
accelerate launch --config_file accelerate.yaml --num_processes=1 --main_process_port=29500 \
    -m tuning.sft_trainer \
    --packing True \
    --max_seq_len 4096 \
    --model_name_or_path mistralai/Mistral-7B-v0.1 \
    --learning_rate 2e-5 \
    --torch_dtype float16 \
    --use_flash_attn True \
    --response_template "\n### Response:" \
    --dataset_text_field output \
    --include_tokens_per_second True \
    --num_train_epochs 1 \
    --gradient_accumulation_steps 1 \
    --gradient_checkpointing True \
    --evaluation_strategy no \
    --save_strategy no \
    --weight_decay 0.01 \
    --warmup_steps 10 \
    --adam_epsilon 1e-4 \
    --lr_scheduler_type linear \
    --logging_strategy steps \
    --logging_steps 10 \
    --max_steps 100 \
    --training_data_path data/cache.json \
    --per_device_train_batch_size 4 \
    --output_dir results/exp_0/hf \
    --skip_memory_metrics False
