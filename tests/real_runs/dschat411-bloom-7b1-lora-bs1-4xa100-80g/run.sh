#!/bin/bash
# deepspeedai/DeepSpeedExamples#411: DeepSpeed-Chat step 1, LoRA on bloom-7b1, 4x A100 80GB, ZeRO stage 0
OUTPUT_PATH=./save/actor-models/7b1_bloom_lora
mkdir -p $OUTPUT_PATH

deepspeed --master_port 25104 --num_gpus 4 main.py \
   --data_path my_data \
   --data_split 10,0,0 \
   --model_name_or_path bigscience/bloom-7b1 \
   --per_device_train_batch_size 1 \
   --per_device_eval_batch_size 4 \
   --max_seq_len 2048 \
   --learning_rate 1e-3 \
   --weight_decay 0.1 \
   --num_train_epochs 3 \
   --gradient_accumulation_steps 1 \
   --lr_scheduler_type cosine \
   --num_warmup_steps 0 \
   --seed 1234 \
   --zero_stage 0 \
   --lora_dim 128 \
   --lora_module_name transformer.h. \
   --only_optimize_lora \
   --deepspeed \
   --output_dir $OUTPUT_PATH \
   &> $OUTPUT_PATH/training.log
