"""Runs that split the model itself over GPUs (LLaMA-Factory's Megatron backend, LLaMA-Factory v1's
expert parallelism) are priced with Megatron's published accounting (estimate/model_parallel.py); with no
measured peak of these forms, a verdict on them is a warning that says so."""

from __future__ import annotations

import pytest

from memlint.catalog.models import resolve
from memlint.estimate import ModelParallel, Precision, TrainingSetup, estimate_training, routed_expert_params
from memlint.estimate.model_parallel import activation_share, parameter_shares

# LLaMA-Factory examples/megatron/qwen3_moe_full.yaml, as users adapt it to another model
MEGATRON_MOE = """\
model_name_or_path: Qwen/Qwen3-30B-A3B-Instruct-2507

# GPU memory: 8 * 78GB
do_train: true
stage: sft
finetuning_type: full # only support full for now
dataset: alpaca_en_demo
cutoff_len: 4096
template: qwen3_nothink

output_dir: saves/mca/qwen3_moe_full
per_device_train_batch_size: 1
gradient_accumulation_steps: 8
learning_rate: 3e-6
bf16: true

# mcore speed up
tensor_model_parallel_size: 1
sequence_parallel: false
pipeline_model_parallel_size: 4
use_distributed_optimizer: true
moe_grouped_gemm: true
expert_model_parallel_size: 2
recompute_granularity: full
"""

# LLaMA-Factory examples/megatron/qwen2_vl_full.yaml's settings on a dense model
MEGATRON_TP = """\
model_name_or_path: Qwen/Qwen2.5-32B-Instruct
do_train: true
stage: sft
finetuning_type: full
dataset: alpaca_en_demo
cutoff_len: 4096
template: qwen
output_dir: saves/mca/qwen2_5_32b_full
per_device_train_batch_size: 1
gradient_accumulation_steps: 2
bf16: true
tensor_model_parallel_size: 4
sequence_parallel: true
pipeline_model_parallel_size: 2
use_distributed_optimizer: true
"""

PATH = "examples/megatron/qwen_full.yaml"


def test_megatron_moe_on_a_40gb_a100_is_a_warning_that_names_what_it_rests_on(lint):
    [finding] = lint({PATH: MEGATRON_MOE}, PATH, select=("MEM",), gpu="a100-40gb", gpus=8)
    assert finding.code == "MEM001" and finding.severity.name == "WARNING"
    assert "published memory accounting holds for Megatron pipeline_model_parallel_size: 4 x " \
           "expert_model_parallel_size: 2" in finding.message
    assert "torch.cuda.max_memory_allocated()" in finding.message


def test_megatron_moe_fits_the_8_x_80_gb_its_comment_names(lint):
    found = lint({PATH: MEGATRON_MOE}, PATH, select=("MEM001", "MEM003"), gpu="h100", gpus=8)
    assert found == []


def test_without_the_distributed_optimizer_the_states_stay_whole_and_it_no_longer_fits(lint):
    text = MEGATRON_MOE.replace("use_distributed_optimizer: true", "use_distributed_optimizer: false")
    [finding] = lint({PATH: text}, PATH, select=("MEM001",), gpu="h100", gpus=8)
    assert "optimizer states" in finding.message


def test_tensor_and_pipeline_parallel_dense_model_needs_data_parallelism_for_its_states(lint):
    """32B over TP 4 x PP 2: 4.1B parameters a GPU at 18 B (6 + 12 / DP) do not fit 80 GB with DP 1 (8 GPUs);
    on 16 GPUs the distributed optimizer halves the 12 B; plain data parallelism would not fit either way."""
    [finding] = lint({PATH: MEGATRON_TP}, PATH, select=("MEM001", "MEM003"), gpu="h100", gpus=8)
    assert finding.code == "MEM001"
    assert lint({PATH: MEGATRON_TP}, PATH, select=("MEM001", "MEM003"), gpu="h100", gpus=16) == []
    plain = MEGATRON_TP.replace("tensor_model_parallel_size: 4", "tensor_model_parallel_size: 1").replace(
        "pipeline_model_parallel_size: 2", "pipeline_model_parallel_size: 1")
    assert [d.code for d in lint({PATH: plain}, PATH, select=("MEM001",), gpu="h100", gpus=16)] == ["MEM001"]


def test_the_shares_follow_megatrons_theoretical_memory_usage():
    """megatron/training/theoretical_memory_usage.py: (blocks / PP + embedding) / TP parameters on the
    first stage at 6 + 12 / DP bytes each; routed experts further / EP."""
    arch = resolve("Qwen/Qwen3-30B-A3B-Instruct-2507").arch
    experts = routed_expert_params(arch)
    total = arch.n_params
    head = arch.lm_head.params if arch.lm_head is not None else 0
    split = ModelParallel(tensor=1, pipeline=4, expert=2, distributed_optimizer=True)
    setup = TrainingSetup(seq_len=4096, precision=Precision.MIXED_BF16, grad_ckpt_every=1, world_size=8,
                          model_parallel=split)
    held, partition = parameter_shares(arch, setup, split)
    first, last = arch.embedding_params + arch.extra_params, arch.final_params + head
    dense = (total - experts - first - last) / 4 + max(first, last)
    assert held * total == pytest.approx(dense + experts / 8)
    assert partition * total == pytest.approx(dense / 2 + experts / 8)  # DP 2, expert DP 1
    budget = estimate_training(arch, setup)
    step = budget.phases[2]
    assert step.component("weights").bytes == pytest.approx(held * total * 2, rel=1e-6)
    assert step.component("fp32_gradients").bytes == pytest.approx(held * total * 4, rel=1e-6)
    assert step.component("gradients") is None  # main_grad is the gradient: no half .grad
    assert step.component("optimizer_states").bytes == pytest.approx(partition * total * 8, rel=1e-6)
    assert budget.setup["model_parallel"]["pipeline"] == 4
    assert any("no measured peak" in a for a in budget.assumptions)


def test_tensor_parallel_splits_activations_whole_only_with_sequence_parallel():
    assert activation_share(ModelParallel(tensor=4, sequence_parallel=True)) == 0.25
    # Korthikanti et al. 2022: 10 of 34 s*b*h bytes per layer stay whole on every tensor-parallel rank
    assert activation_share(ModelParallel(tensor=4)) == pytest.approx((10 + 24 / 4) / 34)


def test_megatron_advice_names_megatron_settings(tmp_path, monkeypatch, capsys):
    from memlint.cli.main import main

    (tmp_path / ".git").mkdir()
    (tmp_path / "run.yaml").write_text(MEGATRON_MOE.replace("use_distributed_optimizer: true",
                                                            "use_distributed_optimizer: false"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    main(["estimate", "run.yaml", "--gpu", "h100", "--gpus", "8"])
    out = capsys.readouterr().out
    assert "8 GPUs · Megatron PP 4 × EP 2 ·" in out
    assert "use_distributed_optimizer: true" in out
    assert "zero_optimization" not in out and "LoraConfig" not in out


def test_fsdp_expert_parallelism_gathers_only_its_share_of_the_experts():
    arch = resolve("Qwen/Qwen3-30B-A3B-Instruct-2507").arch
    from memlint.estimate import Sharding

    base = TrainingSetup(seq_len=256, precision=Precision.AMP_BF16, grad_ckpt_every=1, world_size=16,
                         sharding=Sharding.FSDP_FULL)
    split = estimate_training(arch, base.but(model_parallel=ModelParallel(expert=16, megatron=False)))
    whole = estimate_training(arch, base)
    spared = routed_expert_params(arch) / arch.num_layers * (1 - 1 / 16) * 2
    assert whole.phases[0].component("gathered_params").bytes - split.phases[0].component(
        "gathered_params").bytes == pytest.approx(spared, rel=1e-6)
    assert split.phases[0].component("optimizer_states") == whole.phases[0].component("optimizer_states")


@pytest.mark.parametrize("written", ['"4"', "true", "-2", "0", "4.0", "[4]"])
def test_a_parallel_size_that_is_not_a_whole_number_above_one_splits_nothing(lint, written):
    text = MEGATRON_TP.replace("tensor_model_parallel_size: 4", f"tensor_model_parallel_size: {written}").replace(
        "pipeline_model_parallel_size: 2", "pipeline_model_parallel_size: 1")
    found = lint({PATH: text}, PATH, select=("MEM",), gpu="h100", gpus=16)
    assert [d.code for d in found] == ["MEM001"]  # judged as the data-parallel run it then is
    assert "published memory accounting" not in found[0].message
