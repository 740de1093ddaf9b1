#!/usr/bin/env bash
accelerate launch --config_file fsdp.yaml train.py
