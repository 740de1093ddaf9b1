"""When the language server runs the cycle collector's pass: once the editor is quiet.

The pass (``IdleCollection.collect``, see ``memlint.lint.collector``) walks the whole heap and
holds the GIL from start to end: ~130 ms of CPU with Accelerate's ``accelerator.py`` open, on a
fast core. Timed from the end of the last lint alone, it came due while the user was typing
again: an edit sent two seconds after the one before had its lint run while the timer fired,
and the pass, queued on the lint thread behind that lint, ran before the event loop could
publish the result (``bench/lsp_latency.py --pace-ms 2040``). Quiet now means no edit received
and no lint running or waiting for its debounce: an edit starts the quiet spell again and takes
a pass that has not started yet off the lint thread's queue; a pass that comes due while a lint
is on its way waits for the next spell. A quiet spell runs a pass only once enough lints were
made since the last one (``IdleCollection.least_lints``); a pass made due by too many lints
(``IdleCollection.most_lints``) runs after the next lint whatever comes.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Executor, Future
from typing import Callable

from memlint.lint.collector import IdleCollection

logger = logging.getLogger(__name__)


class QuietCollection:
    """Schedules ``collection``'s pass on the lint thread for the editor's quiet spells;
    ``busy()`` says whether a lint is running or about to."""

    def __init__(self, collection: IdleCollection, lint_thread: Executor, busy: Callable[[], bool]) -> None:
        self.collection = collection
        self._lint_thread = lint_thread
        self._busy = busy
        self._timer: asyncio.TimerHandle | None = None
        self._queued: Future | None = None  # the executor's own future: cancelled at once, not a loop turn later

    def linted(self, due: bool = False) -> None:
        """A lint ended (``due``: too many without a pass): the quiet spell starts now."""
        self._arm(0 if due else self.collection.idle_seconds, forced=due)

    def edited(self) -> None:
        """The user typed: not quiet. A pass queued behind a lint and not started is dropped."""
        if self._queued is not None:
            self._queued.cancel()  # taken off the lint thread's queue unless it is running already
        self._arm(self.collection.idle_seconds, forced=False)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _arm(self, delay: float, forced: bool) -> None:
        self.cancel()
        if not forced and not self.collection.worth_a_pass():
            return  # too few lints since the last pass for its cost (IdleCollection.least_lints)
        self._timer = asyncio.get_running_loop().call_later(delay, self._due, forced)

    def _due(self, forced: bool) -> None:
        self._timer = None
        if not forced and self._busy():
            self._arm(self.collection.idle_seconds, forced=False)  # a lint is on its way: after it
            return
        try:
            self._queued = self._lint_thread.submit(self.collection.collect)
        except RuntimeError:  # the server is shutting down
            return
        self._queued.add_done_callback(_log_failure)


def _log_failure(done: Future) -> None:
    if not done.cancelled() and done.exception() is not None:
        logger.error("memlint: the collector's pass failed", exc_info=done.exception())
