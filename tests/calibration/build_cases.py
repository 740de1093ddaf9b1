#!/usr/bin/env python
"""Write ``tests/calibration/cases.json``: the calibration suite measured by ``memlint.trace``.

Model configs (the ``models`` table, keyed by Hugging Face Hub id) are the models' published
``config.json`` values. They are taken, in this order, from:

1. memlint's model catalogue, ``memlint/catalog/models/<org>--<name>.json`` (its ``"config"``);
2. the ground-truth oracle's ``shared/oracle/cases.json`` (same published numbers);
3. the transcriptions in ``TRANSCRIBED`` below, each with the public copy of the config it was
   copied from (``model_sources`` in the output says which source each model used).

Run from the repository root:  python tests/calibration/build_cases.py
"""

from __future__ import annotations

import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CATALOG = os.path.join(ROOT, "memlint", "catalog", "models")
ORACLE = os.path.join(os.path.dirname(ROOT), "shared", "oracle", "cases.json")
OUT = os.path.join(ROOT, "tests", "calibration", "cases.json")

# Hub id -> name in the oracle's models table
ORACLE_NAMES = {
    "openai-community/gpt2": "gpt2",
    "openai-community/gpt2-medium": "gpt2-medium",
    "openai-community/gpt2-xl": "gpt2-xl",
    "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T": "tinyllama-1.1b",
    "Qwen/Qwen2.5-0.5B": "qwen2.5-0.5b",
    "Qwen/Qwen2.5-1.5B": "qwen2.5-1.5b",
    "Qwen/Qwen2.5-7B": "qwen2.5-7b",
    "meta-llama/Llama-3.2-1B": "llama-3.2-1b",
    "meta-llama/Llama-2-7b-hf": "llama-2-7b",
    "meta-llama/Meta-Llama-3-8B": "llama-3-8b",
    "mistralai/Mistral-7B-v0.1": "mistral-7b-v0.1",
    "microsoft/phi-2": "phi-2",
}

# Published config.json values copied from public copies of the files (the source is named);
# only used when the catalogue has no entry for the model.
TRANSCRIBED: dict[str, tuple[str, dict]] = {
    "google/gemma-2b": (
        "Gemma 2B config table in UbiquitousLearning/mllm src/models/gemma/README.md",
        {"model_type": "gemma", "vocab_size": 256000, "max_position_embeddings": 8192, "num_hidden_layers": 18,
         "num_attention_heads": 8, "num_key_value_heads": 1, "hidden_size": 2048, "intermediate_size": 16384,
         "head_dim": 256, "rms_norm_eps": 1e-6},
    ),
    "google/gemma-2-9b": (
        "google/gemma-2-9b config.json as copied in a public benchmark script (KNOWN_GOOD_CONFIGS)",
        {"model_type": "gemma2", "attention_bias": False, "attention_dropout": 0.0, "head_dim": 256,
         "hidden_act": "gelu_pytorch_tanh", "hidden_size": 3584, "intermediate_size": 14336,
         "max_position_embeddings": 8192, "num_attention_heads": 16, "num_hidden_layers": 42,
         "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "vocab_size": 256000},
    ),
    "microsoft/Phi-3-mini-4k-instruct": (
        "microsoft/Phi-3-mini-4k-instruct config.json as copied in a public benchmark script",
        {"model_type": "phi3", "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 32000,
         "hidden_act": "silu", "hidden_size": 3072, "intermediate_size": 8192, "max_position_embeddings": 4096,
         "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32, "rms_norm_eps": 1e-05,
         "rope_scaling": None, "tie_word_embeddings": False, "vocab_size": 32064},
    ),
    "Qwen/Qwen3-8B": (
        "Qwen3-8B config.json fields as written in a public slime LoRA test (hf config for Qwen3-8B)",
        {"model_type": "qwen3", "hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36,
         "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 131072,
         "vocab_size": 151936, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": False},
    ),
    "tiiuae/falcon-7b": (
        "tiiuae/falcon-7b-instruct config.json (same architecture as falcon-7b) as copied in a public script",
        {"model_type": "falcon", "alibi": False, "apply_residual_connection_post_layernorm": False,
         "attention_dropout": 0.0, "bias": False, "bos_token_id": 11, "eos_token_id": 11, "hidden_dropout": 0.0,
         "hidden_size": 4544, "layer_norm_epsilon": 1e-05, "multi_query": True, "new_decoder_architecture": False,
         "num_attention_heads": 71, "num_hidden_layers": 32, "num_kv_heads": 71, "parallel_attn": True,
         "vocab_size": 65024},
    ),
    "EleutherAI/gpt-neox-20b": (
        "EleutherAI/gpt-neox-20b config fields as copied in a public test suite (GPT_NEOX_CONFIG)",
        {"model_type": "gpt_neox", "vocab_size": 50432, "hidden_size": 6144, "intermediate_size": 24576,
         "num_hidden_layers": 44, "num_attention_heads": 64, "max_position_embeddings": 2048,
         "tie_word_embeddings": False, "hidden_act": "gelu", "use_parallel_residual": True},
    ),
    "facebook/opt-2.7b": (
        "facebook/opt-2.7b config fields as copied in a public test suite (opt_cfg)",
        {"model_type": "opt", "vocab_size": 50272, "hidden_size": 2560, "num_hidden_layers": 32,
         "num_attention_heads": 32, "ffn_dim": 10240, "max_position_embeddings": 2048},
    ),
    "Qwen/Qwen1.5-MoE-A2.7B": (
        "Qwen/Qwen1.5-MoE-A2.7B-Chat-GPTQ-Int4 config.json (same architecture; quantization_config dropped)",
        {"model_type": "qwen2_moe", "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151645,
         "decoder_sparse_step": 1, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
         "intermediate_size": 5632, "max_position_embeddings": 32768, "max_window_layers": 21,
         "moe_intermediate_size": 1408, "norm_topk_prob": False, "num_attention_heads": 16, "num_experts": 60,
         "num_experts_per_tok": 4, "num_hidden_layers": 24, "num_key_value_heads": 16,
         "output_router_logits": False, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
         "router_aux_loss_coef": 0.001, "shared_expert_intermediate_size": 5632, "sliding_window": 32768,
         "tie_word_embeddings": False, "use_sliding_window": False, "vocab_size": 151936},
    ),
    "zai-org/GLM-4-9B-0414": (
        "a Glm4ForCausalLM fine-tune's re-save with GLM-4-9B-0414's sizes "
        "(https://huggingface.co/ccui46/hazardworld_per_chunk_act_glm_tokfix_diffPrompt_2000/blob/main/config.json; "
        "dtype, transformers_version and use_cache dropped)",
        {"model_type": "glm4", "architectures": ["Glm4ForCausalLM"], "attention_bias": True, "attention_dropout": 0.0,
         "eos_token_id": 151329, "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096,
         "initializer_range": 0.02, "intermediate_size": 13696, "max_position_embeddings": 32768,
         "num_attention_heads": 32, "num_hidden_layers": 40, "num_key_value_heads": 2, "pad_token_id": 151329,
         "partial_rotary_factor": 0.5, "rms_norm_eps": 1e-05,
         "rope_parameters": {"partial_rotary_factor": 0.5, "rope_theta": 10000.0, "rope_type": "default"},
         "tie_word_embeddings": False, "vocab_size": 151552},
    ),
    "meta-llama/Llama-4-Scout-17B-16E (text model)": (
        "the Scout text model's sizes as transformers 5.23's Llama4TextConfig defaults "
        "(transformers/models/llama4/configuration_llama4.py; no copy of the gated Hub file was found): "
        "48 layers, 16 experts, 107,769,861,120 parameters without the vision tower",
        {"model_type": "llama4_text", "architectures": ["Llama4ForCausalLM"], "hidden_size": 5120,
         "intermediate_size": 8192, "intermediate_size_mlp": 16384, "num_hidden_layers": 48,
         "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 202048,
         "num_local_experts": 16, "num_experts_per_tok": 1, "interleave_moe_layer_step": 1,
         "use_qk_norm": True, "no_rope_layer_interval": 4, "attention_chunk_size": 8192,
         "attn_temperature_tuning": True, "tie_word_embeddings": False},
    ),
}

TRANSCRIBED["tiiuae/Falcon-H1-0.5B (layer sizes)"] = (
    "Falcon-H1-0.5B's layer sizes: the transformers docs' FalconH1Config table (H1 0.5B: 36 layers, "
    "dim 1024, 8 attention heads, 2 KV, 24 Mamba heads, d_head 64/64, d_state 128, "
    "https://huggingface.co/docs/transformers/model_doc/falcon_h1) and the rest of the architecture keys "
    "of a FalconH1ForCausalLM re-save with those sizes "
    "(https://huggingface.co/MerlinSafety/HybridIntelligence-0.5B/blob/main/config.json); vocab_size, "
    "which no copy read showed, is FalconH1Config's default (128000), so the logits are not the model's",
    {"model_type": "falcon_h1", "architectures": ["FalconH1ForCausalLM"], "attention_bias": False,
     "attention_dropout": 0.0, "attention_in_multiplier": 1.0, "attention_out_multiplier": 0.9375,
     "head_dim": 64, "hidden_act": "silu", "hidden_size": 1024, "intermediate_size": 2048,
     "key_multiplier": 0.39062499999999994, "lm_head_multiplier": 0.0390625, "mamba_chunk_size": 128,
     "mamba_conv_bias": True, "mamba_d_conv": 4, "mamba_d_head": 64, "mamba_d_ssm": 1536, "mamba_d_state": 128,
     "mamba_expand": 2, "mamba_n_groups": 1, "mamba_n_heads": 24, "mamba_norm_before_gate": False,
     "mamba_proj_bias": False, "mamba_rms_norm": False, "mamba_use_mlp": True, "max_position_embeddings": 16384,
     "mlp_bias": False, "mlp_expansion_factor": 8, "mlp_multipliers": [0.8838834764831844, 0.5859375],
     "num_attention_heads": 8, "num_hidden_layers": 36, "num_key_value_heads": 2, "projectors_bias": False,
     "rms_norm_eps": 1e-05},
)

SHORT = {
    "openai-community/gpt2": "gpt2", "openai-community/gpt2-medium": "gpt2medium", "openai-community/gpt2-xl": "gpt2xl",
    "TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T": "tinyllama", "Qwen/Qwen2.5-0.5B": "qwen2.5-0.5b",
    "Qwen/Qwen2.5-1.5B": "qwen2.5-1.5b", "Qwen/Qwen2.5-7B": "qwen2.5-7b", "meta-llama/Llama-3.2-1B": "llama3.2-1b",
    "meta-llama/Llama-2-7b-hf": "llama2-7b", "meta-llama/Meta-Llama-3-8B": "llama3-8b",
    "mistralai/Mistral-7B-v0.1": "mistral7b", "microsoft/phi-2": "phi2", "google/gemma-2b": "gemma-2b",
    "google/gemma-2-9b": "gemma2-9b", "microsoft/Phi-3-mini-4k-instruct": "phi3-mini", "Qwen/Qwen3-8B": "qwen3-8b",
    "tiiuae/falcon-7b": "falcon7b", "EleutherAI/gpt-neox-20b": "neox20b", "facebook/opt-2.7b": "opt2.7b",
    "Qwen/Qwen1.5-MoE-A2.7B": "qwen1.5moe",
    "google-bert/bert-base-uncased": "bert-base", "FacebookAI/roberta-base": "roberta-base",
    "distilbert/distilbert-base-uncased": "distilbert",
    "deepseek-ai/DeepSeek-V2-Lite": "dsv2lite", "zai-org/GLM-4-9B-0414": "glm4-9b",
    "bigcode/starcoder2-3b": "starcoder2-3b", "deepseek-ai/DeepSeek-V3": "dsv3", "meta-llama/Llama-4-Scout-17B-16E (text model)": "llama4-scout",
    "tiiuae/Falcon-H1-0.5B (layer sizes)": "falcon-h1-0.5b",
    "Qwen/Qwen2.5-VL-3B-Instruct": "qwen2.5vl-3b", "Qwen/Qwen3-VL-4B-Instruct": "qwen3vl-4b",
    "google-t5/t5-small": "t5-small", "google-t5/t5-base": "t5-base", "google/flan-t5-base": "flan-t5-base",
}

ALL_LINEAR = "all-linear"


def lora(r: int, targets: object = ALL_LINEAR) -> dict:
    return {"r": r, "alpha": 2 * r, "dropout": 0.05, "target_modules": targets}


def image(per_sequence: int, side: int) -> dict:
    """``per_sequence`` square images of ``side`` pixels in every sequence."""
    return {"per_sequence": per_sequence, "height": side, "width": side}


def oft(block_size: int, targets: object = ALL_LINEAR) -> dict:
    """PEFT OFT as LLaMA-Factory's ``finetuning_type: oft`` sets it up (``oft_block_size``, ``oft_rank: 0``)."""
    return {"r": 0, "method": "oft", "block_size": block_size, "dropout": 0.0, "target_modules": targets}


QV = ["q_proj", "v_proj"]
ATTN = ["q_proj", "k_proj", "v_proj", "o_proj"]
MLA = ["q_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"]  # DeepSeek-V2's attention projections
MLA_Q = ["q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj"]  # V3: low-rank queries


# (model, batch, seq, precision, optimizer, grad_ckpt, extra)
def case_rows() -> list[tuple]:
    G2, G2M, G2XL = "openai-community/gpt2", "openai-community/gpt2-medium", "openai-community/gpt2-xl"
    TL, L32, L2, L3 = ("TinyLlama/TinyLlama-1.1B-intermediate-step-1431k-3T", "meta-llama/Llama-3.2-1B",
                       "meta-llama/Llama-2-7b-hf", "meta-llama/Meta-Llama-3-8B")
    MI, P2, P3 = "mistralai/Mistral-7B-v0.1", "microsoft/phi-2", "microsoft/Phi-3-mini-4k-instruct"
    BERT, ROB, DB = ("google-bert/bert-base-uncased", "FacebookAI/roberta-base", "distilbert/distilbert-base-uncased")
    Q05, Q15, Q7, Q3 = "Qwen/Qwen2.5-0.5B", "Qwen/Qwen2.5-1.5B", "Qwen/Qwen2.5-7B", "Qwen/Qwen3-8B"
    GE, GE2 = "google/gemma-2b", "google/gemma-2-9b"
    FA, NX, OPT, MOE = "tiiuae/falcon-7b", "EleutherAI/gpt-neox-20b", "facebook/opt-2.7b", "Qwen/Qwen1.5-MoE-A2.7B"
    DSL, G4, SC2 = "deepseek-ai/DeepSeek-V2-Lite", "zai-org/GLM-4-9B-0414", "bigcode/starcoder2-3b"
    L4 = "meta-llama/Llama-4-Scout-17B-16E (text model)"
    DV3 = "deepseek-ai/DeepSeek-V3"
    T5S, T5B, FT5B = "google-t5/t5-small", "google-t5/t5-base", "google/flan-t5-base"
    FH1 = "tiiuae/Falcon-H1-0.5B (layer sizes)"
    Q25VL, Q3VL = "Qwen/Qwen2.5-VL-3B-Instruct", "Qwen/Qwen3-VL-4B-Instruct"
    rows = [
        # --- GPT-2 (learned positions, LayerNorm, GELU, attention dropout) ---
        (G2, 8, 1024, "fp32", "adamw", False, {}),
        (G2, 8, 1024, "fp16", "adamw", False, {}),
        (G2, 8, 1024, "amp-fp16", "adam", True, {}),
        (G2, 16, 512, "fp32", "sgd", False, {"attn": "eager"}),
        (G2M, 8, 1024, "bf16", "adafactor", False, {}),
        (G2XL, 2, 1024, "amp-bf16", "sgd-momentum", True, {}),
        # --- every precision x checkpointing on one model (Llama-3.2-1B, b4 s2048) ---
        *[(L32, 4, 2048, p, "adamw", gc, {}) for p in ("fp32", "bf16", "fp16", "amp-bf16", "amp-fp16")
          for gc in (False, True)],
        # --- a vision-language model's alignment stage: the model frozen, a two-layer MLP of its width
        # trains between the embedding and the first block (memlint.trace.build._train_a_projector) ---
        (L32, 4, 2048, "bf16", "adamw", True, {"projector": True}),
        (Q05, 4, 2048, "bf16", "adamw", False, {"projector": True}),
        (TL, 4, 1024, "amp-bf16", "adamw", False, {"projector": True}),
        # --- OFT adapters (LLaMA-Factory's examples/extras/oft: blocks of 32 on every linear) ---
        (L32, 4, 2048, "bf16", "adamw", True, {"lora": oft(32)}),
        (L32, 2, 2048, "bf16", "adamw", False, {"lora": oft(32)}),
        # --- Llama family ---
        (TL, 4, 2048, "bf16", "adamw", False, {}),
        (TL, 4, 2048, "amp-fp16", "adamw-fused", False, {}),
        (TL, 16, 512, "bf16", "sgd", False, {"attn": "eager"}),
        (TL, 8, 1024, "bf16", "adamw", False, {"world_size": 4, "sharding": "fsdp-full"}),
        (L32, 2, 8192, "bf16", "adam", True, {}),
        (L32, 4, 1024, "fp32", "adamw", False, {"lora": lora(16)}),
        (L2, 1, 2048, "bf16", "adamw", False, {}),
        (L2, 1, 2048, "bf16", "adamw-8bit", True, {}),
        (L2, 1, 2048, "bf16", "adamw-forloop", True, {}),
        (L2, 4, 2048, "bf16", "adamw", True, {"qlora": lora(16)}),
        # QLoRA under autocast (--bf16 with fp32 norms and embeddings): the 4-bit linears get no weight copy
        (L2, 1, 1024, "amp-bf16", "adamw", True, {"qlora": lora(16)}),
        (Q05, 4, 2048, "amp-bf16", "adamw", False, {"qlora": lora(16)}),
        (L2, 1, 2048, "amp-bf16", "adamw", True, {"world_size": 2, "sharding": "fsdp-full"}),
        (L3, 1, 4096, "bf16", "adafactor", True, {}),
        (L3, 1, 8192, "bf16", "adamw", True, {"qlora": lora(64)}),
        (L3, 2, 4096, "bf16", "adamw", True, {"world_size": 8, "sharding": "fsdp-full"}),
        # --- Mistral ---
        (MI, 1, 8192, "bf16", "adamw-fused", True, {}),
        (MI, 2, 4096, "bf16", "adamw", True, {"lora": lora(16, QV)}),
        (MI, 1, 4096, "bf16", "adamw-fused", True, {"world_size": 4, "sharding": "fsdp-full"}),
        # --- Qwen2 / Qwen2.5 ---
        (Q05, 16, 1024, "bf16", "adamw", True, {}),
        (Q05, 4, 4096, "amp-bf16", "adamw-fused", False, {}),
        (Q05, 8, 2048, "fp32", "sgd", False, {"attn": "eager"}),
        (Q15, 4, 2048, "fp16", "adamw", True, {}),
        (Q15, 8, 1024, "bf16", "adamw-8bit", False, {}),
        (Q7, 2, 4096, "bf16", "adamw", True, {"qlora": lora(16)}),
        (Q7, 1, 4096, "amp-bf16", "adamw", True, {"world_size": 8, "sharding": "fsdp-full"}),
        # --- Qwen3 (q/k RMSNorm) ---
        (Q3, 1, 4096, "bf16", "adamw", True, {}),
        (Q3, 1, 2048, "amp-bf16", "adamw-fused", True, {}),
        (Q3, 2, 2048, "bf16", "adamw", True, {"lora": lora(16)}),
        (Q3, 2, 4096, "bf16", "adamw-fused", True, {"world_size": 4, "sharding": "fsdp-full"}),
        # --- Gemma (MQA, 256k vocab, head_dim 256) ---
        (GE, 4, 2048, "bf16", "adamw", True, {}),
        (GE, 2, 4096, "amp-bf16", "adamw", True, {}),
        (GE, 2, 1024, "fp32", "adam", False, {}),
        (GE, 8, 1024, "bf16", "adamw", False, {"attn": "eager", "lora": lora(8, ATTN)}),
        (GE, 4, 2048, "bf16", "adamw", False, {"world_size": 2, "sharding": "fsdp-full"}),
        # --- Gemma 2 (soft-capping, sliding window). transformers 5.23 refuses SDPA for Gemma2
        # (attention soft-capping): the sdpa case is kept to record that error ---
        (GE2, 1, 4096, "bf16", "adamw", True, {}),
        (GE2, 1, 4096, "bf16", "adamw", True, {"attn": "eager"}),
        (GE2, 2, 2048, "bf16", "adamw", True, {"attn": "eager", "qlora": lora(16)}),
        (GE2, 1, 8192, "bf16", "adamw", True, {"attn": "eager", "world_size": 8, "sharding": "fsdp-full"}),
        # --- Phi-3 mini (fused qkv / gate_up) ---
        (P3, 2, 4096, "bf16", "adamw", True, {}),
        (P3, 1, 4096, "amp-bf16", "adamw", True, {}),
        (P3, 4, 2048, "bf16", "adamw", True, {"lora": lora(32)}),
        (P3, 4, 2048, "bf16", "adamw-8bit", True, {}),
        (P3, 2, 2048, "fp16", "adamw", False, {"attn": "eager"}),
        # --- Phi-2 (parallel attention+MLP, partial rotary, LayerNorm) ---
        (P2, 8, 2048, "bf16", "adamw", True, {}),
        (P2, 4, 1024, "amp-bf16", "sgd-momentum", False, {}),
        (P2, 4, 2048, "fp32", "adamw", True, {"lora": lora(16, ["q_proj", "k_proj", "v_proj", "dense"])}),
        # --- GPT-NeoX-20B ---
        (NX, 1, 2048, "bf16", "adamw", True, {}),
        (NX, 1, 2048, "bf16", "adamw", True, {"world_size": 8, "sharding": "fsdp-full"}),
        (NX, 1, 2048, "bf16", "adamw", True, {"qlora": lora(16)}),
        # --- OPT-2.7B (learned positions, ReLU, LayerNorm) ---
        (OPT, 4, 2048, "fp32", "adamw", False, {}),
        (OPT, 8, 1024, "amp-fp16", "adamw", True, {}),
        (OPT, 8, 2048, "bf16", "adafactor", True, {}),
        (OPT, 8, 2048, "bf16", "adamw", False, {"lora": lora(16, QV)}),
        # --- Falcon-7B (multi-query, parallel attention) ---
        (FA, 1, 2048, "bf16", "adamw", True, {}),
        (FA, 1, 2048, "amp-bf16", "adamw", True, {}),
        (FA, 4, 2048, "bf16", "adamw", True, {"lora": lora(16, ["query_key_value"])}),
        (FA, 4, 2048, "bf16", "adamw", True, {"qlora": lora(16)}),
        # --- MoE: Qwen1.5-MoE-A2.7B (60 experts, top-4, shared expert) ---
        (MOE, 1, 2048, "bf16", "adamw", True, {}),
        (MOE, 2, 4096, "bf16", "adamw-fused", True, {}),
        (MOE, 4, 2048, "bf16", "adamw", True, {"lora": lora(16, ATTN)}),
        (MOE, 2, 4096, "bf16", "adamw", True, {"world_size": 8, "sharding": "fsdp-full"}),
        # --- encoders, measured with a sequence-classification head (how they are most often
        #     fine-tuned; the trace builds AutoModelForSequenceClassification for them) ---
        (BERT, 16, 512, "fp32", "adamw", False, {}),
        (BERT, 32, 512, "amp-bf16", "adamw", False, {"lora": lora(8, ["query", "value"])}),
        (ROB, 16, 512, "amp-bf16", "adamw", False, {}),
        (ROB, 32, 512, "bf16", "adamw", True, {"lora": lora(16, ["query", "key", "value", "dense"])}),
        (DB, 32, 512, "fp32", "adamw", False, {}),
        (DB, 32, 512, "bf16", "adamw", False, {"lora": lora(8, ["q_lin", "v_lin"])}),
        # --- DeepSeek-V2-Lite (multi-head latent attention; 64 routed experts, top-6, 2 shared) ---
        # (LoRA on "all-linear" is refused by peft 0.21 here: it wraps the experts' fused
        # parameters, which takes no lora_dropout; the attention projections are named instead)
        (DSL, 1, 1024, "bf16", "adamw", False, {}),
        (DSL, 1, 2048, "bf16", "adamw", True, {}),
        (DSL, 2, 4096, "bf16", "adamw-fused", False, {}),
        (DSL, 2, 2048, "bf16", "adamw", False, {"lora": lora(16, MLA)}),
        (DSL, 4, 4096, "bf16", "adamw", True, {"lora": lora(16, MLA)}),
        (DV3, 1, 2048, "bf16", "adamw", True, {"lora": lora(16, MLA_Q)}),
        # --- GLM-4-0414 (half-rotary heads, fused gate_up, post-norms) ---
        (G4, 1, 2048, "bf16", "adamw", False, {}),
        (G4, 2, 4096, "bf16", "adamw-fused", False, {}),
        (G4, 2, 2048, "bf16", "adamw", True, {"lora": lora(16)}),
        # --- StarCoder2 (LayerNorm, biases, GELU MLP, residual/embedding dropout) ---
        (SC2, 2, 2048, "bf16", "adamw", False, {}),
        (SC2, 4, 2048, "bf16", "adamw", True, {"lora": lora(16, ATTN)}),
        # --- Llama-4 Scout's language model (every token through all 16 experts, qk-norm, NoPE
        # layers) ---
        (L4, 1, 1024, "bf16", "adamw-fused", False, {}),
        (L4, 1, 2048, "bf16", "adamw", False, {"lora": lora(16, ATTN)}),
        (L4, 2, 4096, "bf16", "adamw", True, {"lora": lora(16, ATTN)}),
        # --- T5 / Flan-T5 (encoder-decoder: the decoder's self- and cross-attention, relative
        # position bias, the encoder's output kept for every cross-attention; labels as long as
        # the inputs, so the decoder runs over the same number of tokens) ---
        (T5S, 8, 512, "fp32", "adamw", False, {}),
        (T5B, 8, 512, "bf16", "adamw", False, {}),
        (T5B, 16, 512, "bf16", "adamw", False, {"lora": lora(16, ["q", "v"])}),
        (FT5B, 8, 1024, "amp-bf16", "adamw", True, {}),
        (FT5B, 16, 512, "bf16", "adamw", True, {"lora": lora(16, ["q", "k", "v", "o"])}),
        # labels shorter (and once longer) than the inputs: a summarisation step's max_target_length
        (T5B, 8, 512, "bf16", "adamw", False, {"target_len": 64}),
        (FT5B, 4, 512, "fp32", "adamw", False, {"attn": "eager", "target_len": 32}),
        (FT5B, 8, 1024, "amp-bf16", "adamw", True, {"target_len": 128}),
        (FT5B, 2, 256, "bf16", "adamw", False, {"target_len": 512}),
        # --- Falcon-H1 (Mamba-2 mixer beside attention in every layer; transformers' torch path
        # of the chunked scan, as without the mamba_ssm kernels). PEFT refuses LoRA on the
        # mixer's out_proj and conv1d: attention and MLP projections are named ---
        (FH1, 2, 1024, "bf16", "adamw", False, {}),
        (FH1, 4, 1024, "bf16", "adamw", False, {"lora": lora(16, ATTN + ["gate_proj", "up_proj", "down_proj"])}),
        # --- vision-language: the language model plus the vision tower run on the patches of
        # the stated images (memlint.trace.vision_inputs builds pixel_values, image_grid_thw and
        # the placeholder tokens as the Qwen processor would). SGD keeps no states, so the peak is
        # the activations'. LoRA on the attention projections leaves the tower frozen (its linears
        # are qkv/proj); "all-linear" adapts the tower too. Kept small: the tower's windowed
        # attention runs one SDPA call per window on the fake tensors ---
        (Q25VL, 1, 1024, "bf16", "adamw", False, {"images": image(1, 448)}),
        (Q25VL, 2, 2048, "bf16", "sgd", False, {"images": image(2, 448)}),
        (Q25VL, 2, 2048, "bf16", "adamw", False, {"images": image(2, 448), "lora": lora(8, ATTN)}),
        (Q25VL, 2, 2048, "bf16", "adamw", False, {"images": image(2, 448), "lora": lora(16)}),
        (Q3VL, 1, 1024, "bf16", "adamw", False, {"images": image(1, 448)}),
        (Q3VL, 2, 2048, "bf16", "sgd", False, {"images": image(2, 448)}),
        (Q3VL, 2, 2048, "bf16", "adamw", False, {"images": image(2, 448), "lora": lora(16)}),
    ]
    return rows


def make_id(model: str, b: int, s: int, prec: str, opt: str, gc: bool, extra: dict) -> str:
    parts = [SHORT[model]]
    if extra.get("lora", {}).get("method") == "oft":
        parts.append(f"oft{extra['lora']['block_size']}")
    elif extra.get("lora"):
        parts.append(f"lora{extra['lora']['r']}")
    if extra.get("qlora"):
        parts.append(f"qlora{extra['qlora']['r']}")
    if extra.get("world_size", 1) > 1:
        parts.append(f"fsdp{extra['world_size']}")
    parts += [prec.replace("-", ""), opt.replace("-", ""), f"b{b}", f"s{s}"]
    if extra.get("target_len"):
        parts.append(f"t{extra['target_len']}")
    if extra.get("projector"):
        parts.append("proj")
    if gc:
        parts.append("gc")
    if extra.get("attn") == "eager":
        parts.append("eager")
    if extra.get("images"):
        parts.append(f"img{extra['images']['per_sequence']}x{extra['images']['height']}")
    return "-".join(parts)


def model_config(hub_id: str) -> tuple[dict, str]:
    path = os.path.join(CATALOG, hub_id.replace("/", "--") + ".json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            entry = json.load(f)
        cfg = entry.get("config", entry)
        return dict(cfg), f"memlint catalogue: memlint/catalog/models/{os.path.basename(path)}"
    if hub_id in ORACLE_NAMES and os.path.exists(ORACLE):
        with open(ORACLE, encoding="utf-8") as f:
            return dict(json.load(f)["models"][ORACLE_NAMES[hub_id]]), "shared/oracle/cases.json"
    if hub_id in TRANSCRIBED:
        source, cfg = TRANSCRIBED[hub_id]
        return dict(cfg), source
    raise SystemExit(f"no config for {hub_id}")


def main() -> int:
    rows = case_rows()
    models, sources = {}, {}
    cases = []
    for model, b, s, prec, opt, gc, extra in rows:
        if model not in models:
            models[model], sources[model] = model_config(model)
        case = {"id": make_id(model, b, s, prec, opt, gc, extra), "model": model, "batch_size": b, "seq_len": s,
                "precision": prec, "optimizer": opt, "grad_ckpt": gc}
        case.update(extra)
        cases.append(case)
    ids = [c["id"] for c in cases]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        raise SystemExit(f"duplicate ids: {sorted(dup)}")
    doc = {
        "_comment": ("memlint calibration suite, measured with `python -m memlint.trace` (see docs/trace.md). "
                     "Generated by tests/calibration/build_cases.py; 'models' holds each model's published "
                     "config.json values keyed by Hub id, 'model_sources' says where each was read from."),
        "model_sources": sources,
        "models": models,
        "cases": cases,
    }
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    fams = sorted({models[c["model"]]["model_type"] for c in cases})
    print(f"wrote {OUT}: {len(cases)} cases, {len(models)} models, families: {', '.join(fams)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
