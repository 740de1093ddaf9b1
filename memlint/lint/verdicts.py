"""A run's memory verdict in every document of the run (the editor's view).

``memlint check`` reports MEM001 once, on the fact that decides it (``run.sh``'s
``--per_device_train_batch_size 8``). In an editor the user may have only ``train.py`` open,
so the language server asks the engine for the verdict in each document of the run as well:
on the deciding fact *in that document* when it states one, else on the run's anchor or the
model load there, with related information pointing at the other documents.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterable

from memlint.estimate import Budget
from memlint.facts.resolve import ResolvedRun
from memlint.model.diagnostics import Related
from memlint.model.provenance import Location
from memlint.rules.base import Finding

# the run-level memory verdicts shown in each document of the run
VERDICT_CODES = frozenset({"MEM001", "MEM002"})
# where a verdict goes in a document that states no deciding fact, most telling first
FALLBACK_FACTS = ("framework", "model", "micro_batch", "seq_len", "optimizer", "zero_stage")


def place_in(run: ResolvedRun, budget: Budget | None, is_here: Callable[[str], bool]) -> Location | None:
    """Where ``run``'s verdict goes in the document ``is_here`` accepts: the fact that sets the
    largest part of the peak, else the run's anchor, else the model load or another fact."""
    from memlint.rules._memory import location_for

    if budget is not None:
        deciding = location_for(run, budget, within=is_here)
        if deciding is not None:
            return deciding
    if is_here(run.plan.anchor.path):
        return run.plan.anchor
    for name in FALLBACK_FACTS:
        fact = run.plan.get(name)
        if fact is not None and fact.origin is not None and is_here(fact.origin.path):
            return fact.origin
    stated = [f.origin for f in run.plan.facts.values() if f.origin is not None and is_here(f.origin.path)]
    return min(stated, key=lambda o: o.range.start) if stated else None


def _name(path: str) -> str:
    return Path(path).name


def mirrored(code: str, finding: Finding, runs: Iterable[ResolvedRun], path: str,
             key: Callable[[str], str], budget_of: Callable[[ResolvedRun], Budget | None]) -> Finding | None:
    """``finding`` (a verdict reported in another document) as seen from ``path``, or None."""
    if code not in VERDICT_CODES or finding.path is None or key(finding.path) == key(path):
        return None
    entry = finding.data.get("entry")
    run = next((r for r in runs if r.plan.entry == entry), None)
    if run is None:
        return None
    here = key(path)
    budget = budget_of(run)
    where = place_in(run, budget, lambda p: key(p) == here)
    if where is None:
        return None
    related = [Related(finding.path, finding.range, f"{code} is decided here, in {_name(finding.path)}")]
    for document in run.plan.documents:
        if key(document) in (here, key(finding.path)):
            continue
        there = key(document)
        other = place_in(run, budget, lambda p: key(p) == there)  # called here, never kept
        if other is not None:
            related.append(Related(other.path, other.range, f"the same run, in {_name(document)}"))
    at = f"{_name(finding.path)}:{finding.range.start.line}"
    return Finding(range=where.range, path=path, message=f"{finding.message} [run decided at {at}]",
                   related=tuple(related), data={**finding.data, "decided_at": finding.path})
