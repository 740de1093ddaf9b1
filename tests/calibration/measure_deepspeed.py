#!/usr/bin/env python
"""Measure the DeepSpeed cases of the calibration suite: ``tests/calibration/deepspeed_results.json``.

memlint's ``mixed-bf16`` / ``mixed-fp16`` policies (half weights + fp32 master partition + fp32
Adam states) are what DeepSpeed's ZeRO-1/2 optimizer keeps. These cases run the real DeepSpeed
engine on the CPU with real, small models (random init from their published ``config.json``,
read from memlint's catalogue), one case per subprocess (``python -m memlint.trace.deepspeed_step``);
see that module for what is measured and why the CPU run takes the CUDA run's code paths.

Needs torch, transformers and deepspeed (``/work/venv-trace``); run from the repository root:

    python tests/calibration/measure_deepspeed.py [--ids a,b] [--list]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CATALOG = os.path.join(ROOT, "memlint", "catalog", "models")
OUT = os.path.join(ROOT, "tests", "calibration", "deepspeed_results.json")

SMOL, GPT2, PYTHIA = "HuggingFaceTB/SmolLM2-135M-Instruct", "openai-community/gpt2", "EleutherAI/pythia-160m"
OPT, QWEN = "facebook/opt-125m", "Qwen/Qwen2.5-0.5B"
SHORT = {SMOL: "smollm2-135m", GPT2: "gpt2", PYTHIA: "pythia-160m", OPT: "opt-125m", QWEN: "qwen2.5-0.5b"}

# (model, batch, seq, precision, zero stage, gradient checkpointing[, world size[, reduce bucket
# elements]]); tokens per case kept small (real compute on a shared 2-core machine)
ROWS = [
    (SMOL, 2, 512, "mixed-bf16", 1, False),
    (SMOL, 2, 512, "mixed-bf16", 2, False),
    (SMOL, 2, 512, "mixed-fp16", 1, True),
    (SMOL, 4, 256, "mixed-fp16", 2, True),
    (SMOL, 8, 256, "mixed-bf16", 2, True),
    (GPT2, 4, 512, "mixed-fp16", 2, False),
    (GPT2, 1, 1024, "mixed-bf16", 1, False),
    (GPT2, 2, 1024, "mixed-fp16", 1, True),
    (GPT2, 4, 256, "mixed-bf16", 2, True),
    (PYTHIA, 2, 512, "mixed-bf16", 1, False),
    (PYTHIA, 1, 1024, "mixed-fp16", 2, True),
    (PYTHIA, 4, 512, "mixed-bf16", 2, True),
    (PYTHIA, 4, 256, "mixed-fp16", 1, False),
    (OPT, 2, 512, "mixed-fp16", 2, False),
    (OPT, 4, 256, "mixed-bf16", 1, True),
    (QWEN, 1, 256, "mixed-bf16", 2, False),
    (QWEN, 2, 128, "mixed-fp16", 1, True),
    (QWEN, 1, 512, "mixed-bf16", 1, True),
    # two ranks (two processes, gloo on the CPU): ZeRO's division of the states and gradients
    (SMOL, 2, 256, "mixed-bf16", 1, False, 2),
    (SMOL, 2, 256, "mixed-fp16", 2, True, 2),
    (GPT2, 1, 512, "mixed-bf16", 2, False, 2),
    (PYTHIA, 2, 256, "mixed-fp16", 1, True, 2),
    # a reduce bucket far smaller than the gradients (DeepSpeed's default, 5e8 elements, holds all of
    # them): gradients reduced and moved to the partition bucket by bucket during backward, and
    # gradients larger than the bucket (the embeddings) reduced on their own
    (SMOL, 2, 512, "mixed-bf16", 1, False, 1, 5e6),
    (SMOL, 2, 512, "mixed-bf16", 2, False, 1, 5e6),
    (GPT2, 2, 512, "mixed-fp16", 1, False, 1, 2e7),
    (PYTHIA, 2, 512, "mixed-fp16", 2, False, 1, 2e7),
    (PYTHIA, 4, 256, "mixed-bf16", 2, True, 1, 5e6),
    (SMOL, 2, 256, "mixed-fp16", 2, True, 2, 5e6),
    (SMOL, 2, 256, "mixed-bf16", 1, False, 2, 5e6),
    # gradients (1 GB) larger than the logits' backward: ZeRO-2's partition, allocated at the first
    # bucket's reduction, is alive beside nearly all activations
    (QWEN, 1, 256, "mixed-bf16", 2, False, 1, 5e6),
]


def model_config(hub_id: str) -> dict:
    with open(os.path.join(CATALOG, hub_id.replace("/", "--") + ".json"), encoding="utf-8") as f:
        entry = json.load(f)
    return dict(entry.get("config", entry))


def bucket_tag(elements: float) -> str:
    """``5e6`` -> ``"5e6"``: the reduce bucket as a case id shows it."""
    mantissa, exponent = f"{elements:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def cases() -> list[dict]:
    out = []
    for model, b, s, precision, stage, gc, *extra in ROWS:
        n = extra[0] if extra else 1
        bucket = extra[1] if len(extra) > 1 else None
        cid = (f"{SHORT[model]}-zero{stage}" + (f"x{n}" if n > 1 else "")
               + f"-{precision.replace('-', '')}-fusedadam-b{b}-s{s}" + ("-gc" if gc else "")
               + (f"-rb{bucket_tag(bucket)}" if bucket else ""))
        case = {"id": cid, "model": model_config(model), "model_name": model, "batch_size": b, "seq_len": s,
                "precision": precision, "zero_stage": stage, "grad_ckpt": gc, "world_size": n}
        if bucket:
            case["reduce_bucket_size"] = int(bucket)
        out.append(case)
    return out


def run_one(case: dict, timeout: float) -> dict:
    """Measure a case: one process per rank (as the ``deepspeed`` launcher starts them); the
    result is rank 0's, with every rank's peak beside it."""
    n = case["world_size"]
    port = str(29600 + os.getpid() % 300)
    procs, logs = [], []
    t0 = time.perf_counter()
    for rank in range(n):
        env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
                   RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(n), MASTER_PORT=port,
                   OMP_NUM_THREADS=str(max(1, 2 // n)), TRANSFORMERS_VERBOSITY="error", HF_HUB_OFFLINE="1")
        # every rank gets its case before any is waited on (the ranks meet in init_process_group);
        # output goes to files, so a chatty rank cannot block on a full pipe
        out, err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
        proc = subprocess.Popen([sys.executable, "-m", "memlint.trace.deepspeed_step"], stdin=subprocess.PIPE,
                                stdout=out, stderr=err, text=True, env=env)
        proc.stdin.write(json.dumps(case))
        proc.stdin.close()
        procs.append(proc)
        logs.append((out, err))
    try:
        for proc in procs:
            proc.wait(timeout=max(1.0, timeout - (time.perf_counter() - t0)))
    except subprocess.TimeoutExpired:
        for proc in procs:
            proc.kill()
        return {"id": case["id"], "status": "timeout", "error": f"no result within {timeout:g} s"}
    results = []
    for proc, (out, err) in zip(procs, logs):
        out.seek(0)
        err.seek(0)
        lines = [line for line in out.read().splitlines() if line.startswith("{")]
        if not lines:
            return {"id": case["id"], "status": "crashed", "error": f"exit {proc.returncode}",
                    "detail": err.read()[-4000:]}
        results.append(json.loads(lines[-1]))
    result = results[0]
    if result["status"] == "ok" and n > 1:
        result["rank_peak_bytes"] = [r.get("peak_bytes") for r in results]
    result["wall_s"] = round(time.perf_counter() - t0, 2)
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ids", help="comma-separated case ids to (re)measure; the others are kept")
    ap.add_argument("--list", action="store_true", help="print the case ids and exit")
    ap.add_argument("--timeout", type=float, default=1200)
    args = ap.parse_args()
    todo = cases()
    if args.list:
        print("\n".join(c["id"] for c in todo))
        return 0
    wanted = set(args.ids.split(",")) if args.ids else None
    previous = {}
    if os.path.exists(OUT):
        with open(OUT, encoding="utf-8") as f:
            previous = {r["id"]: r for r in json.load(f)["results"]}
    results = {}
    for case in todo:
        if wanted is not None and case["id"] not in wanted and case["id"] in previous:
            results[case["id"]] = previous[case["id"]]
            continue
        res = run_one(case, args.timeout)
        shown = f"{res['peak_gib']:.3f} GiB in {res['peak_phase']}" if res["status"] == "ok" else res.get("error")
        print(f"{case['id']}: {res['status']} {shown} ({res.get('wall_s', '?')} s)", file=sys.stderr, flush=True)
        results[case["id"]] = res
        write(todo, {**previous, **results})  # after every case: a crash keeps what was measured
    write(todo, {**previous, **results})
    return 0


def write(todo: list[dict], results: dict[str, dict]) -> None:
    """The results file: one entry per case, in the case list's order (cases not measured yet
    keep their previous result)."""
    ordered = [results[c["id"]] for c in todo if c["id"] in results]
    doc = {"generated_by": "tests/calibration/measure_deepspeed.py", "n_cases": len(todo),
           "n_ok": sum(r.get("status") == "ok" for r in ordered), "results": ordered}
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    raise SystemExit(main())
