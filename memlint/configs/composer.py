"""Composer / llm-foundry training YAMLs (``composer scripts/train/train.py run.yaml``): the run they define.

llm-foundry's ``scripts/train/yamls``: ``model: {name: hf_causal_lm, pretrained_model_name_or_path}``
(or an ``mpt_causal_lm`` built from the file's own sizes), ``device_train_microbatch_size`` the
micro-batch, ``max_seq_len`` (top level, under ``variables``, or the model's) the length,
``precision: amp_bf16`` autocast over fp32 weights, ``fsdp_config: {sharding_strategy: FULL_SHARD,
activation_checkpointing}`` the sharding and checkpointing, ``optimizer: {name: decoupled_adamw}``.
Values written as ``${max_seq_len}`` / ``${variables.max_seq_len}`` are looked up in the file.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from memlint.configs.deepspeed import positive_int
from memlint.configs.reading import ConfigReader, loaded_mapping, new_facts
from memlint.facts.extract import extractor
from memlint.facts.plan import RunFacts
from memlint.model.provenance import Sourced
from memlint.model.vocabulary import FSDP_STRATEGIES

if TYPE_CHECKING:
    from memlint.documents.parsed import ParsedDocument

TOOL = "Composer"
# keys of llm-foundry's train config (llmfoundry/utils/config_utils.py TrainConfig) no other kind has
COMPOSER_KEYS = {"global_train_batch_size", "device_train_microbatch_size", "device_eval_batch_size",
                 "max_duration", "train_loader", "eval_interval", "fsdp_config", "precision"}
COMPOSER_SIGNATURE = 3
PRECISIONS = {"amp_bf16": "bf16", "amp_fp16": "fp16"}
# Composer's optimizers (composer.optim) and llm-foundry's registry names -> memlint
OPTIMIZERS = {"decoupled_adamw": "adamw", "adamw": "adamw", "decoupled_lionw": "lion", "decoupled_sgdw": "sgd"}
_REFERENCE = re.compile(r"^\$\{\s*([\w.]+)\s*\}$")


def is_composer(value: Any) -> bool:
    """A ``model`` block with a ``name`` and three of the train config's own keys."""
    if not isinstance(value, dict) or not isinstance(value.get("model"), dict) or "name" not in value["model"]:
        return False
    return len(COMPOSER_KEYS & set(value)) >= COMPOSER_SIGNATURE


@extractor("composer")
def extract_composer(parsed: ParsedDocument) -> list[RunFacts]:
    data = loaded_mapping(parsed)
    if data is None:
        return []
    facts = new_facts(parsed.path, "composer", data)
    facts.framework = Sourced("composer", None, "Composer / llm-foundry config")
    reader = ConfigReader(parsed.path, data, facts)
    root = data.value
    model = reader.inside("model")
    checkpoint = model.value("pretrained_model_name_or_path")
    if isinstance(checkpoint, str) and checkpoint:
        model.set("model", checkpoint, model.location("pretrained_model_name_or_path"),
                  "model.pretrained_model_name_or_path")
    micro = positive_int(_resolved(root, reader.value("device_train_microbatch_size")))
    if micro:
        reader.set("micro_batch", micro, reader.location("device_train_microbatch_size"),
                   "device_train_microbatch_size")
    for keys in (("max_seq_len",), ("variables", "max_seq_len"), ("model", "max_seq_len")):
        length = positive_int(_resolved(root, reader.value(*keys)))
        if length:
            reader.set("seq_len", length, reader.location(*keys), ".".join(keys))
            break
    precision = PRECISIONS.get(str(reader.value("precision") or "").lower())
    if precision is not None:
        reader.set("mixed", precision, reader.location("precision"), f"precision: {reader.value('precision')}")
        # Composer's amp keeps the weights, gradients and optimizer states in fp32 and autocasts
        reader.set("load_dtype", "fp32", None, "Composer amp trains fp32 weights")
    name = OPTIMIZERS.get(str(reader.value("optimizer", "name") or "").lower())
    if name is not None:
        reader.set("optimizer", name, reader.location("optimizer", "name"), f"optimizer {reader.value('optimizer', 'name')}")
    _fsdp(reader)
    return [facts]


def _resolved(root: dict, value: Any) -> Any:
    """``${variables.max_seq_len}`` -> the value it names in the same file (OmegaConf's interpolation)."""
    for _ in range(4):
        match = _REFERENCE.match(value) if isinstance(value, str) else None
        if match is None:
            return value
        value = root
        for part in match.group(1).split("."):
            value = value.get(part) if isinstance(value, dict) else None
    return value


def _fsdp(reader: ConfigReader) -> None:
    if not isinstance(reader.value("fsdp_config"), dict):
        return
    fsdp = reader.inside("fsdp_config")
    strategy = str(fsdp.value("sharding_strategy") or "FULL_SHARD")  # Composer's default
    sharding = FSDP_STRATEGIES.get(strategy.lower())
    if sharding is not None and sharding != "none":
        where = fsdp.location("sharding_strategy") if fsdp.has("sharding_strategy") else reader.location("fsdp_config")
        fsdp.set("fsdp", sharding, where, f"fsdp_config.sharding_strategy: {strategy}")
    if isinstance(fsdp.value("activation_checkpointing"), bool):
        fsdp.set("grad_ckpt", int(fsdp.value("activation_checkpointing")), fsdp.location("activation_checkpointing"),
                 "fsdp_config.activation_checkpointing")
    if fsdp.value("activation_cpu_offload") is True or fsdp.value("cpu_offload") is True:
        key = "cpu_offload" if fsdp.value("cpu_offload") is True else None
        if key:
            fsdp.set("offload_params", True, fsdp.location(key), "fsdp_config.cpu_offload")


# llm-foundry refuses a top-level key its TrainConfig does not define from 0.10.0 on
# (llmfoundry/utils/config_utils.py, make_dataclass_and_log_config: ``raise ValueError("Unused
# parameter ...")``); 0.9.0 moved such a key under ``variables`` with a DeprecationWarning, and
# earlier releases' scripts/train/train.py warned ("Unused parameter ... found in cfg") after
# popping the interpolation variables it knew (``data_local``, ``data_remote``, ``global_seed``).
REFUSES_UNUSED_FROM = "0.10.0"


def interpolated(text: str, key: str) -> bool:
    """Whether the file uses a top-level key as an OmegaConf variable (``${data_local}``)."""
    return re.search(r"\$\{\s*" + re.escape(key) + r"\s*\}", text) is not None

