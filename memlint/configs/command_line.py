"""A launcher's options to an entry point memlint cannot read, read as that framework's config.

``deepspeed src/train_bash.py --stage sft --finetuning_type full --cutoff_len 4096 ...`` runs
LLaMA-Factory's entry point; ``accelerate launch -m tuning.sft_trainer --per_device_train_batch_size 4
--torch_dtype float16 ...`` runs a package's ``HfArgumentParser`` script. When the launched
script is not in the project (installed with the framework, or a wrapper that only calls into
it), its options still state the run: they are the fields of ``TrainingArguments`` -- or of
LLaMA-Factory's arguments, which include them -- and mean what the same keys mean in a config
file. So the options are loaded as a mapping, each value converted as a YAML scalar (what
``HfArgumentParser`` makes of ``--bf16``, ``--cutoff_len 4096``, ``--gradient_checkpointing True``),
located at the launcher's words that wrote them, and read by the config extractor of the kind
the keys make up (``memlint.documents.kinds.detect``: the same test a YAML file passes). Options in the
usual flag names of other training CLIs (OpenRLHF's ``--pretrain``) are read by
``memlint.configs.usual_flags`` first.

Options read as TrainingArguments are read as plain ``transformers.TrainingArguments``: whether
the unseen script builds TRL's ``SFTConfig`` (whose defaults differ: checkpointing and bf16 on,
``max_length`` 1024) cannot be told from option names that both accept.
"""

from __future__ import annotations

from typing import Any

import yaml

from memlint.configs.llamafactory import extract_llamafactory
from memlint.configs.trainer_args import trainer_args_facts
from memlint.configs.usual_flags import usual_flags_facts
from memlint.documents import kinds
from memlint.documents.parsed import ParsedDocument
from memlint.documents.reading import Document
from memlint.documents.structured import Structured
from memlint.facts.plan import RunFacts

# configs a launcher's options can make up: those whose keys are command-line options of the
# framework's own argument parser
OPTION_KINDS = ("llamafactory", "hf-args")
PLAIN_TRAINING_ARGUMENTS = "hf-training-arguments"


def options_as_config(launcher: RunFacts, unseen_script: bool = False) -> RunFacts | None:
    """The facts the launcher's script options state when read as a LLaMA-Factory or
    TrainingArguments config (None when they make up neither). ``unseen_script``: the script is
    the author's own code under a path of their machine, so nothing but the options says how it
    trains; they read as Trainer options only when most of them are (LMOps's ``deepspeed
    /home/MiniLLM/train.py --batch-size 16 --lr 1e-4 --epochs 5 --gradient-accumulation-steps 2
    ...``, a trainer of its own with a sixth of its options named like the Trainer's, is not)."""
    if not launcher.cli_args:
        return None
    usual = usual_flags_facts(launcher)  # OpenRLHF's --pretrain, --micro_train_batch_size, ...
    if usual is not None:
        return usual
    value: dict[str, Any] = {}
    ranges = {}
    for key, raw in launcher.cli_args.items():
        value[key] = _scalar(str(raw.value))
        if raw.origin is not None:
            ranges[(key,)] = raw.origin.range
    kind = kinds.detect(launcher.path, "yaml", value)
    if kind not in OPTION_KINDS:
        return None
    if unseen_script and kind == "hf-args" and kinds.known_share(set(value), "hf-args") < kinds.KNOWN_SHARE:
        return None
    data = Structured(value=value, value_ranges=dict(ranges), key_ranges=dict(ranges), syntax="yaml")
    parsed = ParsedDocument(Document(launcher.path, "", "yaml"), kind, structured=data)
    if kind == "llamafactory":
        [facts] = extract_llamafactory(parsed)
    else:
        facts = trainer_args_facts(parsed, data, PLAIN_TRAINING_ARGUMENTS)
    facts.references = []  # the launcher's own references already name the files its options name
    facts.anchor = launcher.anchor
    if facts.framework is not None:
        script = launcher.launches.value if launcher.launches is not None else "the script"
        what = "LLaMA-Factory" if kind == "llamafactory" else "TrainingArguments"
        facts.framework = facts.framework.with_value(
            facts.framework.value, f"{what} options passed to {script} (not in the project)")
    return facts


def _scalar(text: str) -> Any:
    """A command-line value as a YAML scalar: ``True`` -> True, ``4096`` -> 4096; words that are
    not one scalar (``full_shard auto_wrap``, a malformed quote) stay text."""
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    return loaded if isinstance(loaded, (str, int, float, bool)) else text
