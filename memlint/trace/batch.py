"""Measure many cases, each in its own worker subprocess, ``jobs`` at a time.

One case per subprocess: a case that aborts the interpreter (some C++ errors are not Python
exceptions), leaks memory or hangs cannot take the others down, and every FSDP case gets a
fresh process group and fresh monkey-patches. A failed case is reported with its error
(``status``: ``error``, ``crashed`` or ``timeout``), never dropped.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

from memlint.trace.case import Case

RESULT_MARKER = "@@memlint-trace-result@@"
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def worker_main(stdin: Any = None, stdout: Any = None) -> int:
    """Entry point of a worker: read one case (JSON) from stdin, write one result line."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    data = json.loads(stdin.read())
    case = Case.from_dict(data)
    try:
        from memlint.trace.measure import measure_case

        result = measure_case(case)
    except Exception as e:  # noqa: BLE001 - reported, not raised
        result = error_result(case, "error", f"{type(e).__name__}: {e}", traceback.format_exc()[-4000:])
    stdout.write("\n" + RESULT_MARKER + json.dumps(result) + "\n")
    stdout.flush()
    return 0


def error_result(case: Case, status: str, error: str, detail: str = "") -> dict[str, Any]:
    return {"id": case.id, "status": status, "error": error, "detail": detail, "case": case.to_dict()}


def run_one_in_subprocess(case: Case, timeout: float = 900, python: str | None = None) -> dict[str, Any]:
    cmd = [python or sys.executable, "-m", "memlint.trace", "--worker"]
    env = dict(os.environ)
    env["PYTHONPATH"] = _PACKAGE_ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("TRANSFORMERS_VERBOSITY", "error")
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env.setdefault("PYTHONWARNINGS", "ignore")
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, input=json.dumps(case.to_dict()), capture_output=True, text=True,
                              timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        res = error_result(case, "timeout", f"no result within {timeout:g} s")
    else:
        res = None
        for line in proc.stdout.splitlines():
            if line.startswith(RESULT_MARKER):
                res = json.loads(line[len(RESULT_MARKER):])
        if res is None:
            res = error_result(case, "crashed", f"worker exited with code {proc.returncode} and no result",
                               proc.stderr[-4000:])
    res["wall_s"] = round(time.perf_counter() - t0, 2)
    return res


def run_cases(cases: list[Case], jobs: int = 1, timeout: float = 900, python: str | None = None,
              progress: Callable[[int, int, dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Measure every case in a worker subprocess, ``jobs`` at once; results in the cases' order."""
    results: dict[str, dict[str, Any]] = {}
    with cf.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(run_one_in_subprocess, c, timeout, python): c for c in cases}
        for fut in cf.as_completed(futures):
            case = futures[fut]
            try:
                res = fut.result()
            except Exception as e:  # noqa: BLE001
                res = error_result(case, "error", f"{type(e).__name__}: {e}")
            results[case.id] = res
            if progress is not None:
                progress(len(results), len(cases), res)
    return [results[c.id] for c in cases]


def summary_line(res: dict[str, Any]) -> str:
    if res.get("status") == "ok":
        return f"{res['peak_gib']:9.3f} GiB  peak in {res['peak_phase']}"
    return f"{str(res.get('status')).upper()}: {str(res.get('error', ''))[:200]}"
