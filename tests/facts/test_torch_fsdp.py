"""PyTorch's own FSDP in hand-written loops: FSDP1's wrapper with its sharding strategy, mixed
precision and CPU offload, and FSDP2's ``fully_shard``."""

from __future__ import annotations

from facts_testing import dedent, one, span, where

FSDP1 = dedent('''
    import functools
    import os

    import torch
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import MixedPrecision, ShardingStrategy
    from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy
    from transformers import AutoModelForCausalLM
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    BF16 = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32, buffer_dtype=torch.bfloat16)


    def build(model_id):
        model = AutoModelForCausalLM.from_pretrained(model_id, torch_dtype=torch.float32)
        policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={LlamaDecoderLayer})
        return FSDP(model, auto_wrap_policy=policy, mixed_precision=BF16,
                    sharding_strategy=ShardingStrategy.SHARD_GRAD_OP, device_id=int(os.environ["LOCAL_RANK"]))


    def main(loader):
        model = build("meta-llama/Llama-3.1-8B")
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
        for batch in loader:
            model(**batch).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
''')


def test_fsdp1_strategy_and_mixed_precision():
    facts = one(FSDP1)
    assert facts.fsdp.value == "grad-op"
    assert facts.mixed.value == "bf16"
    assert where(facts.mixed) == span(FSDP1, "MixedPrecision(param_dtype=«torch.bfloat16»")


def test_fsdp1_shards_fully_by_default_and_offloads_to_cpu():
    text = FSDP1.replace("sharding_strategy=ShardingStrategy.SHARD_GRAD_OP, ", "cpu_offload=CPUOffload(offload_params=True), ")
    text = text.replace("import MixedPrecision, ShardingStrategy", "import CPUOffload, MixedPrecision")
    facts = one(text)
    assert facts.fsdp.value == "full"
    assert facts.offload_params.value is True and facts.offload_optimizer.value is True


FSDP2 = dedent('''
    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from transformers import AutoModelForCausalLM


    def main(loader, keep_gathered=False):
        model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-8B", torch_dtype=torch.float32)
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for layer in model.model.layers:
            fully_shard(layer, mp_policy=policy, reshard_after_forward=False)
        fully_shard(model, mp_policy=policy, reshard_after_forward=False)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
        for batch in loader:
            model(**batch).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
''')


def test_fsdp2_fully_shard_without_resharding_is_grad_op():
    facts = one(FSDP2)
    assert facts.fsdp.value == "grad-op" and facts.mixed.value == "bf16"


def test_fsdp2_reshards_by_default():
    facts = one(FSDP2.replace(", reshard_after_forward=False", ""))
    assert facts.fsdp.value == "full"
