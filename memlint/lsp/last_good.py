"""No flicker while typing: what a document said when it last parsed, carried over a
transient syntax error.

Mid-edit a script stops parsing (``args = TrainingArguments(`` half typed) and memlint can
only report the syntax error: every other finding and the estimate would vanish, and come
back a keystroke later. Instead the findings of the last version that parsed stay, on the
lines the edit did not touch (moved with the lines around them), and so does the estimate,
marked stale, until the document parses again.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from memlint.documents.parsed import ParsedDocument
from memlint.model.diagnostics import Diagnostic, Position, Range, split_lines

STALE = " · stale: the file does not parse"


def is_broken(parsed: ParsedDocument) -> bool:
    """Does the document fail to parse the way typing makes it (not an unreadable file)?"""
    if parsed.syntax_error is not None:
        return True
    return parsed.structured is not None and not parsed.structured.ok


class LineMap:
    """Old line -> new line for the lines an edit left alone (the common head and tail)."""

    def __init__(self, old_text: str, new_text: str) -> None:
        old, new = split_lines(old_text), split_lines(new_text)
        head = 0
        while head < min(len(old), len(new)) and old[head] == new[head]:
            head += 1
        tail = 0
        while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
            tail += 1
        self.head, self.tail_from, self.shift = head, len(old) - tail, len(new) - len(old)

    def line(self, line: int) -> int | None:  # 1-based
        if line <= self.head:
            return line
        if line > self.tail_from:
            return line + self.shift
        return None

    def range(self, rng: Range) -> Range | None:
        start, end = self.line(rng.start.line), self.line(rng.end.line)
        if start is None or end is None:
            return None
        return Range(Position(start, rng.start.column), Position(end, rng.end.column))


def _moved(diagnostic: Diagnostic, lines: LineMap) -> Diagnostic | None:
    rng = lines.range(diagnostic.range)
    if rng is None:
        return None
    fix = diagnostic.fix
    if fix is not None:
        edits = []
        for edit in fix.edits:
            moved = lines.range(edit.range) if edit.path == diagnostic.path else edit.range
            if moved is None:
                fix = None
                break
            edits.append(dataclasses.replace(edit, range=moved))
        else:
            fix = dataclasses.replace(fix, edits=tuple(edits))
    related = []
    for item in diagnostic.related:
        moved = lines.range(item.range) if item.path == diagnostic.path else item.range
        if moved is not None:
            related.append(dataclasses.replace(item, range=moved))
    return dataclasses.replace(diagnostic, range=rng, fix=fix, related=tuple(related))


@dataclass
class Kept:
    text: str
    diagnostics: list[Diagnostic]


class LastGood:
    """Per document (resolved path): its last version that parsed and what it said."""

    def __init__(self) -> None:
        self._kept: dict[str, Kept] = {}
        self._labels: dict[str, tuple[str, list]] = {}

    def diagnostics(self, key: str, parsed: ParsedDocument, found: list[Diagnostic]) -> list[Diagnostic]:
        """``found`` for a document that parses (remembered); for one that does not, ``found``
        plus the last good findings on the lines the edit left alone."""
        if not is_broken(parsed):
            self._kept[key] = Kept(parsed.text, found)
            return found
        kept = self._kept.get(key)
        if kept is None:
            return found
        lines = LineMap(kept.text, parsed.text)
        seen = {(d.code, d.range, d.message) for d in found}
        out = list(found)
        for diagnostic in kept.diagnostics:
            moved = _moved(diagnostic, lines)
            if moved is not None and (moved.code, moved.range, moved.message) not in seen:
                out.append(moved)
        return sorted(out, key=lambda d: d.sort_key)

    def labels(self, key: str, parsed: ParsedDocument, labels: list) -> list:
        """The code lens labels (``lens.RunLabel``); over a syntax error the last ones, stale."""
        if not is_broken(parsed):
            self._labels[key] = (parsed.text, labels)
            return labels
        if key not in self._labels:
            return labels
        text, last = self._labels[key]
        lines = LineMap(text, parsed.text)
        out = []
        for label in last:
            line = lines.line(label.line)
            if line is not None:
                out.append(dataclasses.replace(label, line=line, label=label.label + STALE))
        return out

    def forget(self, key: str) -> None:
        self._kept.pop(key, None)
        self._labels.pop(key, None)
