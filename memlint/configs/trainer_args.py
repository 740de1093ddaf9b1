"""TrainingArguments written as a JSON or YAML file (``--config args.yaml``, TRL's SFTConfig /
DPOConfig recipes, ``run_clm.py`` argument files): each key means what the dataclass field
means.

TRL's configs change two defaults that decide memory (``trl/trainer/base_config.py``):
gradient checkpointing is on, and ``bf16`` is on unless ``fp16`` is set; TRL's sequence length
is ``max_length`` (``max_seq_length`` in older releases). Transformers 5.23 renamed
``gradient_checkpointing`` to ``activation_checkpointing``; the new name wins when both are
set. TRL recipe files also carry the ``ModelConfig`` fields of the script (``torch_dtype``,
``attn_implementation``, ``load_in_4bit``, ``use_peft``/``lora_r``).
"""

from __future__ import annotations

from memlint.configs.deepspeed import read_deepspeed
from memlint.configs.reading import ConfigReader, loaded_mapping, new_facts
from memlint.configs.schema import schema_name_for
from memlint.facts import hf_args
from memlint.facts.extract import extractor
from memlint.facts.plan import RunFacts
from memlint.parsed import ParsedDocument
from memlint.sourced import Sourced

TRL_VARIANTS = ("trl-sft-config", "trl-dpo-config")
# Read first so that the newer spelling wins over its deprecated alias.
ORDER = {"activation_checkpointing": 0, "max_length": 0}
LORA_FACTS = ("lora_r", "lora_targets", "lora_dropout")


@extractor("hf-args")
def extract_trainer_args(parsed: ParsedDocument) -> list[RunFacts]:
    data = loaded_mapping(parsed)
    if data is None:
        return []
    variant = schema_name_for("hf-args", data.value)
    trl = variant in TRL_VARIANTS
    facts = new_facts(parsed.path, parsed.kind, data)
    facts.framework = Sourced("trl" if trl else "hf-trainer", None,
                             "TRL config file" if trl else "TrainingArguments file")
    reader = ConfigReader(parsed.path, data, facts, variant)
    keys = sorted((k for k in data.value if isinstance(k, str)), key=lambda k: ORDER.get(k, 1))
    for key in keys:
        value = data.value[key]
        where = reader.location(key)
        if key == "deepspeed" and isinstance(value, dict):
            read_deepspeed(reader.inside("deepspeed", schema_name="deepspeed"))
            continue
        for name, converted in hf_args.facts_for(key, value).items():
            if name == "__reference__":
                facts.references.append(Sourced(converted, where, "deepspeed"))
            else:
                reader.set(name, converted, where, key)
    if (trl or "use_peft" in data.value) and not hf_args._bool(data.value.get("use_peft", False)):
        for name in LORA_FACTS:
            setattr(facts, name, None)  # TRL's ModelConfig: lora_* only apply with use_peft
    if trl:
        _trl_defaults(reader)
    return [facts]


def _trl_defaults(reader: ConfigReader) -> None:
    """The defaults TRL changes from TrainingArguments, when the file does not set them."""
    facts = reader.facts
    if facts.grad_ckpt is None:
        default = reader.default("gradient_checkpointing")
        if isinstance(default, bool):
            reader.set("grad_ckpt", int(default), None, f"TRL default gradient_checkpointing={default}")
    if facts.mixed is None and reader.value("bf16") is None and not hf_args._bool(reader.value("fp16")):
        reader.set("mixed", "bf16", None, "TRL default: bf16 unless fp16 is set")
    if facts.seq_len is None:
        default = reader.default("max_length")
        if isinstance(default, int):
            reader.set("seq_len", default, None, f"TRL default max_length={default}")
