"""A run that does what the estimate does not model (Megatron's parallel sizes, GaLore, OFT) gets no memory
verdict, only the note that says why."""

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
        "`expert_model_parallel_size: 2`), which memlint's estimate does not model")


def test_without_model_parallelism_the_verdict_stands(lint):
    text = MEGATRON_MOE.replace("pipeline_model_parallel_size: 4", "pipeline_model_parallel_size: 1").replace(
        "expert_model_parallel_size: 2", "expert_model_parallel_size: 1")
    diagnostics = lint({"examples/megatron/qwen_full.yaml": text}, "examples/megatron/qwen_full.yaml",
                       select=("MEM",), gpu="h100", gpus=8)
    assert [d.code for d in diagnostics] == ["MEM001"]


GALORE = """\
model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
trust_remote_code: true
stage: sft
do_train: true
finetuning_type: full
use_galore: true
galore_layerwise: true
galore_target: mlp,self_attn
galore_rank: 128
galore_scale: 2.0
dataset: identity,alpaca_en_demo
template: llama3
cutoff_len: 2048
output_dir: saves/llama3-8b/full/sft
per_device_train_batch_size: 1
gradient_accumulation_steps: 1
learning_rate: 1.0e-5
pure_bf16: true
"""


def test_galore_and_oft_are_not_counted_as_full_adamw(lint):
    diagnostics = lint({"examples/extras/galore/llama3_full_sft.yaml": GALORE},
                       "examples/extras/galore/llama3_full_sft.yaml", select=("MEM",), gpu="h100", gpus=1)
    assert [(d.code, d.range.start.line) for d in diagnostics] == [("MEM003", 6)]
    assert "GaLore's low-rank optimizer states (`use_galore: true`)" in diagnostics[0].message
    oft = GALORE.replace("finetuning_type: full\nuse_galore: true\n", "finetuning_type: oft\n")
    diagnostics = lint({"examples/extras/oft/llama3_oft_sft.yaml": oft},
                       "examples/extras/oft/llama3_oft_sft.yaml", select=("MEM",), gpu="h100", gpus=1)
    assert [(d.code, d.range.start.line) for d in diagnostics] == [("MEM003", 5)]
