"""ZRO001 and FSDP's HYBRID_SHARD: parameters are gathered within a node and only reduced across
nodes, so SHARD_GRAD_OP over every GPU is no lighter form of it (it sends more across nodes);
only plain data parallelism is. GritLM's 16-node embedding run is the shape: Mistral-7B, full
fine-tuning, an Accelerate FSDP config with ``fsdp_sharding_strategy: HYBRID_SHARD``."""

from __future__ import annotations

FSDP_CONFIG = """\
compute_environment: LOCAL_MACHINE
distributed_type: FSDP
fsdp_config:
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_offload_params: false
  fsdp_sharding_strategy: {strategy}
  fsdp_state_dict_type: FULL_STATE_DICT
  fsdp_transformer_layer_cls_to_wrap: MistralDecoderLayer
  fsdp_use_orig_params: true
mixed_precision: bf16
num_machines: 2
num_processes: 16
"""

LAUNCH = """\
#!/bin/bash
#SBATCH --nodes=2
accelerate launch --config_file configs/fsdp_hybrid.yml --num_machines 2 --num_processes 16 \\
    train.py \\
    --model_name_or_path mistralai/Mistral-7B-v0.1 \\
    --per_device_train_batch_size 4 \\
    --max_seq_length 1024 \\
    --gradient_checkpointing \\
    --bf16 \\
    --output_dir out
"""

TRAIN = """\
from dataclasses import dataclass, field

import torch
from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainingArguments


@dataclass
class ModelArguments:
    model_name_or_path: str = field(default="mistralai/Mistral-7B-v0.1")
    max_seq_length: int = 1024


def main():
    model_args, training_args = HfArgumentParser((ModelArguments, TrainingArguments)).parse_args_into_dataclasses()
    model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path, torch_dtype=torch.bfloat16)
    Trainer(model=model, args=training_args).train()


if __name__ == "__main__":
    main()
"""

SETTINGS = {"gpu": "h100", "gpus": 16}
FILES = {"launch.sh": LAUNCH, "train.py": TRAIN}


def test_full_shard_is_offered_shard_grad_op(lint):
    [finding] = lint("ZRO001", FSDP_CONFIG.format(strategy="FULL_SHARD"), path="configs/fsdp_hybrid.yml",
                     files=FILES, settings=SETTINGS)
    assert "with FSDP SHARD_GRAD_OP" in finding.message


def test_hybrid_shard_is_offered_only_ddp_which_does_not_fit_a_7b_full_fine_tune(lint):
    assert lint("ZRO001", FSDP_CONFIG.format(strategy="HYBRID_SHARD"), path="configs/fsdp_hybrid.yml",
                files=FILES, settings=SETTINGS) == []
