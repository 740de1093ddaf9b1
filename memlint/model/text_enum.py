"""Enumerations whose members are their text: ``DocumentKind.PYTHON == "python"``.

Kinds and applicabilities travel as text (JSON output, the result cache, the language server's
settings); members that are ``str`` compare, hash, print and serialise as that text, so the
types document the vocabulary without changing a byte of what memlint writes.
"""

from __future__ import annotations

import enum


class TextEnum(str, enum.Enum):
    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)
