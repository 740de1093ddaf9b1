#!/bin/bash
# deepspeedai/DeepSpeedExamples#387: the reporter's modified single-GPU step-1 script that ran on one V100 32GB
OUTPUT=./output
ZERO_STAGE=2
mkdir -p $OUTPUT

deepspeed --num_gpus 1 main.py \
   --model_name_or_path facebook/opt-1.3b \
   --per_device_train_batch_size 8 --per_device_eval_batch_size 8 \
   --gradient_accumulation_steps 2 --lora_dim 128 --zero_stage $ZERO_STAGE \
   --only_optimize_lora --deepspeed --output_dir $OUTPUT &> $OUTPUT/training.log
