"""Per-document debouncing: an isolated edit is linted at once, a burst only at its end.

Each key (a document URI) has at most one pending task. The first edit after a quiet spell
runs straight away (the leading edge: typing at a person's pace, keystrokes further apart
than the delay, never waits for a timer it gains nothing from). An edit that comes within the
delay of the one before it, or while that one's job is still pending, cancels the pending job
and waits out the delay (the trailing edge: a paste or a formatter's burst of edits is linted
once, after its last edit). A cancelled job that is waiting for the lint thread is taken off
its queue; one that has started finishes, and its result is dropped as stale by the caller.
Keys are independent: typing in one file never delays another file's diagnostics (Fixit's
per-URI debouncer, not infracost's per-project one; the edges are lodash's ``debounce`` with
``leading`` and ``trailing`` both on).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable, Hashable

logger = logging.getLogger(__name__)


class Debouncer:
    """Runs a document's lint once typing pauses: the first edit after a quiet spell at once,
    the rest after the delay, a newer edit replacing the pending one."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self._pending: dict[Hashable, asyncio.Task] = {}
        self._last_scheduled: dict[Hashable, float] = {}

    def schedule(self, key: Hashable, work: Callable[[], Awaitable[object]], delay: float | None = None) -> asyncio.Task:
        """Run ``work()`` now if ``key`` has been quiet for the delay, else after the delay
        unless ``key`` is scheduled again first. An explicit ``delay`` is always waited out."""
        loop = asyncio.get_running_loop()
        now = loop.time()
        quiet = not self.pending(key) and now - self._last_scheduled.get(key, float("-inf")) >= self.delay
        self._last_scheduled[key] = now
        if delay is None:
            delay = 0.0 if quiet else self.delay
        self.cancel(key)
        task = loop.create_task(self._run(key, work, delay))
        self._pending[key] = task
        task.add_done_callback(lambda done: self._drop_done(key, done))
        return task

    def cancel(self, key: Hashable) -> None:
        task = self._pending.pop(key, None)
        if task is not None and not task.done():
            task.cancel()

    def cancel_all(self) -> None:
        for key in list(self._pending):
            self.cancel(key)

    def forget(self, key: Hashable) -> None:
        """A closed document: drop its pending job and its history."""
        self.cancel(key)
        self._last_scheduled.pop(key, None)

    def busy(self) -> bool:
        """Is any key's job pending (waiting out its delay, or linting)?"""
        return any(not task.done() for task in self._pending.values())

    def pending(self, key: Hashable) -> bool:
        task = self._pending.get(key)
        return task is not None and not task.done()

    async def _run(self, key: Hashable, work: Callable[[], Awaitable[object]], delay: float) -> None:
        if delay > 0:
            await asyncio.sleep(delay)
        try:
            await work()
        except asyncio.CancelledError:
            raise
        except Exception:  # a failed job must not kill the key's future jobs
            logger.exception("memlint: debounced job for %s failed", key)

    def _drop_done(self, key: Hashable, task: asyncio.Task) -> None:
        if self._pending.get(key) is task:
            del self._pending[key]
