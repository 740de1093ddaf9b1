"""Recognising each config kind by content first and name second, and not mistaking others."""

from __future__ import annotations

import pytest

from memlint.documents.kinds import detect
from memlint.documents.structured import load

HF_ZERO2 = """\
{
    "fp16": {"enabled": "auto", "loss_scale": 0, "loss_scale_window": 1000, "hysteresis": 2},
    "bf16": {"enabled": "auto"},
    "zero_optimization": {"stage": 2, "allgather_partitions": true, "overlap_comm": true},
    "gradient_accumulation_steps": "auto",
    "gradient_clipping": "auto",
    "train_batch_size": "auto",
    "train_micro_batch_size_per_gpu": "auto"
}
"""

ACCELERATE = """\
compute_environment: LOCAL_MACHINE
debug: false
distributed_type: MULTI_GPU
downcast_bf16: 'no'
gpu_ids: all
machine_rank: 0
main_training_function: main
mixed_precision: bf16
num_machines: 1
num_processes: 4
rdzv_backend: static
same_network: true
use_cpu: false
"""

AXOLOTL = """\
base_model: Qwen/Qwen2.5-0.5B
datasets:
  - path: mhenrichsen/alpaca_2k_test
    type: alpaca
sequence_len: 2048
micro_batch_size: 4
learning_rate: 0.0002
"""

LLAMAFACTORY = """\
model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
stage: sft
do_train: true
finetuning_type: lora
lora_target: all
dataset: identity,alpaca_en_demo
template: llama3
cutoff_len: 2048
output_dir: saves/llama3-8b/lora/sft
"""

TRL_SFT = """\
model_name_or_path: Qwen/Qwen2.5-0.5B
dataset_name: trl-lib/Capybara
learning_rate: 2.0e-5
num_train_epochs: 1
packing: true
per_device_train_batch_size: 2
gradient_accumulation_steps: 8
max_length: 2048
output_dir: Qwen2.5-0.5B-SFT
"""

# TrlParser reads ModelConfig and ScriptArguments from the same file as SFTConfig.
TRL_QLORA_RECIPE = """\
model_name_or_path: meta-llama/Llama-3.1-8B
torch_dtype: bfloat16
use_peft: true
lora_r: 16
lora_alpha: 32
lora_target_modules: all-linear
load_in_4bit: true
bnb_4bit_quant_type: nf4
dataset_name: trl-lib/Capybara
output_dir: Llama-3.1-8B-QLoRA
per_device_train_batch_size: 4
gradient_accumulation_steps: 4
"""

TRAINING_ARGS_JSON = """\
{"output_dir": "out", "per_device_train_batch_size": 8, "gradient_accumulation_steps": 2,
 "learning_rate": 5e-05, "num_train_epochs": 3, "bf16": true, "deepspeed": "ds_config.json"}
"""

# Not training configs, though they share some key names.
HYDRA = """\
defaults:
  - model: llama
  - trainer: default
trainer:
  max_epochs: 3
  precision: bf16-mixed
learning_rate: 3e-4
num_train_epochs: 3
bf16: true
seed: 42
experiment_name: sweep
data_dir: /data
callbacks: []
"""

# a Hydra config with Trainer-like names, read by @hydra.main (a DPO project's config/config.yaml)
HYDRA_TRAINING = """\
# random seed for batch sampling
seed: 0
# name for this experiment in the local run directory and on wandb
exp_name: ???
batch_size: 4
eval_batch_size: 16
debug: false
lr: 5e-7
gradient_accumulation_steps: 1
max_grad_norm: 10.0
max_length: 512
max_prompt_length: 256
n_epochs: 1
optimizer: RMSprop
warmup_steps: 150
activation_checkpointing: false
defaults:
- _self_
- model: blank_model_fp32
- loss: sft
"""

GITHUB_WORKFLOW = "name: tests\non: [push]\njobs:\n  test:\n    runs-on: ubuntu-latest\n"

# a remote-code model's config.json that keeps its authors' training settings (VLM2Vec's copy of
# InternVideo2's): from_pretrained reads it into the model's config class, no HfArgumentParser
REMOTE_CODE_MODEL_CONFIG = """\
{
  "architectures": ["InternVideo2_Stage2"],
  "auto_map": {"AutoConfig": "config.InternVideo2Config", "AutoModel": "modeling_internvideo2.InternVideo2_Stage2"},
  "batch_size": 64,
  "deepspeed": {"enable": true, "stage": 1},
  "gradient_checkpointing": true,
  "output_dir": "./outputs/stage2",
  "save_latest": false,
  "num_frames": 8,
  "torch_dtype": "float16",
  "transformers_version": "4.40.1"
}
"""


# QwenLM/Qwen-Audio's config.json (remote-code QWen): its sizes share four names with GPT-NeoX's
# arguments, and its precision switches are the model's own
QWEN_REMOTE_CODE_CONFIG = """\
{
  "architectures": ["QWenLMHeadModel"],
  "auto_map": {"AutoConfig": "configuration_qwen.QWenConfig", "AutoModelForCausalLM": "modeling_qwen.QWenLMHeadModel"},
  "attn_dropout_prob": 0.0,
  "bf16": false,
  "fp16": false,
  "fp32": false,
  "hidden_size": 4096,
  "max_position_embeddings": 8192,
  "model_type": "qwen",
  "num_attention_heads": 32,
  "num_hidden_layers": 32,
  "seq_length": 2048
}
"""


@pytest.mark.parametrize(
    "path,text,kind",
    [
        ("configs/run7.json", HF_ZERO2, "deepspeed"),  # by content, whatever the name
        ("ds_config_zero2.json", HF_ZERO2, "deepspeed"),
        ("default_config.yaml", ACCELERATE, "accelerate"),
        ("fsdp.yaml", ACCELERATE, "accelerate"),
        ("examples/qwen/lora.yml", AXOLOTL, "axolotl"),
        ("examples/train_lora/llama3_lora_sft.yaml", LLAMAFACTORY, "llamafactory"),
        ("recipes/sft.yaml", TRL_SFT, "hf-args"),
        ("recipes/qlora.yaml", TRL_QLORA_RECIPE, "hf-args"),
        ("training_args.json", TRAINING_ARGS_JSON, "hf-args"),
        ("conf/config.yaml", HYDRA, "yaml"),
        ("config/config.yaml", HYDRA_TRAINING, "yaml"),
        ("config/config.yaml", HYDRA_TRAINING.replace("exp_name: ???", "exp_name: dpo").split("defaults:")[0], "hf-args"),
        (".github/workflows/tests.yml", GITHUB_WORKFLOW, "yaml"),
        ("package.json", '{"name": "web", "version": "1.0.0", "scripts": {}}', "json"),
        ("src/model/internvideo2/config.json", REMOTE_CODE_MODEL_CONFIG, "json"),
        ("config.json", QWEN_REMOTE_CODE_CONFIG, "json"),  # before: a GPT-NeoX file, bf16 "must be a mapping"
    ],
)
def test_kind_by_content(path, text, kind):
    syntax = "json" if path.endswith(".json") else "yaml"
    assert detect(path, syntax, load(text, syntax).value) == kind


@pytest.mark.parametrize(
    "path,text,kind",
    [
        # the name decides when the content does not (nearly empty, or not a mapping)
        ("ds_config.json", '{"steps_per_print": 100}', "deepspeed"),
        ("deepspeed/zero3.json", "{}", "deepspeed"),
        ("zero2_offload.json", "[]", "deepspeed"),
        ("ds_z3_config.json", '{"wall_clock_breakdown": false}', "deepspeed"),
        ("accelerate_configs/multi_gpu.yaml", "debug: false\n", "accelerate"),
        # but not against content that belongs to something else
        ("zero_shot_results.json", '{"accuracy": 0.71, "task": "boolq"}', "json"),
        ("ds_config.json", '{"accuracy": 0.71, "task": "boolq"}', "json"),
        ("default_config.yaml", "theme: dark\nfont_size: 12\n", "yaml"),
        ("dstats.json", '{"steps_per_print": 1}', "json"),
    ],
)
def test_kind_by_name(path, text, kind):
    syntax = "json" if path.endswith(".json") else "yaml"
    assert detect(path, syntax, load(text, syntax).value) == kind


def test_deepspeed_needs_json():
    """DeepSpeed reads JSON only; a YAML with the same keys is not a DeepSpeed config."""
    assert detect("ds.yaml", "yaml", {"zero_optimization": {"stage": 2}, "train_micro_batch_size_per_gpu": 1}) == "yaml"


def test_accelerate_as_json():
    assert detect("cluster.json", "json", {"distributed_type": "FSDP", "num_processes": 8}) == "accelerate"


def test_memlint_settings_by_name():
    assert detect("memlint.toml", "other", None) == "memlint-settings"
    assert detect("sub/.memlint.toml", "other", None) == "memlint-settings"


# a kohya_ss GUI LoRA preset (HunyuanDiT's kohya_ss-hydit/huynyuan_lora.json has this shape, 160
# keys): it shares output_dir, gradient_accumulation_steps and gradient_checkpointing with
# TrainingArguments, and almost nothing else
KOHYA_PRESET_KEYS = {
    "LoRA_type": "Standard", "adaptive_noise_scale": 0, "additional_parameters": "", "block_alphas": "",
    "block_dims": "", "bucket_no_upscale": True, "bucket_reso_steps": 64, "cache_latents": True,
    "cache_latents_to_disk": False, "caption_dropout_every_n_epochs": 0.0, "caption_dropout_rate": 0,
    "caption_extension": ".txt", "clip_skip": 1, "color_aug": False, "conv_alpha": 1, "conv_dim": 1,
    "enable_bucket": True, "epoch": 10, "flip_aug": False, "full_bf16": False, "full_fp16": False,
    "gradient_accumulation_steps": 1, "gradient_checkpointing": True, "keep_tokens": "0",
    "learning_rate": 0.0001, "logging_dir": "./log", "lr_scheduler": "cosine", "lr_scheduler_args": "",
    "lr_scheduler_num_cycles": "", "lr_scheduler_power": "", "lr_warmup": 0, "max_bucket_reso": 2048,
    "max_data_loader_n_workers": "0", "max_resolution": "1024,1024", "max_timestep": 1000,
    "max_token_length": "75", "max_train_epochs": "", "max_train_steps": "", "mem_eff_attn": False,
    "min_bucket_reso": 256, "min_snr_gamma": 0, "mixed_precision": "fp16", "network_alpha": 1,
    "network_dim": 8, "noise_offset": 0, "num_cpu_threads_per_process": 2, "optimizer": "AdamW8bit",
    "optimizer_args": "", "output_dir": "./output", "output_name": "lora", "persistent_data_loader_workers": False,
    "pretrained_model_name_or_path": "./ckpts/t2i", "prior_loss_weight": 1.0, "random_crop": False,
    "save_every_n_epochs": 1, "save_model_as": "safetensors", "save_precision": "fp16", "save_state": False,
    "seed": "", "shuffle_caption": False, "text_encoder_lr": 5e-05, "train_batch_size": 1,
    "train_data_dir": "./dataset", "unet_lr": 0.0001, "use_cp": False, "v2": False, "xformers": "xformers",
}


def test_a_foreign_preset_that_shares_a_few_trainer_names_is_no_trainer_config():
    import json

    assert detect("kohya_ss-hydit/huynyuan_lora.json", "json", KOHYA_PRESET_KEYS) == "json"
    # the same keys in a file of a few dozen TrainingArguments keys stay TrainingArguments
    trainer = json.loads(TRAINING_ARGS_JSON)
    assert detect("train_args.json", "json", {**trainer, "lr_scheduler": "cosine", "use_cp": False}) == "hf-args"


def test_a_gui_preset_without_output_dir_is_no_deepspeed_config():
    # bmaltais/kohya_ss's presets/finetune/*.json: no output_dir, and `train_batch_size` with
    # `gradient_accumulation_steps`, two DeepSpeed top-level names among some ninety of kohya's own
    preset = {k: v for k, v in KOHYA_PRESET_KEYS.items() if k not in ("output_dir", "gradient_checkpointing")}
    assert detect("presets/finetune/SDXL - AdamW8bit.json", "json", preset) == "json"  # before: deepspeed
    # a DeepSpeed config written without its signature sections is still one
    assert detect("configs/adam_fp16.json", "json", {"train_batch_size": 32, "gradient_accumulation_steps": 1,
                                                     "steps_per_print": 10, "fp16": {"enabled": True}}) == "deepspeed"


def test_a_base_model_key_alone_makes_no_axolotl_config():
    # tw-med-llm-qlora's reports/phase5/*-acceptance.json: a run report that records its base model
    report = {"schema_version": 1, "created_at_utc": "2026-07-22T13:17:36Z", "phase": 5,
              "base_model": {"model_id": "taide/Gemma-3-TAIDE-12b-Chat-2602", "revision": "main"},
              "adapter": {"source_type": "local", "repo_id": None}, "metrics": {"accuracy": 0.71}}
    assert detect("reports/phase5/acceptance.json", "json", report) == "json"  # before: axolotl, 17 findings
    # Qlora-Fine-Tuning-Pipeline's config/adapters.json: a registry of trained adapters
    registry = {"base_model": "Qwen/Qwen2.5-0.5B-Instruct", "adapters": [{"name": "physics-qa", "path": "output/x"}]}
    assert detect("config/adapters.json", "json", registry) == "json"
    # json-extraction-qlora-dpo's configs/model.yaml: the project's own model section
    model = {"base_model": {"model_name_or_path": "Qwen/Qwen2.5-1.5B-Instruct"}, "notes": "bf16 on an A10G"}
    assert detect("configs/model.yaml", "yaml", model) == "yaml"
    # l20-edu-135m-pretrain's docs/sft_6k_quality_summary.json: a run summary that records the
    # recipe (`micro_batch_size`, `learning_rate`) beside its results, most of its keys its own
    summary = {"run_name": "l20-edu-135m-sft-6k-quality", "base_model": "runs/l20-edu-135m-deepthin/step-018928",
               "train_examples": 6000, "eval_examples": 512, "max_steps": 120, "micro_batch_size": 8,
               "gradient_accumulation_steps": 8, "global_batch_sequences": 64, "sequence_length": 2048,
               "learning_rate": 5e-06, "scheduler": "linear warmup + cosine decay", "dtype": "bfloat16",
               "final_checkpoint": "runs/l20-edu-135m-sft-6k-quality/step-000120",
               "train": {"final_logged_loss": 2.12}, "eval": {"final_loss": 2.15}, "sanity": {"verdict": "ok"}}
    assert detect("docs/sft_6k_quality_summary.json", "json", summary) == "json"  # before: axolotl, 13 CFG001
    # an Axolotl config with a few keys of a newer or older release than the schema's still is one
    axolotl = {"base_model": "NousResearch/Llama-3.2-1B", "load_in_8bit": True, "adapter": "lora",
               "sequence_len": 2048, "micro_batch_size": 2, "num_epochs": 1, "lora_r": 16,
               "some_future_key": 1, "another_future_key": 2}
    assert detect("examples/lora.yml", "yaml", axolotl) == "axolotl"
    # an Axolotl config without its signature keys still is one
    assert detect("configs/tiny.yml", "yaml", {"base_model": "Qwen/Qwen2.5-0.5B", "learning_rate": 2e-5,
                                               "gradient_accumulation_steps": 4, "optimizer": "adamw_torch",
                                               "output_dir": "./out"}) == "axolotl"
