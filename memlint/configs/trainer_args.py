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

from typing import TYPE_CHECKING, Any

from memlint.configs.batch_comments import BATCH_KEYS, stated_gpus
from memlint.configs.deepspeed import read_deepspeed
from memlint.configs.reading import ConfigReader, loaded_mapping, new_facts
from memlint.configs.schema import schema_name_for
from memlint.documents.kinds import is_trainer_arguments
from memlint.facts import hf_args
from memlint.facts.extract import extractor
from memlint.facts.plan import RunFacts
from memlint.model.provenance import Sourced
from memlint.model.vocabulary import names_parallelism_config

if TYPE_CHECKING:
    from memlint.documents.parsed import ParsedDocument

TRL_VARIANTS = ("trl-sft-config", "trl-dpo-config", "trl-grpo-config")
# Read first so that the newer spelling wins over its deprecated alias.
ORDER = {"activation_checkpointing": 0, "max_length": 0}
LORA_FACTS = ("lora_r", "lora_targets", "lora_dropout")


@extractor("hf-args")
def extract_trainer_args(parsed: ParsedDocument) -> list[RunFacts]:
    data = loaded_mapping(parsed)
    if data is None:
        return []
    return [trainer_args_facts(parsed, data, schema_name_for("hf-args", data.value))]


@extractor("yaml", "json")
def extract_trainer_arguments_section(parsed: ParsedDocument) -> list[RunFacts]:
    """A project's own config with its TrainingArguments as one section (GLM-4's
    ``finetune/configs/sft.yaml``: ``training_args:`` with ``deepspeed: configs/ds_zero_3.json``,
    which ``finetune.py`` turns into ``Seq2SeqTrainingArguments(**training_args)``). Its fields
    are the run's when a launch passes the file to its script; the file states no run of its own
    (the script trains), but the DeepSpeed config it names is used."""
    data = loaded_mapping(parsed)
    if data is None:
        return []
    sections = [key for key, value in data.value.items() if isinstance(key, str) and isinstance(value, dict)
                and is_trainer_arguments({k for k in value if isinstance(k, str)})]
    if len(sections) != 1:
        return []
    facts = trainer_args_facts(parsed, data, "transformers", (sections[0],))
    facts.framework = None
    return [facts]


def trainer_args_facts(parsed: ParsedDocument, data, variant: str | None, section: tuple[str, ...] = ()) -> RunFacts:
    """The facts of TrainingArguments fields read as ``variant`` (a TRL variant applies TRL's
    defaults; ``"transformers"`` reads plain TrainingArguments), from the block at ``section``."""
    trl = variant in TRL_VARIANTS
    facts = new_facts(parsed.path, parsed.kind, data)
    facts.framework = Sourced("trl" if trl else "hf-trainer", None,
                             "TRL config file" if trl else "TrainingArguments file")
    reader = ConfigReader(parsed.path, data, facts, variant, base=section)
    fields = data.get(*section)
    keys = sorted((k for k in fields if isinstance(k, str)), key=lambda k: ORDER.get(k, 1))
    for key in keys:
        value = fields[key]
        where = reader.location(key)
        if key == "deepspeed" and isinstance(value, dict):
            read_deepspeed(reader.inside("deepspeed", schema_name="deepspeed"))
            continue
        if key != "deepspeed" and _names_parallelism_file(key, value):
            # a project's own key for the run's config (LMFlow's ``accelerate_config_file:
            # configs/accelerate_dsz2_config.yaml``): the file states the run's parallelism
            facts.references.append(Sourced(value.strip(), where, key))
            continue
        for name, converted in hf_args.facts_for(key, value).items():
            if name == "__reference__":
                facts.references.append(Sourced(converted, where, "deepspeed"))
            else:
                reader.set(name, converted, where, key)
    _commented_gpus(parsed, reader, facts)
    if (trl or "use_peft" in fields) and not hf_args._bool(fields.get("use_peft", False)):
        for name in LORA_FACTS:
            setattr(facts, name, None)  # TRL's ModelConfig: lora_* only apply with use_peft
    if trl:
        _trl_defaults(reader)
    return facts


def _commented_gpus(parsed: ParsedDocument, reader: ConfigReader, facts: RunFacts) -> None:
    """The GPU count a global-batch comment on the batch keys implies (``batch_comments``)."""
    if facts.world_size is not None or parsed.document.syntax != "yaml":
        return
    lines = [reader.location(key).range.start.line for key in BATCH_KEYS if reader.has(key)]
    micro = facts.micro_batch.value if facts.micro_batch is not None else 1
    accumulation = facts.grad_accum.value if facts.grad_accum is not None else 1
    stated = stated_gpus(parsed.document.text, parsed.path, lines, int(micro), int(accumulation)) if lines else None
    if stated is not None:
        facts.world_size, facts.gpus_per_node = stated


def _names_parallelism_file(key: str, value: Any) -> bool:
    """A key that names a DeepSpeed/Accelerate config (``accelerate_config_file``,
    ``ds_config``) and a value that is the path of a JSON or YAML file."""
    return (isinstance(value, str) and value.strip().lower().endswith((".json", ".yaml", ".yml"))
            and names_parallelism_config(key))


def _trl_defaults(reader: ConfigReader) -> None:
    """The defaults TRL changes from TrainingArguments, when the file does not set them."""
    fp16 = bool(hf_args._bool(reader.value("fp16")))
    for name, (value, note) in trl_default_facts(reader.facts.stated(), reader.value("bf16"), fp16,
                                                 reader.default).items():
        reader.set(name, value, None, note)


def trl_default_facts(stated, bf16: Any, fp16: bool, default=None) -> dict[str, tuple[Any, str]]:
    """TRL's configs change TrainingArguments defaults that decide memory: checkpointing on,
    bf16 unless fp16 is set, ``max_length`` 1024 (``trl/trainer/base_config.py``, read from the
    TRL schema). Returns the facts ``stated`` lacks, each with a note saying it is TRL's."""
    from memlint.configs.schema import default as schema_default

    read = default or (lambda key: schema_default("trl-sft-config", key))
    out: dict[str, tuple[Any, str]] = {}
    ckpt = read("gradient_checkpointing")
    if "grad_ckpt" not in stated and isinstance(ckpt, bool):
        out["grad_ckpt"] = (int(ckpt), f"TRL default gradient_checkpointing={ckpt}")
    if "mixed" not in stated and bf16 is None and not fp16:
        out["mixed"] = ("bf16", "TRL default: bf16 unless fp16 is set")
    length = read("max_length")
    if "seq_len" not in stated and isinstance(length, int) and not isinstance(length, bool):
        out["seq_len"] = (length, f"TRL default max_length={length}")
    return out
