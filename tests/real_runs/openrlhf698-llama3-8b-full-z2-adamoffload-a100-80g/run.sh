#!/bin/bash
# OpenRLHF/OpenRLHF#698: OpenRLHF's SFT example on one A100 80GB
deepspeed --num_gpus 1 --module openrlhf.cli.train_sft \
   --max_len 128 \
   --dataset Open-Orca/OpenOrca \
   --input_key question \
   --output_key response \
   --train_batch_size 1 \
   --micro_train_batch_size 1 \
   --max_samples 500000 \
   --pretrain meta-llama/Meta-Llama-3-8B \
   --save_path ./checkpoint/llama3-8b-sft \
   --save_steps -1 \
   --logging_steps 1 \
   --eval_steps -1 \
   --zero_stage 2 \
   --max_epochs 1 \
   --packing_samples \
   --bf16 \
   --flash_attn \
   --learning_rate 5e-6 \
   --gradient_checkpointing \
   --adam_offload
