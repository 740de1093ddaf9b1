"""Vision-language (Qwen2.5-VL, Qwen3-VL) and BERT-like encoders (RoBERTa, DistilBERT): their
parameter counts match the published checkpoints, and LoRA reaches DistilBERT's own layer names."""

from __future__ import annotations

import pytest

from memlint.catalog.models import find_entry, resolve
from memlint.estimate import estimate_training, from_config, meta_count
from memlint.estimate.policy import Optimizer, Precision
from memlint.estimate.setup import Lora, TrainingSetup
from memlint.estimate.vision import tower


def test_qwen2_5_vl_7b_is_the_qwen2_5_7b_language_model_plus_its_vision_tower():
    entry = find_entry("Qwen/Qwen2.5-VL-7B-Instruct")
    arch = from_config(entry.config, entry.id)
    assert arch.n_params == entry.published_parameters == 8_292_166_656
    assert arch.n_params - arch.extra_params == from_config(find_entry("Qwen/Qwen2.5-7B").config).n_params
    vision = tower(entry.config)
    # the file lists hidden_size and the patch only: depth, widths and the merger come from defaults
    assert (vision.depth, vision.hidden_size, vision.intermediate_size, vision.merge) == (32, 1280, 3420, 4)
    assert arch.extra_params == vision.params


def test_a_nested_text_config_and_a_flat_one_give_the_same_model():
    flat = find_entry("Qwen/Qwen2.5-VL-7B-Instruct").config
    text_keys = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                 "num_key_value_heads", "vocab_size", "rms_norm_eps", "rope_theta")
    nested = {"model_type": "qwen2_5_vl", "tie_word_embeddings": False, "vision_config": flat["vision_config"],
              "text_config": {"model_type": "qwen2_5_vl_text", **{k: flat[k] for k in text_keys}}}
    assert from_config(nested).n_params == from_config(flat).n_params


def test_the_uploads_of_qwen2_5_vl_answer_with_it():
    assert resolve("unsloth/Qwen2.5-VL-7B-Instruct-bnb-4bit", offline=True).arch.n_params == 8_292_166_656


@pytest.mark.skipif(not meta_count.available(), reason="compares with transformers: needs the `trace` extra")
def test_qwen3_vl_counts_as_transformers_builds_it():
    import torch
    from transformers import AutoModelForImageTextToText, Qwen3VLConfig

    config = Qwen3VLConfig()  # transformers' own defaults: the Qwen3-VL-8B sizes of its docstring
    raw = {**config.to_dict(), "model_type": "qwen3_vl"}
    with torch.device("meta"):
        model = AutoModelForImageTextToText.from_config(config)
    assert from_config(raw).n_params == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize(("model_id", "published"), [
    ("FacebookAI/roberta-base", 124_697_433),
    ("distilbert/distilbert-base-uncased", 66_985_530),
    ("google/t5-v1_1-base", 247_500_000),
])
def test_encoders_have_a_recipe_and_the_published_size(model_id, published):
    entry = find_entry(model_id)
    arch = from_config(entry.config, model_id)
    assert arch.generic_note is None and not arch.is_causal_lm
    assert abs(arch.n_params / published - 1) < 0.005


def test_lora_on_distilbert_adapts_its_own_layer_names():
    arch = from_config(find_entry("distilbert-base-uncased").config)
    setup = TrainingSetup(micro_batch=16, seq_len=256, precision=Precision("bf16"), optimizer=Optimizer.parse("adamw"),
                          lora=Lora(r=8, targets=("q_lin", "v_lin"), alpha=16, dropout=0.1))
    budget = estimate_training(arch, setup)
    # two adapted 768x768 projections per block, A (r x 768) and B (768 x r) each
    assert budget.trainable_parameters == 6 * 2 * (8 * 768 + 768 * 8)
    full = estimate_training(arch, TrainingSetup(micro_batch=16, seq_len=256, precision=Precision("bf16"),
                                                 optimizer=Optimizer.parse("adamw")))
    assert budget.peak_bytes < full.peak_bytes


def test_image_tokens_add_the_vision_towers_activations_and_text_only_says_so():
    arch = from_config(find_entry("Qwen/Qwen2.5-VL-7B-Instruct").config)
    text = estimate_training(arch, TrainingSetup(micro_batch=2, seq_len=2048))
    assert any("text-only batches" in note for note in text.assumptions)
    images = estimate_training(arch, TrainingSetup(micro_batch=2, seq_len=2048, image_tokens=1024))
    double = estimate_training(arch, TrainingSetup(micro_batch=2, seq_len=2048, image_tokens=2048))
    forward = {p.name: p for p in text.phases}["forward"].bytes
    added = {p.name: p for p in images.phases}["forward"].bytes - forward
    # 1024 image tokens are 4096 patches of 1280 features through 32 blocks: tens of KB per
    # patch per block, linear in the patches
    per_patch_block = added / (2 * 4096 * 32)
    assert 20 * 1280 < per_patch_block < 60 * 1280, per_patch_block
    assert {p.name: p for p in double.phases}["forward"].bytes - forward == 2 * added
    # checkpointing keeps each block's input only; LoRA on the language model keeps nothing
    ckpt = estimate_training(arch, TrainingSetup(micro_batch=2, seq_len=2048, image_tokens=1024, grad_ckpt_every=1))
    plain_ckpt = estimate_training(arch, TrainingSetup(micro_batch=2, seq_len=2048, grad_ckpt_every=1))
    kept = {p.name: p for p in ckpt.phases}["forward"].bytes - {p.name: p for p in plain_ckpt.phases}["forward"].bytes
    # bf16 block inputs, plus what stays outside the blocks: the patch embedding's input (3 x 2 x 14 x 14
    # pixels) and the merger's norm, linear and GELU inputs (4 x 1280 per patch)
    assert kept == 2 * 4096 * (32 * 1280 * 2 + 1176 * 2 + 4 * 1280 * 2)
    lora = Lora(r=16, targets=("q_proj", "v_proj"))
    assert (estimate_training(arch, TrainingSetup(micro_batch=2, seq_len=2048, image_tokens=1024, lora=lora)).peak_bytes
            == estimate_training(arch, TrainingSetup(micro_batch=2, seq_len=2048, lora=lora)).peak_bytes)


def test_an_image_takes_the_tokens_the_qwen_processor_gives_it():
    from memlint.estimate.vision import MAX_PIXELS, image_grid, image_tokens

    q25 = find_entry("Qwen/Qwen2.5-VL-3B-Instruct").config  # 14-pixel patches, 2x2 merge: sides of 28
    q3 = find_entry("Qwen/Qwen3-VL-4B-Instruct").config  # 16-pixel patches: sides of 32
    assert image_grid(q25, 448, 448) == (32, 32) and image_tokens(q25, 448, 448) == 256
    assert image_grid(q3, 448, 448) == (28, 28) and image_tokens(q3, 448, 448) == 196
    assert image_grid(q25, 500, 300) == (36, 22)  # each side rounded to a multiple of 28
    rows, cols = image_grid(q25, 4000, 3000)  # scaled into the pixel budget, aspect kept
    assert rows * cols * 14 * 14 <= MAX_PIXELS and rows > cols


def _vl_setup(**kw):
    return TrainingSetup(micro_batch=2, seq_len=2048, precision=Precision("bf16"), optimizer=Optimizer.parse("adamw"),
                         **kw)


def test_lora_on_all_linear_layers_adapts_the_vision_tower_and_keeps_its_activations():
    from memlint.estimate.vision import tower_adapted, tower_lora_params

    entry = find_entry("Qwen/Qwen2.5-VL-3B-Instruct")
    arch = from_config(entry.config, entry.id)
    every, attention = Lora(r=16, targets=("all-linear",)), Lora(r=16, targets=("q_proj", "k_proj", "v_proj", "o_proj"))
    assert tower_adapted(arch, every) and not tower_adapted(arch, attention)
    # the tower's MLP is named like the language model's: gate/up/down_proj reach it
    assert tower_adapted(arch, Lora(r=16, targets=("gate_proj", "up_proj", "down_proj")))
    # 32 blocks of qkv (1280 -> 3840), proj (1280 -> 1280) and a 1280 -> 3420 SwiGLU MLP
    assert tower_lora_params(arch, every) == 32 * 16 * ((1280 + 3840) + 2 * 1280 + 2 * (1280 + 3420) + (3420 + 1280))
    text = estimate_training(arch, _vl_setup(lora=every))
    images = estimate_training(arch, _vl_setup(lora=every, image_tokens=512))
    assert images.peak_bytes > text.peak_bytes
    assert (estimate_training(arch, _vl_setup(lora=attention, image_tokens=512)).peak_bytes
            == estimate_training(arch, _vl_setup(lora=attention)).peak_bytes)


def test_a_frozen_vision_tower_trains_nothing_and_keeps_no_activations():
    entry = find_entry("Qwen/Qwen3-VL-4B-Instruct")
    arch = from_config(entry.config, entry.id)
    trained = estimate_training(arch, _vl_setup(image_tokens=512))
    frozen = estimate_training(arch, _vl_setup(image_tokens=512, freeze_vision_tower=True))
    assert frozen.trainable_parameters == trained.trainable_parameters - arch.extra_params
    assert frozen.peak_bytes == estimate_training(arch, _vl_setup(freeze_vision_tower=True)).peak_bytes
    assert any("vision tower is frozen" in note for note in frozen.assumptions)
