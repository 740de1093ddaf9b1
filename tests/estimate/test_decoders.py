"""DeepSeek-V2/V3, GLM/GLM-4, StarCoder2 and Llama-4's language model: parameter counts equal what transformers builds from
the same config, the published DeepSeek-V2-Lite count is met, and the estimate prices full
fine-tuning and LoRA with the families' own block recipes."""

from __future__ import annotations

import pytest

from memlint.catalog.models import find_entry, resolve
from memlint.estimate import Lora, TrainingSetup, UnsupportedArchitecture, estimate_training, from_config
from memlint.estimate.activations import profile
from memlint.estimate.serving import kv_bytes_per_sequence

# Small configs with the keys the published config.json files carry (smaller sizes).
_DEEPSEEK = {"architectures": ["DeepseekV2ForCausalLM"], "hidden_size": 256, "intermediate_size": 640,
             "moe_intermediate_size": 96, "num_hidden_layers": 3, "num_attention_heads": 4,
             "num_key_value_heads": 4, "vocab_size": 1024, "kv_lora_rank": 64, "qk_nope_head_dim": 32,
             "qk_rope_head_dim": 16, "v_head_dim": 32, "n_routed_experts": 8, "n_shared_experts": 2,
             "num_experts_per_tok": 2, "first_k_dense_replace": 1, "tie_word_embeddings": False}
DEEPSEEK_V2_LITE_SHAPED = {**_DEEPSEEK, "model_type": "deepseek_v2", "q_lora_rank": None}
DEEPSEEK_V2_SHAPED = {**_DEEPSEEK, "model_type": "deepseek_v2", "q_lora_rank": 48}
DEEPSEEK_V3_SHAPED = {**_DEEPSEEK, "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
                      "q_lora_rank": 48, "n_group": 2, "topk_group": 1, "n_shared_experts": 1}
_GLM = {"hidden_size": 256, "intermediate_size": 640, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 1024, "partial_rotary_factor": 0.5,
        "pad_token_id": 0, "tie_word_embeddings": False}
GLM = {**_GLM, "architectures": ["GlmForCausalLM"], "model_type": "glm"}
GLM4 = {**_GLM, "architectures": ["Glm4ForCausalLM"], "model_type": "glm4"}
STARCODER2 = {"architectures": ["Starcoder2ForCausalLM"], "model_type": "starcoder2", "hidden_size": 256,
              "intermediate_size": 1024, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "vocab_size": 1024, "sliding_window": 4096, "use_bias": True,
              "bos_token_id": 0, "eos_token_id": 0, "residual_dropout": 0.1, "embedding_dropout": 0.1,
              "attention_dropout": 0.1}
_LLAMA4 = {"architectures": ["Llama4ForCausalLM"], "model_type": "llama4_text", "hidden_size": 256,
           "intermediate_size": 320, "intermediate_size_mlp": 640, "num_hidden_layers": 4,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 1024,
           "num_local_experts": 4, "num_experts_per_tok": 1, "pad_token_id": 0, "bos_token_id": 0,
           "eos_token_id": 0}
LLAMA4_SCOUT_SHAPED = {**_LLAMA4, "interleave_moe_layer_step": 1}  # every layer sparse
LLAMA4_MAVERICK_SHAPED = {**_LLAMA4, "interleave_moe_layer_step": 2}  # dense and sparse in turn
CONFIGS = {"deepseek_v2_lite": DEEPSEEK_V2_LITE_SHAPED, "deepseek_v2": DEEPSEEK_V2_SHAPED,
           "deepseek_v3": DEEPSEEK_V3_SHAPED, "glm": GLM, "glm4": GLM4, "starcoder2": STARCODER2,
           "llama4_scout": LLAMA4_SCOUT_SHAPED, "llama4_maverick": LLAMA4_MAVERICK_SHAPED}


def _transformers_count(config: dict) -> int:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    kwargs = {k: v for k, v in config.items() if k != "model_type"}
    hf = transformers.AutoConfig.for_model(config["model_type"], **kwargs)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(hf)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
def test_recipe_counts_what_transformers_builds(config):
    arch = from_config(config)
    assert arch.generic_note is None  # a recipe of memlint's, not the meta-device fallback
    assert arch.n_params == _transformers_count(config)


def test_deepseek_v2_lite_matches_its_published_count():
    entry = find_entry("deepseek-ai/DeepSeek-V2-Lite")
    arch = from_config(entry.config, entry.id)
    assert arch.n_params == entry.published_parameters == 15_706_484_224
    assert arch.family == "deepseek" and arch.num_experts == 64 and arch.experts_per_token == 6
    # the first layer is dense, the other 26 carry the experts
    assert [g.count for g in arch.blocks] == [1, 26]
    names = [lin.name for lin in arch.blocks[1].linears]
    assert names[:4] == ["q_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"]
    assert "experts.gate_up_proj" in names and "shared_experts.down_proj" in names
    # the chat model is the same architecture, by the variant rules (-Chat)
    assert resolve("deepseek-ai/DeepSeek-V2-Lite-Chat").arch.n_params == arch.n_params


def test_deepseek_kv_cache_holds_the_compressed_latent():
    """transformers caches kv_lora_rank + qk_rope_head_dim values a token and layer (512 + 64 for
    V2-Lite), whatever the number of heads."""
    arch = resolve("deepseek-ai/DeepSeek-V2-Lite").arch
    per_token_layer = kv_bytes_per_sequence(arch, 1, "bf16") / arch.num_layers
    assert per_token_layer == (512 + 64) * 2


@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
def test_full_fine_tune_and_lora_estimates(config):
    arch = from_config(config)
    full = estimate_training(arch, TrainingSetup(micro_batch=2, seq_len=1024))
    lora = estimate_training(arch, TrainingSetup(micro_batch=2, seq_len=1024,
                                                 lora=Lora(r=8, targets=("q_proj", "o_proj"))))
    assert 0 < lora.peak_bytes < full.peak_bytes
    assert full.peak_bytes >= 8 * arch.n_params  # bf16 weights, gradients and two AdamW moments


def test_glm4_post_norms_and_starcoder2_dropout_cost_activations():
    setup = TrainingSetup(micro_batch=2, seq_len=1024)
    saved = lambda config: profile(from_config(config), setup)  # noqa: E731
    # GLM-4's two more RMSNorms a layer save their fp32 inputs
    assert saved(GLM4).block_saved > saved(GLM).block_saved
    quiet = {**STARCODER2, "residual_dropout": 0.0, "embedding_dropout": 0.0, "attention_dropout": 0.0}
    assert saved(STARCODER2).block_saved > saved(quiet).block_saved  # the residual dropout masks
    assert saved(STARCODER2).base_saved > saved(quiet).base_saved  # the embedding dropout mask


def test_deepseek_config_without_experts_per_token_is_refused():
    config = {k: v for k, v in DEEPSEEK_V2_LITE_SHAPED.items() if k != "num_experts_per_tok"}
    with pytest.raises(UnsupportedArchitecture, match="num_experts_per_tok"):
        from_config(config)


def test_llama4_prices_interleaved_layers_by_their_share():
    """Every token goes through every expert in transformers' Llama-4 MoE, so a sparse layer
    saves far more than a dense one; interleaving halves the sparse layers."""
    setup = TrainingSetup(micro_batch=1, seq_len=512)
    scout = from_config(LLAMA4_SCOUT_SHAPED)
    maverick = from_config(LLAMA4_MAVERICK_SHAPED)
    assert [g.count for g in maverick.blocks] == [2, 2]
    dense = from_config({**_LLAMA4, "moe_layers": []})
    assert [g.count for g in dense.blocks] == [4]
    saved = [profile(a, setup).block_saved for a in (scout, maverick, dense)]
    assert saved[0] > saved[1] > saved[2]
    assert saved[1] == pytest.approx((saved[0] + saved[2]) / 2)
