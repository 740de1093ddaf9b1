"""One table of library names, read the same way by the fact extractors and the rules.

A script's facts and a rule's finding about the same line must agree on what a call is: the
optimizer the estimator models is an optimizer the rules see being built, a loss scaler the
rules know is one the facts know, and FSDP2's ``fully_shard`` wraps a model for both.
"""

import libcst as cst
import pytest

from memlint.model.vocabulary import OPTIMIZER_CLASSES
from memlint.python import library
from memlint.python.index import index_for
from memlint.python.source import parse
from memlint.python.training import (
    FSDP_WRAPPERS,
    is_optimizer_constructor,
    is_scaler_constructor,
    optimizer_creations,
)


def _calls(text: str):
    source = parse(text)
    index = index_for(source)
    _KEPT.append(source)  # an index holds its source weakly
    return index, [node for node in index.nodes_of(cst.Call)]


_KEPT: list = []


@pytest.mark.parametrize("qualname", sorted(OPTIMIZER_CLASSES))
def test_every_optimizer_the_estimator_models_is_an_optimizer_to_the_rules(qualname):
    assert library.is_optimizer_class(qualname)
    assert library.optimizer_class(qualname) is not None


@pytest.mark.parametrize("qualname", [
    "torch.optim.lr_scheduler.CosineAnnealingLR", "torch.optim.Optimizer",
])
def test_schedulers_and_the_base_class_are_not_optimizers(qualname):
    assert not library.is_optimizer_class(qualname)


def test_an_aliased_bitsandbytes_optimizer_is_seen_by_the_rules_and_modelled_by_the_estimator():
    index, calls = _calls(
        "import torch\n"
        "from bitsandbytes.optim import PagedAdamW8bit as Opt\n"
        "def build(model, lr):\n"
        "    return Opt(model.parameters(), lr=lr)\n"
    )
    (call,) = [c for c in calls if any(q.startswith("bitsandbytes.") for q in index.qualified(c))]
    (qualname,) = index.qualified(call)
    assert is_optimizer_constructor(index, call)
    assert library.optimizer_class(qualname) == "paged-adamw-8bit"


def test_scalers_are_one_table():
    index, calls = _calls(
        "from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler\n"
        "import torch.cpu.amp as cpu_amp\n"
        "a = ShardedGradScaler()\n"
        "b = cpu_amp.GradScaler()\n"
    )
    assert all(is_scaler_constructor(index, c) for c in calls if index.qualified(c))
    assert all(q in library.SCALER_CLASSES for c in calls for q in index.qualified(c))


def test_autocast_spellings_are_known_with_their_device():
    assert library.AUTOCAST_DEVICES["torch.cpu.amp.autocast"] == "cpu"
    assert library.AUTOCAST_DEVICES["torch.cuda.amp.autocast"] == "cuda"
    assert "torch.cpu.amp.autocast" not in library.AUTOCASTS  # it never runs on a GPU


def test_fsdp2_fully_shard_wraps_the_model_for_facts_and_rules():
    assert library.TORCH_FULLY_SHARD <= FSDP_WRAPPERS
    assert library.PEFT_WRAPPERS <= library.MODEL_WRAPPERS


def test_optimizer_creations_find_the_model_they_update():
    index, _ = _calls(
        "import torch\n"
        "from torch.optim import AdamW\n"
        "model = build_model()\n"
        "optimizer = AdamW(model.parameters(), lr=3e-4)\n"
    )
    (creation,) = optimizer_creations(index)
    assert creation.models == frozenset({"model"})
