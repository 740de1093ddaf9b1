"""LLaMA-Factory v1 training YAMLs (``llamafactory-cli v1 train run.yaml``): the run they define.

v1 replaced the flat 0.9 argument set with a few typed blocks (``llamafactory/v1/config``):
``model`` is the checkpoint, ``micro_batch_size`` and ``cutoff_len`` the batch and length,
``peft_config: {name: lora, r, target_modules}`` the adapter, ``quant_config:
{quantization_bit: 4}`` the QLoRA base, ``dist_config: {name: fsdp2 | deepspeed, config_file}``
the sharding. v1's ``TrainingArguments`` defaults to ``bf16: true`` and
``enable_activation_checkpointing: true`` (training_args.py); a key the file leaves out takes
that default, reported as an assumption.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memlint.configs.deepspeed import positive_int
from memlint.configs.llamafactory import freeze_layout
from memlint.configs.reading import ConfigReader, loaded_mapping, new_facts
from memlint.facts.extract import extractor
from memlint.facts.hf_args import lora_target_names
from memlint.facts.plan import RunFacts
from memlint.model.provenance import Sourced

if TYPE_CHECKING:
    from memlint.documents.parsed import ParsedDocument

TOOL = "LLaMA-Factory v1"
# Blocks only v1 configs have (0.9 configs are flat and name the model `model_name_or_path`)
V1_BLOCKS = {"model_class", "dist_config", "peft_config", "quant_config", "kernel_config", "optim_config",
             "train_dataset", "micro_batch_size", "batching_strategy"}
# llamafactory/v1/config/training_args.py (TrainingArguments field defaults)
V1_DEFAULTS = {"bf16": True, "enable_activation_checkpointing": True}
# the FSDP backends of llamafactory/v1/plugins/trainer_plugins/distributed/interface.py
# (FSDP2Params, FSDPTurboParams: both reshard after forward by default, i.e. full sharding)
DIST_SHARDING = {"fsdp2": "full", "fsdp": "full", "fsdpturbo": "full"}


def is_llamafactory_v1(value: Any) -> bool:
    """``model: <a checkpoint>`` with at least two of v1's own keys."""
    if not isinstance(value, dict) or not isinstance(value.get("model"), str):
        return False
    return len(V1_BLOCKS & set(value)) >= 2 and "base_model" not in value


@extractor("llamafactory-v1")
def extract_llamafactory_v1(parsed: ParsedDocument) -> list[RunFacts]:
    data = loaded_mapping(parsed)
    if data is None:
        return []
    facts = new_facts(parsed.path, "llamafactory-v1", data)
    facts.framework = Sourced("llamafactory-v1", None, "LLaMA-Factory v1 config")
    reader = ConfigReader(parsed.path, data, facts)
    reader.read("model", ("model",), lambda v: str(v) if v else None, TOOL)
    reader.read("micro_batch", ("micro_batch_size",), positive_int, TOOL)
    reader.read("seq_len", ("cutoff_len",), positive_int, TOOL)
    reader.read("grad_clip", ("max_grad_norm",), lambda v: float(v) if isinstance(v, (int, float)) else None, TOOL)
    bf16, where = _setting(reader, "bf16")
    if bf16 is True:
        reader.set("mixed", "bf16", where, "bf16" if where else "LLaMA-Factory v1 default bf16: true")
    checkpointing, where = _setting(reader, "enable_activation_checkpointing")
    if isinstance(checkpointing, bool):
        note = "enable_activation_checkpointing" if where else "LLaMA-Factory v1 checkpoints by default"
        reader.set("grad_ckpt", int(checkpointing), where, note)
    peft = reader.inside("peft_config")
    if str(peft.value("name") or "").lower() == "lora":
        if positive_int(peft.value("r")):
            peft.set("lora_r", positive_int(peft.value("r")), peft.location("r"), "peft_config.r")
        if peft.has("target_modules"):
            peft.set("lora_targets", lora_target_names(peft.value("target_modules")), peft.location("target_modules"),
                     "peft_config.target_modules")
    elif str(peft.value("name") or "").lower() == "freeze":
        trained, why = freeze_layout(peft.value("freeze_trainable_layers"), peft.value("freeze_trainable_modules"),
                                     peft.value("freeze_extra_modules"), False)
        if why is not None:
            peft.set("unmodelled", why, peft.location("name"), "peft_config.name: freeze")
        elif trained is not None:
            where = peft.location("freeze_trainable_layers") if peft.has("freeze_trainable_layers") else \
                peft.location("name")
            peft.set("trained_layers", trained, where, f"peft_config.freeze_trainable_layers: {trained} "
                     f"(the last {trained} blocks train)")
    bits = reader.value("quant_config", "quantization_bit")
    if bits in (4, 8):
        reader.set("quantization", "nf4" if bits == 4 else "int8", reader.location("quant_config", "quantization_bit"),
                   f"quant_config.quantization_bit: {bits}")
    _distribution(reader)
    return [facts]


def _setting(reader: ConfigReader, key: str) -> tuple[Any, Any]:
    if reader.has(key) and reader.value(key) is not None:
        return reader.value(key), reader.location(key)
    return V1_DEFAULTS.get(key), None


def _distribution(reader: ConfigReader) -> None:
    name = str(reader.value("dist_config", "name") or "").lower()
    if name in DIST_SHARDING:
        reader.set("fsdp", DIST_SHARDING[name], reader.location("dist_config", "name"), f"dist_config.name: {name}")
        experts = positive_int(reader.value("dist_config", "ep_size"))
        if experts is not None and experts > 1:  # fsdpturbo's expert parallelism splits the MoE experts
            reader.set("model_parallel", (1, 1, experts, False, False, False), reader.location("dist_config", "ep_size"),
                       f"dist_config.ep_size: {experts}")
    elif name == "deepspeed":
        reader.inside("dist_config").reference(("config_file",), "deepspeed")
