"""LightningCLI configs (``python main.py fit --config config.yaml``) read as their own kind: the
Trainer section's precision, devices, strategy and accumulation, the user's model and data
arguments, and LightningCLI's schema (generated from Lightning's Trainer)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import yaml

from memlint.documents.kinds import detect
from memlint.lint.engine import Linter, run_context
from memlint.project.project import Project
from memlint.project.settings import Settings

# a fine-tuning project's config, as `python main.py fit --print_config` writes it (trimmed)
CONFIG = textwrap.dedent('''
    # python main.py fit --config configs/llama_sft.yaml
    seed_everything: 42
    trainer:
      accelerator: gpu
      devices: 4
      num_nodes: 2
      precision: bf16-mixed
      strategy: deepspeed_stage_2
      max_epochs: 3
      accumulate_grad_batches: 4
      gradient_clip_val: 1.0
      log_every_n_steps: 10
      callbacks:
        - class_path: lightning.pytorch.callbacks.LearningRateMonitor
          init_args:
            logging_interval: step
    model:
      class_path: finetune.CausalLMModule
      init_args:
        model_name_or_path: meta-llama/Llama-3.1-8B
        learning_rate: 2.0e-5
    data:
      class_path: finetune.InstructionDataModule
      init_args:
        dataset_name: tatsu-lab/alpaca
        batch_size: 8
        max_length: 2048
    optimizer:
      class_path: torch.optim.AdamW
      init_args:
        lr: 2.0e-5
        fused: true
    ckpt_path: null
''').lstrip("\n")

MAIN = textwrap.dedent('''
    from lightning.pytorch.cli import LightningCLI

    from finetune import CausalLMModule, InstructionDataModule


    def cli_main():
        LightningCLI(CausalLMModule, InstructionDataModule, save_config_kwargs={"overwrite": True})


    if __name__ == "__main__":
        cli_main()
''').lstrip("\n")


def _write(tmp_path: Path, files: dict[str, str]) -> Settings:
    (tmp_path / ".git").mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return Settings(root=tmp_path).with_overrides(gpu="h100", cache=False, offline=True)


def test_a_lightning_cli_config_is_its_own_kind_and_states_its_run(tmp_path: Path):
    assert detect("configs/llama_sft.yaml", "yaml", yaml.safe_load(CONFIG)) == "lightning-cli"
    settings = _write(tmp_path, {"configs/llama_sft.yaml": CONFIG, "main.py": MAIN,
                                 "train.sh": "python main.py fit --config configs/llama_sft.yaml\n"})
    [run] = Project(settings).runs_for(tmp_path / "configs/llama_sft.yaml", run_context(settings))
    plan = run.plan
    assert plan.value("model") == "meta-llama/Llama-3.1-8B"
    assert plan.value("micro_batch") == 8 and plan.get("micro_batch").origin.range.start.line == 26
    assert plan.value("seq_len") == 2048
    assert plan.value("lightning_precision") == "bf16-mixed"
    assert plan.value("world_size") == 8 and plan.value("gpus_per_node") == 4
    assert plan.value("zero_stage") == 2 and plan.value("grad_accum") == 4
    assert plan.value("optimizer") == "adamw-fused"
    assert run.setup is not None and run.setup.world_size == 8


def test_flat_model_arguments_and_a_strategy_block(tmp_path: Path):
    text = (CONFIG.replace("  class_path: finetune.CausalLMModule\n  init_args:\n", "")
            .replace("    model_name_or_path:", "  model_name_or_path:").replace("    learning_rate:", "  learning_rate:")
            .replace("  strategy: deepspeed_stage_2\n",
                     "  strategy:\n    class_path: lightning.pytorch.strategies.FSDPStrategy\n"
                     "    init_args:\n      sharding_strategy: FULL_SHARD\n"))
    settings = _write(tmp_path, {"config.yaml": text})
    [run] = Project(settings).runs_for(tmp_path / "config.yaml", run_context(settings))
    assert run.plan.value("model") == "meta-llama/Llama-3.1-8B"
    assert run.plan.value("fsdp") == "full" and run.plan.value("zero_stage") is None


def test_the_schema_knows_the_trainer_and_refuses_a_misspelt_key(tmp_path: Path):
    settings = _write(tmp_path, {"config.yaml": CONFIG})
    assert [d for d in Linter(settings).lint_path(tmp_path / "config.yaml") if d.code.startswith("CFG")] == []
    settings = _write(tmp_path, {"config.yaml": CONFIG.replace("  precision:", "  precison:")})
    [finding] = [d for d in Linter(settings).lint_path(tmp_path / "config.yaml") if d.code.startswith("CFG")]
    assert finding.code == "CFG001"
    assert "unknown LightningCLI key `precison` in `trainer`; did you mean `precision`?" in finding.message


def test_near_misses_are_not_lightning_cli():
    # a Hydra config of the lightning-hydra-template: `defaults` and `_target_` blocks
    hydra = {"defaults": ["_self_", {"trainer": "gpu"}], "trainer": {"_target_": "lightning.pytorch.Trainer",
                                                                     "devices": 1, "precision": "16-mixed"},
             "model": {"_target_": "src.models.MNISTLitModule"}}
    assert detect("configs/train.yaml", "yaml", hydra) != "lightning-cli"
    # a config with one generic trainer key
    assert detect("config.yaml", "yaml", {"trainer": {"max_epochs": 3}, "model": {"name": "resnet50"}}) \
        != "lightning-cli"
    # a Trainer section alone (no model or data): another tool's block
    assert detect("config.yaml", "yaml", {"trainer": {"devices": 2, "precision": "bf16-mixed"}}) != "lightning-cli"
