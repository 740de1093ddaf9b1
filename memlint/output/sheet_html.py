"""The budget sheet as a self-contained HTML page: ``memlint estimate --format html`` (a CI
artifact, a pull-request attachment) and the editor's budget view.

One section per run: the verdict, the per-component bars against the GPU's usable memory,
the phases of a step (forward, backward, optimizer step) as stacked bars with the capacity
line, and the cheapest changes that make it fit. No script, no external resource: the page
opens anywhere, offline, and a webview's content security policy lets it through. Colours
follow the editor's theme when the page is shown in VS Code (``--vscode-*`` variables).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

from memlint.estimate import Budget, Suggestion
from memlint.model.units import GiB
from memlint.output.sheet import MIN_SHOWN_BYTES, describe_setup, verdict_line

# one colour per component, in the order the components are drawn (colour-blind safe, Okabe-Ito)
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#999999")

_STYLE = """
body { font-family: var(--vscode-font-family, system-ui, sans-serif); font-size: 13px;
       color: var(--vscode-foreground, #1f2328); background: var(--vscode-editor-background, #fff);
       margin: 16px; max-width: 960px; }
h1 { font-size: 18px; margin: 0 0 12px; } h2 { font-size: 15px; margin: 24px 0 6px; }
h3 { font-size: 13px; margin: 16px 0 6px; text-transform: uppercase; letter-spacing: .04em; opacity: .8; }
.verdict { font-size: 15px; font-weight: 600; padding: 8px 10px; border-radius: 4px; margin: 8px 0; }
.verdict.fits { background: rgba(0, 158, 115, .15); } .verdict.tight { background: rgba(230, 159, 0, .2); }
.verdict.over { background: rgba(213, 94, 0, .2); }
.setup, .note { opacity: .8; margin: 4px 0; }
table { border-collapse: collapse; width: 100%; }
td { padding: 2px 6px; vertical-align: middle; } td.num { text-align: right; white-space: nowrap; width: 6em; }
td.label { width: 38%; }
.track { position: relative; height: 14px; background: rgba(128, 128, 128, .15); border-radius: 2px; }
.fill { position: absolute; top: 0; bottom: 0; left: 0; border-radius: 2px; }
.stack { display: flex; height: 22px; position: relative; background: rgba(128, 128, 128, .12); border-radius: 2px; }
.seg { height: 100%; } .cap { position: absolute; top: -3px; bottom: -3px; width: 2px; background: #D55E00; }
.legend span { display: inline-block; margin: 2px 10px 2px 0; } .swatch { display: inline-block; width: 10px;
  height: 10px; margin-right: 4px; border-radius: 2px; vertical-align: middle; }
ol.changes li { margin: 4px 0; } code { font-family: var(--vscode-editor-font-family, monospace); }
button { margin-left: 8px; font: inherit; cursor: pointer; color: var(--vscode-button-foreground, #fff);
  background: var(--vscode-button-background, #0969da); border: 0; border-radius: 3px; padding: 2px 8px; }
.stale { background: rgba(230, 159, 0, .2); padding: 6px 10px; border-radius: 4px; }
"""


@dataclass
class RunView:
    """One run on the page: its heading, budget and changes; ``applicable`` marks the changes
    the editor can make with one click (their index is posted back by the page's button)."""

    heading: str
    budget: Budget | None
    suggestions: list[Suggestion] = field(default_factory=list)
    applicable: list[bool] = field(default_factory=list)
    problem: str | None = None


def _gib(n: float) -> str:
    return f"{n / GiB:,.2f}"


def _pct(part: float, whole: float) -> str:
    return f"{max(min(part / whole * 100, 100), 0):.2f}%" if whole > 0 else "0%"


def _verdict_class(budget: Budget) -> str:
    if budget.capacity is None or budget.fits is None:
        return ""
    if not budget.fits:
        return "over"
    return "fits" if budget.comfortable else "tight"


def _colours(budget: Budget) -> dict[str, str]:
    keys = [c.key for c in sorted(budget.components, key=lambda c: -c.bytes)]
    return {key: PALETTE[i % len(PALETTE)] for i, key in enumerate(keys)}


def _components(budget: Budget, scale: float, colours: dict[str, str]) -> list[str]:
    out = ["<h3>Components at the peak</h3>", '<table class="components">']
    shown = [c for c in sorted(budget.components, key=lambda c: -c.bytes) if c.bytes >= MIN_SHOWN_BYTES]
    for c in shown:
        out.append(
            f'<tr data-component="{html.escape(c.key)}"><td class="label">{html.escape(c.label)}</td>'
            f'<td class="num">{_gib(c.bytes)} GiB</td><td><div class="track"><div class="fill" '
            f'style="width:{_pct(c.bytes, scale)};background:{colours.get(c.key, PALETTE[-1])}"></div></div></td></tr>')
    out.append(f'<tr><td class="label"><b>Peak</b> ({html.escape(budget.peak_phase.name.replace("_", " "))})</td>'
               f'<td class="num"><b>{_gib(budget.peak_bytes)} GiB</b></td><td><div class="track"><div class="fill" '
               f'style="width:{_pct(budget.peak_bytes, scale)};background:#777"></div></div></td></tr>')
    if budget.capacity is not None:
        out.append(f'<tr><td class="label">Usable on {html.escape(budget.capacity.gpu_name)}</td>'
                   f'<td class="num">{_gib(budget.capacity.usable_bytes)} GiB</td><td></td></tr>')
    out.append("</table>")
    return out


def _phases(budget: Budget, scale: float, colours: dict[str, str]) -> list[str]:
    out = ["<h3>Phases of a step</h3>", '<table class="phases">']
    for phase in budget.phases:
        segments = "".join(
            f'<div class="seg" title="{html.escape(c.label)}: {_gib(c.bytes)} GiB" '
            f'style="width:{_pct(c.bytes, scale)};background:{colours.get(c.key, PALETTE[-1])}"></div>'
            for c in sorted(phase.components, key=lambda c: -c.bytes) if c.bytes > 0)
        cap = ""
        if budget.capacity is not None:
            cap = f'<div class="cap" style="left:{_pct(budget.capacity.usable_bytes, scale)}"></div>'
        out.append(f'<tr data-phase="{html.escape(phase.name)}"><td class="label">'
                   f'{html.escape(phase.name.replace("_", " "))}</td><td class="num">{_gib(phase.bytes)} GiB</td>'
                   f'<td><div class="stack">{segments}{cap}</div></td></tr>')
    out.append("</table>")
    legend = "".join(f'<span><i class="swatch" style="background:{colour}"></i>'
                     f'{html.escape(next(c.label for c in budget.components if c.key == key))}</span>'
                     for key, colour in colours.items())
    out.append(f'<div class="legend">{legend}</div>')
    if budget.capacity is not None:
        out.append('<p class="note">The red line is the memory the GPU can give tensors.</p>')
    return out


def _changes(view: RunView, index_base: int) -> list[str]:
    budget = view.budget
    if not view.suggestions or budget is None:
        return []
    title = "Cheapest changes that make it fit" if budget.fits is False else "Changes that lower the peak"
    out = [f"<h3>{title}</h3>", '<ol class="changes">']
    for i, s in enumerate(view.suggestions):
        verdict = "" if s.fits is None else (" — fits" if s.fits else " — still short")
        button = ""
        if i < len(view.applicable) and view.applicable[i]:
            button = f'<button data-apply="{index_base + i}">Apply</button>'
        out.append(f'<li data-fits="{str(bool(s.fits)).lower()}">{html.escape(s.change)}: '
                   f'−{_gib(s.saves_bytes)} GiB → {_gib(s.peak_bytes)} GiB{verdict} '
                   f'<span class="note">(<code>{html.escape(s.how)}</code>)</span>{button}</li>')
    out.append("</ol>")
    return out


def render_html(views: list[RunView], title: str = "memlint budget", stale: bool = False,
                script: str = "") -> str:
    """The page for ``views``; ``script`` (the editor's, with its nonce) wires the buttons."""
    body = [f"<h1>{html.escape(title)}</h1>"]
    if stale:
        body.append('<p class="stale">The file does not parse: this is its last estimate.</p>')
    index = 0
    for view in views:
        if len(views) > 1:
            body.append(f"<h2>{html.escape(view.heading)}</h2>")
        budget = view.budget
        if budget is None:
            body.append(f'<p class="verdict">No estimate: {html.escape(view.problem or "not enough facts")}</p>')
            continue
        scale = max(budget.capacity.usable_bytes if budget.capacity else 0, max(p.bytes for p in budget.phases), 1)
        colours = _colours(budget)
        body.append(f'<p class="verdict {_verdict_class(budget)}">{html.escape(verdict_line(budget))}</p>')
        body.append(f'<p class="setup">{html.escape(budget.model)} · {html.escape(describe_setup(budget))}</p>')
        body += _components(budget, scale, colours)
        body += _phases(budget, scale, colours)
        body += _changes(view, index)
        index += len(view.suggestions)
        if budget.assumptions:
            body.append('<p class="note">Assumptions: ' + html.escape("; ".join(budget.assumptions)) + ".</p>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>\n"
            + "\n".join(body) + f"\n{script}</body></html>\n")
