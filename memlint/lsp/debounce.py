"""Per-document debouncing: the newest edit of a document wins, older pending work is dropped.

Each key (a document URI) has at most one pending task. Scheduling again cancels the pending
one, whether it is still waiting out the delay or already waiting for the lint thread (a lint
job that has not started is then taken off the queue; one that has started finishes, and its
result is dropped as stale by the caller). Keys are independent: typing in one file never
delays another file's diagnostics (Fixit's per-URI debouncer, not infracost's per-project one).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Awaitable, Callable, Hashable

logger = logging.getLogger(__name__)


class Debouncer:
    def __init__(self, delay: float) -> None:
        self.delay = delay
        self._pending: dict[Hashable, asyncio.Task] = {}

    def schedule(self, key: Hashable, work: Callable[[], Awaitable[object]], delay: float | None = None) -> asyncio.Task:
        """Run ``work()`` after ``delay`` seconds unless ``key`` is scheduled again first."""
        self.cancel(key)
        task = asyncio.get_running_loop().create_task(self._run(key, work, self.delay if delay is None else delay))
        self._pending[key] = task
        task.add_done_callback(lambda done: self._forget(key, done))
        return task

    def cancel(self, key: Hashable) -> None:
        task = self._pending.pop(key, None)
        if task is not None and not task.done():
            task.cancel()

    def cancel_all(self) -> None:
        for key in list(self._pending):
            self.cancel(key)

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

    def _forget(self, key: Hashable, task: asyncio.Task) -> None:
        if self._pending.get(key) is task:
            del self._pending[key]
