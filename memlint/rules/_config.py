"""Shared by the config rules (CFG...): schema issues as findings, and the DeepSpeed documents
and trainer values a run-level check compares."""

from __future__ import annotations

from typing import Any, ClassVar, Iterator

from memlint.configs import schema
from memlint.configs.key_history import versioned_issues
from memlint.documents.kinds import DocumentKind
from memlint.facts.resolve import ResolvedRun
from memlint.lint.context import RuleContext
from memlint.model.diagnostics import Applicability, Edit, Fix, Range
from memlint.rules.base import Finding, Rule

VALIDATED_KINDS = frozenset(DocumentKind(kind) for kind in schema.VALIDATED_KINDS)
# Frameworks that run DeepSpeed through the HF Trainer (which fills "auto" and checks the rest).
HF_TRAINER_FAMILY = ("hf-trainer", "trl", "axolotl", "llamafactory")
# The schema whose defaults are the Trainer's, per framework.
DEFAULTS_SCHEMA = {
    "hf-trainer": "hf-training-arguments",
    "trl": "trl-sft-config",
    "axolotl": "hf-training-arguments",  # Axolotl hands unset values to TrainingArguments
    "llamafactory": "llamafactory",
}


class SchemaRule(Rule):
    """A rule that reports one category of schema issue (unknown key, bad value, ...)."""

    category: ClassVar[str]
    kinds = VALIDATED_KINDS

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        for issue in versioned_issues(ctx):
            if issue.category == self.category:
                yield Finding(issue.range, issue.message, fix=issue.fix, severity=getattr(issue, "severity", None))


def shown_location(ctx: RuleContext, location) -> str:
    """``path:line:col`` of a location, the path relative to the project root when inside it."""
    from pathlib import Path

    try:
        path = Path(location.path).resolve().relative_to(ctx.settings.root.resolve()).as_posix()
    except (ValueError, OSError):
        path = location.path
    return f"{path}:{location.range.start.line}:{location.range.start.column + 1}"


def replace_with(path: str, where: Range, text: str, message: str, applicability: Applicability = Applicability.UNSAFE) -> Fix:
    return Fix(message, (Edit(path, where, text),), applicability)


def world_size(ctx: RuleContext, run: ResolvedRun | None) -> tuple[int | None, str]:
    """The data-parallel world size of a run and where it comes from (None when unknown)."""
    if run is not None:
        fact = run.plan.get("world_size")
        if fact is not None and isinstance(fact.value, int) and fact.value >= 1:
            return fact.value, f"{fact.note or 'GPU count'} at {shown_location(ctx, fact.origin)}" if fact.origin else (
                fact.note or "the launcher")
        alone = run.plan.get("single_process")
        if alone is not None and alone.value is True:
            # ``python train.py --deepspeed_config ds.json``: no launcher starts other ranks, and
            # DeepSpeed initialises a world of one
            where = f" at {shown_location(ctx, alone.origin)}" if alone.origin else ""
            return 1, f"{alone.note or 'a bare `python` command runs one process'}{where}"
    if ctx.settings.gpus:
        return ctx.settings.gpus, "`gpus` in the memlint settings"
    return None, ""


def runs_through(ctx: RuleContext) -> list[ResolvedRun]:
    """The runs this document takes part in (deduplicated by entry)."""
    seen: set[str] = set()
    out = []
    for run in ctx.runs:
        if run.plan.entry not in seen:
            seen.add(run.plan.entry)
            out.append(run)
    return out


def trainer_default(framework: str, field: str) -> Any:
    """The Trainer's default for a TrainingArguments field under ``framework`` (schema)."""
    name = DEFAULTS_SCHEMA.get(framework)
    if name is None:
        return None
    found = schema.default(name, field)
    if found is schema.MISSING or found is None:
        found = schema.default("hf-training-arguments", field)
    return None if found is schema.MISSING else found
