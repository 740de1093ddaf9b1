"""LLaMA-Factory's training YAML (``llamafactory-cli train config.yaml``) as a schema.

LLaMA-Factory fills the dataclasses in ``llamafactory.hparams.parser._TRAIN_ARGS`` (model, data,
training, finetuning, generating arguments) from one flat YAML with ``HfArgumentParser``, which
refuses unknown keys unless ``ALLOW_EXTRA_ARGS`` is set. Its ``TrainingArguments`` extends
Transformers' ``Seq2SeqTrainingArguments``, so the Transformers fields come from whatever
Transformers is installed next to it (recorded in the version stamp).
"""

from __future__ import annotations

import os

from .common import envelope
from .dataclass_schema import dataclass_schema

FILE = "llamafactory.schema.json"


def build() -> dict[str, dict]:
    # LLaMA-Factory refuses to import next to a Transformers newer than it was tested with;
    # only its dataclasses are read here.
    os.environ.setdefault("DISABLE_VERSION_CHECK", "1")
    from llamafactory.hparams.parser import _TRAIN_ARGS

    return {
        FILE: envelope(
            FILE,
            "LLaMA-Factory training config",
            "llamafactory",
            dataclass_schema(*_TRAIN_ARGS),
            description="Keys of " + ", ".join(c.__name__ for c in _TRAIN_ARGS) + " in one YAML/JSON document.",
            also=("transformers",),
        )
    }
