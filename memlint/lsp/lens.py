"""The per-GPU estimate at the line that defines a run (``≈ 74.8 GiB/GPU on H100 · fits``).

Shown as a code lens when the client supports code lenses, else as an inlay hint at the end
of the line (infracost's pattern: one or the other, never both). The line is the run's plan
anchor: the call or config key that defines the run.
"""

from __future__ import annotations

from dataclasses import dataclass

from memlint.estimate import Budget
from memlint.lint.verdicts import place_in
from memlint.lsp.hover import budget_markdown
from memlint.model.units import GiB

MAX_PROBLEM_CHARS = 80


@dataclass(frozen=True)
class RunLabel:
    line: int  # 1-based, memlint's convention
    label: str
    tooltip: str  # Markdown: the budget sheet


def short_gpu_name(name: str) -> str:
    for prefix in ("NVIDIA ", "GeForce ", "Tesla "):
        if name.startswith(prefix):
            name = name[len(prefix):]
    return name


def label_for(budget: Budget) -> str:
    peak = f"≈ {budget.peak_bytes / GiB:.1f} GiB/GPU"
    cap, margin = budget.capacity, budget.margin_bytes
    if cap is None or margin is None:  # the margin is known exactly when the GPU is
        return f"{peak} peak (no target GPU set)"
    where = f"{peak} on {short_gpu_name(cap.gpu_name)}"
    if not budget.fits:
        return f"{where} · does not fit ({-margin / GiB:.1f} GiB short)"
    if not budget.comfortable:
        return f"{where} · fits, little headroom"
    return f"{where} · fits"


def run_labels(estimates: list, path: str, same_file) -> list[RunLabel]:
    """One label per line that anchors a run in ``path``; a run anchored in another document
    (a script launched by ``run.sh``) gets its label where its verdict goes in this one."""
    by_line: dict[int, list] = {}
    for estimate in estimates:
        anchor = estimate.run.plan.anchor
        if not same_file(anchor.path, path):
            anchor = place_in(estimate.run, estimate.budget, lambda p: same_file(p, path)) or anchor
        if same_file(anchor.path, path):
            by_line.setdefault(anchor.range.start.line, []).append(estimate)
    out = []
    for line, group in sorted(by_line.items()):
        labels = []
        for estimate in group:
            budget = estimate.budget
            if budget is None:
                problem = (estimate.run.problem or "not enough facts").split("; ")[0]
                if len(problem) > MAX_PROBLEM_CHARS:
                    problem = problem[: MAX_PROBLEM_CHARS - 1] + "…"
                labels.append(f"memlint: no estimate ({problem})")
            else:
                labels.append(label_for(budget))
        out.append(RunLabel(line, " | ".join(dict.fromkeys(labels)), budget_markdown(group) or ""))
    return out
