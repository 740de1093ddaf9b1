"""The JSON Schemas in ``schemas/``: valid draft 2020-12, right about real configs, and fresh.

* every committed schema is a valid draft 2020-12 schema with memlint's header;
* realistic documents, in the shapes the ecosystem writes them (Hugging Face's DeepSpeed
  examples, ``accelerate config`` output, Axolotl and LLaMA-Factory YAMLs), validate, and
  known mistakes fail at the right place;
* where a tool is installed, the schema agrees with the tool's own loader on those documents,
  and regenerating from the installed package gives the committed bytes. The tools are not
  memlint dependencies, so those tests skip when they are missing (see schemas/README.md for
  the pinned environment that runs them).
"""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
import typing
from pathlib import Path

import jsonschema
import pytest
import yaml

SCHEMAS_DIR = Path(__file__).resolve().parent.parent / "schemas"
sys.path.insert(0, str(SCHEMAS_DIR))

import generate  # noqa: E402
from _generators import TARGETS  # noqa: E402
from _generators.common import dumps  # noqa: E402

EXPECTED_FILES = sorted(name for target in TARGETS for name in target.outputs)


def load(name: str) -> dict:
    return json.loads((SCHEMAS_DIR / name).read_text(encoding="utf-8"))


def validator(name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(load(name))


def errors(name: str, document) -> list[jsonschema.ValidationError]:
    return sorted(validator(name).iter_errors(document), key=lambda e: list(e.absolute_path))


def describe(errs: list[jsonschema.ValidationError]) -> str:
    return "\n".join(f"{list(e.absolute_path)}: {e.message[:200]}" for e in errs)


# --------------------------------------------------------------------------- realistic documents

# Hugging Face "ZeRO-3 with CPU offload" example: "auto" wherever the Trainer fills it.
DS_ZERO3_OFFLOAD = """
{
    "fp16": {"enabled": "auto", "loss_scale": 0, "loss_scale_window": 1000,
             "initial_scale_power": 16, "hysteresis": 2, "min_loss_scale": 1},
    "bf16": {"enabled": "auto"},
    "optimizer": {"type": "AdamW",
                  "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
    "scheduler": {"type": "WarmupDecayLR",
                  "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto",
                             "warmup_num_steps": "auto", "total_num_steps": "auto"}},
    "zero_optimization": {
        "stage": 3,
        "offload_optimizer": {"device": "cpu", "pin_memory": true},
        "offload_param": {"device": "cpu", "pin_memory": true},
        "overlap_comm": true,
        "contiguous_gradients": true,
        "sub_group_size": 1e9,
        "reduce_bucket_size": "auto",
        "stage3_prefetch_bucket_size": "auto",
        "stage3_param_persistence_threshold": "auto",
        "stage3_max_live_parameters": 1e9,
        "stage3_max_reuse_distance": 1e9,
        "stage3_gather_16bit_weights_on_model_save": true
    },
    "gradient_accumulation_steps": "auto",
    "gradient_clipping": "auto",
    "steps_per_print": 2000,
    "train_batch_size": "auto",
    "train_micro_batch_size_per_gpu": "auto",
    "wall_clock_breakdown": false
}
"""

# A hand-written ZeRO-2 config with concrete values (no Trainer involved).
DS_ZERO2 = """
{
    "train_batch_size": 64,
    "train_micro_batch_size_per_gpu": 4,
    "gradient_accumulation_steps": 4,
    "gradient_clipping": 1.0,
    "bf16": {"enabled": true},
    "optimizer": {"type": "AdamW", "params": {"lr": 2e-5, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01}},
    "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 2e-5, "warmup_num_steps": 100}},
    "zero_optimization": {
        "stage": 2,
        "offload_optimizer": {"device": "none"},
        "allgather_partitions": true,
        "allgather_bucket_size": 2e8,
        "overlap_comm": true,
        "reduce_scatter": true,
        "reduce_bucket_size": 2e8,
        "contiguous_gradients": true,
        "round_robin_gradients": true
    },
    "activation_checkpointing": {"partition_activations": true, "contiguous_memory_optimization": false},
    "tensorboard": {"enabled": true, "output_path": "logs/", "job_name": "zero2"},
    "steps_per_print": 100,
    "wall_clock_breakdown": false
}
"""

# `accelerate config` output for FSDP (keys as accelerate writes them, bools as YAML bools).
ACCELERATE_FSDP = """
compute_environment: LOCAL_MACHINE
debug: false
distributed_type: FSDP
downcast_bf16: 'no'
enable_cpu_affinity: false
fsdp_config:
  fsdp_activation_checkpointing: false
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_cpu_ram_efficient_loading: true
  fsdp_offload_params: false
  fsdp_reshard_after_forward: true
  fsdp_state_dict_type: SHARDED_STATE_DICT
  fsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer
  fsdp_version: 2
machine_rank: 0
main_training_function: main
mixed_precision: bf16
num_machines: 1
num_processes: 8
rdzv_backend: static
same_network: true
tpu_env: []
tpu_use_cluster: false
tpu_use_sudo: false
use_cpu: false
"""

ACCELERATE_DEEPSPEED = """
compute_environment: LOCAL_MACHINE
debug: false
deepspeed_config:
  gradient_accumulation_steps: 4
  gradient_clipping: 1.0
  offload_optimizer_device: cpu
  offload_param_device: none
  zero3_init_flag: true
  zero3_save_16bit_model: true
  zero_stage: 3
distributed_type: DEEPSPEED
machine_rank: 0
main_training_function: main
mixed_precision: bf16
num_machines: 1
num_processes: 4
use_cpu: false
"""

AXOLOTL_QLORA = """
base_model: NousResearch/Llama-3.2-1B
tokenizer_type: AutoTokenizer
load_in_8bit: false
load_in_4bit: true
datasets:
  - path: teknium/GPT4-LLM-Cleaned
    type: alpaca
dataset_prepared_path: last_run_prepared
val_set_size: 0.1
output_dir: ./outputs/qlora-out
adapter: qlora
lora_model_dir:
sequence_len: 2048
sample_packing: true
eval_sample_packing: false
lora_r: 32
lora_alpha: 16
lora_dropout: 0.05
lora_target_linear: true
wandb_project:
wandb_log_model:
gradient_accumulation_steps: 4
micro_batch_size: 2
num_epochs: 1
optimizer: paged_adamw_8bit
lr_scheduler: cosine
learning_rate: 0.0002
train_on_inputs: false
bf16: auto
fp16:
tf32: false
gradient_checkpointing: true
resume_from_checkpoint:
logging_steps: 1
loss_watchdog_threshold: 5.0
loss_watchdog_patience: 3
warmup_ratio: 0.1
evals_per_epoch: 4
saves_per_epoch: 1
weight_decay: 0.0
special_tokens:
  pad_token: "<|end_of_text|>"
plugins:
  - axolotl.integrations.liger.LigerPlugin
liger_rms_norm: true
liger_glu_activation: true
"""

TRAINING_ARGS = """
{
    "output_dir": "out/llama-sft",
    "per_device_train_batch_size": 4,
    "per_device_eval_batch_size": 8,
    "gradient_accumulation_steps": 8,
    "learning_rate": 2e-5,
    "num_train_epochs": 3,
    "lr_scheduler_type": "cosine",
    "warmup_steps": 100,
    "optim": "adamw_torch_fused",
    "bf16": true,
    "activation_checkpointing": true,
    "eval_strategy": "steps",
    "eval_steps": 500,
    "save_strategy": "steps",
    "save_steps": 500,
    "logging_steps": 10,
    "report_to": ["tensorboard"],
    "deepspeed": "ds_config_zero3.json",
    "seed": 42
}
"""

LLAMAFACTORY_LORA = """
model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct
trust_remote_code: true
stage: sft
do_train: true
finetuning_type: lora
lora_rank: 8
lora_target: all
dataset: identity,alpaca_en_demo
template: llama3
cutoff_len: 2048
max_samples: 1000
preprocessing_num_workers: 16
output_dir: saves/llama3-8b/lora/sft
logging_steps: 10
save_steps: 500
plot_loss: true
overwrite_output_dir: true
per_device_train_batch_size: 1
gradient_accumulation_steps: 8
learning_rate: 1.0e-4
num_train_epochs: 3.0
lr_scheduler_type: cosine
warmup_ratio: 0.1
bf16: true
ddp_timeout: 180000000
deepspeed: examples/deepspeed/ds_z3_config.json
"""

TRL_SFT = """
output_dir: out/sft
max_length: 2048
packing: true
assistant_only_loss: true
per_device_train_batch_size: 2
gradient_accumulation_steps: 8
learning_rate: 2.0e-5
bf16: true
"""

TRL_DPO = """
output_dir: out/dpo
beta: 0.1
loss_type: sigmoid
max_length: 1024
per_device_train_batch_size: 2
learning_rate: 5.0e-7
"""


def ds(text: str = DS_ZERO3_OFFLOAD) -> dict:
    return json.loads(text)


VALID = [
    ("deepspeed.schema.json", ds(DS_ZERO3_OFFLOAD), "ZeRO-3 offload, HF 'auto' values"),
    ("deepspeed.schema.json", ds(DS_ZERO2), "ZeRO-2, concrete values"),
    ("accelerate.schema.json", yaml.safe_load(ACCELERATE_FSDP), "accelerate FSDP config"),
    ("accelerate.schema.json", yaml.safe_load(ACCELERATE_DEEPSPEED), "accelerate DeepSpeed config"),
    ("axolotl.schema.json", yaml.safe_load(AXOLOTL_QLORA), "axolotl QLoRA YAML"),
    ("hf-training-arguments.schema.json", json.loads(TRAINING_ARGS), "TrainingArguments JSON"),
    ("llamafactory.schema.json", yaml.safe_load(LLAMAFACTORY_LORA), "LLaMA-Factory LoRA YAML"),
    ("trl-sft-config.schema.json", yaml.safe_load(TRL_SFT), "TRL SFTConfig YAML"),
    ("trl-dpo-config.schema.json", yaml.safe_load(TRL_DPO), "TRL DPOConfig YAML, one loss_type string"),
]


@pytest.mark.parametrize("name,document,label", VALID, ids=[v[2] for v in VALID])
def test_realistic_document_validates(name, document, label):
    assert not errors(name, document), describe(errors(name, document))


def mutate(document: dict, path: str, value, *, delete: str | None = None) -> dict:
    """A copy of ``document`` with ``path`` (dotted) set to ``value`` and ``delete`` removed."""
    out = copy.deepcopy(document)
    *parents, leaf = path.split(".")
    node = out
    for step in parents:
        node = node.setdefault(step, {})
    node[leaf] = value
    if delete:
        *parents, leaf = delete.split(".")
        node = out
        for step in parents:
            node = node[step]
        del node[leaf]
    return out


# (schema, document, path of the error, words the best message contains, what it shows)
INVALID = [
    (
        "deepspeed.schema.json",
        mutate(ds(), "gradient_acumulation_steps", 4),
        [],
        "gradient_acumulation_steps",
        "misspelt top-level key (DeepSpeed ignores it silently)",
    ),
    ("deepspeed.schema.json", mutate(ds(), "zero_optimization.stage", 5), ["zero_optimization"], "5", "ZeRO stage 5"),
    (
        "deepspeed.schema.json",
        mutate(ds(), "zero_optimization.offload_optimizer", {"device": "gpu"}),
        ["zero_optimization"],
        "gpu",
        "offload device 'gpu'",
    ),
    (
        "deepspeed.schema.json",
        mutate(ds(), "zero_optimization.overlap_comm", "auto"),
        ["zero_optimization"],
        "auto",
        "'auto' where no integration fills it",
    ),
    (
        "deepspeed.schema.json",
        mutate(ds(), "steps_per_print", "auto"),
        ["steps_per_print"],
        "auto",
        "'auto' on a top-level key nobody fills",
    ),
    (
        "deepspeed.schema.json",
        mutate(ds(), "zero_optimization.stage3_max_live_parameters", "auto"),
        ["zero_optimization"],
        "auto",
        "'auto' on a ZeRO-3 knob the Trainer does not fill",
    ),
    (
        "deepspeed.schema.json",
        mutate(
            ds(),
            "zero_optimization.prefetch_bucket_size",
            "auto",
            delete="zero_optimization.stage3_prefetch_bucket_size",
        ),
        ["zero_optimization"],
        "auto",
        "'auto' under the field name (HF fills only the stage3_ alias)",
    ),
    (
        "deepspeed.schema.json",
        mutate(ds(), "zero_optimization.max_live_parameters", 10**9),
        ["zero_optimization"],
        "",
        "both spellings of one field (pydantic rejects it)",
    ),
    (
        "deepspeed.schema.json",
        mutate(ds(), "zero_optimization.stage3_max_live_params", 10**9),
        ["zero_optimization"],
        "stage3_max_live_params",
        "misspelt ZeRO key",
    ),
    ("deepspeed.schema.json", mutate(ds(), "amp", {"enabled": True}), [], "amp", "a key DeepSpeed removed"),
    (
        "deepspeed.schema.json",
        mutate(ds(), "fp16.loss_scale", "auto"),
        ["fp16"],
        "auto",
        "'auto' inside fp16 other than enabled",
    ),
    (
        "deepspeed.schema.json",
        mutate(ds(DS_ZERO2), "train_micro_batch_size_per_gpu", 0),
        ["train_micro_batch_size_per_gpu"],
        "0",
        "micro batch 0",
    ),
    (
        "deepspeed.schema.json",
        mutate(ds(DS_ZERO2), "activation_checkpointing.partition_activation", True),
        ["activation_checkpointing"],
        "partition_activation",
        "misspelt key in a hand-read section",
    ),
    (
        "axolotl.schema.json",
        mutate(yaml.safe_load(AXOLOTL_QLORA), "sequence_length", 2048, delete="sequence_len"),
        [],
        "sequence_length",
        "sequence_length (Axolotl expects sequence_len and ignores the other)",
    ),
    (
        "axolotl.schema.json",
        mutate(yaml.safe_load(AXOLOTL_QLORA), "micro_batch_size", "2x"),
        ["micro_batch_size"],
        "2x",
        "non-integer micro batch",
    ),
    (
        "accelerate.schema.json",
        mutate(yaml.safe_load(ACCELERATE_FSDP), "fsdp_config.fsdp_ofload_params", True),
        ["fsdp_config"],
        "fsdp_ofload_params",
        "misspelt fsdp_config key",
    ),
    (
        "accelerate.schema.json",
        mutate(yaml.safe_load(ACCELERATE_FSDP), "mixed_precision", "fp32"),
        ["mixed_precision"],
        "fp32",
        "mixed precision fp32 is not an accelerate choice",
    ),
    (
        "accelerate.schema.json",
        mutate(yaml.safe_load(ACCELERATE_FSDP), "distributed_type", "ZERO3"),
        ["distributed_type"],
        "ZERO3",
        "unknown distributed type",
    ),
    (
        "accelerate.schema.json",
        mutate(yaml.safe_load(ACCELERATE_FSDP), "num_process", 8),
        [],
        "num_process",
        "misspelt top-level key",
    ),
    (
        "hf-training-arguments.schema.json",
        mutate(json.loads(TRAINING_ARGS), "per_device_batch_size", 4),
        [],
        "per_device_batch_size",
        "unknown TrainingArguments key",
    ),
    (
        "hf-training-arguments.schema.json",
        mutate(json.loads(TRAINING_ARGS), "lr_scheduler_type", "cosine_annealing"),
        ["lr_scheduler_type"],
        "cosine_annealing",
        "unknown SchedulerType",
    ),
    (
        "hf-training-arguments.schema.json",
        yaml.safe_load("learning_rate: 2e-5\n"),
        ["learning_rate"],
        "2e-5",
        "YAML 1.1 reads 2e-5 (no dot) as a string",
    ),
    (
        "llamafactory.schema.json",
        mutate(yaml.safe_load(LLAMAFACTORY_LORA), "stage", "grpo"),
        ["stage"],
        "grpo",
        "unknown LLaMA-Factory stage",
    ),
    (
        "llamafactory.schema.json",
        mutate(yaml.safe_load(LLAMAFACTORY_LORA), "lora_rnak", 8),
        [],
        "lora_rnak",
        "misspelt LLaMA-Factory key",
    ),
    (
        "trl-sft-config.schema.json",
        mutate(yaml.safe_load(TRL_SFT), "max_seq_length", 2048, delete="max_length"),
        [],
        "max_seq_length",
        "max_seq_length (renamed max_length in TRL)",
    ),
]


@pytest.mark.parametrize(
    "name,document,path,words,label", INVALID, ids=[f"{v[0].split('.')[0]}: {v[4]}" for v in INVALID]
)
def test_known_mistake_fails(name, document, path, words, label):
    errs = errors(name, document)
    assert errs, f"{label}: expected a schema error"
    best = jsonschema.exceptions.best_match(errs)
    assert list(best.absolute_path)[: len(path)] == path, describe(errs)
    assert words in json.dumps(best.instance) + best.message, describe(errs)


# Every path the Hugging Face Trainer fills (transformers integrations/deepspeed.py).
HF_AUTO_PATHS = [
    "train_micro_batch_size_per_gpu",
    "gradient_accumulation_steps",
    "train_batch_size",
    "gradient_clipping",
    "fp16.enabled",
    "bf16.enabled",
    "optimizer.params.lr",
    "optimizer.params.betas",
    "optimizer.params.eps",
    "optimizer.params.weight_decay",
    "scheduler.params.warmup_min_lr",
    "scheduler.params.warmup_max_lr",
    "scheduler.params.warmup_num_steps",
    "scheduler.params.total_num_steps",
    "zero_optimization.reduce_bucket_size",
    "zero_optimization.stage3_prefetch_bucket_size",
    "zero_optimization.stage3_param_persistence_threshold",
]


@pytest.mark.parametrize("path", HF_AUTO_PATHS)
def test_auto_is_valid_where_the_trainer_fills_it(path):
    document = mutate(ds(DS_ZERO2), path, "auto")
    assert not errors("deepspeed.schema.json", document), describe(errors("deepspeed.schema.json", document))


def test_deepspeed_auto_paths_are_annotated():
    """The schema says who fills each "auto" (memlint links it to the TrainingArguments value)."""
    zero = load("deepspeed.schema.json")["properties"]["zero_optimization"]["anyOf"][0]["properties"]
    assert "transformers" in zero["reduce_bucket_size"]["x-memlint-auto-filled-by"]
    assert "auto" not in json.dumps(zero["overlap_comm"])


@pytest.mark.parametrize(
    "name,document",
    [
        ("deepspeed.schema.json", mutate(ds(DS_ZERO2), "zero_optimization.cpu_offload", True)),
        ("deepspeed.schema.json", mutate(ds(DS_ZERO2), "bfloat16", {"enabled": True}, delete="bf16")),
        ("deepspeed.schema.json", {"train_batch_size": 8, "zero_optimization": True}),
        ("hf-training-arguments.schema.json", {"output_dir": "o", "gradient_checkpointing": True}),
        ("accelerate.schema.json", {"distributed_type": "MULTI_GPU", "fp16": True}),
    ],
    ids=[
        "ds cpu_offload",
        "ds bfloat16",
        "ds boolean zero_optimization",
        "hf gradient_checkpointing",
        "accelerate fp16",
    ],
)
def test_deprecated_spellings_stay_valid(name, document):
    assert not errors(name, document), describe(errors(name, document))


def test_deprecated_spellings_are_marked():
    schema = load("deepspeed.schema.json")
    zero = schema["properties"]["zero_optimization"]["anyOf"][0]["properties"]
    assert zero["cpu_offload"]["deprecated"] is True
    assert zero["cpu_offload"]["x-memlint-replaced-by"] == "offload_optimizer"
    assert schema["properties"]["bfloat16"]["deprecated"] is True
    hf = load("hf-training-arguments.schema.json")["$defs"]["TrainingArgumentsFields"]["properties"]
    assert hf["gradient_checkpointing"]["deprecated"] is True
    assert hf["gradient_checkpointing"]["x-memlint-replaced-by"] == "activation_checkpointing"


def test_seq2seq_variant():
    schema = load("hf-training-arguments.schema.json")
    seq2seq = jsonschema.Draft202012Validator({**schema, "$ref": "#/$defs/Seq2SeqTrainingArguments"})
    document = {**json.loads(TRAINING_ARGS), "predict_with_generate": True, "generation_max_length": 128}
    assert not list(seq2seq.iter_errors(document))
    assert errors("hf-training-arguments.schema.json", document), "plain TrainingArguments has no generation keys"


# --------------------------------------------------------------------------- the files themselves


def test_every_target_has_a_committed_file():
    assert sorted(p.name for p in SCHEMAS_DIR.glob("*.schema.json")) == EXPECTED_FILES


@pytest.mark.parametrize("name", EXPECTED_FILES)
def test_schema_is_valid_draft_2020_12(name):
    schema = load(name)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == f"https://memlint.dev/schemas/{name}"
    assert schema["title"]
    stamp = schema["x-memlint-generated-from"]
    assert stamp["by"] == "schemas/generate.py"
    assert stamp["package"] and stamp["version"]


@pytest.mark.parametrize("name", EXPECTED_FILES)
def test_schema_file_is_in_canonical_form(name):
    """Sorted keys and fixed indentation: regenerating cannot reorder anything."""
    text = (SCHEMAS_DIR / name).read_text(encoding="utf-8")
    assert text == dumps(json.loads(text))


@pytest.mark.parametrize("name", EXPECTED_FILES)
def test_local_refs_resolve(name):
    schema = load(name)
    refs = []

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("$ref"), str):
                refs.append(node["$ref"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    for ref in refs:
        assert ref.startswith("#/$defs/"), ref
        assert ref.rsplit("/", 1)[-1] in schema["$defs"], ref


# --------------------------------------------------------------------------- against the tools


def installed(*modules: str) -> None:
    """Skip (with the reason) unless every module can be found; nothing is imported."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (see schemas/README.md for the pinned environment)")


def same_versions(target) -> None:
    """Skip when the installed tool is not the version the committed schema came from."""
    mismatches = generate.version_mismatches(target)
    if mismatches:
        pytest.skip("; ".join(mismatches))


def requires(target_name: str, *extra_modules: str) -> None:
    """Skip unless the tool behind ``target_name`` is installed at the committed version."""
    target = next(t for t in TARGETS if t.name == target_name)
    installed(*target.modules, *extra_modules)
    same_versions(target)


@pytest.mark.parametrize("target", TARGETS, ids=[t.name for t in TARGETS])
def test_regenerating_gives_the_committed_file(target):
    installed(*target.modules)
    same_versions(target)
    for name, text in generate.render(target).items():
        assert text == (SCHEMAS_DIR / name).read_text(encoding="utf-8"), f"{name} is stale: run schemas/generate.py"


def concrete(document: dict) -> dict:
    """The HF example with every "auto" replaced by what the Trainer would write."""
    text = json.dumps(document)
    for key, value in {'"betas": "auto"': '"betas": [0.9, 0.999]'}.items():
        text = text.replace(key, value)
    out = json.loads(text.replace('"enabled": "auto"', '"enabled": false').replace('"auto"', "16"))
    out["train_batch_size"] = 16 * 16 * 4  # micro batch 16 x accumulation 16 x 4 ranks
    return out


DS_AGREEMENT = [
    (concrete(ds(DS_ZERO3_OFFLOAD)), True),
    (ds(DS_ZERO2), True),
    (mutate(ds(DS_ZERO2), "zero_optimization.stage", 5), False),
    (mutate(ds(DS_ZERO2), "zero_optimization.offload_optimizer", {"device": "gpu"}), False),
    (mutate(ds(DS_ZERO2), "zero_optimization.stage3_max_live_params", 1), False),
    (mutate(ds(DS_ZERO2), "zero_optimization.allgather_bucket_size", 2e8, delete=None), True),
    (
        mutate(mutate(ds(DS_ZERO2), "zero_optimization.stage", 3), "zero_optimization.stage3_max_live_parameters", 5),
        True,
    ),
    (
        mutate(
            mutate(ds(DS_ZERO2), "zero_optimization.stage3_max_live_parameters", 5),
            "zero_optimization.max_live_parameters",
            5,
        ),
        False,
    ),
    (mutate(ds(DS_ZERO2), "bf16.enable", True), False),
    (mutate(ds(DS_ZERO2), "fp16.loss_scale_window", "often"), False),
    (mutate(ds(DS_ZERO2), "amp", {"enabled": True}), False),
    (mutate(ds(DS_ZERO2), "tensorboard.enabled", "yes please"), False),
]


@pytest.mark.parametrize("document,accepted", DS_AGREEMENT)
def test_deepspeed_agrees_with_the_schema(document, accepted):
    """Where DeepSpeed itself validates (its pydantic sections, removed keys), it and the
    schema give the same verdict."""
    requires("deepspeed")
    from unittest import mock

    import deepspeed.comm
    from deepspeed.runtime.config import DeepSpeedConfig

    # Rank 0 of 4 (the ZeRO-2 example's batch sizes are for 4 GPUs: 64 = 4 x 4 x 4).
    with (
        mock.patch.object(deepspeed.comm, "get_rank", lambda *a, **k: 0),
        mock.patch.object(deepspeed.comm, "get_world_size", lambda *a, **k: 4),
    ):
        try:
            DeepSpeedConfig(copy.deepcopy(document))
            deepspeed_accepts = True
        except Exception:  # noqa: BLE001 - any refusal
            deepspeed_accepts = False
    assert deepspeed_accepts is accepted
    assert (not errors("deepspeed.schema.json", document)) is accepted, describe(
        errors("deepspeed.schema.json", document)
    )


@pytest.mark.parametrize(
    "text,accepted",
    [
        (ACCELERATE_FSDP, True),
        (ACCELERATE_DEEPSPEED, True),
        (ACCELERATE_FSDP + "num_process: 8\n", False),
        (ACCELERATE_FSDP.replace("distributed_type: FSDP", "distributed_type: ZERO3"), False),
    ],
)
def test_accelerate_agrees_with_the_schema(text, accepted, tmp_path):
    requires("accelerate")
    from accelerate.commands.config.config_args import ClusterConfig

    path = tmp_path / "default_config.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        ClusterConfig.from_yaml_file(str(path))
        accelerate_accepts = True
    except Exception:  # noqa: BLE001 - any refusal
        accelerate_accepts = False
    assert accelerate_accepts is accepted
    document = yaml.safe_load(text)
    assert (not errors("accelerate.schema.json", document)) is accepted


# FSDP1 as `accelerate config` writes it: the questionnaire asks for the sharding strategy and
# stores it under `fsdp_reshard_after_forward` (commands/config/cluster.py), whose launch argument
# defaults to "true" (the FSDP2 form)
ACCELERATE_FSDP1 = ACCELERATE_FSDP.replace("fsdp_version: 2", "fsdp_version: 1").replace(
    "fsdp_reshard_after_forward: true", "fsdp_reshard_after_forward: {strategy}")


@pytest.mark.parametrize("strategy", ["FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD"])
def test_an_fsdp1_sharding_strategy_under_reshard_after_forward_is_valid(strategy):
    requires("accelerate", "torch")
    from accelerate.utils import FullyShardedDataParallelPlugin

    document = yaml.safe_load(ACCELERATE_FSDP1.format(strategy=strategy))
    # what `accelerate launch` hands the plugin (FSDP_RESHARD_AFTER_FORWARD) is read as a strategy
    plugin = FullyShardedDataParallelPlugin(fsdp_version=1, reshard_after_forward=strategy)
    assert plugin.reshard_after_forward.name == strategy
    assert not errors("accelerate.schema.json", document), describe(errors("accelerate.schema.json", document))
    assert errors("accelerate.schema.json", mutate(document, "fsdp_config.fsdp_reshard_after_forward", "FULL"))


@pytest.mark.parametrize(
    "document,accepted",
    [
        (json.loads(TRAINING_ARGS), True),
        (mutate(json.loads(TRAINING_ARGS), "per_device_batch_size", 4), False),
        (mutate(json.loads(TRAINING_ARGS), "lr_scheduler_type", "cosine_annealing"), False),
        # handed to Trainer.train(resume_from_checkpoint=...), which takes str | bool
        (mutate(json.loads(TRAINING_ARGS), "resume_from_checkpoint", False), True),
    ],
)
def test_transformers_agrees_with_the_schema(document, accepted):
    requires("transformers", "torch")
    from transformers import HfArgumentParser, TrainingArguments

    document = {k: v for k, v in document.items() if k != "deepspeed"}  # would load the file
    try:
        # use_cpu: bf16 is checked against the machine, which is no business of the schema.
        HfArgumentParser(TrainingArguments).parse_dict({**document, "use_cpu": True})
        transformers_accepts = True
    except Exception:  # noqa: BLE001 - any refusal
        transformers_accepts = False
    assert transformers_accepts is accepted
    assert (not errors("hf-training-arguments.schema.json", document)) is accepted


@pytest.mark.parametrize(
    "text,accepted",
    [
        (AXOLOTL_QLORA, True),
        (AXOLOTL_QLORA.replace("micro_batch_size: 2", "micro_batch_size: two"), False),
    ],
)
def test_axolotl_agrees_with_the_schema(text, accepted):
    requires("axolotl")
    from axolotl.utils.schemas.config import AxolotlInputConfig

    document = yaml.safe_load(text)
    try:
        AxolotlInputConfig(**document)
        axolotl_accepts = True
    except Exception:  # noqa: BLE001 - any refusal
        axolotl_accepts = False
    assert axolotl_accepts is accepted
    assert (not errors("axolotl.schema.json", document)) is accepted


def test_check_mode_reports_a_stale_file(tmp_path, capsys):
    """``--check`` compares with the committed files and exits 1 on a difference."""
    requires("transformers")
    target = next(t for t in TARGETS if t.name == "transformers")
    for name in target.outputs:
        (tmp_path / name).write_text((SCHEMAS_DIR / name).read_text(encoding="utf-8"), encoding="utf-8")
    assert generate.main(["--check", "--out", str(tmp_path), "transformers"]) == 0
    (tmp_path / target.outputs[0]).write_text("{}\n", encoding="utf-8")
    assert generate.main(["--check", "--out", str(tmp_path), "transformers"]) == 1
    assert "STALE" in capsys.readouterr().out


def test_missing_tool_is_skipped_with_a_message(capsys, monkeypatch):
    fake = generate.Target(
        name="nothing",
        package="nothing",
        outputs=("x.schema.json",),
        modules=("memlint_no_such_module",),
        build=lambda: {},
    )
    monkeypatch.setattr(generate, "TARGETS", (fake,))
    assert generate.main(["--check"]) == 0
    assert "skip nothing: not installed" in capsys.readouterr().out


# Aria's recipes/accelerate_configs/zero3.yaml (and open-r1's, TRL's): the accumulation and the
# clipping are left to the training script's TrainingArguments
ACCELERATE_DEEPSPEED_AUTO = ACCELERATE_DEEPSPEED.replace(
    "gradient_accumulation_steps: 4", "gradient_accumulation_steps: auto").replace(
    "gradient_clipping: 1.0", "gradient_clipping: auto")


def test_deepspeed_config_auto_is_what_the_plugin_keeps(monkeypatch):
    """`accelerate launch` hands `deepspeed_config.gradient_accumulation_steps` on as
    ACCELERATE_GRADIENT_ACCUMULATION_STEPS (utils/launch.py) and DeepSpeedPlugin keeps "auto"
    for the Trainer to fill; the ZeRO stage is read with int(), so "auto" stays wrong there."""
    requires("accelerate")
    from accelerate.utils import DeepSpeedPlugin

    document = yaml.safe_load(ACCELERATE_DEEPSPEED_AUTO)
    monkeypatch.setenv("ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "auto")
    monkeypatch.setenv("ACCELERATE_GRADIENT_CLIPPING", "auto")
    plugin = DeepSpeedPlugin()
    assert (plugin.deepspeed_config["gradient_accumulation_steps"], plugin.deepspeed_config["gradient_clipping"]) \
        == ("auto", "auto")
    assert not errors("accelerate.schema.json", document), describe(errors("accelerate.schema.json", document))
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "auto")
    with pytest.raises(ValueError):
        DeepSpeedPlugin()
    assert errors("accelerate.schema.json", mutate(document, "deepspeed_config.zero_stage", "auto"))
    assert errors("accelerate.schema.json", mutate(document, "deepspeed_config.gradient_clipping", "often"))


@pytest.mark.parametrize("name", ["hf-training-arguments", "trl-sft-config", "trl-dpo-config", "trl-grpo-config"])
def test_resume_from_checkpoint_takes_what_trainer_train_takes(name):
    """Scripts pass `training_args.resume_from_checkpoint` to `trainer.train`, which resumes from
    the last checkpoint on True and not at all on False; a number is still wrong."""
    requires("transformers", "torch")
    import inspect

    from transformers import Trainer

    assert bool in typing.get_args(inspect.signature(Trainer.train).parameters["resume_from_checkpoint"].annotation)
    document = {"output_dir": "outputs/sft", "learning_rate": 2.0e-5}
    for value in (False, True, "outputs/sft/checkpoint-500", None):
        found = errors(f"{name}.schema.json", {**document, "resume_from_checkpoint": value})
        assert not found, describe(found)
    assert errors(f"{name}.schema.json", {**document, "resume_from_checkpoint": 500})
