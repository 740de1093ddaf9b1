"""A script that picks its optimizer by an option (zyushun/Adam-mini's DeepSpeed-Chat examples:
``if args.optimizer == "adam_mini": Adam_mini(...) else: FusedAdam(...)``, launched with
``--optimizer $ALGORITHM``): the launch's choice is the run's optimizer, and Adam-mini keeps one
state per parameter, not Adam's two."""

from __future__ import annotations

from pathlib import Path

from memlint.catalog.models import resolve_model
from memlint.estimate import Optimizer, Precision, TrainingSetup, estimate_training
from memlint.lint.engine import run_context
from memlint.project.project import Project
from memlint.project.settings import Settings

from tests.facts.facts_testing import dedent, write

MAIN_PY = dedent('''
    import argparse

    import deepspeed
    import torch
    from adam_mini import Adam_mini
    from deepspeed.ops.adam import DeepSpeedCPUAdam, FusedAdam
    from transformers import AutoModelForCausalLM


    def parse_args():
        parser = argparse.ArgumentParser()
        parser.add_argument("--model_name_or_path", type=str, required=True)
        parser.add_argument("--per_device_train_batch_size", type=int, default=16)
        parser.add_argument("--max_seq_len", type=int, default=512)
        parser.add_argument("--learning_rate", type=float, default=1e-3)
        parser.add_argument("--offload", action="store_true")
        parser.add_argument("--optimizer", type=str, default="adamw", choices=["adamw", "adam_mini"])
        return parser.parse_args()


    def main():
        args = parse_args()
        model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, torch_dtype=torch.bfloat16)
        if args.optimizer == "adam_mini":
            optimizer = Adam_mini(named_parameters=model.named_parameters(), lr=args.learning_rate,
                                  betas=(0.9, 0.95), weight_decay=0.0, dim=4096, n_heads=32)
        else:
            AdamOptimizer = DeepSpeedCPUAdam if args.offload else FusedAdam
            optimizer = AdamOptimizer(model.parameters(), lr=args.learning_rate, betas=(0.9, 0.95))
        model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer)
        for batch in loader:
            loss = model(**batch).loss
            model.backward(loss)
            model.step()


    if __name__ == "__main__":
        main()
''')

LAUNCH = dedent('''
    MODEL_NAME="meta-llama/Llama-2-7b-hf"
    ALGORITHM="{algorithm}"
    deepspeed --master_port 26700 main.py \\
       --model_name_or_path $MODEL_NAME \\
       --per_device_train_batch_size 20 \\
       --max_seq_len 1024 \\
       --optimizer $ALGORITHM
''')


def _optimizer(tmp_path: Path, algorithm: str):
    write(tmp_path, {"main.py": MAIN_PY, "run_sft.sh": LAUNCH.format(algorithm=algorithm)})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False)
    [run] = Project(settings).runs_for(tmp_path / "run_sft.sh", run_context(settings))
    return run.plan.get("optimizer")


def test_the_optimizer_the_launch_names_is_the_runs(tmp_path: Path):
    chosen = _optimizer(tmp_path, "adam_mini")
    assert chosen.value == "adam-mini"  # before: the default branch's FusedAdam, then AdamW assumed
    assert Path(chosen.origin.path).name == "run_sft.sh" and "--optimizer" in chosen.note


def test_near_miss_the_default_choice_keeps_the_fused_adam(tmp_path: Path):
    assert _optimizer(tmp_path, "adamw").value == "adamw-fused"


def test_adam_mini_keeps_one_state_a_parameter():
    arch = resolve_model("meta-llama/Llama-2-7b-hf")
    setup = TrainingSetup(micro_batch=1, seq_len=512, precision=Precision.MIXED_BF16)

    def states(optimizer: Optimizer) -> int:
        budget = estimate_training(arch, setup.but(optimizer=optimizer))
        step = next(p for p in budget.phases if p.name == "optimizer_step")
        return step.component("optimizer_states").bytes

    # m in fp32 beside the master weights; v is one value per block
    assert states(Optimizer.ADAM_MINI) * 2 == states(Optimizer.ADAMW_FUSED)
