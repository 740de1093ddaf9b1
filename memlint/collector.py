"""Python's cycle collector paused while memlint analyses a document.

Parsing a script builds hundreds of thousands of long-lived objects (libcst nodes, their
positions, scopes) and almost no garbage. Each allocation counts towards the collector's next
pass, and each pass walks every young object to find cycles that are not there: on a
50,000-line file, more than the analysis itself. mypy, which builds trees of the same size,
raises the collector's threshold for the same reason. Here the collector is off for the length
of one lint and back on after it (cycles made meanwhile are collected then); nested and
concurrent lints (the language server's threads) share one pause.
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager
from typing import Iterator

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def collector_paused() -> Iterator[None]:
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
