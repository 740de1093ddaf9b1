#!/usr/bin/env python
"""Run ground-truth oracle cases through ``memlint.trace`` and compare the peaks.

    PYTHONPATH=. python tests/calibration/compare_oracle.py [--ids a,b,...] [--jobs 2] \\
        [--out tests/calibration/oracle_comparison.json]

Reads ``shared/oracle/cases.json`` (the oracle's spelling is translated, see
``memlint.trace.case.from_oracle_dict``) and ``shared/oracle/results.json``, measures the chosen
cases in worker subprocesses, prints a Markdown table and writes the rows as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ORACLE_DIR = os.path.join(os.path.dirname(ROOT), "shared", "oracle")

DEFAULT_IDS = [
    "gpt2-fp32-adamw-b16-s128-forloop",
    "gpt2-bf16-sgd-b16-s512",
    "gpt2-ampfp16-adamw-b8-s1024",
    "gpt2-ampbf16-adamw-b8-s1024-eager",
    "llama3.2-1b-bf16-adamw-b4-s2048-gc",
    "phi2-ampfp16-adamw-b2-s2048-gc",
    "tinyllama-lora8attn-fp32-b8-s1024-eager",
    "tinyllama-fsdp2-ws2-fp32-adamw-b4-s1024",
    "llama2-7b-bf16-adamw-b1-s2048-gc-fused",
    "llama2-7b-lora16qv-bf16-b4-s2048-gc",
    "llama2-7b-fsdp2-ws8-bf16-adamw-b1-s2048-gc",
    "mistral7b-bf16-sgd-b4-s512",
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ids", help="comma-separated oracle case ids (default: a fixed set of 12)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", help="write the comparison rows (JSON) here")
    args = ap.parse_args()
    sys.path.insert(0, ROOT)
    from memlint.trace.batch import run_cases
    from memlint.trace.case import load_cases

    ids = args.ids.split(",") if args.ids else DEFAULT_IDS
    cases = [c for c in load_cases(os.path.join(ORACLE_DIR, "cases.json"), oracle=True) if c.id in ids]
    with open(os.path.join(ORACLE_DIR, "results.json"), encoding="utf-8") as f:
        oracle = {r["id"]: r for r in json.load(f)["results"]}
    results = run_cases(cases, jobs=args.jobs)
    rows = []
    print("| case | oracle peak (B) | memlint trace peak (B) | difference | phase (oracle / trace) |")
    print("|---|---:|---:|---:|---|")
    for r in results:
        o = oracle[r["id"]]
        mine = r.get("peak_bytes")
        diff = None if mine is None else mine - o["peak_bytes"]
        rows.append({"id": r["id"], "oracle_peak_bytes": o["peak_bytes"], "trace_peak_bytes": mine,
                     "difference_bytes": diff, "oracle_phase": o["peak_phase"], "trace_phase": r.get("peak_phase"),
                     "status": r["status"], "error": r.get("error"), "wall_s": r.get("wall_s")})
        shown = "n/a" if diff is None else f"{diff:+,} ({diff / o['peak_bytes']:+.4%})"
        print(f"| {r['id']} | {o['peak_bytes']:,} | {mine if mine is None else format(mine, ',')} | {shown} | "
              f"{o['peak_phase']} / {r.get('peak_phase')} |")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)
            f.write("\n")
    return 0 if all(row["difference_bytes"] == 0 for row in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
