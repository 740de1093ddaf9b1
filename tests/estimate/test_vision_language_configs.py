"""A LLaMA-Factory run of a vision-language model: the images are priced at the config's
``image_max_pixels`` (one per sequence, said as an assumption), and ``freeze_vision_tower``
(on by default) keeps the tower's weights in the compute dtype, without gradients, states or
activations."""

from __future__ import annotations

import json

from memlint.catalog.models import resolve
from memlint.cli.errors import EXIT_OK
from memlint.cli.main import main

# LLaMA-Factory's examples/train_full/qwen3vl_full_sft.yaml (commit ff6d4d12), without its DeepSpeed file
QWEN3_VL_FULL = """\
### model
model_name_or_path: Qwen/Qwen3-VL-4B-Instruct
image_max_pixels: 262144
video_max_pixels: 16384
trust_remote_code: true

### method
stage: sft
do_train: true
finetuning_type: full
freeze_vision_tower: true
freeze_multi_modal_projector: true
freeze_language_model: false

### dataset
dataset: mllm_demo,identity,alpaca_en_demo
template: qwen3_vl_nothink
cutoff_len: 2048

### output
output_dir: saves/qwen3-vl-4b/full/sft

### train
per_device_train_batch_size: 1
gradient_accumulation_steps: 2
learning_rate: 1.0e-5
bf16: true
"""


def _sheet(tmp_path, monkeypatch, capsys, text: str) -> tuple[dict, str]:
    (tmp_path / ".git").mkdir(exist_ok=True)
    (tmp_path / "qwen3vl_full_sft.yaml").write_text(text)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["estimate", "qwen3vl_full_sft.yaml", "--gpu", "h100", "--format", "json"]) == EXIT_OK
    captured = capsys.readouterr()
    return json.loads(captured.out), captured.err


def _weights(sheet: dict) -> int:
    return {c["key"]: c["bytes"] for c in sheet["phases"][0]["components"]}["weights"]


def test_a_frozen_tower_stays_in_bf16_and_trains_nothing(tmp_path, monkeypatch, capsys):
    arch = resolve("Qwen/Qwen3-VL-4B-Instruct").arch
    sheet, err = _sheet(tmp_path, monkeypatch, capsys, QWEN3_VL_FULL)
    assert sheet["trainable_parameters"] == arch.n_params - arch.extra_params
    assert _weights(sheet) == 4 * (arch.n_params - arch.extra_params) + 2 * arch.extra_params
    assert any("vision tower is frozen" in a for a in sheet["assumptions"])


def test_a_trained_tower_keeps_activations_for_the_configured_pixel_budget(tmp_path, monkeypatch, capsys):
    arch = resolve("Qwen/Qwen3-VL-4B-Instruct").arch
    trained = QWEN3_VL_FULL.replace("freeze_vision_tower: true", "freeze_vision_tower: false")
    sheet, err = _sheet(tmp_path, monkeypatch, capsys, trained)
    assert sheet["trainable_parameters"] == arch.n_params
    # 262,144 pixels: a 512 x 512 image, 32 x 32 patches of 16 pixels, 256 tokens after the 2 x 2 merge
    assert any("vision tower activations for 256 image tokens per sequence" in a for a in sheet["assumptions"])
    bigger, _ = _sheet(tmp_path, monkeypatch, capsys, trained.replace("262144", "1048576"))
    assert bigger["peak_bytes"] > sheet["peak_bytes"]
