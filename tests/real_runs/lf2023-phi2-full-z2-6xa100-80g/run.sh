#!/bin/bash
# LLaMA-Factory (Dec 2023, src/train_bash.py) full SFT of phi-2 on 6x A100 80GB, as reported in hiyouga/LlamaFactory#2023
deepspeed --include localhost:0,1,2,3,4,5 --master_port=9901 src/train_bash.py \
    --deepspeed ds_config.json \
    --stage sft \
    --do_train \
    --model_name_or_path microsoft/phi-2 \
    --dataset my_dataset \
    --template default \
    --finetuning_type full \
    --output_dir sft_checkpoint \
    --per_device_train_batch_size 1 \
    --gradient_accumulation_steps 8 \
    --lr_scheduler_type cosine \
    --learning_rate 5e-5 \
    --num_train_epochs 3.0 \
    --bf16 \
    --cutoff_len 4096
