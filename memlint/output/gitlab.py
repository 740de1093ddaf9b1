"""``--output-format gitlab``: a GitLab Code Quality report (the Code Climate subset GitLab
reads), so merge requests show memlint's findings in their Code Quality widget.

Fingerprints identify a finding across pipelines: they hash the rule, the file and the text of
the flagged line -- not its number, nor the message (which names other lines), so a finding that
moves down when lines are added above it is still the same finding -- plus a counter for twins.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter

from memlint.model.diagnostics import Diagnostic, Severity

_SEVERITY = {Severity.ERROR: "critical", Severity.WARNING: "major", Severity.INFO: "info"}


def _line_text(ctx, d: Diagnostic) -> str:
    text = ctx.read_text(d.path) or ""
    lines = text.splitlines()
    return lines[d.range.start.line - 1].strip() if 0 < d.range.start.line <= len(lines) else ""


def format_gitlab(diagnostics: list[Diagnostic], ctx) -> str:
    seen: Counter[str] = Counter()
    issues = []
    for d in diagnostics:
        path = ctx.relative(d.path)
        identity = "\0".join((d.code, path, _line_text(ctx, d)))
        seen[identity] += 1
        fingerprint = hashlib.sha256(f"{identity}\0{seen[identity]}".encode()).hexdigest()
        issues.append({
            "type": "issue",
            "check_name": d.code,
            "description": f"{d.code} {d.message}",
            "categories": ["Bug Risk"],
            "severity": _SEVERITY[d.severity],
            "fingerprint": fingerprint,
            "location": {
                "path": path,
                "positions": {
                    "begin": {"line": d.range.start.line, "column": d.range.start.column + 1},
                    "end": {"line": d.range.end.line, "column": d.range.end.column + 1},
                },
            },
        })
    return json.dumps(issues, indent=2, ensure_ascii=False) + "\n"
