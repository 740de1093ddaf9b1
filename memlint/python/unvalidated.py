"""libcst's parse without its per-node validation, for text CPython has already parsed.

Every libcst node checks its own fields when it is built (``CSTNode.__post_init__`` calls
``_validate``: parentheses that balance, whitespace where a keyword needs it...). That guards
trees built by hand; a tree the parser builds from valid Python passes by construction, and
``memlint check`` parses with libcst only text that ``ast.parse`` accepted. On the real tree's
kept modules the checks are a fifth of libcst's parse (``bench/real_speed.py``'s tree; libcst's
own comment on ``__post_init__`` names the same cost: "avoid validating the tree when parsing
a file"). The nodes are the same; only the checks are skipped.

The hook is the class attribute that the dataclass ``__init__`` of every node class calls, put
back to libcst's own function afterwards, whatever another thread did meanwhile (a node built
elsewhere during the parse is then built unchecked, as the parser's are: nothing else changes).
"""

from __future__ import annotations

import libcst as cst

# libcst's own (``self._validate()``); a libcst without it is parsed as it is
_VALIDATING = cst.CSTNode.__dict__.get("__post_init__")


def _unchecked(self: cst.CSTNode) -> None:
    """What a node built by the parser does after ``__init__``: nothing to check."""


def parse_module(text: str) -> cst.Module:
    """``cst.parse_module(text)``, its nodes built without ``_validate``; the same errors
    (``cst.ParserSyntaxError``) for text the parser rejects."""
    if _VALIDATING is None:
        return cst.parse_module(text)
    cst.CSTNode.__post_init__ = _unchecked  # type: ignore[method-assign]
    try:
        return cst.parse_module(text)
    finally:
        cst.CSTNode.__post_init__ = _VALIDATING  # type: ignore[method-assign]
