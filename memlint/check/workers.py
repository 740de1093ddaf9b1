"""Linting on every core: worker processes that each keep what they parsed.

``memlint check`` works in two passes over the files it has to analyse. First each file is
read, classified, parsed and its facts extracted (:meth:`Worker.analyse`); what other
documents need to know about it — its kind, the files it names, its facts — comes back as a
:class:`~memlint.project.project.DocumentRecord`. Then, once every worker knows every record
(:meth:`Worker.seed`), each file is linted (:meth:`Worker.lint`) by the worker that parsed it,
whose tree is still in memory; a launcher linked to a script parsed elsewhere uses the facts
that came back. Only at the end of the lints does a worker that has nothing left take over the
last batches of another, parsing them again, where it still finishes first (:meth:`Lanes._steal`).

A lane is one worker: in this process (:class:`LocalLane`, for small inputs and for
``--jobs 1``: no pool start-up for a pre-commit run on one file) or in a process of its own
(:class:`ProcessLane`; each is a one-process pool, so the work sent to it lands where its
earlier work did). A lane whose process dies is replaced by a local one, and the run goes on.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from typing import Any

from memlint.documents import reads
from memlint.lint.collector import collector_paused
from memlint.lint.needs import Prefilter, prefilter_on
from memlint.model.diagnostics import Diagnostic
from memlint.project.documents import DocumentRecord
from memlint.project.project import Project
from memlint.project.settings import Settings

Task = tuple[str, int]  # (path as given, index of its settings root)

# linting a file costs about this share of what analysing it cost (real code, one process:
# 3.4 s of lint after 5.9 s of analysis), so a lane that takes over a batch another lane
# parsed, parsing it again, pays about 1 + this for what that lane would have linted for this
LINT_PER_ANALYSIS = 0.6


@dataclass
class Batch:
    """Files sent to a worker in one call, and what analysing them cost (CPU seconds; 0 when
    not measured): the weight :meth:`Lanes.run` shares the tail of the work out by."""

    tasks: list[Task]
    weight: float = 0.0


@dataclass
class Setup:
    """What every worker knows from the start."""

    roots: list[Settings]  # the settings of each project root, by index
    names: dict[str, str] | None = None  # absolute path -> path as walked, for a walk without symlinks
    candidates: dict[int, list[Path]] = field(default_factory=dict)  # root index -> its files


@dataclass
class Outcome:
    path: str
    root: int
    digest: str
    diagnostics: list[Diagnostic]
    reads: dict[str, Any]
    errors: list[str]


def cpu_count() -> int:
    """The cores this process may use (its affinity mask, not the machine's core count)."""
    counter = getattr(os, "process_cpu_count", None)
    if counter is not None:
        return counter() or 1
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


class Worker:
    """One process's share of a check: a snapshot project and rule set per settings root."""

    def __init__(self, setup: Setup) -> None:
        self.setup = setup
        self._projects: dict[int, Project] = {}
        self._linters: dict[int, Any] = {}

    def project(self, root: int) -> Project:
        project = self._projects.get(root)
        if project is None:
            project = self._projects[root] = Project(self.setup.roots[root], snapshot=True)
            if prefilter_on():  # the rules' and extractors' needs
                project.documents.wanted = Prefilter(self.setup.roots[root])
            if self.setup.names is not None:
                project.seed_files(self.setup.names, self.setup.candidates.get(root))
        return project

    def linter(self, root: int):
        linter = self._linters.get(root)
        if linter is None:
            from memlint.lint.engine import Linter  # the rules load with the first file to lint

            linter = self._linters[root] = Linter(self.setup.roots[root], self.project(root))
        return linter

    def analyse(self, tasks: list[Task]) -> list[tuple[str, int, DocumentRecord | None, float]]:
        """Each file's record, and the CPU seconds its analysis took (what linting it costs
        another worker more: :class:`Batch`)."""
        out: list[tuple[str, int, DocumentRecord | None, float]] = []
        for path, root in tasks:
            started = time.process_time()
            try:
                with collector_paused(keep=True):  # parsing is where the collector costs (memlint.lint.collector)
                    record = self.project(root).record(path)
            except Exception:  # reported when the file is linted; the others go on
                record = None
            out.append((path, root, record, time.process_time() - started))
        return out

    def set_roots(self, roots: list[Settings], candidates: dict[int, list[Path]]) -> None:
        self.setup = Setup(roots, self.setup.names, candidates)

    def seed(self, root: int, records: list[tuple[str, DocumentRecord]]) -> None:
        project = self.project(root)
        for path, record in records:
            project.seed(path, record)

    def lint(self, tasks: list[Task]) -> list[Outcome]:
        out: list[Outcome] = []
        for path, root in tasks:
            linter = self.linter(root)
            before = len(linter.internal_errors)
            with collector_paused(keep=True), reads.recording() as recorded:
                diagnostics = linter.lint_path(path)  # never raises: a failure is reported on the file
            try:
                digest = linter.project.digest(path)
            except Exception:
                digest = ""
            out.append(Outcome(path, root, digest, diagnostics, recorded.to_json(),
                               linter.internal_errors[before:]))
        return out


# ----------------------------------------------------------------- lanes


class LaneDied(Exception):
    """A worker process ended without answering (killed, out of memory, a crash in C code)."""


class LocalLane:
    """A worker in this process: a call is answered as soon as it is sent."""

    connection = None

    def __init__(self, setup: Setup) -> None:
        self.worker = Worker(setup)
        self._answer: tuple[bool, Any] | None = None

    def send(self, method: str, *args: Any) -> None:
        try:
            self._answer = (True, getattr(self.worker, method)(*args))
        except Exception as error:
            self._answer = (False, error)

    def receive(self) -> Any:
        assert self._answer is not None
        ok, value = self._answer
        self._answer = None
        if not ok:
            raise value
        return value

    def stop(self) -> None:
        pass

    def close(self, wait: bool = True) -> None:
        pass


# the worker of this process, if it is one (``_serve``): kept to the end, never freed
_served: list[Worker] = []


def _serve(connection, setup: Setup) -> None:
    """A worker process: answer calls until told to stop (None) or the parent goes away.

    Its worker stays referenced when it returns: the process then ends (``os._exit``, after a
    fork) with its trees still allocated, where freeing them one by one cost each worker 0.1 s
    of the end of a run on real code, both cores waiting for it."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    worker = Worker(setup)
    _served.append(worker)
    while True:
        try:
            message = connection.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        method, args = message
        try:
            answer = (True, getattr(worker, method)(*args))
        except Exception:
            answer = (False, traceback.format_exc())
        try:
            connection.send(answer)
        except (OSError, ValueError):
            return


class ProcessLane:
    """A worker in a process of its own, which keeps what it parsed between calls."""

    def __init__(self, setup: Setup) -> None:
        context = _context()
        self.connection, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child, setup), daemon=True, name="memlint-worker")
        self.process.start()
        child.close()

    def send(self, method: str, *args: Any) -> None:
        self.send_message(ForkingPickler.dumps((method, args)))

    def send_message(self, message: memoryview) -> None:
        """Send a call pickled already (what ``send`` pickles: :meth:`Lanes._broadcast`)."""
        try:
            self.connection.send_bytes(message)
        except (OSError, ValueError) as error:
            raise LaneDied(str(error)) from None

    def receive(self) -> Any:
        try:
            ok, value = self.connection.recv()
        except (EOFError, OSError) as error:
            raise LaneDied(f"exit code {self.process.exitcode}" if self.process.exitcode is not None
                           else str(error)) from None
        if not ok:
            raise RuntimeError(f"worker failed:\n{value}")
        return value

    def stop(self) -> None:
        """Tell the process to end (without waiting for it: ``close``)."""
        try:
            self.connection.send(None)
        except (OSError, ValueError):
            pass

    def close(self, wait: bool = True) -> None:
        """``wait=False``: the process ends while this one goes on (multiprocessing reaps it,
        at the latest when this process exits, a daemon's end then being forced)."""
        self.stop()
        if wait:
            self.process.join(timeout=5)
            if self.process.is_alive():
                self.process.terminate()
                self.process.join(timeout=5)
        self.connection.close()


def preload() -> None:
    """Import, before the workers fork, what every one of them would import on its first file:
    libcst, the extractors, the rules and the model catalogue. Imported in each worker, they
    cost every worker the whole start-up of a one-process run (a second of CPU on a loaded
    machine), which is why two workers were slower than one on a tree of small YAML files;
    forked, the workers share the parent's copy. ``gc.freeze`` (undone in the parent once the
    workers started: :class:`Lanes`) keeps the workers' collectors off those objects, whose
    pages then stay shared."""
    from memlint.catalog.models import catalog_entries
    from memlint.documents.parsed import parse_document  # noqa: F401
    from memlint.facts.extract import extract  # noqa: F401
    from memlint.lint.engine import Linter  # noqa: F401
    from memlint.rules import all_rules

    all_rules()
    catalog_entries()


def _context():
    """Fork where it is safe and cheap (Linux: the child has memlint imported already, and
    memlint's main process runs no other threads), spawn elsewhere."""
    if sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


class Lanes:
    """The workers of one check, and the dispatch of batches of work to them."""

    def __init__(self, setup: Setup, processes: int) -> None:
        self.setup = setup
        freeze = processes > 1 and _context().get_start_method() == "fork"
        if freeze:
            preload()
            freeze = gc.get_freeze_count() == 0  # a caller's own frozen objects stay as they are
            if freeze:
                gc.freeze()
        try:
            self.lanes: list[LocalLane | ProcessLane] = (
                [ProcessLane(setup) for _ in range(processes)] if processes > 1 else [LocalLane(setup)]
            )
        finally:
            if freeze:
                gc.unfreeze()
        self._seeds: list[tuple[int, list[tuple[str, DocumentRecord]]]] = []
        self._roots_known = len(setup.roots)  # the roots every worker knows (a caller's list may grow)
        # method -> each lane's seconds between sending it a batch and its answer (``--statistics``)
        self.busy: dict[str, list[float]] = {}
        # the worker when everything runs in this process (its projects then serve the caller too)
        self.local: Worker | None = self.lanes[0].worker if isinstance(self.lanes[0], LocalLane) else None

    def __len__(self) -> int:
        return len(self.lanes)

    def close(self, wait: bool = True) -> None:
        """``wait=False``: the end of a check, whose workers' processes end (their memory going
        back to the system) while this one writes the cache and the report."""
        for lane in self.lanes:  # every process ends at once, not one after the other
            lane.stop()
        for lane in self.lanes:
            lane.close(wait)
        if self.local is not None:
            # what this process's lints kept out of the collector's passes (``collector_paused``)
            # is collected again: a caller that goes on (the tests, the fix loop) frees its cycles
            gc.unfreeze()

    def set_roots(self, roots: list[Settings], candidates: dict[int, list[Path]]) -> None:
        """Settings roots met after the workers started (a linked file under another root)."""
        if len(roots) > self._roots_known:
            self.setup = Setup(list(roots), self.setup.names, dict(candidates))
            self._roots_known = len(roots)
            if self.local is None:  # a local worker's setup is the caller's own (the same lists)
                self._broadcast("set_roots", self.setup.roots, self.setup.candidates)

    def seed(self, root: int, records: list[tuple[str, DocumentRecord]]) -> None:
        """Tell every worker these records (one worker's facts reach all the others)."""
        self._seeds.append((root, records))
        self._broadcast("seed", root, records)

    def _broadcast(self, method: str, *args: Any) -> None:
        """Call ``method`` on every lane at once: the message is pickled once (every record of a
        check, with its facts), and the workers unpickle it side by side, not one after the other."""
        message: memoryview | None = None
        sent: list[int] = []
        for index, lane in enumerate(self.lanes):
            if isinstance(lane, LocalLane):
                self._call(index, method, *args)
                continue
            if message is None:
                message = ForkingPickler.dumps((method, args))
            try:
                lane.send_message(message)
                sent.append(index)
            except LaneDied as error:
                self._replace(index, error)
                self._call(index, method, *args)
        for index in sent:
            try:
                self.lanes[index].receive()
            except LaneDied as error:
                self._replace(index, error)
                self._call(index, method, *args)

    def run(self, method: str, shared: list[Batch], own: dict[int, list[Batch]] | None = None
            ) -> list[tuple[int, Any]]:
        """Run ``method`` on batches: a lane takes its ``own`` batches first (files it parsed),
        then any from ``shared``, then, once both are empty, the last of another lane's own
        where that lane would otherwise finish last (:meth:`_steal`). Returns (lane, answer)
        pairs as they come."""
        own = {i: list(batches) for i, batches in (own or {}).items()}
        shared = list(shared)
        answers: list[tuple[int, Any]] = []
        in_flight: dict[int, Batch] = {}
        sent: dict[int, float] = {}
        busy = self.busy.setdefault(method, [0.0] * len(self.lanes))
        while True:
            for index in range(len(self.lanes)):
                if index in in_flight:
                    continue
                queue = own.get(index)
                batch = queue.pop(0) if queue else (shared.pop(0) if shared else self._steal(index, own))
                if batch is None:
                    continue
                try:
                    sent[index] = time.perf_counter()
                    self.lanes[index].send(method, batch.tasks)
                    in_flight[index] = batch
                except LaneDied as error:
                    own.setdefault(index, []).insert(0, batch)
                    self._replace(index, error)
            if not in_flight:
                return answers
            for index in self._ready(in_flight):
                batch = in_flight.pop(index)
                try:
                    answers.append((index, self.lanes[index].receive()))
                    busy[index] += time.perf_counter() - sent[index]
                except LaneDied as error:
                    own.setdefault(index, []).insert(0, batch)
                    self._replace(index, error)

    @staticmethod
    def _steal(thief: int, own: dict[int, list[Batch]]) -> Batch | None:
        """The last (lightest) batch of the lane with the most own work queued, for a lane that
        has none left, when the thief, parsing its files again, still finishes it before the
        victim finishes the rest of its queue (:data:`LINT_PER_ANALYSIS`): the lanes then end
        together instead of one waiting for the other's last seconds."""
        victims = [(sum(b.weight for b in queue), index) for index, queue in own.items() if queue and index != thief]
        if not victims:
            return None
        queued, victim = max(victims)
        batch = own[victim][-1]
        if LINT_PER_ANALYSIS * (queued - batch.weight) < (1 + LINT_PER_ANALYSIS) * batch.weight:
            return None
        return own[victim].pop()

    def _ready(self, in_flight: dict[int, Batch]) -> list[int]:
        local = [i for i in in_flight if self.lanes[i].connection is None]
        if local:
            return local
        from multiprocessing.connection import wait

        # no lane is local here: every one has a connection
        by_connection = {c: i for i in in_flight if (c := self.lanes[i].connection) is not None}
        return sorted(by_connection[c] for c in wait(list(by_connection)))

    def _call(self, index: int, method: str, *args: Any) -> Any:
        try:
            self.lanes[index].send(method, *args)
            return self.lanes[index].receive()
        except LaneDied as error:
            self._replace(index, error)
            return self._call(index, method, *args)

    def _replace(self, index: int, error: Exception) -> None:
        """A worker process died: its work goes on in this process, which learns what it knew."""
        print(f"memlint: internal error: a worker process ended ({error}); its files are checked in "
              "the main process (please report it)", file=sys.stderr)
        self.lanes[index].close()
        lane = LocalLane(self.setup)
        for root, records in self._seeds:
            lane.worker.seed(root, records)
        self.lanes[index] = lane
