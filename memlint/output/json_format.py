"""``--format json``: an array with ruff's field names, so tools that read ruff read memlint."""

from __future__ import annotations

import json

from memlint.model.diagnostics import Diagnostic
from memlint.rules import all_rules


def diagnostic_to_json(d: Diagnostic, ctx) -> dict:
    rules = all_rules()
    rule = rules.get(d.code)
    fix = None
    if d.fix is not None:
        fix = {
            "applicability": d.fix.applicability,
            "message": d.fix.message,
            "edits": [
                {
                    "content": e.new_text,
                    "location": {"row": e.range.start.line, "column": e.range.start.column + 1},
                    "end_location": {"row": e.range.end.line, "column": e.range.end.column + 1},
                }
                for e in d.fix.edits
            ],
        }
    return {
        "code": d.code,
        "name": rule.name if rule else None,
        "message": d.message,
        "severity": str(d.severity),
        "filename": ctx.relative(d.path),
        "location": {"row": d.range.start.line, "column": d.range.start.column + 1},
        "end_location": {"row": d.range.end.line, "column": d.range.end.column + 1},
        "fix": fix,
        "url": rule.url() if rule else None,
    }


def format_json(diagnostics: list[Diagnostic], ctx) -> str:
    return json.dumps([diagnostic_to_json(d, ctx) for d in diagnostics], indent=2) + "\n"
