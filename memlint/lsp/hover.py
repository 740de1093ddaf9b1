"""Hovers: the memory budget sheet of the run under the cursor, and a rule's page on its code
in a suppression comment.

A run is "under the cursor" when the cursor is on a call that defines it in Python
(``TrainingArguments(...)``, ``SFTConfig``, a ``Trainer``, ``from_pretrained``) or on a key of
a config it reads (DeepSpeed, Axolotl, TrainingArguments YAML/JSON). Of the runs the document
takes part in (``Project.runs_for``), the one whose facts come from inside that call or key
wins; otherwise all of them are shown (a DeepSpeed config shared by two scripts).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from memlint.documents.parsed import ParsedDocument
from memlint.model.diagnostics import Position, Range
from memlint.output.sheet import render_markdown
from memlint.python.source import PythonSource
from memlint.rules import all_rules
from memlint.rules.base import section

# calls that define a training run, by the name they are called with (import aliases resolved)
RUN_CALLS = frozenset({
    "TrainingArguments", "Seq2SeqTrainingArguments", "SFTConfig", "DPOConfig", "ORPOConfig", "KTOConfig",
    "GRPOConfig", "RewardConfig", "PPOConfig", "CPOConfig", "Trainer", "Seq2SeqTrainer", "SFTTrainer",
    "DPOTrainer", "ORPOTrainer", "KTOTrainer", "GRPOTrainer", "RewardTrainer", "PPOTrainer", "CPOTrainer",
    "from_pretrained", "LoraConfig", "BitsAndBytesConfig", "get_peft_model", "prepare_model_for_kbit_training",
    "initialize",  # deepspeed.initialize
})
MAX_RUNS_SHOWN = 3

_SUPPRESSION = re.compile(r"#\s*memlint:\s*(?:ignore-file|ignore)\[([^\]]*)\]", re.IGNORECASE)
_CODE = re.compile(r"[A-Za-z]+[0-9]*")


@dataclass(frozen=True)
class Target:
    """What the cursor is on: its range, and the value range of a config key (for matching facts)."""

    range: Range
    value_range: Range | None = None


# ----------------------------------------------------------------- rule pages


def rule_code_at(line: str, column: int) -> tuple[str, int, int] | None:
    """The rule code (and its columns) under ``column`` in a suppression comment on ``line``."""
    for comment in _SUPPRESSION.finditer(line):
        base = comment.start(1)
        for code in _CODE.finditer(comment.group(1)):
            start, end = base + code.start(), base + code.end()
            if start <= column <= end:
                return code.group(0).upper(), start, end
    return None


def _markdown(text: str) -> str:
    return text.replace("``", "`")


def rule_page(code: str) -> str | None:
    """A rule's page from its docstring: summary, why it matters, fix, settings, link."""
    rules = all_rules()
    rule = rules.get(code)
    if rule is None:
        matching = [c for c in rules if c.startswith(code)]
        if not matching:
            return None
        return f"**memlint** — `{code}` selects {len(matching)} rule(s): " + ", ".join(
            f"`{c}` {rules[c].name}" for c in matching)
    doc = rule.__doc__ or ""
    parts = [f"**{rule.code}** · `{rule.name}` · {rule.severity}", "", _markdown(section(doc, "What it does"))]
    for title in ("Why it matters", "Fix", "Settings"):
        body = section(doc, title)
        if body:
            parts += ["", f"**{title}**", "", _markdown(body)]
    parts += ["", f"[Rule page]({rule.url()})"]
    return "\n".join(parts)


# ----------------------------------------------------------------- what the cursor is on


class _Aliases(cst.CSTVisitor):
    """``from transformers import TrainingArguments as TA``: TA -> TrainingArguments."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        if isinstance(node.names, cst.ImportStar):
            return False
        for alias in node.names:
            if alias.asname is not None and isinstance(alias.asname.name, cst.Name) and isinstance(alias.name, cst.Name):
                self.names[alias.asname.name.value] = alias.name.value
        return False


class _Calls(cst.CSTVisitor):
    def __init__(self, python: PythonSource, position: Position, aliases: dict[str, str]) -> None:
        self.python = python
        self.position = position
        self.aliases = aliases
        self.found: list[tuple[cst.Call, Range]] = []

    def visit_Call(self, node: cst.Call) -> bool:
        rng = self.python.range_of(node)
        if not rng.contains(self.position):
            return False  # the cursor is not inside: nor in any call nested in it
        if self._name(node) in RUN_CALLS:
            self.found.append((node, rng))
        return True

    def _name(self, node: cst.Call) -> str | None:
        """The name a call is spelled with (``x.from_pretrained`` -> from_pretrained), through
        an import alias (``TA(...)`` -> TrainingArguments)."""
        func = node.func
        if isinstance(func, cst.Attribute):
            return func.attr.value
        if isinstance(func, cst.Name):
            return self.aliases.get(func.value, func.value)
        return None


def target_at(parsed: ParsedDocument, position: Position) -> Target | None:
    """The run-defining call (Python) or config key under ``position``, innermost first."""
    if parsed.python is not None:
        aliases = _Aliases()
        try:
            parsed.python.module.visit(aliases)
            visitor = _Calls(parsed.python, position, aliases.names)
            parsed.python.module.visit(visitor)
        except RecursionError:
            return None
        if not visitor.found:
            return None
        return Target(visitor.found[-1][1])
    data = parsed.structured
    if data is None:
        return None
    best: tuple[int, Target] | None = None
    for path, key_range in data.key_ranges.items():
        value_range = data.value_ranges.get(path)
        on_key = key_range.contains(position)
        on_scalar = (value_range is not None and value_range.contains(position)
                     and not isinstance(data.get(*path), (dict, list)))
        if (on_key or on_scalar) and (best is None or len(path) > best[0]):
            best = (len(path), Target(key_range, value_range))
    return best[1] if best else None


def _inside(inner: Range, outer: Range) -> bool:
    return outer.start <= inner.start and inner.end <= outer.end


def runs_at(estimates: list, path_key: str, target: Target, same_file) -> list:
    """The runs whose facts come from inside ``target``; all runs when none does."""
    chosen = []
    for estimate in estimates:
        plan = estimate.run.plan
        origins = [f.origin for f in plan.facts.values() if f.origin is not None]
        origins.append(plan.anchor)
        for origin in origins:
            if not same_file(origin.path, path_key):
                continue
            if _inside(origin.range, target.range) or (target.value_range is not None and origin.range == target.value_range):
                chosen.append(estimate)
                break
    return chosen or list(estimates)


# ----------------------------------------------------------------- the sheet


def budget_markdown(estimates: list) -> str | None:
    blocks = []
    for estimate in estimates[:MAX_RUNS_SHOWN]:
        run = estimate.run
        header = ""
        if len(estimates) > 1:
            header = f"#### Run from `{_name(run.plan.entry)}`\n\n"
        if run.problem is not None or estimate.budget is None:
            blocks.append(f"{header}**memlint** — no estimate for this run: {run.problem or 'not enough facts'}")
            continue
        text = render_markdown(estimate.budget, estimate.suggestions)
        documents = ", ".join(f"`{_name(d)}`" for d in run.plan.documents)
        extra = [f"Run defined by {documents}."]
        if estimate.budget.assumptions:
            extra.append("Assumptions: " + "; ".join(estimate.budget.assumptions) + ".")
        blocks.append(header + text + "\n\n" + "\n\n".join(extra))
    if len(estimates) > MAX_RUNS_SHOWN:
        blocks.append(f"… and {len(estimates) - MAX_RUNS_SHOWN} more runs use this file.")
    return "\n\n---\n\n".join(blocks) if blocks else None


def _name(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]
