"""The cycle collector's pass in the language server waits for the editor to be quiet: an edit
starts the quiet spell again and takes a pass that has not started off the lint thread, a pass
that comes due while a lint is on its way waits for the next spell (memlint.lsp.quiet_collection).
The server's lint thread is a one-worker executor, as here; the passes are the real ones."""

from __future__ import annotations

import asyncio
import gc
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from memlint.lint.collector import IdleCollection
from memlint.lsp.quiet_collection import QuietCollection

IDLE = 0.6  # seconds without an edit or a lint before a pass


@pytest.fixture(autouse=True)
def _heap_unfrozen_after():
    """The passes freeze what is alive (the server's policy): not this test process's heap."""
    was_enabled = gc.isenabled()
    yield
    gc.unfreeze()
    (gc.enable if was_enabled else gc.disable)()


class RecordedCollection(IdleCollection):
    """The real pass, with the loop time it ran at."""

    def __init__(self, loop: asyncio.AbstractEventLoop, **kwargs) -> None:
        super().__init__(**kwargs)
        self.loop = loop
        self.passes: list[float] = []

    def collect(self) -> None:
        self.passes.append(self.loop.time())
        super().collect()


async def _passes_run(quiet: QuietCollection, collection: RecordedCollection, lint_thread: ThreadPoolExecutor,
                     seconds: float = 10.0) -> list[float]:
    """The passes, once one has run (or ``seconds`` went by); the scheduler and thread stopped."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not collection.passes and loop.time() < deadline:
        await asyncio.sleep(0.02)
    quiet.cancel()
    lint_thread.shutdown()
    return collection.passes


def _scheduler(busy: list[bool], least_lints: int = 0) -> tuple[QuietCollection, RecordedCollection, ThreadPoolExecutor]:
    loop = asyncio.get_running_loop()
    lint_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memlint-lint")
    collection = RecordedCollection(loop, idle_seconds=IDLE, most_lints=500, least_lints=least_lints)
    return QuietCollection(collection, lint_thread, lambda: busy[0]), collection, lint_thread


def test_an_edit_starts_the_quiet_spell_again():
    async def scenario() -> tuple[float, float, list[float]]:
        loop = asyncio.get_running_loop()
        quiet, collection, lint_thread = _scheduler([False])
        quiet.linted()
        linted_at = loop.time()
        await asyncio.sleep(IDLE / 2)
        quiet.edited()  # typing again before the pass came due
        edited_at = loop.time()
        return linted_at, edited_at, await _passes_run(quiet, collection, lint_thread)

    linted_at, edited_at, passes = asyncio.run(scenario())
    assert edited_at - linted_at < IDLE, "the edit came after the pass was due: the scenario did not happen"
    assert len(passes) == 1
    assert passes[0] - edited_at >= IDLE, "the pass ran before the editor was quiet after the edit"


def test_a_pass_due_while_a_lint_is_on_its_way_waits_for_the_next_quiet_spell():
    async def scenario() -> tuple[list[float], float, list[float]]:
        loop = asyncio.get_running_loop()
        busy = [True]  # a lint waiting for its debounce, or running
        quiet, collection, lint_thread = _scheduler(busy)
        quiet.linted()
        await asyncio.sleep(IDLE * 1.5)
        while_busy = list(collection.passes)
        busy[0] = False
        freed_at = loop.time()
        return while_busy, freed_at, await _passes_run(quiet, collection, lint_thread)

    while_busy, freed_at, passes = asyncio.run(scenario())
    assert while_busy == [], "the pass ran while a lint was on its way"
    assert len(passes) == 1 and passes[0] >= freed_at


def test_an_edit_takes_a_queued_pass_off_the_lint_thread_and_a_forced_one_runs_while_busy():
    async def scenario() -> tuple[list[float], float, list[float]]:
        loop = asyncio.get_running_loop()
        quiet, collection, lint_thread = _scheduler([True])
        lint = threading.Event()
        running = loop.run_in_executor(lint_thread, lint.wait)  # a lint on the lint thread
        quiet.linted(due=True)  # too many lints without a pass: due whatever is on its way
        await asyncio.sleep(0.1)  # the pass is queued behind the lint
        quiet.edited()  # the user typed: the queued pass goes
        edited_at = loop.time()
        lint.set()
        await running
        await asyncio.sleep(0.2)
        after_the_lint = list(collection.passes)
        quiet.linted(due=True)
        return after_the_lint, edited_at, await _passes_run(quiet, collection, lint_thread)

    after_the_lint, edited_at, passes = asyncio.run(scenario())
    assert after_the_lint == [], "a pass queued behind the lint ran after the user typed"
    assert len(passes) == 1, "a pass made due by too many lints waited for a quiet spell"


def test_a_quiet_spell_after_too_few_lints_for_a_pass_runs_none():
    """A pass walks the whole heap whatever it frees: after two lints a quiet spell is no reason
    for one, after the third it is."""
    async def scenario() -> tuple[list[float], list[float]]:
        quiet, collection, lint_thread = _scheduler([False], least_lints=3)
        for _ in range(2):
            collection.linted()  # as the server's lint job ends
            quiet.linted()
        await asyncio.sleep(IDLE * 2)
        after_two = list(collection.passes)
        collection.linted()
        quiet.linted()
        return after_two, await _passes_run(quiet, collection, lint_thread)

    after_two, passes = asyncio.run(scenario())
    assert after_two == [], "a quiet spell after two lints ran a pass"
    assert len(passes) == 1
