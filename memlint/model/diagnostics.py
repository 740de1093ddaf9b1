"""The diagnostic model every part of memlint speaks: positions, ranges, fixes, findings.

Positions are 1-based lines and 0-based columns counted in Unicode code points (libcst's
convention). Output formats convert: JSON/SARIF use 1-based columns, the language server
converts to the client's position encoding (UTF-16 by default).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Any

from memlint.model.text_enum import TextEnum

# Positions count lines broken at \n, \r\n and \r, as libcst and the Language Server Protocol
# do. ``str.splitlines`` also breaks at \f, \v, \x1c-\x1e, \x85, \u2028 and \u2029, which
# can sit inside a line of a script or config and would shift every line after them.
LINE_BREAK = re.compile(r"\r\n|\r|\n")


def split_lines(text: str, keepends: bool = False) -> list[str]:
    """The lines of ``text`` as positions count them (a final line break ends the last line)."""
    if not keepends:
        lines = LINE_BREAK.split(text)
        return lines[:-1] if lines and lines[-1] == "" else lines
    out, start = [], 0
    for match in LINE_BREAK.finditer(text):
        out.append(text[start:match.end()])
        start = match.end()
    if start < len(text):
        out.append(text[start:])
    return out


@dataclass(frozen=True, order=True)
class Position:
    line: int  # 1-based
    column: int  # 0-based, code points

    @classmethod
    def at_offset(cls, text: str, offset: int) -> "Position":
        """The position of the character at ``offset`` in ``text``."""
        before = text[:offset]
        breaks = list(LINE_BREAK.finditer(before))
        line_start = breaks[-1].end() if breaks else 0
        return cls(len(breaks) + 1, offset - line_start)


@dataclass(frozen=True, order=True)
class Range:
    start: Position
    end: Position

    @classmethod
    def of(cls, line: int, column: int, end_line: int, end_column: int) -> "Range":
        return cls(Position(line, column), Position(end_line, end_column))

    @classmethod
    def file_start(cls) -> "Range":
        return cls(Position(1, 0), Position(1, 0))

    def contains(self, position: Position) -> bool:
        return self.start <= position <= self.end

    def within(self, text: str) -> "Range":
        """This range cut to the document ``text`` (parsers report some errors one column past
        the end of a line, or on the line after the last)."""
        lines = LINE_BREAK.split(text)

        def fit(position: Position) -> Position:
            line = min(max(position.line, 1), len(lines))
            return Position(line, min(max(position.column, 0), len(lines[line - 1])))

        start, end = fit(self.start), fit(self.end)
        return Range(start, max(start, end))


class Severity(enum.IntEnum):
    """Ordered so that thresholds compare: INFO < WARNING < ERROR."""

    INFO = 1
    WARNING = 2
    ERROR = 3

    @classmethod
    def parse(cls, text: str) -> "Severity":
        try:
            return cls[text.strip().upper()]
        except KeyError:
            names = ", ".join(s.name.lower() for s in cls)
            raise ValueError(f"unknown severity {text!r}; expected one of {names}") from None

    def __str__(self) -> str:  # "error", as users write it in settings
        return self.name.lower()


@dataclass(frozen=True)
class Edit:
    """Replace ``range`` of ``path`` with ``new_text`` (an empty range inserts)."""

    path: str
    range: Range
    new_text: str


class Applicability(TextEnum):
    """How far a fix can be trusted (ruff's terms): ``--fix`` applies safe fixes; unsafe ones
    are only offered (the editor's quick fixes, ``--unsafe-fixes``)."""

    SAFE = "safe"
    UNSAFE = "unsafe"


@dataclass(frozen=True)
class Fix:
    message: str
    edits: tuple[Edit, ...]
    applicability: Applicability = Applicability.SAFE

    def __post_init__(self) -> None:  # "safe" as text (a plugin's rule, the cache) is the member
        object.__setattr__(self, "applicability", Applicability(self.applicability))


@dataclass(frozen=True)
class Related:
    """Another place that explains the finding (the DeepSpeed file a script links, ...)."""

    path: str
    range: Range
    message: str


@dataclass(frozen=True)
class Diagnostic:
    code: str
    message: str
    path: str
    range: Range
    severity: Severity
    fix: Fix | None = None
    related: tuple[Related, ...] = ()
    # Structured payload for hovers and quick fixes (e.g. the budget of a MEM001 finding).
    data: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def sort_key(self) -> tuple:
        return (self.path, self.range.start, self.code, self.message)
