"""CFG011: fp16 and bf16 both enabled."""

from __future__ import annotations

from typing import Iterator

from memlint.configs.deepspeed import enabled
from memlint.documents.kinds import DocumentKind
from memlint.facts.hf_args import _bool
from memlint.lint.context import RuleContext
from memlint.model.diagnostics import Severity
from memlint.rules.base import Example, Finding, Rule

# What each tool does with both switches on.
CONSEQUENCE = {
    DocumentKind.DEEPSPEED: "DeepSpeed refuses the config ('bfloat16 and fp16 modes cannot be simultaneously enabled')",
    DocumentKind.HF_ARGS: "TrainingArguments raises 'At most one of fp16 and bf16 can be True'",
    DocumentKind.LLAMAFACTORY: "TrainingArguments raises 'At most one of fp16 and bf16 can be True'",
    DocumentKind.AXOLOTL: "Axolotl trains in bf16 and drops fp16 without a word",
}


class Fp16AndBf16(Rule):
    """## What it does
    Reports configs that enable both fp16 and bf16 mixed precision: DeepSpeed's
    ``fp16.enabled`` and ``bf16.enabled``, or ``fp16: true`` next to ``bf16: true`` in
    TrainingArguments, TRL, LLaMA-Factory and Axolotl files.

    ## Why it matters
    Only one half-precision mode can run. DeepSpeed and TrainingArguments stop at start-up;
    Axolotl keeps bf16 and ignores fp16, so the file says something the run does not do. The
    two modes also cost memory differently under DeepSpeed (fp16 keeps loss-scaling state).

    ## Fix
    Keep ``bf16`` on Ampere and newer GPUs (A100, H100, L4, RTX 30xx/40xx); keep ``fp16`` on
    V100 and T4.
    """

    code = "CFG011"
    name = "fp16-and-bf16"
    severity = Severity.ERROR
    kinds = frozenset(CONSEQUENCE)

    VALID = (
        Example(
            '{\n  "train_micro_batch_size_per_gpu": "auto",\n  "fp16": {"enabled": "auto", "loss_scale": 0},\n'
            '  "bf16": {"enabled": "auto"},\n  "zero_optimization": {"stage": 2}\n}\n',
            path="ds_config.json",
            title='Both "auto": the Trainer enables exactly one',
        ),
        Example(
            "output_dir: out/sft\nper_device_train_batch_size: 2\ngradient_accumulation_steps: 8\n"
            "learning_rate: 2.0e-5\nbf16: true\nfp16: false\n",
            path="training_args.yaml",
        ),
    )
    INVALID = (
        Example(
            '{\n  "train_micro_batch_size_per_gpu": 2,\n  "fp16": {"enabled": true, "loss_scale": 0},\n'
            '  "bf16": {"enabled": true},\n  "zero_optimization": {"stage": 2}\n}\n',
            path="ds_config.json",
            lines=(3,),
            message="DeepSpeed refuses",
        ),
        Example(
            "model_name_or_path: meta-llama/Llama-3.2-3B-Instruct\nstage: sft\nfinetuning_type: lora\n"
            "template: llama3\ncutoff_len: 2048\nper_device_train_batch_size: 2\nbf16: true\nfp16: true\n"
            "output_dir: saves/llama3-3b/lora\n",
            path="llama3_lora_sft.yaml",
            lines=(8,),
            message="At most one of fp16 and bf16",
        ),
    )

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        data = ctx.structured
        if data is None or not isinstance(data.value, dict):
            return
        if ctx.kind == "deepspeed":
            bf16 = enabled(data.value.get("bf16")) or enabled(data.value.get("bfloat16"))
            both = enabled(data.value.get("fp16")) and bf16
            path: tuple[str, ...] = ("fp16", "enabled")
        else:
            both = _bool(data.value.get("fp16")) and _bool(data.value.get("bf16")) is True
            path = ("fp16",)
        if both:
            yield Finding(data.range_of(path), f"fp16 and bf16 are both enabled: {CONSEQUENCE[ctx.kind]}; "
                          "keep bf16 on Ampere or newer GPUs, fp16 on V100/T4")
