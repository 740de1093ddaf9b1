"""The server keeps each open buffer as the editor has it: incremental edits are placed by the
LSP's lines (``\\n``, ``\\r\\n``, ``\\r``), not by ``str.splitlines``' (which also breaks at form
feeds, U+2028 and five more). End to end: test_server_robustness.py's form-feed test."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st
from lsprotocol import types
from pygls.workspace.position_codec import PositionCodec

from memlint.lsp.text_sync import EditorTextDocument, lsp_lines

_PIECES = ["x = 1", "", "é", "🦙", "\n", "\r", "\r\n", "\x0c", "\u2028", "\x85", "\x0b"]


@st.composite
def _edits(draw):
    text = "".join(draw(st.lists(st.sampled_from(_PIECES), max_size=12)))
    lines = re.split(r"\r\n|\r|\n", text)

    def position() -> types.Position:
        line = draw(st.integers(0, len(lines)))  # one past the last line too
        column = draw(st.integers(0, len(lines[line]) + 2)) if line < len(lines) else 0  # past the end too
        return types.Position(line, column)

    start, end = sorted([position(), position()], key=lambda p: (p.line, p.character))
    return text, start, end, draw(st.sampled_from(["", "y", "\n", "\x0c", "🦙"]))


def _offset(text: str, position: types.Position) -> int:
    """The LSP's reading of a position, in code points (the client counts UTF-32 here)."""
    starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]
    if position.line >= len(starts):
        return len(text)
    line_end = re.compile(r"\r\n|\r|\n").search(text, starts[position.line])
    content_end = line_end.start() if line_end else len(text)
    return min(starts[position.line] + position.character, content_end)


@given(_edits())
def test_an_incremental_edit_replaces_the_range_the_lsp_names(edit):
    text, start, end, new = edit
    document = EditorTextDocument("file:///train.py", text, version=1, position_codec=PositionCodec("utf-32"))
    document.apply_change(types.TextDocumentContentChangePartial(range=types.Range(start, end), text=new))
    first, last = _offset(text, start), max(_offset(text, start), _offset(text, end))
    assert document.source == text[:first] + new + text[last:]
    assert "".join(lsp_lines(document.source)) == document.source
    assert len(lsp_lines(document.source)) == len(re.findall(r"\r\n|\r|\n", document.source)) + bool(
        re.search(r"(?:\r\n|\r|\n)\Z", document.source) is None and document.source)
