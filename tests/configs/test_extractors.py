"""Facts from configs: each value with the exact range that set it, tool defaults from the
schemas (without a location), and what each tool really does with its settings."""

from __future__ import annotations

from typing import Any

from memlint.documents.parsed import parse_document
from memlint.documents.reading import document_from_text
from memlint.facts.extract import extract
from memlint.facts.plan import RunFacts


def facts_of(path: str, text: str) -> RunFacts:
    [facts] = extract(parse_document(document_from_text(path, text)))
    return facts


def at(facts: RunFacts, name: str) -> tuple[Any, int, int, int, int] | tuple[Any, None]:
    """(value, line, column, end line, end column) of a fact, or (value, None) for a default."""
    fact = getattr(facts, name)
    assert fact is not None, f"{name} not extracted"
    if fact.origin is None:
        return fact.value, None
    r = fact.origin.range
    return fact.value, r.start.line, r.start.column, r.end.line, r.end.column


# --------------------------------------------------------------------------- DeepSpeed

DS_ZERO3_OFFLOAD = """\
{
  "train_batch_size": 256,
  "train_micro_batch_size_per_gpu": 4,
  "gradient_accumulation_steps": 8,
  "gradient_clipping": 1.0,
  "bf16": {"enabled": true},
  "optimizer": {"type": "AdamW", "params": {"lr": 2e-5, "weight_decay": 0.0}},
  "zero_optimization": {
    "stage": 3,
    "offload_optimizer": {"device": "cpu", "pin_memory": true},
    "offload_param": {"device": "nvme", "nvme_path": "/local_nvme"},
    "reduce_bucket_size": 5e8,
    "stage3_prefetch_bucket_size": 5e7,
    "stage3_max_live_parameters": 1e9
  }
}
"""


def test_deepspeed_facts_and_their_ranges():
    facts = facts_of("ds_config.json", DS_ZERO3_OFFLOAD)
    assert at(facts, "global_batch") == (256, 2, 22, 2, 25)
    assert at(facts, "micro_batch") == (4, 3, 36, 3, 37)
    assert at(facts, "grad_accum") == (8, 4, 33, 4, 34)
    assert at(facts, "grad_clip") == (1.0, 5, 23, 5, 26)
    assert at(facts, "ds_bf16") == (True, 6, 22, 6, 26)
    assert at(facts, "optimizer") == ("adamw-fused", 7, 24, 7, 31)
    assert at(facts, "zero_stage") == (3, 9, 13, 9, 14)
    assert at(facts, "offload_optimizer") == (True, 10, 36, 10, 41)
    assert at(facts, "offload_params") == (True, 11, 32, 11, 38)
    assert at(facts, "reduce_bucket") == (5e8, 12, 26, 12, 29)
    assert at(facts, "prefetch_bucket") == (5e7, 13, 35, 13, 38)
    assert at(facts, "max_live_parameters") == (1e9, 14, 34, 14, 37)
    assert facts.auto_keys == []


def test_deepspeed_auto_values_are_auto_keys_not_facts():
    text = ('{\n  "train_micro_batch_size_per_gpu": "auto",\n  "gradient_accumulation_steps": "auto",\n'
            '  "bf16": {"enabled": "auto"},\n  "zero_optimization": {"stage": 2, "reduce_bucket_size": "auto"}\n}\n')
    facts = facts_of("ds_config.json", text)
    assert facts.micro_batch is None and facts.grad_accum is None and facts.ds_bf16 is None
    assert facts.reduce_bucket is None
    assert [(a.value, a.origin.range.start.line) for a in facts.auto_keys] == [
        ("train_micro_batch_size_per_gpu", 2),
        ("gradient_accumulation_steps", 3),
        ("bf16.enabled", 4),
        ("zero_optimization.reduce_bucket_size", 5),
    ]
    assert at(facts, "zero_stage") == (2, 5, 33, 5, 34)


def test_deepspeed_offload_a_stage_ignores_is_no_offload():
    text = ('{\n  "zero_optimization": {\n    "stage": 2,\n    "offload_optimizer": {"device": "cpu"},\n'
            '    "offload_param": {"device": "cpu"}\n  }\n}\n')
    facts = facts_of("zero2.json", text)
    assert at(facts, "offload_optimizer") == (True, 4, 36, 4, 41)
    assert at(facts, "offload_params") == (False, 5, 32, 5, 37)
    assert facts.offload_params.note == "offload_param ignored at ZeRO stage 2"


def test_deepspeed_default_stage_and_legacy_spellings():
    facts = facts_of("ds_config.json", '{"zero_optimization": {"cpu_offload": true}, "bfloat16": {"enabled": true}}')
    assert at(facts, "zero_stage") == (0, 1, 22, 1, 43)  # no "stage": DeepSpeed's default, on the block
    assert at(facts, "offload_optimizer")[0] is False  # stage 0 runs no ZeRO optimizer
    assert at(facts, "ds_bf16")[0] is True


def test_deepspeed_optimizer_names():
    facts = facts_of("ds_config.json", '{"train_batch_size": 8, "optimizer": {"type": "OneBitAdam"}}')
    assert facts.optimizer.value == "adamw-fused"
    facts = facts_of("ds_config.json", '{"train_batch_size": 8, "optimizer": {"type": "Lion"}}')
    assert facts.optimizer.value == "lion"


# --------------------------------------------------------------------------- Accelerate

ACCELERATE_DEEPSPEED = """\
compute_environment: LOCAL_MACHINE
debug: false
deepspeed_config:
  deepspeed_multinode_launcher: standard
  gradient_accumulation_steps: 4
  offload_optimizer_device: cpu
  offload_param_device: cpu
  zero3_init_flag: true
  zero_stage: 3
distributed_type: DEEPSPEED
machine_rank: 0
main_training_function: main
mixed_precision: bf16
num_machines: 2
num_processes: 16
use_cpu: false
"""


def test_accelerate_deepspeed_plugin():
    facts = facts_of("accelerate_configs/zero3.yaml", ACCELERATE_DEEPSPEED)
    assert at(facts, "world_size") == (16, 15, 15, 15, 17)
    assert at(facts, "gpus_per_node") == (8, 15, 15, 15, 17)
    assert at(facts, "zero_stage") == (3, 9, 14, 9, 15)
    assert at(facts, "offload_optimizer") == (True, 6, 28, 6, 31)
    assert at(facts, "offload_params") == (True, 7, 24, 7, 27)
    assert at(facts, "grad_accum") == (4, 5, 31, 5, 32)
    assert at(facts, "ds_bf16") == (True, 13, 17, 13, 21)  # DeepSpeed's own bf16 mode
    assert facts.mixed is None
    assert facts.references == []


def test_accelerate_deepspeed_config_file_is_a_reference():
    text = ("compute_environment: LOCAL_MACHINE\ndeepspeed_config:\n  deepspeed_config_file: configs/ds_z3.json\n"
            "  zero3_init_flag: true\ndistributed_type: DEEPSPEED\nmixed_precision: bf16\nnum_processes: 8\n")
    facts = facts_of("accelerate.yaml", text)
    [reference] = facts.references
    assert reference.value == "configs/ds_z3.json"
    assert (reference.origin.range.start.line, reference.origin.range.start.column) == (3, 25)
    assert at(facts, "mixed") == ("bf16", 6, 17, 6, 21)  # fills the file's "auto"
    assert facts.zero_stage is None


def test_accelerate_plugin_default_stage_comes_from_the_help_text():
    text = "deepspeed_config:\n  offload_optimizer_device: none\ndistributed_type: DEEPSPEED\nnum_processes: 4\n"
    facts = facts_of("default_config.yaml", text)
    assert at(facts, "zero_stage") == (2, None)  # "If unspecified, will default to `2`"


def test_accelerate_fsdp():
    text = ("compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nfsdp_config:\n"
            "  fsdp_activation_checkpointing: true\n  fsdp_offload_params: true\n  fsdp_reshard_after_forward: false\n"
            "  fsdp_version: 2\nmixed_precision: bf16\nnum_processes: 8\n")
    facts = facts_of("fsdp2.yaml", text)
    assert at(facts, "fsdp") == ("grad-op", 6, 30, 6, 35)
    assert at(facts, "offload_params") == (True, 5, 23, 5, 27)
    assert at(facts, "grad_ckpt") == (1, 4, 33, 4, 37)
    assert at(facts, "mixed") == ("bf16", 8, 17, 8, 21)


def test_accelerate_fsdp1_default_strategy_from_the_schema():
    text = "distributed_type: FSDP\nfsdp_config:\n  fsdp_offload_params: false\nnum_processes: 4\n"
    facts = facts_of("fsdp.yaml", text)
    assert at(facts, "fsdp") == ("full", None)


def test_accelerate_gpu_ids_when_num_processes_is_unset():
    facts = facts_of("default_config.yaml", "distributed_type: MULTI_GPU\ngpu_ids: 0,1,2\nmixed_precision: fp16\n")
    assert at(facts, "world_size") == (3, 2, 9, 2, 14)
    assert at(facts, "mixed") == ("fp16", 3, 17, 3, 21)


# --------------------------------------------------------------------------- Axolotl

AXOLOTL_QLORA = """\
base_model: NousResearch/Meta-Llama-3.1-8B
load_in_4bit: true
adapter: qlora
lora_r: 64
lora_alpha: 16
lora_dropout: 0.05
lora_target_modules:
  - q_proj
  - k_proj
  - v_proj
sequence_len: 4096
micro_batch_size: 2
gradient_accumulation_steps: 4
optimizer: paged_adamw_8bit
learning_rate: 0.0002
bf16: true
gradient_checkpointing: true
attn_implementation: flash_attention_2
plugins:
  - axolotl.integrations.liger.LigerPlugin
liger_fused_linear_cross_entropy: true
deepspeed: deepspeed_configs/zero2.json
"""


def test_axolotl_qlora():
    facts = facts_of("qlora.yml", AXOLOTL_QLORA)
    assert facts.framework.value == "axolotl"
    assert at(facts, "model") == ("NousResearch/Meta-Llama-3.1-8B", 1, 12, 1, 42)
    assert at(facts, "quantization") == ("nf4", 2, 14, 2, 18)
    assert facts.double_quant.value is True
    assert at(facts, "lora_r") == (64, 4, 8, 4, 10)
    assert at(facts, "lora_dropout") == (0.05, 6, 14, 6, 18)
    assert at(facts, "lora_targets") == (("q_proj", "k_proj", "v_proj"), 8, 2, 10, 10)
    assert at(facts, "seq_len") == (4096, 11, 14, 11, 18)
    assert at(facts, "micro_batch") == (2, 12, 18, 12, 19)
    assert at(facts, "grad_accum") == (4, 13, 29, 13, 30)
    assert at(facts, "optimizer") == ("paged-adamw-8bit", 14, 11, 14, 27)
    assert at(facts, "mixed") == ("bf16", 16, 6, 16, 10)
    assert at(facts, "load_dtype") == ("bf16", 16, 6, 16, 10)
    assert at(facts, "grad_ckpt") == (1, 17, 24, 17, 28)
    assert at(facts, "attention") == ("flash", 18, 21, 18, 38)
    assert at(facts, "fused_loss") == (True, 21, 34, 21, 38)
    assert [r.value for r in facts.references] == ["deepspeed_configs/zero2.json"]


def test_axolotl_defaults_come_from_its_schema():
    facts = facts_of("full.yml", "base_model: Qwen/Qwen2.5-0.5B\nlearning_rate: 0.00001\n"
                     "datasets:\n  - path: tatsu-lab/alpaca\n    type: alpaca\n")
    assert at(facts, "seq_len") == (512, None)
    assert at(facts, "micro_batch") == (1, None)
    assert at(facts, "grad_accum") == (1, None)
    assert at(facts, "grad_ckpt") == (0, None)
    assert at(facts, "optimizer") == ("adamw-fused", None)
    # bf16 defaults to "auto": bf16 on GPUs that have it
    assert at(facts, "mixed") == ("bf16", None)
    assert "auto" in facts.mixed.note
    assert facts.lora_r is None and facts.quantization is None


def test_axolotl_lora_keys_do_nothing_without_an_adapter():
    facts = facts_of("full.yml", "base_model: x/y\nlearning_rate: 0.00001\nsequence_len: 1024\nlora_r: 16\n"
                     "lora_target_linear: true\n")
    assert facts.lora_r is None and facts.lora_targets is None


def test_axolotl_liger_without_the_plugin_is_no_fused_loss():
    text = AXOLOTL_QLORA.replace("plugins:\n  - axolotl.integrations.liger.LigerPlugin\n", "")
    assert facts_of("qlora.yml", text).fused_loss is None


def test_axolotl_batch_size_gives_accumulation():
    facts = facts_of("run.yml", "base_model: x/y\nlearning_rate: 0.00001\nmicro_batch_size: 4\nbatch_size: 32\n")
    assert at(facts, "grad_accum") == (8, 4, 12, 4, 14)


def test_axolotl_precision_without_bf16():
    facts = facts_of("run.yml", "base_model: x/y\nlearning_rate: 0.00001\nbf16: false\nfp16: true\n")
    assert at(facts, "mixed") == ("fp16", 4, 6, 4, 10)
    assert at(facts, "load_dtype") == ("fp16", 4, 6, 4, 10)
    facts = facts_of("run.yml", "base_model: x/y\nlearning_rate: 0.00001\nbf16: false\n")
    assert facts.mixed is None and at(facts, "load_dtype") == ("fp32", None)


def test_axolotl_inline_deepspeed_and_fsdp():
    text = ("base_model: x/y\nlearning_rate: 0.00001\ndeepspeed:\n  zero_optimization:\n    stage: 3\n"
            "  bf16:\n    enabled: true\n")
    facts = facts_of("run.yml", text)
    assert at(facts, "zero_stage") == (3, 5, 11, 5, 12)
    assert at(facts, "ds_bf16") == (True, 7, 13, 7, 17)
    text = ("base_model: x/y\nlearning_rate: 0.00001\nfsdp_version: 2\nfsdp_config:\n  offload_params: true\n"
            "  reshard_after_forward: true\n  activation_checkpointing: true\n")
    facts = facts_of("run.yml", text)
    assert at(facts, "fsdp") == ("full", 6, 25, 6, 29)
    assert at(facts, "offload_params") == (True, 5, 18, 5, 22)
    assert at(facts, "grad_ckpt") == (1, 7, 28, 7, 32)


# --------------------------------------------------------------------------- LLaMA-Factory

LF_LORA = """\
### model
model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
quantization_bit: 4

### method
stage: sft
do_train: true
finetuning_type: lora
lora_rank: 16
lora_target: q_proj,v_proj

### dataset
dataset: identity,alpaca_en_demo
template: llama3
cutoff_len: 4096
max_length: 512

### train
per_device_train_batch_size: 2
gradient_accumulation_steps: 8
learning_rate: 1.0e-4
bf16: true
flash_attn: fa2
enable_liger_kernel: true
deepspeed: examples/deepspeed/ds_z2_config.json
"""


def test_llamafactory_lora():
    facts = facts_of("llama3_lora_sft.yaml", LF_LORA)
    assert facts.framework.value == "llamafactory"
    assert at(facts, "model") == ("meta-llama/Meta-Llama-3-8B-Instruct", 2, 20, 2, 55)
    assert at(facts, "quantization") == ("nf4", 3, 18, 3, 19)
    assert at(facts, "double_quant") == (True, None)  # schema default double_quantization: true
    assert at(facts, "lora_r") == (16, 9, 11, 9, 13)
    assert at(facts, "lora_targets") == (("q_proj", "v_proj"), 10, 13, 10, 26)
    assert at(facts, "seq_len") == (4096, 15, 12, 15, 16)  # cutoff_len; max_length is for generation
    assert at(facts, "micro_batch") == (2, 19, 29, 19, 30)
    assert at(facts, "grad_accum") == (8, 20, 29, 20, 30)
    assert at(facts, "mixed") == ("bf16", 22, 6, 22, 10)
    assert at(facts, "load_dtype") == ("bf16", 22, 6, 22, 10)
    assert at(facts, "attention") == ("flash", 23, 12, 23, 15)
    assert at(facts, "fused_loss") == (True, 24, 21, 24, 25)
    assert at(facts, "grad_ckpt") == (1, None)  # on unless disable_gradient_checkpointing
    assert at(facts, "optimizer") == ("adamw-fused", None)
    assert [r.value for r in facts.references] == ["examples/deepspeed/ds_z2_config.json"]


def test_llamafactory_defaults_come_from_its_schema():
    facts = facts_of("lf.yaml", "model_name_or_path: Qwen/Qwen2.5-7B\nstage: sft\ntemplate: qwen\n"
                     "dataset: alpaca_en_demo\noutput_dir: out\n")
    assert at(facts, "lora_r") == (8, None)
    assert at(facts, "lora_targets") == (("all-linear",), None)
    assert at(facts, "seq_len") == (2048, None)
    assert at(facts, "micro_batch") == (8, None)


def test_llamafactory_full_fine_tuning_upcasts_trainable_weights():
    text = ("model_name_or_path: Qwen/Qwen2.5-7B\nstage: sft\nfinetuning_type: full\ntemplate: qwen\n"
            "disable_gradient_checkpointing: true\nbf16: true\n")
    facts = facts_of("full.yaml", text)
    assert facts.lora_r is None
    assert at(facts, "load_dtype") == ("fp32", 6, 6, 6, 10)
    assert at(facts, "mixed") == ("bf16", 6, 6, 6, 10)
    assert at(facts, "grad_ckpt") == (0, 5, 32, 5, 36)
    facts = facts_of("full.yaml", text.replace("bf16: true", "pure_bf16: true"))
    assert at(facts, "load_dtype") == ("bf16", 6, 11, 6, 15)


# --------------------------------------------------------------------------- TrainingArguments / TRL

def test_training_arguments_json():
    text = ('{\n  "output_dir": "out",\n  "per_device_train_batch_size": 16,\n  "gradient_accumulation_steps": 2,\n'
            '  "gradient_checkpointing": true,\n  "activation_checkpointing": false,\n  "optim": "adamw_bnb_8bit",\n'
            '  "max_grad_norm": 0.3,\n  "bf16": true,\n  "deepspeed": "ds_config.json"\n}\n')
    facts = facts_of("training_args.json", text)
    assert facts.framework.value == "hf-trainer"
    assert at(facts, "micro_batch") == (16, 3, 33, 3, 35)
    assert at(facts, "grad_ckpt") == (0, 6, 30, 6, 35)  # the new name wins
    assert at(facts, "optimizer") == ("adamw-8bit", 7, 11, 7, 27)
    assert at(facts, "grad_clip") == (0.3, 8, 19, 8, 22)
    assert at(facts, "mixed") == ("bf16", 9, 10, 9, 14)
    [reference] = facts.references
    assert reference.value == "ds_config.json" and reference.origin.range.start.line == 10


TRL_RECIPE = """\
model_name_or_path: Qwen/Qwen2.5-0.5B
dataset_name: trl-lib/Capybara
learning_rate: 2.0e-5
num_train_epochs: 1
per_device_train_batch_size: 2
gradient_accumulation_steps: 8
logging_steps: 25
output_dir: Qwen2.5-0.5B-SFT
packing: true
"""


def test_trl_defaults():
    text = TRL_RECIPE
    facts = facts_of("sft.yaml", text)
    assert facts.framework.value == "trl"
    assert at(facts, "grad_ckpt") == (1, None)
    assert at(facts, "mixed") == ("bf16", None)
    assert at(facts, "seq_len") == (1024, None)
    facts = facts_of("sft.yaml", text + "fp16: true\nmax_length: 4096\ngradient_checkpointing: false\n")
    assert at(facts, "mixed") == ("fp16", 10, 6, 10, 10)
    assert at(facts, "seq_len") == (4096, 11, 12, 11, 16)
    assert at(facts, "grad_ckpt") == (0, 12, 24, 12, 29)


def test_trl_recipe_model_config_fields():
    text = ("model_name_or_path: meta-llama/Llama-3.1-8B\ntorch_dtype: bfloat16\nattn_implementation: sdpa\n"
            "use_peft: true\nlora_r: 32\nlora_target_modules: all-linear\nload_in_4bit: true\n"
            "output_dir: out\nmax_length: 2048\nlearning_rate: 2.0e-4\nper_device_train_batch_size: 4\n"
            "gradient_accumulation_steps: 4\nnum_train_epochs: 1\nlogging_steps: 10\nbf16: true\n"
            "lr_scheduler_type: cosine\nwarmup_ratio: 0.03\nreport_to: none\n")
    facts = facts_of("sft_qlora.yaml", text)
    assert at(facts, "load_dtype") == ("bf16", 2, 13, 2, 21)
    assert at(facts, "attention") == ("sdpa", 3, 21, 3, 25)
    assert at(facts, "lora_r") == (32, 5, 8, 5, 10)
    assert at(facts, "lora_targets") == (("all-linear",), 6, 21, 6, 31)
    assert at(facts, "quantization") == ("nf4", 7, 14, 7, 18)
    facts = facts_of("sft.yaml", text.replace("use_peft: true\n", ""))
    assert facts.lora_r is None  # TRL's ModelConfig: LoRA only with use_peft


def test_inline_deepspeed_dict_in_training_arguments():
    text = "output_dir: out\nper_device_train_batch_size: 2\ndeepspeed:\n  zero_optimization:\n    stage: 2\n"
    facts = facts_of("args.yaml", text)
    assert at(facts, "zero_stage") == (2, 5, 11, 5, 12)
    assert facts.references == []


def test_broken_configs_state_nothing():
    assert extract(parse_document(document_from_text("ds_config.json", '{"zero_optimization": {'))) == []
    assert extract(parse_document(document_from_text("qlora.yml", "base_model: x\n\tadapter: lora\n"))) == []


def test_axolotl_prefixed_fsdp_checkpointing_and_context_parallelism():
    text = ("base_model: meta-llama/Llama-3.1-8B\nlearning_rate: 0.00002\nsequence_len: 500_000\n"
            "context_parallel_size: 8\nmicro_batch_size: 1\nfsdp_version: 2\nfsdp_config:\n"
            "  fsdp_activation_checkpointing: true\n")
    facts = facts_of("alst.yml", text)
    assert at(facts, "seq_len") == (62_500, 3, 14, 3, 21)  # each of the 8 ranks holds 1/8 of a sequence
    assert "context_parallel_size" in facts.seq_len.note
    assert at(facts, "grad_ckpt") == (1, 8, 33, 8, 37)
