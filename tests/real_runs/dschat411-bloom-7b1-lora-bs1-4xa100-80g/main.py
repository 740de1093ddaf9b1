# DeepSpeed-Chat training/step1_supervised_finetuning/main.py (April 2023), reduced to the arguments and the code
# that decide GPU memory. Data: prompts+answers tokenized with padding="max_length", max_length=max_seq_len.
import argparse

import deepspeed
import torch
from deepspeed.ops.adam import DeepSpeedCPUAdam, FusedAdam
from transformers import AutoConfig, AutoModelForCausalLM

from utils.ds_utils import get_train_ds_config
from utils.module.lora import convert_linear_layer_to_lora, only_optimize_lora_parameters


def parse_args():
    parser = argparse.ArgumentParser(description="Finetune a transformers model on a causal language modeling task")
    parser.add_argument("--data_path", nargs="*", default=["Dahoas/rm-static"])
    parser.add_argument("--data_split", type=str, default="6,2,2")
    parser.add_argument("--model_name_or_path", type=str, required=True)
    parser.add_argument("--per_device_train_batch_size", type=int, default=16)
    parser.add_argument("--per_device_eval_batch_size", type=int, default=16)
    parser.add_argument("--max_seq_len", type=int, default=512)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--weight_decay", type=float, default=0.)
    parser.add_argument("--num_train_epochs", type=int, default=1)
    parser.add_argument("--gradient_accumulation_steps", type=int, default=1)
    parser.add_argument("--lr_scheduler_type", type=str, default="cosine")
    parser.add_argument("--num_warmup_steps", type=int, default=0)
    parser.add_argument("--output_dir", type=str, default=None)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--local_rank", type=int, default=-1)
    parser.add_argument("--gradient_checkpointing", action="store_true")
    # deepspeed features
    parser.add_argument("--offload", action="store_true")
    parser.add_argument("--zero_stage", type=int, default=0)
    # LoRA
    parser.add_argument("--lora_dim", type=int, default=0)
    parser.add_argument("--lora_module_name", type=str, default="decoder.layers.")
    parser.add_argument("--only_optimize_lora", action="store_true")
    parser = deepspeed.add_config_arguments(parser)
    args = parser.parse_args()
    if args.gradient_checkpointing and args.lora_dim > 0:
        assert not args.only_optimize_lora, "--gradient_checkpointing and --only_optimize_lora cannot be enabled at the same time."
    return args


def main():
    args = parse_args()
    deepspeed.init_distributed()
    ds_config = get_train_ds_config(offload=args.offload, stage=args.zero_stage)
    ds_config["train_micro_batch_size_per_gpu"] = args.per_device_train_batch_size
    ds_config["train_batch_size"] = (
        args.per_device_train_batch_size * torch.distributed.get_world_size() * args.gradient_accumulation_steps
    )

    # utils.model.model_utils.create_hf_model: plain from_pretrained (fp32), the fp16 DeepSpeed engine casts it
    model_config = AutoConfig.from_pretrained(args.model_name_or_path)
    model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, config=model_config)

    if args.lora_dim > 0:
        model = convert_linear_layer_to_lora(model, args.lora_module_name, args.lora_dim)
        if args.only_optimize_lora:
            model = only_optimize_lora_parameters(model)

    AdamOptimizer = DeepSpeedCPUAdam if args.offload else FusedAdam
    optimizer = AdamOptimizer(
        [p for p in model.parameters() if p.requires_grad], lr=args.learning_rate, betas=(0.9, 0.95)
    )
    model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, args=args, config=ds_config,
                                                  dist_init_required=True)
    if args.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    ...  # training loop: model(**batch, use_cache=False).loss; model.backward(loss); model.step()


if __name__ == "__main__":
    main()
