"""Python's cycle collector paused while memlint analyses a document.

Parsing a script builds hundreds of thousands of long-lived objects (libcst nodes, their
positions, scopes) and almost no garbage. Each allocation counts towards the collector's next
pass, and each pass walks every young object to find cycles that are not there: on a
50,000-line file, more than the analysis itself. mypy, which builds trees of the same size,
raises the collector's threshold for the same reason. Here the collector is off for the length
of one lint and back on after it (cycles made meanwhile are collected then); nested and
concurrent lints (the language server's threads) share one pause.

A long-running process (the language server) also moves what it holds after its first lint
into the collector's permanent generation (``freeze_long_lived``): its imports, schemas and the
open documents' trees, which a full pass would otherwise walk every few dozen edits (100-170
ms at once on a 2,000-line script).
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


def freeze_long_lived() -> None:
    """Collect once, then exclude every object alive now from the collector's later passes
    (``gc.freeze``). Objects frozen here are still freed by reference counting when they die
    (an edited document's replaced statements, its earlier versions: memlint unlinks those, see
    ``python_unit_scopes._empty``); only a cycle among them would wait for ``gc.unfreeze``."""
    gc.collect()
    gc.freeze()
