"""What a config document is, judged by its content first and its name second.

``ds_config.json`` is a DeepSpeed config, but so is ``configs/run7.json`` if it holds
``zero_optimization``; an Axolotl YAML has ``base_model``; an Accelerate config has
``distributed_type``; a LLaMA-Factory YAML has ``model_name_or_path`` with ``stage``,
``finetuning_type`` or ``template``; TrainingArguments (or TRL's SFTConfig/DPOConfig) written
as JSON/YAML has fields only the Trainer's arguments have (``per_device_train_batch_size``,
``output_dir``, ``lr_scheduler_type``); a torchtune recipe config names torchtune components
(``model: {_component_: torchtune.models.llama3_1.lora_llama3_1_8b}``); a LightningCLI config has a
``trainer`` section of the Trainer's own arguments beside ``model``/``data``; a GPT-NeoX argument file
has NeoX's model and parallelism keys beside DeepSpeed sections. A file that merely shares a few generic key names with
a training config (a Hydra or Lightning config with ``learning_rate``) must not be mistaken
for one: then most of its keys have to be keys the tool knows, which the committed schemas tell.
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import Any

from memlint.model.text_enum import TextEnum


class DocumentKind(TextEnum):
    """What a document is to memlint: training code, a launcher, one tool's config, or plain
    JSON/YAML/other text it only checks for syntax."""

    PYTHON = "python"  # training code (imports an ML library)
    PYTHON_OTHER = "python-other"  # Python that imports no ML library: read, not parsed
    SHELL = "shell"  # launcher scripts: torchrun, deepspeed, accelerate launch, slurm
    MARKDOWN = "markdown"  # a project's README and docs: launch commands in shell code blocks
    MAKEFILE = "makefile"  # a Makefile: launch commands in its targets' recipes
    DEEPSPEED = "deepspeed"
    ACCELERATE = "accelerate"
    AXOLOTL = "axolotl"
    LLAMAFACTORY = "llamafactory"
    LLAMAFACTORY_V1 = "llamafactory-v1"
    HF_ARGS = "hf-args"  # TrainingArguments / TRL configs written as JSON or YAML
    TORCHTUNE = "torchtune"
    COMPOSER = "composer"
    LIGHTNING_CLI = "lightning-cli"  # LightningCLI's config.yaml: trainer / model / data sections
    NEOX = "neox"
    MEMLINT_SETTINGS = "memlint-settings"
    JSON = "json"
    YAML = "yaml"
    OTHER = "other"


# the kinds memlint reads as one tool's config
CONFIG_KINDS = frozenset({
    DocumentKind.DEEPSPEED, DocumentKind.ACCELERATE, DocumentKind.AXOLOTL, DocumentKind.LLAMAFACTORY,
    DocumentKind.LLAMAFACTORY_V1, DocumentKind.HF_ARGS, DocumentKind.TORCHTUNE, DocumentKind.NEOX,
    DocumentKind.COMPOSER, DocumentKind.LIGHTNING_CLI,
})
# the kinds that can define a run of their own (a model, a trainer, a launched script)
ENTRY_KINDS = frozenset({
    DocumentKind.PYTHON, DocumentKind.AXOLOTL, DocumentKind.LLAMAFACTORY, DocumentKind.LLAMAFACTORY_V1,
    DocumentKind.HF_ARGS, DocumentKind.TORCHTUNE, DocumentKind.COMPOSER, DocumentKind.LIGHTNING_CLI,
    DocumentKind.SHELL, DocumentKind.MARKDOWN,
    DocumentKind.MAKEFILE,
})
# configs that only take part in runs other documents define
STANDALONE_KINDS = frozenset({DocumentKind.DEEPSPEED, DocumentKind.ACCELERATE})
# the kinds whose documents can take part in a training run
RUN_KINDS = ENTRY_KINDS | STANDALONE_KINDS

DEEPSPEED_SIGNATURE = {"zero_optimization", "train_micro_batch_size_per_gpu"}
DEEPSPEED_KEYS = {
    "zero_optimization", "train_micro_batch_size_per_gpu", "train_batch_size",
    "gradient_accumulation_steps", "zero_allow_untested_optimizer", "fp16", "bf16",
    "gradient_clipping", "steps_per_print", "wall_clock_breakdown", "activation_checkpointing",
}
ACCELERATE_SIGNATURE = {"compute_environment", "distributed_type"}
ACCELERATE_KEYS = {"compute_environment", "distributed_type", "num_processes", "machine_rank", "use_cpu",
                   "mixed_precision", "num_machines", "main_training_function"}
AXOLOTL_KEYS = {"sequence_len", "micro_batch_size", "datasets", "adapter", "lora_r", "load_in_4bit",
                "load_in_8bit", "num_epochs", "lora_target_linear", "sample_packing", "val_set_size"}
LLAMAFACTORY_KEYS = {"stage", "finetuning_type", "template", "cutoff_len", "lora_target", "dataset_dir",
                     "quantization_bit", "lora_rank"}
HF_ARGS_KEYS = {
    "per_device_train_batch_size", "output_dir", "gradient_accumulation_steps", "learning_rate",
    "num_train_epochs", "gradient_checkpointing", "activation_checkpointing", "bf16", "fp16", "optim",
    "max_seq_length", "max_length", "max_steps", "lr_scheduler_type", "warmup_ratio", "logging_steps",
}
# Fields only the HF Trainer's arguments have: two of them make a TrainingArguments/TRL file
# even when most of its keys belong to the script's own dataclasses (TRL's ModelConfig).
HF_ARGS_DISTINCTIVE = {
    "per_device_train_batch_size", "per_device_eval_batch_size", "gradient_accumulation_steps", "output_dir",
    "optim", "lr_scheduler_type", "warmup_ratio", "logging_steps", "save_strategy", "eval_strategy",
    "max_seq_length", "max_length", "gradient_checkpointing", "activation_checkpointing", "report_to",
}
# GPT-NeoX's own arguments (megatron/neox_arguments, written with "_" or "-"): a NeoX file passes
# its DeepSpeed keys on to DeepSpeed and keeps these for itself
NEOX_KEYS = {"pipe_parallel_size", "model_parallel_size", "num_layers", "hidden_size", "num_attention_heads",
             "seq_length", "max_position_embeddings", "pos_emb", "norm", "checkpoint_activations",
             "tokenizer_type", "vocab_file", "data_path", "train_iters", "partition_activations"}
NEOX_SIGNATURE = 3
KNOWN_SHARE = 0.5  # of a TrainingArguments-like file's keys that the schemas must know
# a file of many keys of which the schemas know fewer than this share is another tool's, whatever
# Trainer names it shares (the lowest share among the real projects' TrainingArguments-like files
# of bench/precision_repos.tsv is 0.14, Latte's OmegaConf configs; a kohya_ss preset has 0.06)
FOREIGN_SHARE = 0.1
AXOLOTL_MIN_KNOWN = 2  # an Axolotl config without its signature keys still writes more of its keys than `base_model`
FOREIGN_MIN_KEYS = 40

_DEEPSPEED_NAME = re.compile(r"^(ds|deepspeed)([_-]?config)?([_-].*)?\.json$|^zero[_-]?(\d|stage).*\.json$", re.I)
_ACCELERATE_NAME = re.compile(r"^(accelerate|default_config)([_-].*)?\.(ya?ml|json)$", re.I)
_ACCELERATE_DIR = re.compile(r"(^|/)accelerate(_configs?)?/", re.I)
_SETTINGS_NAME = re.compile(r"^\.?memlint\.toml$")


def detect(path: str, syntax: str, value: Any) -> DocumentKind:
    """The document kind: one tool's config, or the plain syntax ("json"/"yaml") when it is
    none of them."""
    return DocumentKind(_detect(path, syntax, value))


def _detect(path: str, syntax: str, value: Any) -> str:
    name = PurePath(path).name
    posix = PurePath(path).as_posix()
    if _SETTINGS_NAME.match(name):
        return "memlint-settings"
    if not isinstance(value, dict):
        return by_name(name, posix, syntax) or syntax
    keys = {k for k in value if isinstance(k, str)}
    if _is_model_config(keys):
        return syntax  # Qwen-Audio's config.json has "bf16": false and "fp16": false beside its sizes
    if syntax == "yaml" and _is_torchtune(value):
        return "torchtune"
    if _is_llamafactory_v1(value):
        return "llamafactory-v1"
    if syntax == "yaml" and _is_composer(value):
        return "composer"
    if syntax == "yaml" and _is_lightning_cli(value):
        return "lightning-cli"
    if len({k.replace("-", "_") for k in keys} & NEOX_KEYS) >= NEOX_SIGNATURE and not _is_megatron_yaml(value):
        return "neox"
    if syntax == "json" and keys & DEEPSPEED_SIGNATURE:
        return "deepspeed"
    if keys & ACCELERATE_SIGNATURE and len(keys & ACCELERATE_KEYS) >= 2:
        return "accelerate"
    if _is_axolotl(value, keys):
        return "axolotl"
    if "model_name_or_path" in keys and keys & LLAMAFACTORY_KEYS and known_share(keys, "llamafactory") >= KNOWN_SHARE:
        return "llamafactory"
    if syntax == "json" and len(keys & DEEPSPEED_KEYS) >= 2 and "output_dir" not in keys \
            and known_share(keys, "deepspeed") >= KNOWN_SHARE:
        # not a kohya_ss GUI preset: 92 keys, `train_batch_size` and `gradient_accumulation_steps`
        # among them, 3 % of them DeepSpeed's (the real configs this branch takes: 67 % and more)
        return "deepspeed"
    if syntax == "yaml" and _is_hydra_composition(value):
        return by_name(name, posix, syntax) or syntax  # its keys are the project's own dataclass's
    if is_trainer_arguments(keys):
        return "hf-args"
    named = by_name(name, posix, syntax)
    if named is not None and (not keys or known_share(keys, named) >= KNOWN_SHARE):
        return named
    return syntax


def _is_axolotl(value: dict, keys: set[str]) -> bool:
    """An Axolotl config: ``base_model`` a model's name or path, beside Axolotl's own keys, which
    make most of the file (every one of Axolotl's 250 examples: 92 % and more). A report or
    registry that records its ``base_model`` as a mapping (tw-med-llm-qlora's ``reports/*.json``),
    beside keys of its own alone (an adapter list), or beside a few of Axolotl's names among many
    of its own (l20-edu-135m-pretrain's run summaries: ``micro_batch_size`` with ``train_examples``,
    ``final_checkpoint`` and sections of losses; a third of its keys Axolotl's), is the project's."""
    if "base_model" not in keys or isinstance(value["base_model"], (dict, list)):
        return False  # (None: a broken file's first keys, whose values are not read)
    from memlint.configs.schema import SchemaUnavailable, top_level_keys

    try:
        known = len(keys & top_level_keys("axolotl"))
    except SchemaUnavailable:
        return bool(keys & AXOLOTL_KEYS) or len(keys) > 1
    if known < KNOWN_SHARE * len(keys):
        return False
    return bool(keys & AXOLOTL_KEYS) or known >= AXOLOTL_MIN_KNOWN


def _is_model_config(keys: set[str]) -> bool:
    """A model's ``config.json`` as ``PretrainedConfig.save_pretrained`` writes it: its
    ``architectures`` beside the ``transformers_version`` (or ``model_type``) that wrote it. A
    remote-code model's config may carry its authors' training settings too (VLM2Vec's InternVideo2
    config: ``output_dir``, ``gradient_checkpointing``, ``batch_size``), but nothing parses it as
    TrainingArguments: ``from_pretrained`` reads it into the model's config class."""
    return "architectures" in keys and bool(keys & {"transformers_version", "model_type"})


def _is_hydra_composition(value: dict) -> bool:
    """A Hydra/OmegaConf config: a ``defaults:`` list composing other configs, or a value
    OmegaConf reads as mandatory (``exp_name: ???``). HfArgumentParser refuses both, so however
    many Trainer-like names it holds (``gradient_accumulation_steps``, ``max_length``), such a
    file is read by the project's own code (eric-mitchell/direct-preference-optimization's
    ``config/config.yaml`` with ``@hydra.main(config_path="config")``). So is a node that reads
    its parent's values through OmegaConf's relative interpolation (PipelineRL's
    ``conf/finetune/base.yaml``: ``config_name: ${..model_path}``), a part of a composed tree the
    project's code reads, unless Hydra instantiates it as a class (``_target_``)."""
    return isinstance(value.get("defaults"), list) or any(v == "???" for v in value.values()) or (
        "_target_" not in value and any(isinstance(v, str) and "${." in v for v in value.values()))


def _is_megatron_yaml(value: dict) -> bool:
    """A Megatron-LM ``--yaml-cfg`` file (``megatron/training/yaml_arguments.py``; its
    ``examples/gpt3/gpt_config.yaml``): Megatron's flat argument names, as GPT-NeoX writes many of
    them, but the model's and the parallelism's under ``language_model:`` and ``model_parallel:``
    sections, and ``optimizer: adam`` a name where NeoX's is a mapping. No schema of memlint's
    covers it."""
    return isinstance(value.get("language_model"), dict) and isinstance(value.get("model_parallel"), dict)


def _is_torchtune(value: dict) -> bool:
    from memlint.configs.torchtune import is_torchtune

    return is_torchtune(value)


def _is_composer(value: dict) -> bool:
    from memlint.configs.composer import is_composer

    return is_composer(value)


def _is_lightning_cli(value: dict) -> bool:
    from memlint.configs.lightning_cli import is_lightning_cli

    return is_lightning_cli(value)


def _is_llamafactory_v1(value: dict) -> bool:
    from memlint.configs.llamafactory_v1 import is_llamafactory_v1

    return is_llamafactory_v1(value)


def by_name(name: str, posix: str, syntax: str) -> str | None:
    """The kind a file's name promises when its content does not decide."""
    if syntax == "json" and _DEEPSPEED_NAME.match(name):
        return "deepspeed"
    if syntax in ("yaml", "json") and (_ACCELERATE_NAME.match(name) or _ACCELERATE_DIR.search(posix)):
        return "accelerate"
    return None


def is_trainer_arguments(keys: set[str]) -> bool:
    """Do these keys read as TrainingArguments (a file of them, or a section of a project's own
    config)? Two of its distinctive keys are enough, unless the Trainer's schemas know almost
    none of the file's keys: a kohya_ss GUI preset (HunyuanDiT's ``huynyuan_lora.json``: 160
    keys, of which ``output_dir``, ``gradient_accumulation_steps`` and ``gradient_checkpointing``
    and six more are Trainer names) is another tool's format."""
    if len(keys & HF_ARGS_DISTINCTIVE) >= 2:
        return len(keys) < FOREIGN_MIN_KEYS or known_share(keys, "hf-args") >= FOREIGN_SHARE
    return len(keys & HF_ARGS_KEYS) >= 2 and known_share(keys, "hf-args") >= KNOWN_SHARE


def known_share(keys: set[str], kind: str) -> float:
    """The share of ``keys`` that the tool's schema(s) know."""
    if not keys:
        return 0.0
    from memlint.configs.schema import HF_VARIANTS, SchemaUnavailable, top_level_keys

    names = HF_VARIANTS + ("llamafactory",) if kind == "hf-args" else (kind,)
    try:
        known = frozenset().union(*(top_level_keys(n) for n in names))
    except SchemaUnavailable:
        return 1.0  # without schemas, the signature keys decide
    return len(keys & known) / len(keys)
