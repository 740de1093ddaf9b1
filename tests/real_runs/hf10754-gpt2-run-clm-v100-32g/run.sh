#!/bin/bash
# huggingface/transformers#10754: the documented GPT-2 example of examples/language-modeling, default settings,
# single V100 32GB, no distributed/parallel set-up
python run_clm.py \
    --model_name_or_path gpt2 \
    --dataset_name wikitext \
    --dataset_config_name wikitext-2-raw-v1 \
    --do_train \
    --do_eval \
    --output_dir /tmp/test-clm
