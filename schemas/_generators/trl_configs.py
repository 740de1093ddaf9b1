"""TRL's ``SFTConfig``, ``DPOConfig`` and ``GRPOConfig`` as schemas, one file each.

All three are ``TrainingArguments`` subclasses loaded the same way (``TrlParser`` /
``HfArgumentParser`` from YAML or JSON), so each file holds every field, inherited ones
included, and rejects unknown keys.
"""

from __future__ import annotations

from .common import envelope
from .dataclass_schema import dataclass_schema
from .trainer_train import accept_what_train_takes

SFT_FILE = "trl-sft-config.schema.json"
DPO_FILE = "trl-dpo-config.schema.json"
GRPO_FILE = "trl-grpo-config.schema.json"


def build() -> dict[str, dict]:
    from trl import DPOConfig, GRPOConfig, SFTConfig

    out = {}
    for file_name, cls in ((SFT_FILE, SFTConfig), (DPO_FILE, DPOConfig), (GRPO_FILE, GRPOConfig)):
        body = dataclass_schema(cls)
        accept_what_train_takes(body["properties"])
        out[file_name] = envelope(
            file_name,
            f"TRL {cls.__name__}",
            "trl",
            body,
            description=f"trl.{cls.__name__} (a transformers.TrainingArguments subclass) as a JSON/YAML document.",
            also=("transformers",),
        )
    return out
