"""A run that does what the estimate does not model (Megatron's parallel sizes) gets no memory verdict, only
the note that says why and what to do; GaLore and OFT are modelled (tests/estimate/test_memory_savers.py)."""

from __future__ import annotations

MEGATRON_MOE = """\
model_name_or_path: Qwen/Qwen2.5-32B-Instruct
do_train: true
stage: sft
finetuning_type: full
dataset: alpaca_en_demo
cutoff_len: 4096
template: qwen
output_dir: saves/mca/qwen2_5_32b_full
per_device_train_batch_size: 1
gradient_accumulation_steps: 8
learning_rate: 3.0e-6
bf16: true
tensor_model_parallel_size: 1
pipeline_model_parallel_size: 4
expert_model_parallel_size: 2
use_distributed_optimizer: true
recompute_granularity: full
"""


def test_megatron_parallel_sizes_are_not_judged_as_data_parallel(lint):
    diagnostics = lint({"examples/megatron/qwen_full.yaml": MEGATRON_MOE}, "examples/megatron/qwen_full.yaml",
                       select=("MEM",), gpu="h100", gpus=8)
    assert [(d.code, d.range.start.line) for d in diagnostics] == [("MEM003", 14)]
    assert diagnostics[0].message == (
        "memory not checked: the run uses Megatron's model parallelism (`pipeline_model_parallel_size: 4` x "
        "`expert_model_parallel_size: 2`), which memlint's estimate does not model: memlint sizes data "
        "parallelism, ZeRO and FSDP only; size this run with Megatron's own report "
        "(megatron/training/theoretical_memory_usage.py) and silence this note with `# memlint: ignore[MEM003]`")


def test_without_model_parallelism_the_verdict_stands(lint):
    text = MEGATRON_MOE.replace("pipeline_model_parallel_size: 4", "pipeline_model_parallel_size: 1").replace(
        "expert_model_parallel_size: 2", "expert_model_parallel_size: 1")
    diagnostics = lint({"examples/megatron/qwen_full.yaml": text}, "examples/megatron/qwen_full.yaml",
                       select=("MEM",), gpu="h100", gpus=8)
    assert [d.code for d in diagnostics] == ["MEM001"]
