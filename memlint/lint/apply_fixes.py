"""Applying fixes: edits to text, and atomic writes that keep the file's mode.

``--fix`` only ever writes a file when asked, through a temporary file in the same directory
and ``os.replace``, so a crash leaves either the old or the new file, never half of one. The
text is the one memlint linted (byte-order mark dropped, line breaks as they were); the mark
goes back on when it is written.
"""

from __future__ import annotations

import codecs
import errno
import os
import stat
import tempfile
from pathlib import Path

from memlint.model.diagnostics import LINE_BREAK, Edit, split_lines


def _offset(lines: list[str], line: int, column: int) -> int:
    """Character offset of a 1-based line and 0-based column (clamped to the text)."""
    line = max(1, min(line, len(lines) + 1))
    before = sum(len(text) for text in lines[: line - 1])
    length = len(lines[line - 1]) if line - 1 < len(lines) else 0
    return before + max(0, min(column, length))


def apply_edits(text: str, edits: list[Edit]) -> str:
    """``text`` with non-overlapping edits applied (overlapping later edits are skipped). Line
    breaks in the new text take the document's style, as editors do (a CRLF file stays CRLF)."""
    lines = split_lines(text, keepends=True)
    first_break = LINE_BREAK.search(text)
    newline = first_break.group() if first_break else "\n"
    spans = []
    for edit in edits:
        start = _offset(lines, edit.range.start.line, edit.range.start.column)
        end = _offset(lines, edit.range.end.line, edit.range.end.column)
        new_text = edit.new_text if newline == "\n" else LINE_BREAK.sub(newline, edit.new_text)
        spans.append((start, max(end, start), new_text))
    spans.sort(key=lambda s: (s[0], s[1]))
    out, cursor = [], 0
    for start, end, new in spans:
        if start < cursor:
            continue  # overlaps an earlier edit: leave it for the next pass
        out.append(text[cursor:start])
        out.append(new)
        cursor = end
    out.append(text[cursor:])
    return "".join(out)


class ReadOnlyFile(PermissionError):
    """The file has no write permission: ``--fix`` does not replace it behind the user's back
    (a rename would succeed wherever the directory is writable)."""


def write_atomically(path: Path, text: str, bom: bool = False) -> None:
    """Replace ``path``'s content (UTF-8, with a byte-order mark when ``bom``), keeping its
    permissions, in one ``os.replace``. Raises OSError — ReadOnlyFile for a file without
    write permission — and then leaves the file and its directory as they were."""
    mode = stat.S_IMODE(path.stat().st_mode)
    if not mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) or not os.access(path, os.W_OK):
        raise ReadOnlyFile(errno.EACCES, "the file is read-only", str(path))
    data = (codecs.BOM_UTF8 if bom else b"") + text.encode("utf-8")
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".memlint", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
