"""Unresolved merge conflicts: the usual reason a script or config that worked yesterday stops
parsing. Naming the marker beats repeating the parser's complaint about the line after it."""

from __future__ import annotations

from memlint.model.diagnostics import Position, Range


def conflict_marker(text: str) -> tuple[Range, str] | None:
    """The first ``<<<<<<< branch`` line git left in ``text``, and the marker as written."""
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("<<<<<<<") and (len(line) == 7 or line[7] in " \t"):
            marker = line.rstrip()
            return Range(Position(number, 0), Position(number, len(marker))), marker
    return None


def conflict_message(text: str) -> tuple[Range, str] | None:
    """A finding's range and message for a file that does not parse because of a conflict."""
    found = conflict_marker(text)
    if found is None:
        return None
    where, marker = found
    return where, (f"unresolved merge conflict (`{marker}`): the file cannot be parsed until it is resolved")
