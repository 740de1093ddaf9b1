"""A run whose learners a project class builds with OLMo-core's data parallelism shards as that
config says (open-instruct's GRPO: ``grpo.py`` hands its options to ``OLMoCoreModelGroup``, which
starts Ray actors of ``PolicyTrainerOLMoCoreProcess``, whose ``setup_model`` builds
``TransformerDataParallelConfig(name=DataParallelType.hsdp, shard_degree=...)``), and ZRO001 then
proposes only forms OLMo-core offers: ddp, fsdp, hsdp -- its FSDP always reshards after forward,
so never SHARD_GRAD_OP. The launch is a cluster submitter's: ``python mason.py ... -- source
setup.sh \\&\\& python grpo.py ...``, whose escaped ``&&`` chains the commands it runs."""

from __future__ import annotations

from dataclasses import replace

import pytest

from memlint.estimate import Sharding
from memlint.lint.engine import Linter
from memlint.rules.zro001_zero3_on_small_model import _lighter_forms
from tests.facts.facts_testing import dedent
from tests.project.test_config_launchers import _project, _runs

GRPO = dedent('''
    from dataclasses import dataclass, field

    import ray
    from transformers import HfArgumentParser

    from rl.olmo_actor import ModelGroup


    @dataclass
    class GRPOConfig:
        model_name_or_path: str = field(default="Qwen/Qwen3-8B")
        per_device_train_batch_size: int = 1
        learning_rate: float = 5e-7
        gradient_checkpointing: bool = False
        fsdp_shard_degree: int | None = field(default=None, metadata={"help": "FSDP shard degree."})
        fsdp_num_replicas: int | None = None
        num_learners_per_node: list[int] = field(default_factory=lambda: [8])


    def main(config: GRPOConfig):
        ray.init()
        group = ModelGroup(config, sum(config.num_learners_per_node))
        group.train()


    if __name__ == "__main__":
        main(HfArgumentParser(GRPOConfig).parse_args_into_dataclasses()[0])
''')

ACTOR = dedent('''
    import ray
    import torch
    from olmo_core.distributed.parallel import DataParallelType
    from olmo_core.optim import AdamWConfig
    from olmo_core.train.train_module.transformer import TransformerDataParallelConfig, TransformerTrainModule

    from rl.models import build_model


    class PolicyTrainer:
        def __init__(self, config, rank, world_size):
            self.config, self.rank, self.world_size = config, rank, world_size

        def setup_model(self):
            torch.cuda.set_device(self.rank % torch.cuda.device_count())
            model = build_model(self.config.model_name_or_path)
            dp_config = TransformerDataParallelConfig(
                name=DataParallelType.__KIND__,
                num_replicas=self.config.fsdp_num_replicas,
                shard_degree=self.config.fsdp_shard_degree,
            )
            self.train_module = TransformerTrainModule(model=model, optim=AdamWConfig(lr=self.config.learning_rate),
                                                       dp_config=dp_config)


    class ModelGroup:
        def __init__(self, config, world_size):
            actor = ray.remote(num_gpus=1)(PolicyTrainer)
            self.models = [actor.remote(config, rank, world_size) for rank in range(world_size)]

        def train(self):
            ray.get([model.setup_model.remote() for model in self.models])
''')

LAUNCH = dedent('''
    #!/bin/bash
    uv run python mason.py \\
        --cluster ai2/jupiter \\
        --num_nodes 2 \\
        --gpus 8 -- source configs/ray_node_setup.sh \\&\\&python rl/grpo.py \\
        --model_name_or_path Qwen/Qwen3-8B \\
        --per_device_train_batch_size 1 \\
        --learning_rate 5e-7 \\
        --fsdp_shard_degree 8 \\
        --fsdp_num_replicas 1 \\
        --num_learners_per_node 8 \\
        --gradient_checkpointing
''')

MASON = dedent('''
    import argparse
    import subprocess


    def main():
        parser = argparse.ArgumentParser()
        parser.add_argument("--cluster")
        parser.add_argument("--num_nodes", type=int, default=1)
        parser.add_argument("--gpus", type=int, default=0)
        args, command = parser.parse_known_args()
        subprocess.run(["beaker", "submit", args.cluster, *command], check=True)


    if __name__ == "__main__":
        main()
''')


def _settings(tmp_path, kind: str):
    return _project(tmp_path, {
        "mason.py": MASON,
        "rl/__init__.py": "",
        "rl/grpo.py": GRPO,
        "rl/olmo_actor.py": ACTOR.replace("__KIND__", kind),
        "rl/models.py": "def build_model(name):\n    ...\n",
        "scripts/multi_node_grpo.sh": LAUNCH,
    })


@pytest.mark.parametrize("kind, sharding", [("hsdp", Sharding.FSDP_HYBRID), ("fsdp", Sharding.FSDP_FULL),
                                            ("ddp", Sharding.NONE)])
def test_the_learners_shard_as_their_olmo_core_config_says(tmp_path, kind, sharding):
    settings = _settings(tmp_path, kind)
    [run] = _runs(settings, "scripts/multi_node_grpo.sh")
    assert run.plan.value("model") == "Qwen/Qwen3-8B"  # the command after the submitter's escaped &&
    assert run.setup.sharding == sharding
    assert run.plan.value("parallel_library") == "olmo-core"


def test_no_false_out_of_memory_and_no_shard_grad_op_for_olmo_core(tmp_path):
    """Qwen3-8B, full fine-tune, 8 learners: plain DDP would not fit an H100 (~77 GiB), HSDP over the
    8 learners does (~13 GiB); SHARD_GRAD_OP would too, but OLMo-core has none to propose."""
    settings = _settings(tmp_path, "hsdp")
    findings = [d for d in Linter(settings).lint_path(tmp_path) if d.code in ("MEM001", "MEM002", "ZRO001")]
    assert findings == []
    [run] = _runs(settings, "scripts/multi_node_grpo.sh")
    assert _lighter_forms(run) == (Sharding.NONE,)
    # the same full sharding outside OLMo-core is offered SHARD_GRAD_OP; hybrid sharding never is
    other = replace(run, plan=replace(run.plan, facts={k: v for k, v in run.plan.facts.items()
                                                       if k != "parallel_library"}))
    assert _lighter_forms(other) == (Sharding.NONE,)
    full = replace(other, setup=other.setup.but(sharding=Sharding.FSDP_FULL))
    assert _lighter_forms(full) == (Sharding.NONE, Sharding.FSDP_GRAD_OP)
    assert _lighter_forms(replace(full, plan=run.plan)) == (Sharding.NONE,)
