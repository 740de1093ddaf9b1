"""``--format sarif``: SARIF 2.1.0 for GitHub code scanning and other SARIF viewers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

from memlint import __version__
from memlint.model.diagnostics import Diagnostic, Severity
from memlint.rules import all_rules
from memlint.rules.base import section

_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _rule_descriptor(rule) -> dict:
    doc = rule.__doc__ or ""
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary() or rule.name},
        "fullDescription": {"text": section(doc, "Why it matters") or rule.summary() or rule.name},
        "helpUri": rule.url(),
        "help": {"text": section(doc, "What it does"), "markdown": section(doc, "What it does")},
        "defaultConfiguration": {"level": _LEVEL[rule.severity]},
    }


def _artifact_location(path: str, ctx) -> dict:
    """A URI reference (RFC 3986, as SARIF requires): relative to the working directory and
    percent-encoded (``run configs/zéro%.json`` -> ``run%20configs/z%C3%A9ro%25.json``), or a
    ``file:`` URI for a file outside it."""
    relative = ctx.relative(path)
    if Path(relative).is_absolute():
        return {"uri": Path(relative).as_uri()}
    return {"uri": quote(relative, safe="/"), "uriBaseId": "%SRCROOT%"}


def format_sarif(diagnostics: list[Diagnostic], ctx) -> str:
    rules = all_rules()
    used = sorted({d.code for d in diagnostics if d.code in rules})
    index = {code: i for i, code in enumerate(used)}
    results = []
    for d in diagnostics:
        region = {
            "startLine": d.range.start.line,
            "startColumn": d.range.start.column + 1,
            "endLine": d.range.end.line,
            "endColumn": d.range.end.column + 1,
        }
        result: dict[str, Any] = {
            "ruleId": d.code,
            "level": _LEVEL[d.severity],
            "message": {"text": d.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": _artifact_location(d.path, ctx),
                        "region": region,
                    }
                }
            ],
        }
        if d.code in index:
            result["ruleIndex"] = index[d.code]
        results.append(result)
    root = Path(ctx.cwd).resolve().as_uri() + "/"
    document = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "memlint",
                        "version": __version__,
                        "informationUri": "https://github.com/memlint/memlint",
                        "rules": [_rule_descriptor(rules[code]) for code in used],
                    }
                },
                "originalUriBaseIds": {"%SRCROOT%": {"uri": root}},
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }
    return json.dumps(document, indent=2) + "\n"
