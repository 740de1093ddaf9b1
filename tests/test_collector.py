"""Python's cycle collector around memlint's work: paused during a lint, long-lived objects frozen."""

from __future__ import annotations

import gc
import threading
import weakref

from memlint.lint.collector import IdleCollection, collector_paused, freeze_long_lived


class _Node:
    """Something weak-referenceable that can sit in a cycle (as libcst's scopes do)."""

    def __init__(self) -> None:
        self.other: _Node | None = None


def test_a_pause_is_shared_by_nested_and_concurrent_lints_and_restores_the_collector() -> None:
    was_enabled = gc.isenabled()
    gc.enable()
    try:
        inside: list[bool] = []

        def lint() -> None:
            with collector_paused():
                inside.append(gc.isenabled())

        with collector_paused():
            with collector_paused():
                assert not gc.isenabled()
            assert not gc.isenabled(), "the inner pause's end re-enabled the collector under the outer one"
            thread = threading.Thread(target=lint)
            thread.start()
            thread.join()
            assert not gc.isenabled(), "another thread's lint re-enabled it"
        assert gc.isenabled() and inside == [False]
        gc.disable()
        with collector_paused():
            pass
        assert not gc.isenabled(), "a pause turned on a collector that was off"
    finally:
        (gc.enable if was_enabled else gc.disable)()


def test_freezing_collects_what_is_dead_and_keeps_freeing_frozen_objects_by_reference_counting() -> None:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        dead_cycle = _Node()
        dead_cycle.other = _Node()
        dead_cycle.other.other = dead_cycle
        dead = weakref.ref(dead_cycle)
        del dead_cycle  # unreachable, but only the collector can free it
        assert dead() is not None
        kept = _Node()
        kept_ref = weakref.ref(kept)
        before = gc.get_freeze_count()
        freeze_long_lived()
        assert dead() is None, "the garbage alive before the freeze was frozen with the rest"
        assert gc.get_freeze_count() > before
        assert not any(o is kept for o in gc.get_objects()), "a live object was left to the collector's passes"
        del kept  # a frozen object with no cycle still goes when its last reference does
        assert kept_ref() is None
    finally:
        gc.unfreeze()
        (gc.enable if was_enabled else gc.disable)()


def test_what_a_lint_made_skips_the_young_passes_until_the_idle_collection_frees_its_cycles() -> None:
    """The language server's policy: a lint's objects are frozen at its end (no young pass
    walks them between an edit and its diagnostics); the pass when the editor is quiet frees
    the cycles left meanwhile and keeps the survivors frozen; too many lints without a quiet
    spell make the pass due at once."""
    was_enabled = gc.isenabled()
    try:
        collection = IdleCollection(idle_seconds=0.5, most_lints=3)
        with collector_paused():  # as the server's lint job runs
            survivor = _Node()
            garbage = _Node()
            garbage.other = _Node()
            garbage.other.other = garbage
            dead = weakref.ref(garbage)
            del garbage
            assert collection.linted() is False
        assert gc.get_count()[0] < 50, "the lint's objects were left in the youngest generation"
        gc.collect(0)
        gc.collect(1)
        assert dead() is not None, "a young pass walked the frozen objects"
        assert collection.linted() is False
        assert collection.linted() is True, "the third lint without a quiet spell made no pass due"
        collection.collect()
        assert dead() is None, "the idle pass left the frozen cycle"
        assert not any(o is survivor for o in gc.get_objects()), "a survivor was not frozen again"
        assert collection.linted() is False, "the count of lints did not start again after the pass"
    finally:
        gc.unfreeze()
        (gc.enable if was_enabled else gc.disable)()
