#!/usr/bin/env python
"""Markdown summary of a ``memlint.trace`` results file (default: tests/calibration/results.json).

    python tests/calibration/summarize.py [results.json]
"""

from __future__ import annotations

import collections
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> int:
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "results.json")
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    results = doc["results"]
    fam: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for r in results:
        t = r["case"]["model"]["model_type"]
        fam[t][0] += 1
        fam[t][1] += r["status"] == "ok"
    print("| family (model_type) | cases | measured |")
    print("|---|---:|---:|")
    for t, (n, ok) in sorted(fam.items()):
        print(f"| {t} | {n} | {ok} |")
    print(f"| **all** | **{len(results)}** | **{sum(v[1] for v in fam.values())}** |\n")
    print("| case | model | peak GiB | peak in | params / trainable | breakdown at peak (GiB) | steps s |")
    print("|---|---|---:|---|---|---|---:|")
    for r in results:
        c = r["case"]
        if r["status"] != "ok":
            print(f"| {r['id']} | {c['model_name']} | **{r['status']}** | | | {r['error'][:150]} | |")
            continue
        bd = ", ".join(f"{k} {v / 2**30:.2f}" for k, v in r["breakdown"].items() if v >= 2**27)
        p = r["params"]
        print(f"| {r['id']} | {c['model_name']} | {r['peak_gib']:.3f} | {r['peak_phase']} | "
              f"{p['total'] / 1e9:.2f}B / {p['trainable'] / 1e6:.1f}M | {bd} | {r['timing_s'].get('steps_s', '')} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
