#!/usr/bin/env bash
set -euo pipefail
deepspeed --num_gpus 4 train.py --per-device-batch 4 --accum 8
