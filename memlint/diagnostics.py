"""The diagnostic model every part of memlint speaks: positions, ranges, fixes, findings.

Positions are 1-based lines and 0-based columns counted in Unicode code points (libcst's
convention). Output formats convert: JSON/SARIF use 1-based columns, the language server
converts to the client's position encoding (UTF-16 by default).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, order=True)
class Position:
    line: int  # 1-based
    column: int  # 0-based, code points


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


@dataclass(frozen=True)
class Fix:
    message: str
    edits: tuple[Edit, ...]
    # "safe" fixes are applied by ``--fix``; "unsafe" ones only offered (editor, --unsafe-fixes).
    applicability: str = "safe"


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
