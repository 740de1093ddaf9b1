"""Configs that used to be read as another tool's: GPT-NeoX argument files (their DeepSpeed
sections are DeepSpeed's, their own keys are not unknown DeepSpeed keys), DeepSpeed autotuning
spaces, and LLaMA-Factory v1 YAMLs."""

from __future__ import annotations

from memlint.documents import kinds
from memlint.documents.structured import load

from .test_extractors import at, facts_of

# as GPT-NeoX ships them (configs/125M.yml): JSON with comments, read as YAML
NEOX_125M = """\
# GPT-2 pretraining setup
{
   "pipe_parallel_size": 1,
   "model_parallel_size": 1,

   # model settings
   "num_layers": 12,
   "hidden_size": 768,
   "num_attention_heads": 12,
   "seq_length": 2048,
   "max_position_embeddings": 2048,
   "norm": "layernorm",
   "pos_emb": "rotary",

   "optimizer": {
     "type": "Adam",
     "params": {
       "lr": 0.0006,
       "betas": [0.9, 0.95],
       "eps": 1.0e-8,
     }
   },
   "zero_optimization": {
    "stage": 1,
    "allgather_partitions": True,
    "overlap_comm": True,
    "contiguous_gradients": True,
  },

   "train_micro_batch_size_per_gpu": 4,
   "data_impl": "mmap",
   "checkpoint_activations": true,
   "checkpoint_num_layers": 1,
   "gradient_clipping": 1.0,
   "fp16": {
     "enabled": true,
     "loss_scale": 0,
     "loss_scale_window": 1000,
   },
   "train_iters": 320000,
}
"""

# DeepSpeed's autotuning example: the tuner tries each stage and micro-batch size
DS_AUTOTUNING = """\
{
  "train_micro_batch_size_per_gpu": "auto",
  "fp16": {"enabled": true},
  "zero_optimization": {
    "stage": [0, 1, 2, 3]
  },
  "autotuning": {
    "enabled": true,
    "fast": false,
    "arg_mappings": {"train_micro_batch_size_per_gpu": "--per_device_train_batch_size"}
  }
}
"""

# as LLaMA-Factory ships them (examples/v1/train_lora/train_lora_sft.yaml)
LF_V1_LORA = """\
model: Qwen/Qwen3-4B
model_class: llm

# PEFT Configuration
peft_config:
  name: lora
  r: 16
  lora_alpha: 32
  lora_dropout: 0.05
  target_modules: all

kernel_config:
  name: auto

# FSDP Config
dist_config:
  name: fsdp2
  dcp_path: null

### data
train_dataset: data/v1_sft_demo.yaml

### training
output_dir: ./outputs/test_lora
micro_batch_size: 2
cutoff_len: 4096
learning_rate: 1.0e-4
max_steps: 10
"""

LF_V1_DEEPSPEED = """\
model: Qwen/Qwen3-0.6B
model_class: llm

dist_config:
    name: deepspeed
    config_file: examples/deepspeed/ds_z3_config.json

train_dataset: data/v1_sft_demo.yaml
output_dir: outputs/Qwen3-0.6B-deepspeed
micro_batch_size: 1
cutoff_len: 2048
enable_activation_checkpointing: false
"""


def test_neox_argument_files_are_neox_not_deepspeed():
    assert kinds.detect("configs/125M.yml", "yaml", load(NEOX_125M, "yaml").value) == "neox"
    hyphens = {"pipe-parallel-size": 1, "num-layers": 12, "hidden-size": 768, "zero_optimization": {"stage": 1}}
    assert kinds.detect("configs/small_tune.json", "json", hyphens) == "neox"
    # a DeepSpeed config is still one
    assert kinds.detect("ds.json", "json", {"zero_optimization": {"stage": 2}, "train_batch_size": 8}) == "deepspeed"


# Megatron-LM's examples/gpt3/gpt_config.yaml (a --yaml-cfg file), trimmed: Megatron's flat names
# beside `language_model:` and `model_parallel:` sections, and `optimizer` a name
MEGATRON_YAML = """\
# WARNING: Yaml configs is currently an experimental feature
language_model:
  num_layers: 24
  hidden_size: 1024
  num_attention_heads: 16
  hidden_dropout: 0.0

model_parallel:
  tensor_model_parallel_size: 1
  pipeline_model_parallel_size: 1
  sequence_parallel: False

micro_batch_size: 2
global_batch_size: 128
max_position_embeddings: 4096
seed: 1234

# Optimizer
optimizer: adam
lr: 2.5e-4
lr_decay_style: cosine

data_path: null
seq_length: 4096
train_iters: null
"""


def test_a_megatron_lm_yaml_is_not_a_neox_file(lint):
    assert kinds.detect("examples/gpt3/gpt_config.yaml", "yaml", load(MEGATRON_YAML, "yaml").value) == "yaml"
    assert lint({"examples/gpt3/gpt_config.yaml": MEGATRON_YAML}, "examples/gpt3/gpt_config.yaml") == []


def test_neox_keys_are_not_unknown_deepspeed_keys(lint):
    assert lint({"configs/125M.yml": NEOX_125M}, "configs/125M.yml") == []


def test_neox_precision_sections_keep_neox_keys(lint):
    # Pythia's and the 1-3B configs write NeoX's own keys in the precision sections NeoX hands to
    # DeeperSpeed: "fp16": {"fp16": true, ...} and "fp16": {"type": "bfloat16", ...}
    pythia = NEOX_125M.replace('"fp16": {\n     "enabled": true,', '"fp16": {\n     "fp16": true,\n     "type": "bfloat16",\n     "enabled": true,')
    assert '"type": "bfloat16"' in pythia
    assert lint({"configs/pythia/1B.yml": pythia}, "configs/pythia/1B.yml") == []
    # the same keys in a plain DeepSpeed config are unknown: DeepSpeed's fp16 section refuses them
    plain = '{"train_micro_batch_size_per_gpu": 4, "fp16": {"fp16": true, "enabled": true}}'
    [finding] = lint({"ds_config.json": plain}, "ds_config.json")
    assert finding.code == "CFG001" and "`fp16`" in finding.message


def test_neox_deepspeed_sections_are_linted_as_deepspeed(lint):
    text = NEOX_125M.replace('"stage": 1,', '"stage": 5,').replace('"overlap_comm"', '"overlap_com"')
    found = lint({"configs/125M.yml": text}, "configs/125M.yml")
    assert [d.code for d in found] == ["CFG002", "CFG001"]
    assert "`zero_optimization.stage`" in found[0].message
    assert "`overlap_comm`" in found[1].message


# Pythia's models/1B/pythia-1b.yml ZeRO section, for GPT-NeoX: the legacy offload switch, off
PYTHIA_ZERO = NEOX_125M.replace('"contiguous_gradients": True,', '"contiguous_gradients": True,\n    "cpu_offload": false')
GPT_NEOX_REQUIREMENTS = ("deepspeed@git+https://github.com/EleutherAI/DeeperSpeed.git"
                         "@91d1c55ba037b5ada99ae14884dff87a4dc5b9ea#egg=deepspeed\nftfy>=6.0.1\n")


def test_a_key_deeperspeed_still_reads_is_an_info_in_a_neox_config(lint):
    # Pythia pins nothing: its configs run on the DeeperSpeed GPT-NeoX pins
    [finding] = lint({"requirements.txt": "numpy==1.26.1\ntqdm==4.66.1\n", "models/1B/pythia-1b.yml": PYTHIA_ZERO},
                     "models/1B/pythia-1b.yml")
    assert (finding.code, finding.severity.name) == ("CFG003", "INFO")
    assert finding.message == (
        "`cpu_offload` is deprecated in DeeperSpeed too, the DeepSpeed fork GPT-NeoX runs "
        "(EleutherAI/DeeperSpeed@91d1c55, DeepSpeed 0.16.5), which still reads it and logs a warning: "
        "use `offload_optimizer`")
    # GPT-NeoX itself pins the fork by commit
    [finding] = lint({"requirements/requirements.txt": GPT_NEOX_REQUIREMENTS, "configs/pythia/1B.yml": PYTHIA_ZERO},
                     "configs/pythia/1B.yml")
    assert finding.severity.name == "INFO"
    assert "(the commit you pin, requirements/requirements.txt:1, DeepSpeed 0.16.5)" in finding.message


def test_near_miss_a_neox_config_under_an_upstream_deepspeed_release_or_a_plain_deepspeed_config(lint):
    [finding] = lint({"requirements.txt": "deepspeed==0.19.8\n", "configs/1B.yml": PYTHIA_ZERO}, "configs/1B.yml")
    assert (finding.code, finding.severity.name) == ("CFG003", "WARNING")
    assert "is deprecated in DeepSpeed 0.19.8: use `offload_optimizer`" in finding.message
    plain = '{"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 2, "cpu_offload": false}}'
    [finding] = lint({"ds_config.json": plain}, "ds_config.json")
    assert (finding.code, finding.severity.name) == ("CFG003", "WARNING")
    assert "DeeperSpeed" not in finding.message


def test_deepspeed_autotuning_space_is_accepted(lint):
    assert lint({"ds_autotune.json": DS_AUTOTUNING}, "ds_autotune.json") == []
    # without an autotuning section a list is still no stage
    plain = DS_AUTOTUNING.replace('"autotuning"', '"_autotuning_off"')
    [finding] = lint({"ds_config.json": plain}, "ds_config.json")
    assert finding.code == "CFG002"


def test_llamafactory_v1_is_recognised():
    assert kinds.detect("train_lora_sft.yaml", "yaml", load(LF_V1_LORA, "yaml").value) == "llamafactory-v1"
    # an Axolotl YAML also has micro_batch_size, but names its model base_model
    axolotl = {"base_model": "Qwen/Qwen3-4B", "micro_batch_size": 2, "sequence_len": 4096, "adapter": "lora"}
    assert kinds.detect("qlora.yml", "yaml", axolotl) == "axolotl"


def test_llamafactory_v1_lora_run():
    facts = facts_of("train_lora_sft.yaml", LF_V1_LORA)
    assert at(facts, "model")[:2] == ("Qwen/Qwen3-4B", 1)
    assert facts.lora_r.value == 16
    assert facts.lora_targets.value == ("all-linear",)
    assert facts.micro_batch.value == 2
    assert facts.seq_len.value == 4096
    assert facts.fsdp.value == "full"
    # v1's defaults, as assumptions
    assert at(facts, "mixed") == ("bf16", None)
    assert at(facts, "grad_ckpt") == (1, None)


def test_llamafactory_v1_deepspeed_config_file_is_linked():
    facts = facts_of("train_full_deepspeed.yaml", LF_V1_DEEPSPEED)
    assert [r.value for r in facts.references] == ["examples/deepspeed/ds_z3_config.json"]
    assert at(facts, "grad_ckpt")[:2] == (0, 12)
    assert facts.fsdp is None


def test_llamafactory_v1_is_estimated(lint):
    found = lint({"train_lora_sft.yaml": LF_V1_LORA}, "train_lora_sft.yaml", select=("MEM", "CFG"), gpu="h100")
    assert found == []


LF_V1_FSDPTURBO_EP = """\
model: Qwen/Qwen3.5-35B-A3B
model_class: llm

dist_config:
  name: fsdpturbo
  ep_size: 16
  ep_dispatcher: eager

cp_size: 1

init_config:
  name: init_on_meta

### data
train_dataset: data/v1_sft_demo.yaml

### training
output_dir: outputs/Qwen3.5-35B-A3B/full/sft
micro_batch_size: 1
cutoff_len: 256
learning_rate: 1.0e-4
bf16: true
max_steps: 5
"""


def test_llamafactory_v1_fsdpturbo_shards_and_splits_its_experts():
    """``fsdpturbo`` (FSDPTurboParams in llamafactory/v1/plugins/trainer_plugins/distributed/
    interface.py) is FSDP with expert parallelism: with ``ep_size > 1`` each GPU holds 1/EP of the
    routed experts (estimate/model_parallel.py) -- not a DDP verdict (784.7 GiB before)."""
    facts = facts_of("train_full_qwen3_moe_fsdpturbo_ep_fsdp.yaml", LF_V1_FSDPTURBO_EP)
    assert facts.fsdp.value == "full"
    assert facts.unmodelled is None
    # (tensor, pipeline, expert, sequence parallel, distributed optimizer, Megatron's state layout)
    assert facts.model_parallel.value == (1, 1, 16, False, False, False)
    assert facts.model_parallel.origin.range.start.line == 6
    assert facts_of("one_expert_group.yaml", LF_V1_FSDPTURBO_EP.replace("ep_size: 16", "ep_size: 1")).model_parallel is None