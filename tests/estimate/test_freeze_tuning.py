"""LLaMA-Factory's freeze tuning (``finetuning_type: freeze``): the last N blocks train, upcast to
fp32, and the embeddings, head and other blocks stay frozen in the compute dtype. Layouts the
estimate cannot state (the first blocks, chosen modules) are named, not guessed; LLaMA Pro's interleaved
blocks are modelled (tests/estimate/test_memory_savers.py)."""

from __future__ import annotations

import json

import pytest

from memlint.catalog.models import resolve
from memlint.cli.errors import EXIT_OK
from memlint.cli.main import main
from memlint.estimate import TrainingSetup, estimate_training
from memlint.estimate.policy import Precision
from memlint.documents.parsed import parse_document
from memlint.documents.reading import document_from_text
from memlint.facts.extract import extract

# examples/train_full/llama3_full_sft.yaml as LLaMA-Factory's docs turn it into freeze tuning
FREEZE = """\
### model
model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
trust_remote_code: true

### method
stage: sft
do_train: true
finetuning_type: freeze
freeze_trainable_layers: 2
freeze_trainable_modules: all

### dataset
dataset: identity,alpaca_en_demo
template: llama3
cutoff_len: 2048

### output
output_dir: saves/llama3-8b/freeze/sft

### train
per_device_train_batch_size: 1
gradient_accumulation_steps: 8
learning_rate: 1.0e-4
bf16: true
"""


def _sheet(tmp_path, monkeypatch, capsys, text: str) -> tuple[dict, str]:
    (tmp_path / ".git").mkdir(exist_ok=True)
    (tmp_path / "llama3_freeze_sft.yaml").write_text(text)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["estimate", "llama3_freeze_sft.yaml", "--gpu", "h100", "--format", "json"]) == EXIT_OK
    captured = capsys.readouterr()
    return json.loads(captured.out), captured.err


def test_the_last_blocks_train_in_fp32_and_the_rest_stays_bf16(tmp_path, monkeypatch, capsys):
    sheet, err = _sheet(tmp_path, monkeypatch, capsys, FREEZE)
    assert sheet["setup"]["frozen"] == {"layers": 30, "embeddings": True, "head": True}
    assert "the last 2 of 32 blocks train" in err
    arch = resolve("meta-llama/Meta-Llama-3-8B").arch
    block = arch.blocks[0].params_per_block
    components = {c["key"]: c["bytes"] for c in sheet["phases"][0]["components"]}
    assert components["weights"] == 2 * block * 4 + (arch.n_params - 2 * block) * 2
    assert components["optimizer_states"] == pytest.approx(2 * block * 8, rel=0.01)


def test_freeze_tuning_is_far_below_full_fine_tuning():
    arch = resolve("meta-llama/Meta-Llama-3-8B").arch
    full = estimate_training(arch, TrainingSetup(precision=Precision.MIXED_BF16, grad_ckpt_every=1))
    frozen = estimate_training(arch, TrainingSetup(
        precision=Precision.MIXED_BF16, grad_ckpt_every=1, frozen_layers=30, freeze_embeddings=True,
        freeze_head=True, frozen_weight_bytes=2.0))
    assert frozen.peak_bytes < full.peak_bytes / 3


@pytest.mark.parametrize(("change", "replacement", "named"), [
    ("freeze_trainable_layers: 2\n", "freeze_trainable_layers: 0\nuse_llama_pro: true\n", "LLaMA Pro"),
    ("freeze_trainable_layers: 2\n", "freeze_trainable_layers: -2\n", "the first blocks"),
    ("freeze_trainable_modules: all\n", "freeze_trainable_modules: mlp,self_attn\n", "chosen modules"),
])
def test_layouts_the_estimate_cannot_state_are_named(change, replacement, named):
    text = FREEZE.replace(change, replacement)
    [facts] = extract(parse_document(document_from_text("examples/train_freeze/llama3_freeze_sft.yaml", text)))
    assert facts.trained_layers is None
    assert named in facts.unmodelled.value


# examples/v1/train_freeze/train_freeze_sft.yaml (LLaMA-Factory v1), trimmed
V1_FREEZE = """\
model: Qwen/Qwen3-4B
model_class: llm

# Freeze Configuration
peft_config:
  name: freeze
  freeze_trainable_layers: 2      # Train the last 2 layers
  freeze_trainable_modules: all       # In these layers, train specific modules
  freeze_extra_modules: null      # Extra modules to train (e.g. embed_tokens, lm_head)

# FSDP Config
dist_config:
  name: fsdp2
  dcp_path: null

### training
output_dir: ./outputs/test_freeze
micro_batch_size: 1
cutoff_len: 2048
learning_rate: 2.0e-5
max_steps: 10
"""


def test_a_v1_freeze_config_trains_its_last_blocks():
    [facts] = extract(parse_document(document_from_text("examples/v1/train_freeze/train_freeze_sft.yaml", V1_FREEZE)))
    assert facts.kind == "llamafactory-v1" and facts.trained_layers.value == 2
    extra = V1_FREEZE.replace("freeze_extra_modules: null", "freeze_extra_modules: embed_tokens")
    [facts] = extract(parse_document(document_from_text("examples/v1/train_freeze/train_freeze_sft.yaml", extra)))
    assert facts.trained_layers is None and "extra modules" in facts.unmodelled.value
