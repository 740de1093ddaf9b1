"""TrainingArguments fields that exist to be handed to ``Trainer.train``.

``TrainingArguments.resume_from_checkpoint`` is annotated ``str | None`` and documented as "not
directly used by Trainer; intended for training/evaluation scripts": the scripts pass it on,
``trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)`` (Transformers'
examples, TRL's and alignment-handbook's scripts, Aria's ``aria/train.py``). ``Trainer.train``
takes ``resume_from_checkpoint: str | bool | None`` ("If a `bool` and equals `True`, load the last
checkpoint in *args.output_dir*"; ``False`` is turned into ``None``), in 4.46 (trainer.py:
``Optional[Union[str, bool]]``) as in the newest release. A file's value reaches it unchecked:
``HfArgumentParser.parse_dict``/``parse_yaml_file`` build the dataclass with ``dtype(**inputs)``,
and TrlParser's ``set_defaults_with_config`` makes the YAML value an argparse default, which
argparse converts only when it is a string. So ``resume_from_checkpoint: false`` runs (no resume)
and ``true`` resumes from the last checkpoint: the field takes what ``Trainer.train`` takes.
"""

from __future__ import annotations

import inspect

from .dataclass_schema import widen
from .python_types import schema_for


def accept_what_train_takes(properties: dict[str, dict]) -> None:
    """Widen each field named like a ``Trainer.train`` parameter by the JSON types of that
    parameter's annotation (an annotation left as a string, a forward reference, is skipped)."""
    from transformers import Trainer

    for name, parameter in inspect.signature(Trainer.train).parameters.items():
        if name not in properties or parameter.annotation is inspect.Parameter.empty \
                or isinstance(parameter.annotation, str):
            continue
        taken = schema_for(parameter.annotation).get("type", [])
        properties[name] = widen(properties[name], taken if isinstance(taken, list) else [taken])
