"""Composer / llm-foundry train YAMLs read as their own kind, with the run they define."""

from __future__ import annotations

from pathlib import Path

import yaml

from memlint.documents.kinds import detect
from memlint.lint.engine import run_context
from memlint.project.settings import Settings
from memlint.project.project import Project


def _text() -> str:
    # llm-foundry scripts/train/yamls/finetune layout: variables, ${...} interpolations, fsdp_config
    return (Path(__file__).parent / "data" / "llm_foundry_finetune.yaml").read_text(encoding="utf-8")


def test_llm_foundry_finetune_yaml_is_composer_and_states_its_run(tmp_path: Path):
    text = _text()
    assert detect("finetune.yaml", "yaml", yaml.safe_load(text)) == "composer"
    (tmp_path / ".git").mkdir()
    path = tmp_path / "yamls" / "finetune.yaml"
    path.parent.mkdir()
    path.write_text(text, encoding="utf-8")
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False)
    [run] = Project(settings).runs_for(path, run_context(settings))
    plan = run.plan
    assert plan.value("model") == "meta-llama/Llama-3.1-8B"
    assert plan.value("micro_batch") == 8 and plan.get("micro_batch").origin.range.start.line == 50
    assert plan.value("seq_len") == 2048  # ${variables.max_seq_len}
    assert plan.value("mixed") == "bf16" and plan.value("fsdp") == "full" and plan.value("grad_ckpt") == 1
    assert plan.value("optimizer") == "adamw"
    assert run.problem is None and run.setup is not None


def test_a_hydra_config_with_a_model_block_is_not_composer():
    near = {"model": {"name": "resnet50", "pretrained": True}, "precision": "amp_bf16", "trainer": {"max_epochs": 3}}
    assert detect("config.yaml", "yaml", near) != "composer"


def _config_findings(tmp_path: Path, text: str) -> list:
    from memlint.lint.engine import Linter

    (tmp_path / ".git").mkdir(exist_ok=True)
    path = tmp_path / "yamls" / "finetune.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text, encoding="utf-8")
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False)
    return [d for d in Linter(settings).lint_path(path) if d.code.startswith("CFG")]


def test_the_llm_foundry_schema_knows_the_train_config_and_its_interpolations(tmp_path: Path):
    # variables, ${...} values, an icl_tasks path (moved to icl_tasks_str by llm-foundry), open blocks
    text = _text() + "icl_tasks: eval/yamls/tasks_v0.2.yaml\neval_gauntlet: eval/yamls/eval_gauntlet_v0.2.yaml\n"
    assert _config_findings(tmp_path, text) == []


def test_a_misspelt_train_config_key_is_unknown_to_llm_foundry(tmp_path: Path):
    text = _text().replace("device_train_microbatch_size:", "device_train_micro_batch_size:")
    [finding] = _config_findings(tmp_path, text)
    assert finding.code == "CFG001"
    assert "unknown llm-foundry key `device_train_micro_batch_size`; did you mean `device_train_microbatch_size`?" \
        in finding.message
    assert "put your own values under `variables`" in finding.message
    # the same key under `variables` is the file's own value: no finding
    moved = _text().replace("variables:\n", "variables:\n  my_data_root: /data\n", 1)
    assert _config_findings(tmp_path, moved) == []


def test_a_wrongly_typed_train_config_value(tmp_path: Path):
    text = _text().replace("max_seq_len: ${variables.max_seq_len}", "max_seq_len: long", 1)
    found = _config_findings(tmp_path, text)
    assert [f.code for f in found] == ["CFG002"] and "max_seq_len" in found[0].message
