"""The run a command line names: ``--model`` and the setup flags (``estimate`` and ``trace``),
which also override what a PATH's files say."""

from __future__ import annotations

import argparse

from memlint.cli.errors import UsageError
from memlint.estimate import (
    Attention,
    Lora,
    Optimizer,
    Precision,
    Sharding,
    TrainingSetup,
)

PRECISIONS = [p.value for p in Precision]
OPTIMIZERS = [o.value for o in Optimizer]
ZERO = {0: Sharding.NONE, 1: Sharding.ZERO1, 2: Sharding.ZERO2, 3: Sharding.ZERO3}
FSDP = {"full": Sharding.FSDP_FULL, "hybrid": Sharding.FSDP_HYBRID, "grad-op": Sharding.FSDP_GRAD_OP}


def add_run_arguments(p: argparse.ArgumentParser, done: str) -> None:
    """The run to look at: a PATH (its files say), or --model and the setup flags (which also
    override what the files say). ``done`` ends the PATH help: "estimated", "measured"."""
    p.add_argument("path", nargs="?", help="a training script or config (DeepSpeed, Axolotl, "
                   f"TrainingArguments YAML/JSON); the run it describes is {done}")
    p.add_argument("--model", help="Hub id or alias from the catalogue, a config.json, or a model directory")
    p.add_argument("--offline", action="store_true",
                   help="never ask the Hugging Face Hub for an uncatalogued model's config.json")
    p.add_argument("--batch", type=int, help="micro-batch per GPU (default 1)")
    p.add_argument("--seq", type=int, help="sequence length in tokens (default 2048)")
    p.add_argument("--target-len", type=int, metavar="TOKENS",
                   help="an encoder-decoder's label length, when shorter or longer than --seq (max_target_length)")
    p.add_argument("--precision", choices=PRECISIONS, help="precision policy (default bf16)")
    p.add_argument("--optimizer", choices=OPTIMIZERS, help="optimizer (default adamw: torch's foreach AdamW)")
    p.add_argument("--grad-ckpt", nargs="?", const=1, type=int, metavar="EVERY",
                   help="gradient checkpointing (every layer, or every EVERY-th)")
    p.add_argument("--attn", choices=[a.value for a in Attention], help="attention implementation (default sdpa)")
    p.add_argument("--lora-r", type=int, help="train LoRA adapters of this rank instead of the full model")
    p.add_argument("--lora-targets", default=None,
                   help="all-linear, or comma-separated module names (default q_proj,v_proj)")
    p.add_argument("--lora-dropout", type=float, default=None)
    p.add_argument("--qlora", action="store_true", help="4-bit NF4 base weights (bitsandbytes) under LoRA")
    p.add_argument("--zero", type=int, choices=(0, 1, 2, 3), help="DeepSpeed ZeRO stage")
    p.add_argument("--fsdp", choices=sorted(FSDP), help="FSDP sharding strategy")
    p.add_argument("--offload", choices=("optimizer", "all"), help="ZeRO offload to CPU")
    p.add_argument("--gpus", type=int, help="data-parallel world size (default 1)")
    p.add_argument("--gpu", help="target GPU, e.g. h100, a100-80gb, 'NVIDIA A10G' (see `memlint gpus`)")
    p.add_argument("--grad-accum", type=int, help="gradient accumulation steps")
    p.add_argument("--fused-loss", action="store_true", help="fused/chunked cross-entropy (Liger)")
    p.add_argument("--keep-logits", action="store_true", help="the loop keeps model outputs alive through backward")
    p.add_argument("--image-tokens", type=int, help="image tokens per sequence of a vision-language model "
                   "(Qwen2.5-VL: one per 28x28 pixels); default none, text-only batches")


def _quantization(qlora: bool | str | None) -> str | None:
    """``--qlora`` is NF4; a pre-quantized upload names its own format (``cli/named_run.py``)."""
    if isinstance(qlora, str):
        return qlora
    return "nf4" if qlora else None


def setup_from_args(args: argparse.Namespace, base: TrainingSetup | None = None) -> TrainingSetup:
    """A training setup from flags; flags override ``base`` (a setup read from files)."""
    s = base or TrainingSetup()
    changes: dict = {}
    if args.batch is not None:
        changes["micro_batch"] = args.batch
    if args.seq is not None:
        changes["seq_len"] = args.seq
    if getattr(args, "target_len", None) is not None:
        if args.target_len < 1:
            raise UsageError("--target-len must be 1 or more")
        changes["decoder_len"] = args.target_len
    if args.precision:
        changes["precision"] = Precision(args.precision)
    if args.optimizer:
        changes["optimizer"] = Optimizer(args.optimizer)
    if args.grad_ckpt is not None:
        changes["grad_ckpt_every"] = args.grad_ckpt
    if args.attn:
        changes["attention"] = Attention(args.attn)
    if args.lora_r or args.qlora:
        targets = tuple(t.strip() for t in (args.lora_targets or "q_proj,v_proj").split(",") if t.strip())
        dropout = 0.05 if args.lora_dropout is None else args.lora_dropout
        changes["lora"] = Lora(r=args.lora_r or 16, targets=targets, dropout=dropout,
                               quantization=_quantization(args.qlora))
    if args.zero is not None:
        changes["sharding"] = ZERO[args.zero]
    if args.fsdp:
        changes["sharding"] = FSDP[args.fsdp]
    if args.offload:
        changes["offload_optimizer"] = True
        changes["offload_params"] = args.offload == "all"
    if args.gpus is not None:
        changes["world_size"] = args.gpus
    if args.grad_accum is not None:
        changes["grad_accum"] = args.grad_accum
    if args.fused_loss:
        changes["fused_loss"] = True
    if args.keep_logits:
        changes["keep_logits"] = True
    if getattr(args, "image_tokens", None) is not None:
        if args.image_tokens < 0:
            raise UsageError("--image-tokens must be 0 or more")
        changes["image_tokens"] = args.image_tokens
    try:
        s = s.but(**changes)
    except ValueError as error:
        raise UsageError(str(error)) from None
    if s.offload_params and s.sharding not in (Sharding.ZERO3, Sharding.FSDP_FULL, Sharding.FSDP_HYBRID):
        raise UsageError("--offload all (parameter offload) needs --zero 3 or --fsdp full")
    return s
