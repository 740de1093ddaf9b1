"""The editor's budget view: the HTML page of ``memlint.output.sheet_html`` for the runs a document
takes part in, with the edits of the changes that can be applied from it with one click.

The server answers the ``memlint.budgetView`` command with ``{"html", "edits", "stale"}``:
``edits[i]`` is the i-th change's edit (``{uri: [TextEdit]}``, client units) or None when it
cannot be made by editing values (more GPUs, LoRA). The VS Code extension shows the page in a
webview, wires its buttons to ``edits`` and asks again as the documents change.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from memlint.lint.suggestion_edits import edits_json, suggestion_edits
from memlint.output.sheet_html import RunView, render_html

MAX_RUNS = 3


def budget_view(estimates: list, path: str, read: Callable[[str], str | None],
                place: Callable[[list], list | None], stale: bool = False) -> dict[str, Any]:
    """``read(path)``: a document's text as linted; ``place(edits_json)``: those edits in
    client units (None when one cannot be placed)."""
    views: list[RunView] = []
    edits: list[dict[str, list] | None] = []
    for estimate in estimates[:MAX_RUNS]:
        run, budget = estimate.run, estimate.budget
        heading = f"Run from {Path(run.plan.entry).name}"
        if budget is None:
            views.append(RunView(heading, None, problem=run.problem))
            continue
        suggestions = estimate.suggestions if budget.capacity is not None else []
        applicable = []
        for suggestion in suggestions:
            placed = place(edits_json(suggestion_edits(suggestion, run, read))) if suggestion.fits else None
            by_uri: dict[str, list] = {}
            for edit in placed or []:
                by_uri.setdefault(edit["uri"], []).append({"range": edit["range"], "newText": edit["newText"]})
            edits.append(by_uri or None)
            applicable.append(bool(by_uri))
        views.append(RunView(heading, budget, suggestions, applicable))
    title = f"memlint budget: {Path(path).name}"
    return {"html": render_html(views, title=title, stale=stale), "edits": edits, "stale": stale,
            "runs": len(views)}
