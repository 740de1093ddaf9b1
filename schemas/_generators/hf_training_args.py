"""Transformers' ``TrainingArguments`` (and ``Seq2SeqTrainingArguments``) as a schema.

Users write these as JSON or YAML and load them with ``HfArgumentParser``; the dataclass fields
are the source of truth. The top level is ``TrainingArguments``; ``$defs`` holds the
``Seq2SeqTrainingArguments`` variant, which adds its own fields to the same set.
"""

from __future__ import annotations

from .common import envelope
from .dataclass_schema import dataclass_properties
from .trainer_train import accept_what_train_takes

FILE = "hf-training-arguments.schema.json"


def build() -> dict[str, dict]:
    from transformers import Seq2SeqTrainingArguments, TrainingArguments

    base, base_required = dataclass_properties(TrainingArguments)
    accept_what_train_takes(base)
    seq2seq, _ = dataclass_properties(Seq2SeqTrainingArguments)
    extras = {name: schema for name, schema in seq2seq.items() if name not in base}
    fields = {"type": "object", "properties": base}
    if base_required:
        fields["required"] = base_required
    body = {
        "$ref": "#/$defs/TrainingArgumentsFields",
        "unevaluatedProperties": False,
        "$defs": {
            "TrainingArgumentsFields": fields,
            "Seq2SeqTrainingArguments": {
                "description": "Seq2SeqTrainingArguments: TrainingArguments plus the generation fields.",
                "$ref": "#/$defs/TrainingArgumentsFields",
                "properties": extras,
                "unevaluatedProperties": False,
            },
        },
    }
    return {
        FILE: envelope(
            FILE,
            "Hugging Face TrainingArguments",
            "transformers",
            body,
            description=(
                "transformers.TrainingArguments as a JSON/YAML document (HfArgumentParser.parse_dict). "
                "Use '#/$defs/Seq2SeqTrainingArguments' for Seq2SeqTrainingArguments."
            ),
        )
    }
