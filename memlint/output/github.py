"""``--format github``: GitHub Actions workflow commands, one annotation per finding."""

from __future__ import annotations

from memlint.model.diagnostics import Diagnostic, Severity

_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def format_github(diagnostics: list[Diagnostic], ctx) -> str:
    lines = []
    for d in diagnostics:
        props = ",".join(
            [
                f"title={_escape_property(f'memlint ({d.code})')}",
                f"file={_escape_property(ctx.relative(d.path))}",
                f"line={d.range.start.line}",
                f"col={d.range.start.column + 1}",
                f"endLine={d.range.end.line}",
                f"endColumn={d.range.end.column + 1}",
            ]
        )
        lines.append(f"::{_LEVEL[d.severity]} {props}::{_escape_data(f'{d.code} {d.message}')}")
    return "".join(line + "\n" for line in lines)
