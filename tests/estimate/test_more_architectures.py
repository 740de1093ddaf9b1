"""Recipes close to Llama (OLMo-2, SmolLM3, Granite, InternLM2) and the meta-device count for an
architecture with no recipe: parameter counts equal what transformers builds, and the estimate
runs full fine-tuning and LoRA on them."""

from __future__ import annotations

import pytest

from memlint.catalog.models import find_entry, resolve
from memlint.estimate import Lora, TrainingSetup, UnsupportedArchitecture, estimate_training, from_config

# Small configs shaped like the published ones (same keys, smaller sizes).
OLMO2 = {"architectures": ["Olmo2ForCausalLM"], "attention_bias": False, "hidden_act": "silu", "hidden_size": 256,
         "intermediate_size": 688, "max_position_embeddings": 4096, "model_type": "olmo2",
         "num_attention_heads": 8, "num_hidden_layers": 2, "num_key_value_heads": 4, "rms_norm_eps": 1e-06,
         "rope_theta": 500000, "tie_word_embeddings": False, "vocab_size": 1024}
SMOLLM3 = {"architectures": ["SmolLM3ForCausalLM"], "attention_bias": False, "hidden_act": "silu",
           "hidden_size": 256, "intermediate_size": 688, "model_type": "smollm3", "num_attention_heads": 8,
           "num_hidden_layers": 4, "num_key_value_heads": 2, "no_rope_layer_interval": 4,
           "no_rope_layers": [1, 1, 1, 0], "pad_token_id": 1, "vocab_size": 1024}  # tie left to the default
GRANITE = {"architectures": ["GraniteForCausalLM"], "attention_multiplier": 0.0078125, "embedding_multiplier": 12.0,
           "hidden_act": "silu", "hidden_size": 256, "intermediate_size": 640, "logits_scaling": 16.0,
           "model_type": "granite", "num_attention_heads": 8, "num_hidden_layers": 2, "num_key_value_heads": 2,
           "residual_multiplier": 0.22, "tie_word_embeddings": True, "vocab_size": 1024}


def _transformers_count(config: dict) -> int:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    kwargs = {k: v for k, v in config.items() if k != "model_type"}
    hf = transformers.AutoConfig.for_model(config["model_type"], **kwargs)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(hf)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("config", [OLMO2, SMOLLM3, GRANITE], ids=["olmo2", "smollm3", "granite"])
def test_recipe_counts_what_transformers_builds(config):
    arch = from_config(config)
    assert arch.generic_note is None  # a recipe of memlint's, not the meta-device fallback
    assert arch.n_params == _transformers_count(config)


def test_internlm2_matches_its_published_count_and_names_its_fused_layers():
    entry = find_entry("internlm/internlm2_5-7b-chat")
    arch = from_config(entry.config, entry.id)
    assert abs(arch.n_params / entry.published_parameters - 1) < 0.0005
    assert [lin.name for lin in arch.blocks[0].linears] == ["wqkv", "wo", "w1", "w3", "w2"]
    # the base model is the same architecture, by the variant rules (-chat)
    assert resolve("internlm/internlm2_5-7b").arch.n_params == arch.n_params


@pytest.mark.parametrize("model", ["allenai/OLMo-2-1124-7B", "internlm/internlm2_5-7b-chat"])
def test_full_fine_tune_and_lora_estimates(model):
    arch = resolve(model).arch
    full = estimate_training(arch, TrainingSetup(micro_batch=1, seq_len=2048))
    targets = ("wqkv", "wo") if arch.family == "internlm2" else ("q_proj", "v_proj")
    lora = estimate_training(arch, TrainingSetup(micro_batch=1, seq_len=2048, lora=Lora(r=16, targets=targets)))
    assert 0 < lora.peak_bytes < full.peak_bytes
    # full bf16 fine-tuning with AdamW holds at least weights, gradients and two moments
    assert full.peak_bytes > arch.n_params * (2 + 2 + 2 + 2)


def test_internlm2_runs_the_eager_attention_its_config_names():
    arch = resolve("internlm/internlm2_5-7b-chat").arch
    budget = estimate_training(arch, TrainingSetup(micro_batch=1, seq_len=1024))
    assert any("InternLM2" in note for note in budget.assumptions)


def test_no_recipe_is_counted_on_the_meta_device_and_says_so():
    pytest.importorskip("transformers")
    # XLM-RoBERTa (RoBERTa's recipe is not applied to another model_type)
    roberta = {"architectures": ["XLMRobertaForMaskedLM"], "attention_probs_dropout_prob": 0.1, "hidden_act": "gelu",
               "hidden_size": 128, "intermediate_size": 512, "max_position_embeddings": 130,
               "model_type": "xlm-roberta", "num_attention_heads": 4, "num_hidden_layers": 2, "pad_token_id": 1,
               "type_vocab_size": 1, "vocab_size": 1000}
    arch = from_config(roberta, "acme/tiny-xlm-roberta")
    torch = pytest.importorskip("torch")
    import transformers

    hf = transformers.AutoConfig.for_model("xlm-roberta", **{k: v for k, v in roberta.items() if k != "model_type"})
    with torch.device("meta"):
        expected = sum(p.numel() for p in transformers.AutoModelForMaskedLM.from_config(hf).parameters())
    assert arch.n_params == expected
    assert arch.num_layers == 2 and any(lin.name.endswith("query") for lin in arch.blocks[0].linears)
    assert "no memlint recipe for model_type 'xlm-roberta'" in arch.generic_note and "memlint trace" in arch.generic_note
    full = estimate_training(arch, TrainingSetup(micro_batch=2, seq_len=128))
    assert full.peak_bytes > expected * 16


def test_remote_code_architectures_are_refused_not_run(tmp_path):
    pytest.importorskip("transformers")
    config = {"architectures": ["AcmeForCausalLM"], "model_type": "acme_private_arch", "hidden_size": 64,
              "auto_map": {"AutoModelForCausalLM": "modeling_acme.AcmeForCausalLM"}}
    (tmp_path / "modeling_acme.py").write_text("raise SystemExit('remote code must never run')\n")
    with pytest.raises(UnsupportedArchitecture, match="acme_private_arch") as refused:
        from_config(config)
    # why (its own modelling code, never run) and what to do, without transformers' list of every
    # model type it knows
    message = str(refused.value)
    assert "`modeling_acme.AcmeForCausalLM`" in message and "trust_remote_code" in message
    assert "`model-config`" in message and "gpt2" not in message and len(message) < 400


def test_a_hub_remote_code_model_is_refused_with_its_own_class():
    """cerebras/btlm-3b-8k-base (axolotl's examples): its config.json names model_type btlm and
    the checkpoint's modelling code, referred to by repository (``org/name--module.Class``)."""
    pytest.importorskip("transformers")
    config = {"architectures": ["BTLMLMHeadModel"], "model_type": "btlm", "n_embd": 2560, "n_layer": 32,
              "n_head": 32, "n_inner": 6826, "vocab_size": 50257, "position_embedding_type": "alibi",
              "auto_map": {"AutoConfig": "cerebras/btlm-3b-8k-base--configuration_btlm.BTLMConfig",
                           "AutoModelForCausalLM": "cerebras/btlm-3b-8k-base--modeling_btlm.BTLMLMHeadModel"}}
    with pytest.raises(UnsupportedArchitecture, match="model_type 'btlm' has no memlint recipe") as refused:
        from_config(config, "cerebras/btlm-3b-8k-base")
    assert "`modeling_btlm.BTLMLMHeadModel`" in str(refused.value)


def test_a_vision_language_model_without_a_recipe_counts_its_vision_tower():
    """Mllama (Llama 3.2 Vision): transformers maps the config to a text-only causal LM too; the
    catalogue's published total includes the vision encoder, and the repeated layers are the
    decoder's 40 (self- and cross-attention mixed), not the vision encoder's 32."""
    pytest.importorskip("transformers")
    entry = find_entry("meta-llama/Llama-3.2-11B-Vision-Instruct")
    arch = from_config(entry.config, entry.id)
    assert arch.n_params == entry.published_parameters == 10_670_220_835
    assert arch.num_layers == 40 and arch.hidden_size == 4096
    assert "no memlint recipe for model_type 'mllama'" in arch.generic_note
    lora = estimate_training(arch, TrainingSetup(micro_batch=1, seq_len=1024, lora=Lora(r=16)))
    assert 0 < lora.trainable_parameters < arch.n_params // 100


def test_a_timm_vision_tower_is_added_from_its_stored_count():
    """Gemma 3n (axolotl's and LLaMA-Factory's gemma-3n-E2B-it examples): transformers builds its
    MobileNetV5 vision tower with timm, which memlint does not install. The rest is built on the
    meta device and the tower's stored timm count added: the total equals what transformers
    counted for the catalogue's config in an environment that had timm."""
    pytest.importorskip("transformers")
    from memlint.estimate import meta_count

    entry = find_entry("google/gemma-3n-E2B-it")
    arch = meta_count.from_meta(entry.config, entry.id)  # counted live, not the stored row
    assert arch.n_params == 5_418_464_192
    assert arch.num_layers == 30 and arch.hidden_size == 2048 and arch.intermediate_size == 8192
    # the stand-in is gone once the model is built
    import transformers

    assert transformers.AutoModel.from_config.__func__.__name__ == "from_config"
    assert not isinstance(transformers.AutoModel.__dict__["from_config"], staticmethod)


def test_an_uncounted_timm_tower_is_refused_with_what_to_do():
    pytest.importorskip("transformers")
    entry = find_entry("google/gemma-3n-E2B-it")
    config = {**entry.config, "vision_config": {**entry.config["vision_config"], "architecture": "mobilenetv5_900m_enc"}}
    with pytest.raises(UnsupportedArchitecture, match="timm model 'mobilenetv5_900m_enc'") as refused:
        from_config(config, "acme/gemma-3n-bigger-eyes")
    assert "`model-config`" in str(refused.value)
