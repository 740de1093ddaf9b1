"""Human output: ``path:line:col: CODE message``, the source line and a caret under the range."""

from __future__ import annotations

import re

from memlint.model.diagnostics import Diagnostic, Severity, split_lines

# Messages quote what files contain (a YAML key can hold a line break or a terminal escape):
# shown escaped, so each finding stays one line and the terminal only prints text.
_UNPRINTABLE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")


def _one_line(text: str) -> str:
    return _UNPRINTABLE.sub(lambda match: repr(match.group())[1:-1], text)


_COLORS = {Severity.ERROR: "\033[31m", Severity.WARNING: "\033[33m", Severity.INFO: "\033[36m"}
_RESET, _BOLD, _DIM = "\033[0m", "\033[1m", "\033[2m"


def _header(d: Diagnostic, ctx) -> str:
    location = f"{_one_line(ctx.relative(d.path))}:{d.range.start.line}:{d.range.start.column + 1}"
    code = d.code
    if ctx.color:
        location = f"{_BOLD}{location}{_RESET}"
        code = f"{_COLORS[d.severity]}{code}{_RESET}"
    return f"{location}: {code} [{d.severity}] {_one_line(d.message)}"


def format_concise(diagnostics: list[Diagnostic], ctx) -> str:
    return "".join(_header(d, ctx) + "\n" for d in diagnostics)


def format_text(diagnostics: list[Diagnostic], ctx) -> str:
    out: list[str] = []
    cache: dict[str, list[str]] = {}
    for d in diagnostics:
        out.append(_header(d, ctx))
        if d.path not in cache:
            text = ctx.read_text(d.path)
            cache[d.path] = split_lines(text) if text else []
        lines = cache[d.path]
        line_no = d.range.start.line
        if 1 <= line_no <= len(lines):
            source = lines[line_no - 1].expandtabs(4)
            gutter = f"{line_no:>5} | "
            out.append(gutter + source)
            start = d.range.start.column
            end = d.range.end.column if d.range.end.line == line_no else len(source)
            width = max(1, min(end, len(source)) - start)
            caret = " " * len(gutter) + " " * start + "^" * width
            out.append(f"{_COLORS[d.severity]}{caret}{_RESET}" if ctx.color else caret)
        if d.fix is not None:
            out.append(f"      = fix ({d.fix.applicability}): {_one_line(d.fix.message)}")
        out.append("")
    if diagnostics:
        errors = sum(d.severity == Severity.ERROR for d in diagnostics)
        warnings = sum(d.severity == Severity.WARNING for d in diagnostics)
        infos = len(diagnostics) - errors - warnings
        out.append(f"Found {len(diagnostics)} finding{'s' if len(diagnostics) != 1 else ''} "
                   f"({errors} error{'s' if errors != 1 else ''}, {warnings} warning{'s' if warnings != 1 else ''}, "
                   f"{infos} info).")
    return "\n".join(out) + ("\n" if out else "")
