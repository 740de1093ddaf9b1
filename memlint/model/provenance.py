"""Values with provenance: every fact memlint uses points back at the text that set it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from memlint.model.diagnostics import Range

T = TypeVar("T")


@dataclass(frozen=True)
class Location:
    path: str
    range: Range

    def __str__(self) -> str:
        return f"{self.path}:{self.range.start.line}:{self.range.start.column + 1}"


@dataclass(frozen=True)
class Sourced(Generic[T]):
    """``value`` as read from ``origin``; ``note`` says how (``"argparse default"``, ...).

    ``origin`` is None for values that no file set: defaults of a framework or of the
    project's memlint settings. Such values are reported as assumptions.
    """

    value: T
    origin: Location | None = None
    note: str = ""

    @property
    def assumed(self) -> bool:
        return self.origin is None

    def with_value(self, value: T, note: str | None = None) -> "Sourced[T]":
        return Sourced(value, self.origin, self.note if note is None else note)
