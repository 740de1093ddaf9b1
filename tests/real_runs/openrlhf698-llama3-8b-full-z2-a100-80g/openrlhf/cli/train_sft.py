# OpenRLHF openrlhf/cli/train_sft.py (Jan 2025), reduced to the arguments and calls that decide GPU memory.
# The DeepSpeed config is built in code (openrlhf/utils/deepspeed/deepspeed_utils.py::get_train_ds_config),
# inlined here as make_ds_config().
import argparse

import deepspeed
import torch
from deepspeed.ops.adam import DeepSpeedCPUAdam, FusedAdam
from transformers import AutoModelForCausalLM


def make_ds_config(args):
    return {
        "zero_optimization": {
            "stage": args.zero_stage,
            "offload_param": {"device": "none"},
            "offload_optimizer": {"device": "cpu" if args.adam_offload else "none", "pin_memory": True},
            "sub_group_size": "auto",
            "stage3_max_live_parameters": "auto",
            "stage3_max_reuse_distance": "auto",
            "stage3_param_persistence_threshold": "auto",
            "stage3_prefetch_bucket_size": "auto",
            "reduce_bucket_size": "auto",
            "zero_hpz_partition_size": args.zpg,
        },
        "bf16": {"enabled": args.bf16},
        "gradient_clipping": args.max_norm,
        "train_micro_batch_size_per_gpu": args.micro_train_batch_size,
        "train_batch_size": args.train_batch_size,
    }


def train(args):
    model = AutoModelForCausalLM.from_pretrained(
        args.pretrain,
        attn_implementation="flash_attention_2" if args.flash_attn else "eager",
        torch_dtype=torch.bfloat16 if args.bf16 else "auto",
    )
    if args.gradient_checkpointing:
        model.gradient_checkpointing_enable(
            gradient_checkpointing_kwargs={"use_reentrant": args.gradient_checkpointing_use_reentrant}
        )
    AdamOptimizer = DeepSpeedCPUAdam if args.adam_offload else FusedAdam
    optim = AdamOptimizer(model.parameters(), lr=args.learning_rate, betas=args.adam_betas, weight_decay=args.l2)
    ds_config = make_ds_config(args)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=optim, config=ds_config)
    return engine  # SFT loop over packed samples of up to max_len tokens omitted


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--micro_train_batch_size", type=int, default=8, help="batch size per GPU")
    parser.add_argument("--train_batch_size", type=int, default=128, help="Global training batch size")
    parser.add_argument("--max_norm", type=float, default=1.0, help="Gradient clipping")
    parser.add_argument("--gradient_checkpointing", action="store_true", default=False)
    parser.add_argument("--gradient_checkpointing_use_reentrant", action="store_true", default=False)
    parser.add_argument("--local_rank", type=int, default=-1, help="local_rank for deepspeed")
    parser.add_argument("--zero_stage", type=int, default=2, help="DeepSpeed ZeRO stage")
    parser.add_argument("--bf16", action="store_true", default=False, help="Enable bfloat16")
    parser.add_argument("--zpg", type=int, default=1, help="ZeRO++ max partition size")
    parser.add_argument("--adam_offload", action="store_true", default=False, help="Offload Adam Optimizer")
    parser.add_argument("--flash_attn", action="store_true", default=False, help="Enable FlashAttention2")
    parser.add_argument("--max_epochs", type=int, default=2)
    parser.add_argument("--pretrain", type=str, default=None)
    parser.add_argument("--learning_rate", type=float, default=5e-6)
    parser.add_argument("--l2", type=float, default=0, help="weight decay loss")
    parser.add_argument("--adam_betas", type=float, nargs=2, default=(0.9, 0.95), help="Betas for Adam optimizer")
    parser.add_argument("--lora_rank", type=int, default=0)
    parser.add_argument("--packing_samples", action="store_true", default=False)
    parser.add_argument("--max_len", type=int, default=2048, help="Max tokens for the samples")
    parser.add_argument("--save_path", type=str, default="./ckpt")
    args, _ = parser.parse_known_args()
    train(args)
