"""MEM001: a run that overflows only into a bitsandbytes paged optimizer's states pages them to host
memory instead of running out: an info that says how much is paged, not an out-of-memory error."""

from __future__ import annotations

from memlint.catalog.models import resolve
from memlint.estimate import Lora, Optimizer, Precision, TrainingSetup, estimate_training
from memlint.model.diagnostics import Severity
from memlint.model.units import GiB

# A full fine-tune written as many SFT scripts are: its own argument dataclass, the optimizer
# name passed through to TrainingArguments, the model loaded in bf16 and put on the GPU.
SFT_SCRIPT = '''\
from dataclasses import dataclass, field

import torch
from datasets import load_dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, HfArgumentParser, TrainingArguments
from trl import SFTTrainer as Trainer


@dataclass
class ScriptArguments:
    model_name: str = field(default="meta-llama/Llama-3.1-8B")
    per_device_train_batch_size: int = field(default={batch})
    gradient_accumulation_steps: int = field(default=16)
    gradient_checkpointing: bool = field(default={ckpt})
    optim: str = field(default="{optim}", metadata={{"help": "the optimizer"}})
    output_dir: str = field(default="./sft_out")


args = HfArgumentParser(ScriptArguments).parse_args_into_dataclasses()[0]
training_args = TrainingArguments(
    output_dir=args.output_dir,
    per_device_train_batch_size=args.per_device_train_batch_size,
    gradient_accumulation_steps=args.gradient_accumulation_steps,
    gradient_checkpointing=args.gradient_checkpointing,
    bf16=True,
    optim=args.optim,
    learning_rate=2e-5,
)
model = AutoModelForCausalLM.from_pretrained(args.model_name, torch_dtype=torch.bfloat16).to("cuda")
tokenizer = AutoTokenizer.from_pretrained(args.model_name)
dataset = load_dataset("HuggingFaceH4/ultrachat_200k", split="train_sft")
trainer = Trainer(model=model, args=training_args, train_dataset=dataset, processing_class=tokenizer)
trainer.train()
'''

SETTINGS = {"gpu": "h100", "seq-len": 2048}


def script(optim: str, batch: int = 1, ckpt: bool = True) -> str:
    return SFT_SCRIPT.format(optim=optim, batch=batch, ckpt=ckpt)


def test_an_overflow_into_paged_states_is_an_info_that_says_what_is_paged(lint):
    [diagnostic] = lint("MEM001", script("paged_adamw_32bit"), path="sft.py", settings=SETTINGS)
    assert diagnostic.severity == Severity.INFO
    assert "Paged AdamW 32-bit (bitsandbytes) keeps in CUDA managed memory" in diagnostic.message
    assert "fits only by paging ~" in diagnostic.message and "not an out-of-memory error" in diagnostic.message
    assert diagnostic.range.start.line == 15  # the optimizer's default, which decides the paged part
    budget = diagnostic.data["budget"]
    paged = next(c for c in budget["components"] if c["key"] == "paged_optimizer_states")
    # bitsandbytes' 32-bit kernels keep fp32 states for the bf16 weights: 8 bytes a parameter
    assert abs(paged["bytes"] - 8 * budget["trainable_parameters"]) < 0.01 * GiB
    overflow = budget["peak_bytes"] - budget["capacity"]["usable_bytes"]
    assert 0 < overflow < paged["bytes"]
    assert f"~{overflow / GiB:.1f} GiB" in diagnostic.message


def test_an_overflow_larger_than_the_paged_states_stays_an_error(lint):
    # micro-batch 8 without checkpointing: the activations alone overflow, paging cannot help
    [paged] = lint("MEM001", script("paged_adamw_32bit", batch=8, ckpt=False), path="sft.py", settings=SETTINGS)
    assert paged.severity == Severity.ERROR  # the overflow is larger than the paged states
    assert "paging" not in paged.message


def test_torch_adamw_keeps_bf16_states_and_fits(lint):
    assert lint("MEM001", script("adamw_torch_fused"), path="sft.py", settings=SETTINGS) == []


def test_paging_is_said_in_the_estimate_breakdown():
    arch = resolve("meta-llama/Llama-3.1-8B").arch
    setup = TrainingSetup(micro_batch=1, seq_len=2048, precision=Precision.BF16, optimizer=Optimizer.PAGED_ADAMW,
                          grad_ckpt_every=1)
    budget = estimate_training(arch, setup)
    paged = budget.peak_phase.component("paged_optimizer_states")
    assert paged is not None and "CUDA managed memory" in paged.note
    assert budget.paged_bytes == paged.bytes
    fused = estimate_training(arch, setup.but(optimizer=Optimizer.ADAMW_FUSED))
    assert fused.paged_bytes == 0
    assert abs((budget.peak_bytes - fused.peak_bytes) - paged.bytes / 2) < 0.01 * GiB  # fp32, not bf16


def test_lora_factors_under_the_paging_threshold_stay_in_device_memory():
    arch = resolve("meta-llama/Llama-3.1-8B").arch
    base = TrainingSetup(micro_batch=1, seq_len=2048, precision=Precision.BF16, optimizer=Optimizer.PAGED_ADAMW,
                         grad_ckpt_every=1)
    # rank 16 on 4096-wide projections: 65,536 values a factor, under bitsandbytes' 1e5
    small = estimate_training(arch, base.but(lora=Lora(r=16, targets=("q_proj", "v_proj"))))
    assert small.paged_bytes == 0
    # rank 64: 262,144 values in each factor of q_proj and in v_proj's lora_A, all paged; v_proj's
    # lora_B (1024 x 64 under grouped-query attention: 65,536 values) stays: 32 layers x 8 bytes
    large = estimate_training(arch, base.but(lora=Lora(r=64, targets=("q_proj", "v_proj"))))
    states = large.peak_phase.component("optimizer_states")
    assert states is not None and states.bytes == 32 * 1024 * 64 * 8
    assert large.paged_bytes == 32 * (2 * 4096 * 64 + 4096 * 64) * 8
