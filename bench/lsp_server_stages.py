"""``memlint lsp`` with clocks around its stages, for ``bench/lsp_latency.py --stages``.

Where does the language server spend an edit beyond the engine? This runs the real server (the
same ``memlint.cli.main`` entry point) after wrapping, from outside, the few functions an edit
goes through: the read of a message's body (pygls' stdin reader), the lint job on the lint thread
(``MemlintServer._lint_job``: the overlays synced, the engine's ``Linter.lint_path``, the
dependents' check, the diagnostics converted) and the publish on the event loop. At each
publish of a version it appends one JSON line to the file named first on its command line:

- ``read_to_job``: ms from the didChange's body read to its lint job starting on the lint thread
  (the debounce's wait, if any, and the hand-over to the thread);
- ``job_wall`` / ``job_cpu`` / ``engine_cpu``: the job's wall clock, the lint thread's CPU in it,
  and of that the engine's (``lint_path``);
- ``job_to_published``: ms from the job's end to the publish written (the result id, JSON-RPC);
- ``process_cpu`` / ``loop_cpu``: the whole process's CPU and the event loop thread's since the
  publish before (JSON-RPC in and out, pygls' text sync, scheduling).

Thread CPU is ``time.thread_time`` read on the thread itself, so nothing samples or traces:
the figures cost a few clock reads per edit (cProfile would inflate libcst's codegen tenfold).

    python bench/lsp_server_stages.py OUT.jsonl [memlint lsp options]
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pygls import io_  # noqa: E402

import memlint.lsp.server as server_module  # noqa: E402
from memlint.cli.main import main as memlint_main  # noqa: E402
from memlint.lint.engine import Linter  # noqa: E402


class Stages:
    """The clocks of the edit in flight; written out at its publish."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.lock = threading.Lock()
        self.body_read = 0.0
        self.job: dict[str, float] = {}
        self.engine_cpu = 0.0
        self.last_process = time.process_time()
        self.last_loop: float | None = None

    def published(self, version: int) -> None:
        now, process, loop = time.perf_counter(), time.process_time(), time.thread_time()
        with self.lock:
            job, engine = dict(self.job), self.engine_cpu
            self.engine_cpu = 0.0
        row = {
            "version": version,
            "read_to_job": (job.get("start", now) - self.body_read) * 1000,
            "job_wall": (job.get("end", now) - job.get("start", now)) * 1000,
            "job_cpu": job.get("cpu", 0.0) * 1000,
            "engine_cpu": engine * 1000,
            "job_to_published": (now - job.get("end", now)) * 1000,
            "process_cpu": (process - self.last_process) * 1000,
            "loop_cpu": (loop - self.last_loop) * 1000 if self.last_loop is not None else None,
        }
        self.last_process, self.last_loop = process, loop
        with self.out.open("a") as handle:
            handle.write(json.dumps(row) + "\n")


def install(stages: Stages) -> None:
    read_body = io_.StdinAsyncReader.readexactly

    def readexactly(self, n):
        future = read_body(self, n)
        future.add_done_callback(lambda _: setattr(stages, "body_read", time.perf_counter()))
        return future

    io_.StdinAsyncReader.readexactly = readexactly  # type: ignore[method-assign]

    lint_job = server_module.MemlintServer._lint_job

    def timed_job(self, *args):
        start, cpu = time.perf_counter(), time.thread_time()
        try:
            return lint_job(self, *args)
        finally:
            with stages.lock:
                stages.job = {"start": start, "end": time.perf_counter(), "cpu": time.thread_time() - cpu}

    server_module.MemlintServer._lint_job = timed_job  # type: ignore[method-assign]

    lint_path = Linter.lint_path

    def timed_lint_path(self, *args, **kwargs):
        cpu = time.thread_time()
        try:
            return lint_path(self, *args, **kwargs)
        finally:
            with stages.lock:
                stages.engine_cpu += time.thread_time() - cpu

    Linter.lint_path = timed_lint_path  # type: ignore[method-assign]

    publish = server_module.MemlintServer.text_document_publish_diagnostics

    def timed_publish(self, params):
        result = publish(self, params)
        if params.version is not None:
            stages.published(params.version)
        return result

    server_module.MemlintServer.text_document_publish_diagnostics = timed_publish  # type: ignore[method-assign]


if __name__ == "__main__":
    install(Stages(Path(sys.argv[1])))
    sys.exit(memlint_main(["lsp", *sys.argv[2:]]))
