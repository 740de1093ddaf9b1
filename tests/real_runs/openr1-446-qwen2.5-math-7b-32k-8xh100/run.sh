#!/bin/bash
# huggingface/open-r1#446: reproduce OpenR1-Qwen-7B on one node of 8x H100 80GB (recipe config, liger off)
accelerate launch --config_file recipes/accelerate_configs/zero3.yaml src/open_r1/sft.py \
    --config recipes/OpenR1-Qwen-7B/sft/config.yaml
