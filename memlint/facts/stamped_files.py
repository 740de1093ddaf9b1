"""What a file's text says, kept while the file's size and modification time stay the same.

The scans of a project's Python files for argument classes (``project_arguments``,
``parser_helpers``) run once per lint of a config document; a file is read again only when it
changed.
"""

from __future__ import annotations

import ast
import os
import warnings
from pathlib import Path
from typing import Callable, TypeVar

MAX_BYTES = 2 * 1024 * 1024  # larger files are generated data, not argument classes

T = TypeVar("T")


def stamped(cache: dict[str, tuple[tuple[int, int], T | None]], path: str,
            derive: Callable[[str], T | None]) -> T | None:
    """``derive(text)`` of the file at ``path``, from ``cache`` while the file is unchanged;
    None for a file that cannot be read or is larger than :data:`MAX_BYTES`."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    stamp = (info.st_mtime_ns, info.st_size)
    kept = cache.get(path)
    if kept is not None and kept[0] == stamp:
        return kept[1]
    result = None
    if info.st_size <= MAX_BYTES:
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        result = derive(text)
    cache[path] = (stamp, result)
    return result


def python_module(text: str) -> ast.Module | None:
    """The module ``ast`` reads from ``text`` (CPython's parser, in C: nothing is compiled or
    run), its warnings silenced; None for text that does not parse."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(text)
    except Exception:  # a file that does not parse says nothing we can read
        return None
