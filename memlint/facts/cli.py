"""A launcher's command-line options, applied to the script it runs.

A script declares which options feed which facts (``RunFacts.cli_bindings``): an argparse
``--batch_size`` bound to ``micro_batch``, or, for ``HfArgumentParser`` scripts, every
TrainingArguments field (bound as ``"hf:<field>"``). ``torchrun ... train.py --batch_size 4``
then overrides the script's default with the launcher's 4, located in the launcher.
"""

from __future__ import annotations

from typing import Any

from memlint.facts import hf_args
from memlint.facts.plan import RunFacts
from memlint.sourced import Sourced

# plain fact -> converter for raw command-line text
_CONVERT = {
    "micro_batch": hf_args._int,
    "seq_len": hf_args._int,
    "grad_accum": hf_args._int,
    "world_size": hf_args._int,
    "lora_r": hf_args._int,
    "grad_ckpt": lambda v: None if hf_args._bool(v) is None else int(bool(hf_args._bool(v))),
    "model": lambda v: str(v) or None,
}


def facts_from_cli(script: RunFacts, launcher: RunFacts) -> dict[str, Sourced[Any]]:
    """The facts the launcher's options set in ``script`` (located in the launcher)."""
    out: dict[str, Sourced[Any]] = {}
    for option, raw in launcher.cli_args.items():
        bindings = script.cli_bindings.get(option, ())
        for binding in bindings:
            if binding.startswith("hf:"):
                for name, value in hf_args.facts_for(binding[3:], raw.value).items():
                    if name == "__reference__":
                        continue  # a --deepspeed option: a link, handled by the launcher's references
                    out[name] = Sourced(value, raw.origin, f"--{option} on the command line")
                continue
            convert = _CONVERT.get(binding)
            value = convert(raw.value) if convert else raw.value
            if value is not None:
                out[binding] = Sourced(value, raw.origin, f"--{option} on the command line")
    return out
