"""Falcon-H1 (a Mamba-2 mixer beside attention in every layer): the parameter count equals what
transformers builds from the same config, whichever of the mixer's optional parts a config
turns on, and the estimate prices the chunked scan's activations, which dwarf Llama's at the
same sizes."""

from __future__ import annotations

import pytest

from memlint.estimate import Lora, TrainingSetup, estimate_training, from_config
from memlint.estimate.activations import profile

# Falcon-H1-0.5B's keys at smaller sizes (two layers, a 1,024-token vocabulary)
SMALL = {"architectures": ["FalconH1ForCausalLM"], "model_type": "falcon_h1", "attention_bias": False,
         "head_dim": 64, "hidden_act": "silu", "hidden_size": 256, "intermediate_size": 512,
         "mamba_chunk_size": 128, "mamba_conv_bias": True, "mamba_d_conv": 4, "mamba_d_head": 24,
         "mamba_d_ssm": 384, "mamba_d_state": 64, "mamba_expand": 2, "mamba_n_groups": 1, "mamba_n_heads": 16,
         "mamba_norm_before_gate": False, "mamba_proj_bias": False, "mamba_rms_norm": False,
         "mlp_bias": False, "num_attention_heads": 4, "num_hidden_layers": 2, "num_key_value_heads": 2,
         "projectors_bias": False, "vocab_size": 1024, "tie_word_embeddings": False}
VARIANTS = {
    "0.5b-shaped": SMALL,
    "gated-norm-biases-groups": {**SMALL, "mamba_rms_norm": True, "mamba_proj_bias": True,
                                 "projectors_bias": True, "attention_bias": True, "mlp_bias": True,
                                 "mamba_n_groups": 2, "mamba_conv_bias": False},
    # no mamba_d_ssm: FalconH1Config's default (1024 = 16 heads x 64)
    "tied-default-d-ssm": {**{k: v for k, v in SMALL.items() if k != "mamba_d_ssm"}, "tie_word_embeddings": True,
                           "mamba_d_head": 64},
}


def _transformers_count(config: dict) -> int:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    kwargs = {k: v for k, v in config.items() if k != "model_type"}
    hf = transformers.AutoConfig.for_model(config["model_type"], **kwargs)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(hf)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("config", VARIANTS.values(), ids=VARIANTS.keys())
def test_recipe_counts_what_transformers_builds(config):
    arch = from_config(config)
    assert arch.generic_note is None  # memlint's recipe, not the meta-device fallback
    assert arch.n_params == _transformers_count(config)


def test_the_chunked_scan_keeps_more_than_a_llama_block_of_the_same_sizes():
    hybrid = from_config(SMALL)
    llama = from_config({"model_type": "llama", "hidden_size": 256, "intermediate_size": 512,
                         "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
                         "num_hidden_layers": 2, "vocab_size": 1024})
    setup = TrainingSetup(micro_batch=2, seq_len=1024)
    assert profile(hybrid, setup).block_saved > 5 * profile(llama, setup).block_saved


def test_lora_on_attention_and_mlp_trains_less_and_keeps_less():
    arch = from_config(SMALL)
    full = estimate_training(arch, TrainingSetup(micro_batch=2, seq_len=1024))
    targets = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    lora = estimate_training(arch, TrainingSetup(micro_batch=2, seq_len=1024, lora=Lora(r=16, targets=targets)))
    assert lora.trainable_parameters < full.trainable_parameters / 10
    assert 0 < lora.peak_bytes < full.peak_bytes
