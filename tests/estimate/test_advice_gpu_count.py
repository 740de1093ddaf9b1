"""What the advice tells a run that already shards fully but runs on one GPU.

A user with `"zero_optimization": {"stage": 3}` (or FSDP full shard) and no GPU count has
nothing to shard over: the change that helps is more GPUs, not a sharding stage they set already.
"""
from __future__ import annotations

import pytest

from memlint.catalog.gpus import lookup_gpu
from memlint.catalog.models import resolve_model
from memlint.estimate import Precision, Sharding, TrainingSetup, capacity_for, estimate_training, suggest


@pytest.fixture(scope="module")
def llama3_8b():
    return resolve_model("meta-llama/Meta-Llama-3-8B")


def _advice(arch, sharding: Sharding) -> dict[str, str]:
    setup = TrainingSetup(micro_batch=1, seq_len=2048, precision=Precision.AMP_BF16, sharding=sharding)
    budget = estimate_training(arch, setup, capacity_for(lookup_gpu("a100-40gb")))
    return {s.key: s.change for s in suggest(arch, setup, budget, limit=20)}


@pytest.mark.parametrize("sharding", [Sharding.ZERO3, Sharding.FSDP_FULL])
def test_a_fully_sharded_run_on_one_gpu_is_told_to_add_gpus(llama3_8b, sharding):
    advice = _advice(llama3_8b, sharding)
    assert advice["zero3_8"] == "run it on 8 GPUs (its full sharding then splits the model over them)"


def test_an_unsharded_run_on_one_gpu_is_told_to_shard_over_more(llama3_8b):
    advice = _advice(llama3_8b, Sharding.NONE)
    assert advice["zero3_8"] == "shard over 8 GPUs (ZeRO-3 / FSDP)"
