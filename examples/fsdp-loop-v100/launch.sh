#!/usr/bin/env bash
# 4 x V100 32GB on one node
set -euo pipefail
torchrun --standalone --nproc_per_node 4 train_fsdp.py --micro-batch 4 --accum 8
