#!/usr/bin/env bash
NGPUS=8
torchrun --nproc_per_node "$NGPUS" train.py --batch_size 8 --max_length 2048
