"""Suppression comments: ``# memlint: ignore[CODE, ...]`` on the line of a finding.

Python and YAML take the comment on the finding's first line (``# memlint: ignore`` without
codes silences every rule there); ``# memlint: ignore-file[CODE]`` anywhere silences a code in
the whole file. JSON has no comments: use ``per-file-ignores`` in the settings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from memlint.model.diagnostics import split_lines

_COMMENT = re.compile(r"#\s*memlint:\s*(ignore-file|ignore)(?:\[([^\]]*)\])?", re.IGNORECASE)
ALL = "*"


@dataclass
class Suppressions:
    by_line: dict[int, set[str]] = field(default_factory=dict)  # 1-based line -> codes (or ALL)
    file_wide: set[str] = field(default_factory=set)

    def silences(self, code: str, line: int) -> bool:
        for codes in (self.file_wide, self.by_line.get(line, ())):
            if ALL in codes or any(code.startswith(c) for c in codes):
                return True
        return False


def parse_codes(text: str | None) -> set[str]:
    if text is None:
        return {ALL}
    codes = {c.strip().upper() for c in text.split(",") if c.strip()}
    return codes or {ALL}


def find(text: str, syntax: str) -> Suppressions:
    result = Suppressions()
    if syntax not in ("python", "yaml", "shell") or "memlint" not in text:
        return result
    for number, line in enumerate(split_lines(text), start=1):
        if "memlint" not in line:
            continue
        for match in _COMMENT.finditer(line):
            codes = parse_codes(match.group(2))
            if match.group(1).lower() == "ignore-file":
                result.file_wide |= codes
            else:
                result.by_line.setdefault(number, set()).update(codes)
    return result


def comment_for(codes: list[str]) -> str:
    return f"# memlint: ignore[{', '.join(sorted(set(codes)))}]"


def add_to_line(line: str, code: str, syntax: str) -> str:
    """The line with ``code`` added to its suppression comment (or a new comment)."""
    match = _COMMENT.search(line)
    if match and match.group(1).lower() == "ignore":
        codes = parse_codes(match.group(2))
        if ALL in codes:
            return line
        codes.add(code)
        return line[: match.start()] + comment_for(sorted(codes)) + line[match.end():]
    stripped = line.rstrip()
    return f"{stripped}  {comment_for([code])}" if stripped else comment_for([code])
