"""MEM001's suggestions as edits: the lines to change so that a run fits.

A suggestion (``memlint.estimate.advice``) is a changed ``TrainingSetup``; the edit changes
the text where each value it needs is set — a launcher flag (``--per_device_train_batch_size
8``), a YAML or JSON key, a ``TrainingArguments`` keyword — and every value it needs: a
smaller micro-batch comes with the accumulation that keeps the effective batch. A value
that no file sets (accumulation left at its default) is added beside the micro-batch, in the
same form, when that form has a well-known name for it (Hugging Face's, Axolotl's and
DeepSpeed's ``gradient_accumulation_steps``). A suggestion that needs a change the text
cannot show (more GPUs, LoRA, a code change) gets no edits: the editor explains it instead.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable

from memlint.estimate.advice import Suggestion
from memlint.facts.resolve import ResolvedRun
from memlint.model.diagnostics import Edit, Position, Range
from memlint.model.provenance import Location

# the micro-batch's names whose families call accumulation ``gradient_accumulation_steps``
# (Hugging Face TrainingArguments and LLaMA-Factory, Axolotl, DeepSpeed)
MICRO_BATCH_NAMES = frozenset({
    "per_device_train_batch_size", "micro_batch_size", "train_micro_batch_size_per_gpu",
})
# names of the settings a suggestion may add, by fact, and the micro-batch names they go with
ADDED_NAMES: dict[str, tuple[str, frozenset[str]]] = {
    "grad_accum": ("gradient_accumulation_steps", MICRO_BATCH_NAMES),
    "grad_ckpt": ("gradient_checkpointing", frozenset({"per_device_train_batch_size", "micro_batch_size"})),
    "fused_loss": ("use_liger_kernel", frozenset({"per_device_train_batch_size"})),  # TrainingArguments
    "optimizer": ("optim", frozenset({"per_device_train_batch_size"})),
}
# Hugging Face / Axolotl ``optim`` values of the optimizer suggestions
OPTIM_VALUES = {"fused_adamw": "adamw_torch_fused", "adamw_8bit": "adamw_bnb_8bit"}

_KWARG = re.compile(r"(\w+)\s*=\s*$")
_FLAG = re.compile(r"--(\w+)(?:\s+|=)$")
_YAML_KEY = re.compile(r"^(\s*)(?:-\s+)?(\w+)\s*:\s*$")
_JSON_KEY = re.compile(r'"(\w+)"\s*:\s*$')
_BOOL = re.compile(r"^(['\"]?)(false|true|False|True|FALSE|TRUE)\1$")


class _Text:
    """One document's text, with what stands before a value on its line."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.lines = text.split("\n")

    def at(self, rng: Range) -> str:
        if rng.start.line != rng.end.line or rng.start.line > len(self.lines):
            return ""
        return self.lines[rng.start.line - 1][rng.start.column:rng.end.column]

    def before(self, rng: Range) -> str:
        return self.lines[rng.start.line - 1][:rng.start.column] if rng.start.line <= len(self.lines) else ""

    def line(self, number: int) -> str:
        return self.lines[number - 1].rstrip("\r") if number <= len(self.lines) else ""


def _form(text: _Text, origin: Location) -> tuple[str, str, str] | None:
    """How the value at ``origin`` is written: (form, setting name, indent), form one of
    kwarg, flag, yaml, json; None for anything else (an argparse default, a call)."""
    before = text.before(origin.range)
    suffix = Path(origin.path).suffix.lower()
    if suffix in (".py", ".pyi"):
        found = _KWARG.search(before)
        return ("kwarg", found.group(1), "") if found else None
    if suffix in (".sh", ".bash", ".slurm", ".sbatch"):
        found = _FLAG.search(before)
        return ("flag", found.group(1), "") if found else None
    if suffix in (".yaml", ".yml"):
        found = _YAML_KEY.match(before)
        return ("yaml", found.group(2), " " * len(found.group(1))) if found else None
    if suffix == ".json":
        found = _JSON_KEY.search(before)
        return ("json", found.group(1), "") if found else None
    return None


def _literal(value: Any, form: str) -> str:
    if isinstance(value, bool):
        return {"kwarg": str(value), "flag": str(value)}.get(form, json.dumps(value))
    if isinstance(value, str) and form in ("kwarg", "json"):
        return json.dumps(value)
    return str(value)


def _replace(text: _Text, origin: Location, value: Any) -> Edit | None:
    """The value at ``origin`` replaced by ``value``, in the spelling found there."""
    old = text.at(origin.range)
    if isinstance(value, bool):
        found = _BOOL.match(old)
        if found is None:
            return None
        word = "true" if value else "false"
        spelled = found.group(2)
        word = word.capitalize() if spelled[0].isupper() and not spelled.isupper() else word
        word = word.upper() if spelled.isupper() else word
        return Edit(origin.path, origin.range, f"{found.group(1)}{word}{found.group(1)}")
    if isinstance(value, int):
        return Edit(origin.path, origin.range, str(value)) if old.strip("'\"").isdigit() else None
    if isinstance(value, str):
        quote = old[0] if old[:1] in ("'", '"') and old[-1:] == old[:1] else ""
        return Edit(origin.path, origin.range, f"{quote}{value}{quote}")
    return None


def _add(text: _Text, beside: Location, name: str, value: Any, bare_flag: bool = True) -> Edit | None:
    """A new setting ``name`` beside the micro-batch at ``beside``, in the same form."""
    form = _form(text, beside)
    if form is None:
        return None
    kind, _, indent = form
    end = beside.range.end
    if kind == "yaml":
        line = text.line(end.line)
        at = Position(end.line, len(line))
        return Edit(beside.path, Range(at, at), f"\n{indent}{name}: {_literal(value, 'yaml')}")
    insert = Range(end, end)
    if kind == "kwarg":
        return Edit(beside.path, insert, f", {name}={_literal(value, 'kwarg')}")
    if kind == "json":
        return Edit(beside.path, insert, f', "{name}": {_literal(value, "json")}')
    if value is True and bare_flag:
        return Edit(beside.path, insert, f" --{name}")
    return Edit(beside.path, insert, f" --{name} {_literal(value, 'flag')}")


def _changes(key: str, suggestion: Suggestion) -> list[tuple[str, Any]] | None:
    """The facts one suggestion changes, with their new values; None when text cannot say it."""
    setup = suggestion.setup
    if key == "micro_batch":
        return [("micro_batch", setup.micro_batch), ("grad_accum", setup.grad_accum)]
    if key == "grad_ckpt":
        return [("grad_ckpt", True)]
    if key == "fused_loss":
        return [("fused_loss", True)]
    if key in ("zero2", "zero3"):
        return [("zero_stage", 2 if key == "zero2" else 3)]
    if key in OPTIM_VALUES:
        return [("optimizer", OPTIM_VALUES[key])]
    return None


def _edit_for(fact: str, value: Any, run: ResolvedRun, text_of: Callable[[str], _Text | None]) -> Edit | None:
    stated = run.plan.get(fact)
    if stated is not None and stated.origin is not None:
        text = text_of(stated.origin.path)
        if text is None:
            return None
        form = _form(text, stated.origin)
        if form is None:
            return None  # set by an argparse default or a call: a code change, not a value
        if fact == "optimizer" and form[1] not in ("optim", "optimizer"):
            return None
        if fact == "grad_ckpt":
            value = bool(value)
        if isinstance(value, bool) and form[0] == "flag" and not _BOOL.match(text.at(stated.origin.range)):
            return None  # a bare ``--flag``: nothing to flip
        return _replace(text, stated.origin, value)
    if fact not in ADDED_NAMES:
        return None
    name, beside_names = ADDED_NAMES[fact]
    micro = run.plan.get("micro_batch")
    if micro is None or micro.origin is None:
        return None
    text = text_of(micro.origin.path)
    form = _form(text, micro.origin) if text is not None else None
    if text is None or form is None or form[1] not in beside_names:
        return None
    return _add(text, micro.origin, name, value)


def suggestion_edits(suggestion: Suggestion, run: ResolvedRun, read: Callable[[str], str | None]) -> tuple[Edit, ...]:
    """The edits that make ``suggestion`` true of the run's files; () when some part of it
    has no edit (the whole change or nothing)."""
    texts: dict[str, _Text | None] = {}

    def text_of(path: str) -> _Text | None:
        if path not in texts:
            content = read(path)
            texts[path] = _Text(path, content) if content is not None else None
        return texts[path]

    edits: list[Edit] = []
    for key in suggestion.key.split("+"):
        changes = _changes(key, suggestion)
        if changes is None:
            return ()
        for fact, value in changes:
            current = run.plan.get(fact)
            if current is not None and current.value == value and current.origin is not None:
                continue  # already so
            edit = _edit_for(fact, value, run, text_of)
            if edit is None:
                return ()
            edits.append(edit)
    return tuple(edits)


def edits_json(edits: tuple[Edit, ...]) -> list[dict[str, Any]]:
    return [{
        "path": e.path,
        "range": [e.range.start.line, e.range.start.column, e.range.end.line, e.range.end.column],
        "new_text": e.new_text,
    } for e in edits]
