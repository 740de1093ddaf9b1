"""Python's cycle collector paused while memlint analyses a document.

Parsing a script builds hundreds of thousands of long-lived objects (libcst nodes, their
positions, scopes) and almost no garbage. Each allocation counts towards the collector's next
pass, and each pass walks every young object to find cycles that are not there: on a
50,000-line file, more than the analysis itself. mypy, which builds trees of the same size,
raises the collector's threshold for the same reason. Here the collector is off for the length
of one lint and back on after it (cycles made meanwhile are collected then); nested and
concurrent lints (the language server's threads) share one pause.

A long-running process (the language server) never collects between an edit and its
diagnostics (``IdleCollection``): what a lint made, the new version's tree and scopes, goes to
the collector's permanent generation at its end (``gc.freeze``, constant time), where the young
passes that would walk it (4-8 ms after each edit of a 2,000-line script) do not look; once the
editor has been quiet for a while, one full pass (``freeze_long_lived``) frees the cycles the
edits left, and freezes what is alive again: the imports, schemas and the open documents'
trees, which a full pass would otherwise walk every few dozen edits (100-170 ms at once).
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager
from typing import Iterator

_lock = threading.Lock()
_depth = 0
_was_enabled = False
_keep = False


@contextmanager
def collector_paused(keep: bool = False) -> Iterator[None]:
    """``keep``: what the pause made stays out of the collector's later passes (``gc.freeze``
    at its end, constant time). For ``memlint check``, whose trees live until the run ends: the
    young pass that re-enabling would start next walks every object of the file just analysed
    (each of them alive): 6 % of a cold run's profile on real code."""
    global _depth, _was_enabled, _keep
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
        _keep = _keep or keep
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                if _keep:
                    gc.freeze()
                    _keep = False
                if _was_enabled:
                    gc.enable()


def freeze_long_lived() -> None:
    """Collect everything (what was frozen before too), then exclude every object alive now
    from the collector's later passes (``gc.freeze``). Objects frozen here are still freed by
    reference counting when they die (an edited document's replaced statements, its earlier
    versions: memlint unlinks those, see ``python_unit_scopes._empty``); only a cycle among
    them waits for the next call."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


class IdleCollection:
    """When a long-running process collects: after ``idle_seconds`` without a lint once
    ``least_lints`` lints were made since the last pass, or after ``most_lints`` lints without a
    pause that long (a cap on the cycles left frozen meanwhile). The caller keeps the clock (the
    server's event loop).

    A pass walks the whole heap whatever it frees: 116-135 ms of CPU with TRL's
    ``grpo_trainer.py`` or Accelerate's ``accelerator.py`` open, to free 26 and 127 objects an
    edit. So a quiet spell after a few edits is no reason for one: each pass is a chance that the
    user's next keystroke waits for it."""

    def __init__(self, idle_seconds: float = 2.0, most_lints: int = 500, least_lints: int = 100) -> None:
        self.idle_seconds = idle_seconds
        self.most_lints = most_lints
        self.least_lints = least_lints
        self._lints = 0

    def worth_a_pass(self) -> bool:
        """Have enough lints been made since the last pass for a quiet spell to run one?"""
        return self._lints >= self.least_lints

    def linted(self) -> bool:
        """At the end of a lint, with the collector paused: keep what it made out of the young
        passes. True when a collection is due now rather than at the next idle time."""
        gc.freeze()
        self._lints += 1
        return self._lints >= self.most_lints

    def collect(self) -> None:
        freeze_long_lived()
        self._lints = 0
