"""Each budget component against numbers computed by hand from the published architectures."""

from __future__ import annotations

import pytest

from memlint.catalog.gpus import lookup_gpu
from memlint.catalog.models import resolve_model
from memlint.estimate import (
    Lora,
    Optimizer,
    Precision,
    Sharding,
    TrainingSetup,
    capacity_for,
    estimate_training,
    kv_bytes_per_sequence,
)
from memlint.estimate.states import NF4_DOUBLE_QUANT_BYTES, count_parameters
from memlint.model.units import GiB

LLAMA2_7B = 6_738_415_616  # published safetensors total (fp16 part)


@pytest.fixture(scope="module")
def llama2():
    return resolve_model("meta-llama/Llama-2-7b-hf")


def phase(budget, name):
    return next(p for p in budget.phases if p.name == name)


def component(phase_, key):
    found = phase_.component(key)
    return 0 if found is None else found.bytes


def test_pure_bf16_adamw_foreach_step_is_five_copies_of_the_weights(llama2):
    # bf16 weights 2 + grads 2 + AdamW m, v 2+2 + foreach's sqrt(v) temporary 2 = 10 B/param
    budget = estimate_training(llama2, TrainingSetup(micro_batch=1, seq_len=2048))
    step = phase(budget, "optimizer_step")
    assert component(step, "weights") == 2 * LLAMA2_7B
    assert component(step, "gradients") == 2 * LLAMA2_7B
    assert component(step, "optimizer_states") == 4 * LLAMA2_7B
    assert component(step, "optimizer_step_temp") == 2 * LLAMA2_7B
    assert step.bytes == 10 * LLAMA2_7B


def test_fused_adamw_has_no_step_temporary(llama2):
    setup = TrainingSetup(micro_batch=1, seq_len=2048, optimizer=Optimizer.ADAMW_FUSED)
    step = phase(estimate_training(llama2, setup), "optimizer_step")
    assert component(step, "optimizer_step_temp") == 0
    assert step.bytes == 8 * LLAMA2_7B


def test_autocast_keeps_fp32_weights_grads_and_states(llama2):
    # HF Trainer bf16=True over an fp32-loaded model: 4 + 4 + 8 (+ 4 foreach temp) B/param
    setup = TrainingSetup(micro_batch=1, seq_len=2048, precision=Precision.AMP_BF16, grad_ckpt_every=1)
    step = phase(estimate_training(llama2, setup), "optimizer_step")
    assert step.bytes == 20 * LLAMA2_7B


def test_deepspeed_zero2_matches_deepspeeds_own_model_state_formula(llama2):
    # DeepSpeed's estimate_zero2_model_states_mem_needs: 2P + 18P/N (fp16 params, then fp16 +
    # fp32 grads, fp32 master and Adam's two states sharded over N GPUs)
    # fp32 grads). With DeepSpeed's FusedAdam (its default) the step peaks while the half
    # gradients, their flattened copy and the fp32 partition are alive together.
    n = 8
    setup = TrainingSetup(precision=Precision.MIXED_BF16, sharding=Sharding.ZERO2, world_size=n,
                          optimizer=Optimizer.ADAMW_FUSED, micro_batch=1, seq_len=512)
    step = phase(estimate_training(llama2, setup), "optimizer_step")
    states = sum(component(step, k) for k in
                 ("weights", "gradients", "master_weights", "fp32_gradients", "optimizer_states"))
    assert states == pytest.approx(2 * LLAMA2_7B + 18 * LLAMA2_7B / n, rel=1e-9)
    assert component(step, "flat_gradients") == pytest.approx(2 * LLAMA2_7B / n, rel=1e-9)


@pytest.mark.parametrize("sharding", [Sharding.ZERO1, Sharding.ZERO2])
def test_deepspeed_zero12_fp32_gradients_live_only_in_the_step(llama2, sharding):
    # stage_1_and_2.py step(): the fp32 gradient partition is made from the flattened half
    # gradients and dropped after the inner optimizer's step; the parameters are all-gathered in
    # place (all_gather_into_tensor), so no all-gather bucket exists
    setup = TrainingSetup(precision=Precision.MIXED_FP16, sharding=sharding, world_size=4,
                          optimizer=Optimizer.ADAMW_FUSED, micro_batch=1, seq_len=512)
    budget = estimate_training(llama2, setup)
    for name in ("forward", "backward"):
        assert component(phase(budget, name), "fp32_gradients") == 0
        assert component(phase(budget, name), "allgather_bucket") == 0
    step = phase(budget, "optimizer_step")
    assert component(step, "fp32_gradients") == pytest.approx(4 * LLAMA2_7B / 4, rel=1e-9)
    # in step() only this rank's half gradients are alive, under ZeRO-1 too: its backward epilogue
    # copies them into grads_in_partition and clears every param.grad (measured at world size 2)
    assert component(step, "gradients") == pytest.approx(2 * LLAMA2_7B / 4, rel=1e-9)
    # the backward holds the default reduce bucket: 5e8 half-precision elements
    assert component(phase(budget, "backward"), "reduce_bucket") == 10**9


def test_deepspeed_zero3_shards_everything(llama2):
    # bf16 params 2 + bf16 gradient partition 2 (stage3.py's grad_partitions_flat_buffer) + fp32
    # gradient buffer 4 + fp32 master 4 + Adam 8, all over N
    n = 8
    setup = TrainingSetup(precision=Precision.MIXED_BF16, sharding=Sharding.ZERO3, world_size=n,
                          micro_batch=1, seq_len=512)
    step = phase(estimate_training(llama2, setup), "optimizer_step")
    states = sum(component(step, k) for k in
                 ("weights", "gradients", "master_weights", "fp32_gradients", "optimizer_states"))
    assert states == pytest.approx(20 * LLAMA2_7B / n, rel=1e-9)
    assert component(step, "gradients") == pytest.approx(2 * LLAMA2_7B / n, rel=1e-9)


def test_deepspeed_zero3_offload_keeps_no_gradient_partition_on_the_gpu(llama2):
    setup = TrainingSetup(precision=Precision.MIXED_BF16, sharding=Sharding.ZERO3, world_size=8,
                          offload_optimizer=True, micro_batch=1, seq_len=512)
    step = phase(estimate_training(llama2, setup), "optimizer_step")
    assert component(step, "gradients") == 0 and component(step, "fp32_gradients") == 0


def test_optimizer_offload_moves_states_to_the_host(llama2):
    setup = TrainingSetup(precision=Precision.MIXED_BF16, sharding=Sharding.ZERO2, world_size=1,
                          offload_optimizer=True, micro_batch=1, seq_len=512)
    budget = estimate_training(llama2, setup)
    step = phase(budget, "optimizer_step")
    assert component(step, "optimizer_states") == 0 and component(step, "master_weights") == 0
    # fp32 master 4 + fp32 grads 4 + Adam 8 bytes per parameter on the CPU
    assert budget.host_bytes == 16 * LLAMA2_7B


def test_lora_trains_only_the_adapters(llama2):
    lora = Lora(r=16, targets=("q_proj", "v_proj"))
    counts = count_parameters(llama2, TrainingSetup(lora=lora))
    # 32 layers x 2 adapted projections x r x (in + out) = 32 * 2 * 16 * (4096 + 4096)
    assert counts.lora == 32 * 2 * 16 * (4096 + 4096) == 8_388_608
    setup = TrainingSetup(micro_batch=1, seq_len=512, lora=lora, optimizer=Optimizer.ADAMW_FUSED)
    step = phase(estimate_training(llama2, setup), "optimizer_step")
    assert component(step, "gradients") == 4 * counts.lora  # fp32 adapters
    assert component(step, "optimizer_states") == 8 * counts.lora
    assert component(step, "weights") == 2 * LLAMA2_7B + 4 * counts.lora


def test_all_linear_lora_adapts_seven_projections(llama2):
    counts = count_parameters(llama2, TrainingSetup(lora=Lora(r=8, targets=("all-linear",))))
    h, f = 4096, 11008
    per_layer = 8 * ((h + h) * 4 + 2 * (h + f) + (f + h))
    assert counts.lora == 32 * per_layer


def test_qlora_nf4_double_quant_bytes_per_weight(llama2):
    setup = TrainingSetup(micro_batch=1, seq_len=512,
                          lora=Lora(r=16, targets=("all-linear",), quantization="nf4", double_quant=True))
    weights = component(phase(estimate_training(llama2, setup), "optimizer_step"), "weights")
    quantized = llama2.linear_weight_params
    rest = LLAMA2_7B - quantized
    lora = count_parameters(llama2, setup).lora
    # 4-bit weights + one 8-bit absmax per 64 + one fp32 constant per 256 absmax; the rest in fp32
    assert NF4_DOUBLE_QUANT_BYTES == pytest.approx(0.5 + 1 / 64 + 4 / (64 * 256))
    assert weights == int(quantized * NF4_DOUBLE_QUANT_BYTES + rest * 4 + lora * 4)


def test_eight_bit_adamw_states(llama2):
    setup = TrainingSetup(micro_batch=1, seq_len=512, optimizer=Optimizer.ADAMW_8BIT)
    counts = count_parameters(llama2, setup)
    states = component(phase(estimate_training(llama2, setup), "optimizer_step"), "optimizer_states")
    big = LLAMA2_7B - counts.small_tensors
    assert states == int(big * (2 + 8 / 256) + counts.small_tensors * 8)


def test_logits_and_loss_buffers_at_the_start_of_backward():
    # transformers' ForCausalLMLoss: fp32 log-softmax (4 B) + two fp32 gradient buffers (8 B)
    arch = resolve_model("meta-llama/Llama-3.2-1B-Instruct")
    setup = TrainingSetup(micro_batch=4, seq_len=2048, grad_ckpt_every=1)
    budget = estimate_training(arch, setup)
    backward = phase(budget, "backward")
    assert component(backward, "logits") == 12 * 4 * 2048 * 128_256


def test_kv_cache_per_token_llama3_8b():
    arch = resolve_model("meta-llama/Llama-3.1-8B")
    # 2 (K, V) x 32 layers x 8 KV heads x 128 head dim x 2 bytes
    assert kv_bytes_per_sequence(arch, 1) == 2 * 32 * 8 * 128 * 2 == 131_072
    assert kv_bytes_per_sequence(arch, 1, "fp8") == 65_536


def test_sliding_window_caps_the_kv_cache():
    arch = resolve_model("mistralai/Mistral-7B-v0.1")
    assert arch.sliding_window == 4096
    assert kv_bytes_per_sequence(arch, 32_768) == kv_bytes_per_sequence(arch, 4096)


def test_capacity_subtracts_the_cuda_context_and_the_allocators_fragmentation():
    gpu = lookup_gpu("NVIDIA A100-SXM4-80GB")
    cap = capacity_for(gpu)
    assert cap.usable_bytes == int((gpu.total_bytes - 1 * GiB) * 0.965)
    assert cap.comfortable_bytes == int(cap.usable_bytes * 0.95)
    lenient = capacity_for(gpu, fragmentation=0.0)  # e.g. expandable_segments
    assert lenient.usable_bytes == gpu.total_bytes - 1 * GiB
    assert lookup_gpu("a100").id == lookup_gpu("A100-80GB").id == gpu.id


def test_gradient_accumulation_keeps_gradients_during_forward(llama2):
    base = TrainingSetup(micro_batch=1, seq_len=2048, grad_ckpt_every=1)
    one = phase(estimate_training(llama2, base), "forward").bytes
    accumulating = phase(estimate_training(llama2, base.but(grad_accum=8)), "forward").bytes
    assert accumulating - one == 2 * LLAMA2_7B


def test_ddp_buckets_copy_the_gradients(llama2):
    setup = TrainingSetup(micro_batch=1, seq_len=512, world_size=8, optimizer=Optimizer.ADAMW_FUSED)
    step = phase(estimate_training(llama2, setup), "optimizer_step")
    assert component(step, "ddp_buckets") == 2 * LLAMA2_7B


def test_a_client_torch_adamw_under_deepspeed_steps_with_its_foreach_temporary(llama2):
    # DeepSpeed calls the client optimizer's step() on the fp32 partition: torch's foreach
    # AdamW allocates a copy of the second moments there; DeepSpeed's fused Adam does not
    n = 8
    for optimizer, expected in ((Optimizer.ADAMW, 4 * LLAMA2_7B / n), (Optimizer.ADAMW_FUSED, 0)):
        setup = TrainingSetup(precision=Precision.MIXED_BF16, sharding=Sharding.ZERO2, world_size=n,
                              optimizer=optimizer, micro_batch=1, seq_len=512)
        step = phase(estimate_training(llama2, setup), "optimizer_step")
        assert component(step, "optimizer_step_temp") == pytest.approx(expected, rel=1e-9)


def test_a_tied_embedding_keeps_the_heads_gradient_through_backward():
    # SmolLM2-135M ties its 49152 x 576 embedding to the head: the head's gradient waits in
    # autograd's input buffer for the embedding's, and the two are summed out of place; under
    # ZeRO-1 the reduce bucket makes that last moment of backward the peak
    smol = resolve_model("HuggingFaceTB/SmolLM2-135M-Instruct")
    tied = 49152 * 576 * 2
    setup = TrainingSetup(precision=Precision.MIXED_BF16, sharding=Sharding.ZERO1, world_size=1,
                          optimizer=Optimizer.ADAMW_FUSED, micro_batch=2, seq_len=512, grad_ckpt_every=1)
    backward = phase(estimate_training(smol, setup), "backward")
    assert component(backward, "tied_embedding_gradients") == 2 * tied
    assert component(backward, "reduce_bucket") == 10**9
    # LoRA freezes the embedding: nothing of the kind
    lora = setup.but(lora=Lora(r=8), sharding=Sharding.NONE, precision=Precision.BF16)
    parts = {c.key for p in estimate_training(smol, lora).phases for c in p.components}
    assert not parts & {"tied_head_gradient", "tied_embedding_gradients"}


def test_zero_all_reduce_flattens_the_bucket_over_several_ranks():
    # stage_1_and_2.py allreduce_bucket: ``tensor = self.flatten(bucket)`` on top of the bucket;
    # one rank reduces nothing
    smol = resolve_model("HuggingFaceTB/SmolLM2-135M-Instruct")
    setup = TrainingSetup(precision=Precision.MIXED_FP16, sharding=Sharding.ZERO2, world_size=2,
                          optimizer=Optimizer.ADAMW_FUSED, micro_batch=2, seq_len=256, grad_ckpt_every=1)
    backward = phase(estimate_training(smol, setup), "backward")
    assert component(backward, "reduce_copy") == smol.n_params * 2
    single = phase(estimate_training(smol, setup.but(world_size=1)), "backward")
    assert component(single, "reduce_copy") == 0
