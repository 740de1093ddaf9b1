#!/usr/bin/env python
"""Measure real training steps on a real GPU beside memlint's estimate and the fake-tensor run.

Every accuracy figure of ``docs/accuracy.md`` compares the estimate with PyTorch's memory tracker on
fake tensors. This script checks those figures on a CUDA GPU and measures what the fake run cannot
see: the CUDA context and the kernels' modules, cuBLAS/cuDNN workspaces, the caching allocator's
reserved-over-allocated overhead, and where a run really stops fitting.

For each case (``tests/calibration/cases.json``, real weights not needed: random init from the
model's published ``config.json``), one fresh Python process builds the model on the GPU and runs
the same two training steps as ``memlint trace`` (:func:`memlint.trace.measure.measure_case` with
real CUDA tensors, so the CPU emulations are off and CUDA picks its own kernels). It records
``torch.cuda.max_memory_allocated`` / ``max_memory_reserved``, ``torch.cuda.mem_get_info`` right
after the context is made and after the steps (the bytes the process holds outside the caching
allocator), the allocator's retries and OOMs, the device, driver, CUDA, torch and transformers
versions, the tracker's own peak on the GPU, memlint's estimate and the fake-tensor measurement
(the committed one, and with ``--fake-jobs`` one run here with this machine's libraries).

The edge probe then grows the sequence length of one setup so that memlint's estimate lands at
fixed fractions of the card's capacity, and records which of them ran and which ran out of memory:
what "fits" means, measured.

Without a GPU the same command runs each case's fake-tensor measurement instead (the CPU path), so
the script, its case selection and its output are tested here before a GPU minute is spent.

    python bench/gpu_truth.py                      # default cases + edge probe -> tests/calibration/
    python bench/gpu_truth.py --ids gpt2-fp32-adamw-b8-s1024 --no-edge --out /tmp/x.json
    python bench/gpu_truth.py --list               # the default cases and whether they fit this card

Needs torch and transformers (and peft for LoRA cases); memlint itself only from this checkout
(``PYTHONPATH``), none of its linting dependencies.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from memlint.estimate.oracle_cases import trace_case_inputs  # noqa: E402
from memlint.estimate.training import estimate_training  # noqa: E402
from memlint.trace.case import Case, load_cases  # noqa: E402

CASES = REPO / "tests" / "calibration" / "cases.json"
FAKE_RESULTS = REPO / "tests" / "calibration" / "results.json"
OUT_GPU = REPO / "tests" / "calibration" / "gpu_truth.json"
OUT_CPU = REPO / "tests" / "calibration" / "gpu_truth_cpu.json"
GiB = 2**30
RESULT_MARKER = "@@gpu-truth@@"

#: the default cases, most informative first (the run stops starting new ones past --budget-s):
#: every family, precision policy, optimizer and attention kind of the calibration suite that a
#: single GPU runs without bitsandbytes, small ones first, then 7-8B models, then the near-ties
#: of a 141 GB card (skipped on a smaller card whose capacity they exceed).
DEFAULT_IDS = (
    "gpt2-fp32-adamw-b8-s1024",
    "llama3.2-1b-bf16-adamw-b4-s2048-gc",
    "gpt2-ampfp16-adam-b8-s1024-gc",
    "llama3.2-1b-ampbf16-adamw-b4-s2048-gc",
    "gpt2-fp32-sgd-b16-s512-eager",
    "qwen2.5-0.5b-ampbf16-adamwfused-b4-s4096",
    "llama3.2-1b-lora16-fp32-adamw-b4-s1024",
    "llama3.2-1b-bf16-adamw-b4-s2048",
    "phi2-bf16-adamw-b8-s2048-gc",
    "gemma-2b-bf16-adamw-b4-s2048-gc",
    "opt2.7b-bf16-adafactor-b8-s2048-gc",
    "tinyllama-bf16-sgd-b16-s512-eager",
    "llama2-7b-bf16-adamw-b1-s2048",
    "mistral7b-lora16-bf16-adamw-b2-s4096-gc",
    "mistral7b-bf16-adamwfused-b1-s8192-gc",
    "qwen3-8b-bf16-adamw-b1-s4096-gc",
    "qwen3-8b-ampbf16-adamwfused-b1-s2048-gc",
    "falcon7b-ampbf16-adamw-b1-s2048-gc",
)

#: the edge probe: one setup whose sequence length is grown so that the estimate lands at these
#: fractions of the card's total memory (torch.cuda.mem_get_info's total)
EDGE_BASE = "llama2-7b-bf16-adamw-b1-s2048"
EDGE_FRACTIONS = (0.90, 0.94, 0.97, 1.00)
EDGE_SEQ_STEP = 128


# ----------------------------------------------------------------------------- the child process
def child_main() -> int:
    """Measure one case (JSON on stdin) on this process's GPU, or on fake tensors without one."""
    import torch

    from memlint.trace.measure import measure_case, versions

    data = json.loads(sys.stdin.read())
    case = Case.from_dict(data["case"])
    out: dict[str, Any] = {"id": case.id, "versions": versions()}
    if not torch.cuda.is_available():
        out["device"] = None
        try:
            out["fake"] = _slim(measure_case(case, fake=True, device="cpu"))
            out["status"] = "ok"
        except Exception as e:  # noqa: BLE001 - reported, the next case still runs
            out.update(status="error", error=f"{type(e).__name__}: {e}")
        print(RESULT_MARKER + json.dumps(out), flush=True)
        return 0

    torch.cuda.init()
    free0, total = torch.cuda.mem_get_info()
    props = torch.cuda.get_device_properties(0)
    out["device"] = {"name": props.name, "total_bytes": int(total), "total_memory": int(props.total_memory),
                     "capability": f"{props.major}.{props.minor}", "cuda": torch.version.cuda,
                     "driver": _driver_version()}
    out["context_bytes"] = int(total - free0)  # after init, before any tensor: the context alone
    t0 = time.perf_counter()
    try:
        result = measure_case(case, fake=False, device="cuda")
        torch.cuda.synchronize()
        out["status"] = "ok"
        out["tracker"] = _slim(result)
    except torch.OutOfMemoryError as e:
        out.update(status="oom", error=str(e).splitlines()[0][:400])
    except Exception as e:  # noqa: BLE001
        out.update(status="error", error=f"{type(e).__name__}: {e}"[:400])
    out["steps_wall_s"] = round(time.perf_counter() - t0, 2)
    free1, _ = torch.cuda.mem_get_info()
    stats = torch.cuda.memory_stats()
    reserved_now = int(torch.cuda.memory_reserved())
    out["cuda"] = {
        "max_allocated_bytes": int(torch.cuda.max_memory_allocated()),
        "max_reserved_bytes": int(torch.cuda.max_memory_reserved()),
        "reserved_at_end_bytes": reserved_now,
        "used_at_end_bytes": int(total - free1),
        # what the process holds outside the caching allocator once the steps ran: the context,
        # the kernels' modules loaded lazily, cuBLAS/cuDNN handles
        "outside_allocator_bytes": int(total - free1) - reserved_now,
        "alloc_retries": int(stats.get("num_alloc_retries", 0)),
        "ooms": int(stats.get("num_ooms", 0)),
    }
    print(RESULT_MARKER + json.dumps(out), flush=True)
    return 0


def _driver_version() -> str | None:
    try:
        proc = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20)
        return proc.stdout.strip().splitlines()[0] if proc.returncode == 0 and proc.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def _slim(result: dict[str, Any]) -> dict[str, Any]:
    """What a measurement adds to the record (the case itself is recorded once)."""
    keep = ("peak_bytes", "peak_phase", "breakdown", "kernels", "timing_s", "measurement")
    return {k: result[k] for k in keep if k in result}


def run_child(case: Case, timeout: float) -> dict[str, Any]:
    """One case in a fresh interpreter: a fresh CUDA context and allocator, as a user's run has."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("TRANSFORMERS_VERBOSITY", "error")
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("PYTHONWARNINGS", "ignore")
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child"],
                              input=json.dumps({"case": case.to_dict()}), capture_output=True, text=True,
                              timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"id": case.id, "status": "timeout", "error": f"no result within {timeout:g} s"}
    for line in proc.stdout.splitlines():
        if line.startswith(RESULT_MARKER):
            res = json.loads(line[len(RESULT_MARKER):])
            res["wall_s"] = round(time.perf_counter() - t0, 2)
            return res
    return {"id": case.id, "status": "crashed", "error": f"exit code {proc.returncode}",
            "detail": proc.stderr[-3000:]}


# ----------------------------------------------------------------------------- the parent
def probe_device() -> dict[str, Any] | None:
    """The GPU this machine has, asked in a child process so this one never makes a CUDA context
    (its few hundred MiB would count against every case)."""
    code = ("import json, torch\n"
            "if torch.cuda.is_available():\n"
            "    t = torch.cuda.mem_get_info()[1]\n"
            "    print(json.dumps({'name': torch.cuda.get_device_name(0), 'total_bytes': t}))\n"
            "else:\n    print('null')\n")
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def estimate(case: Case, *, cuda_dropout: bool) -> dict[str, Any]:
    """memlint's estimate of the case: with CUDA's 1-byte dropout mask (what the GPU run keeps) or
    with the CPU kernel's rule (what the fake runs measured)."""
    arch, setup = trace_case_inputs({"case": case.to_dict()})
    if cuda_dropout:
        setup = dataclasses.replace(setup, dropout_mask_bytes=1, cuda_workspaces=True)
    budget = estimate_training(arch, setup)
    return {"peak_bytes": int(budget.peak_bytes), "peak_phase": budget.peak_phase.name,
            "parameters": int(budget.parameters)}


def committed_fake() -> dict[str, dict[str, Any]]:
    data = json.loads(FAKE_RESULTS.read_text())
    return {r["id"]: r for r in data["results"] if r.get("status") == "ok"}


def needs_bitsandbytes(case: Case) -> bool:
    return case.qlora is not None or case.optimizer == "adamw-8bit"


def select(cases: dict[str, Case], ids: list[str], total_bytes: int | None, fake: dict[str, dict]) -> tuple[list[Case], list[dict]]:
    """The cases to run and, for each one left out, why: more than one GPU, bitsandbytes, or a
    measured peak above the card's total memory (a case that cannot fit says nothing new)."""
    chosen, skipped = [], []
    for cid in ids:
        case = cases.get(cid)
        if case is None:
            skipped.append({"id": cid, "why": "not in tests/calibration/cases.json"})
        elif case.world_size > 1:
            skipped.append({"id": cid, "why": f"needs {case.world_size} GPUs"})
        elif needs_bitsandbytes(case):
            skipped.append({"id": cid, "why": "needs bitsandbytes"})
        elif total_bytes and fake.get(cid) and fake[cid]["peak_bytes"] > total_bytes:
            skipped.append({"id": cid, "why": f"measured peak {fake[cid]['peak_bytes'] / GiB:.1f} GiB is above "
                                              f"the card's {total_bytes / GiB:.1f} GiB"})
        else:
            chosen.append(case)
    return chosen, skipped


def edge_cases(base: Case, total_bytes: int, fractions: tuple[float, ...] = EDGE_FRACTIONS) -> list[Case]:
    """The base setup at the sequence lengths whose estimate is nearest each edge fraction."""
    out, seen = [], set()
    for frac in fractions:
        target = frac * total_bytes
        best = None
        for seq in range(EDGE_SEQ_STEP, 65536 + 1, EDGE_SEQ_STEP):
            c = dataclasses.replace(base, seq_len=seq, id=f"edge-{base.id}-s{seq}")
            est = estimate(c, cuda_dropout=True)["peak_bytes"]
            if best is None or abs(est - target) < abs(best[1] - target):
                best = (c, est)
            if est > target:
                break
        if best and best[0].seq_len not in seen:
            seen.add(best[0].seq_len)
            c = best[0]
            c.notes = f"edge probe: estimate at {frac:.2f} of the card's total"
            out.append(c)
    return out


def record(case: Case, res: dict[str, Any], fake: dict[str, dict], edge: bool) -> dict[str, Any]:
    """The result row: the measurement beside the estimate and the committed fake run."""
    row = {"id": case.id, "edge_probe": edge, "status": res.get("status"), **{k: v for k, v in res.items() if k not in ("id", "status")}}
    row["estimate"] = estimate(case, cuda_dropout=True)
    row["estimate_cpu_dropout"] = estimate(case, cuda_dropout=False)
    committed = fake.get(case.id)
    if committed:
        row["fake_committed"] = {"peak_bytes": committed["peak_bytes"], "peak_phase": committed["peak_phase"],
                                 "versions": committed.get("versions")}
    row["case"] = case.to_dict()
    return row


def write(path: Path, header: dict[str, Any], rows: list[dict], skipped: list[dict]) -> None:
    data = {**header, "n_cases": len(rows), "n_ok": sum(r["status"] == "ok" for r in rows),
            "results": rows, "skipped": skipped}
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    tmp.replace(path)


def summary(row: dict[str, Any]) -> str:
    est = row["estimate"]["peak_bytes"] / GiB
    if row.get("device") is None:
        fake = row.get("fake", {}).get("peak_bytes")
        got = f"fake {fake / GiB:7.2f}" if fake else row.get("error", "")
        return f"{row['id']:48s} {row['status']:7s} est {est:7.2f}  {got}"
    cuda = row.get("cuda", {})
    alloc, resv = cuda.get("max_allocated_bytes", 0) / GiB, cuda.get("max_reserved_bytes", 0) / GiB
    return (f"{row['id']:48s} {row['status']:7s} est {est:7.2f} alloc {alloc:7.2f} reserved {resv:7.2f} "
            f"outside {cuda.get('outside_allocator_bytes', 0) / 2**20:6.0f} MiB  {row.get('wall_s', 0):5.1f} s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--cases", type=Path, default=CASES, help="a case file (default tests/calibration/cases.json)")
    ap.add_argument("--ids", help="comma-separated case ids (default: the default list)")
    ap.add_argument("--out", type=Path, help=f"results JSON (default {OUT_GPU.name} with a GPU, {OUT_CPU.name} without)")
    ap.add_argument("--budget-s", type=float, default=420,
                    help="start no new case after this many seconds (default 420: the run ends within 8 minutes)")
    ap.add_argument("--timeout", type=float, default=240, help="seconds per case (default 240)")
    ap.add_argument("--no-edge", action="store_true", help="skip the edge probe")
    ap.add_argument("--edge-base", default=EDGE_BASE, help=f"the edge probe's case (default {EDGE_BASE})")
    ap.add_argument("--edge-fractions", default=",".join(map(str, EDGE_FRACTIONS)),
                    help="fractions of the card's total memory the edge probe's estimates land at")
    ap.add_argument("--list", action="store_true", help="print the selection and exit")
    args = ap.parse_args(argv)
    if args.child:
        return child_main()

    started = time.perf_counter()
    device = probe_device()
    total = device["total_bytes"] if device else None
    cases = {c.id: c for c in load_cases(args.cases)}
    fake = committed_fake()
    ids = [i for i in args.ids.split(",") if i] if args.ids is not None else list(DEFAULT_IDS)
    chosen, skipped = select(cases, ids, total, fake)
    fractions = tuple(float(f) for f in args.edge_fractions.split(","))
    edges = ([] if args.no_edge or not total or args.edge_base not in cases
             else edge_cases(cases[args.edge_base], total, fractions))
    # the edge probe first: it decides the verdict's threshold, the cases only refine it
    plan = [(c, True) for c in edges] + [(c, False) for c in chosen]
    print(f"device: {device['name'] + f' ({total / GiB:.2f} GiB total)' if device else 'none (CPU path: fake tensors)'}; "
          f"{len(chosen)} cases, {len(edges)} edge probes, {len(skipped)} skipped", flush=True)
    if args.list:
        for c, edge in plan:
            print(f"  {'edge ' if edge else ''}{c.id}: estimate {estimate(c, cuda_dropout=True)['peak_bytes'] / GiB:.2f} GiB")
        for s in skipped:
            print(f"  skipped {s['id']}: {s['why']}")
        return 0

    out = args.out or (OUT_GPU if device else OUT_CPU)
    header = {"generated_by": "python bench/gpu_truth.py", "argv": sys.argv[1:], "date": time.strftime("%Y-%m-%d"),
              "host": {"device": device, "python": platform.python_version(), "cpu_count": os.cpu_count(),
                       "PYTORCH_CUDA_ALLOC_CONF": os.environ.get("PYTORCH_CUDA_ALLOC_CONF")}}
    rows: list[dict] = []
    for case, edge in plan:
        if time.perf_counter() - started > args.budget_s:
            skipped.append({"id": case.id, "why": f"not started: past the {args.budget_s:g} s budget"})
            continue
        rows.append(record(case, run_child(case, args.timeout), fake, edge))
        print(summary(rows[-1]), flush=True)
        if len(rows) == 2 and all(r["status"] in ("error", "crashed") for r in rows):
            print("the first two cases failed alike; stopping (see their 'error' / 'detail')", flush=True)
            for r in rows:
                print(r.get("error"), r.get("detail", "")[-1500:], sep="\n", flush=True)
            header["aborted"] = "the first two cases failed"
            break
        header["wall_s"] = round(time.perf_counter() - started, 1)
        write(out, header, rows, skipped)
    header["wall_s"] = round(time.perf_counter() - started, 1)
    write(out, header, rows, skipped)
    print(f"wrote {out} ({len(rows)} rows) in {header['wall_s']} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
