"""A speed change changes no finding: ``memlint check``'s JSON report on real trees, compared
between two memlint checkouts (e.g. a ``git archive`` of main and this branch).

    python bench/findings_check.py TREE [TREE ...] --save DIR [--memlint PYTHONPATH]
    python bench/findings_check.py TREE [TREE ...] --compare DIR [--memlint PYTHONPATH]

``--save`` writes each tree's report (``check . --no-cache --offline --output-format json``:
nothing is written into the trees) under DIR; ``--compare`` runs the checkout again and compares
with what was saved, finding by finding, printing the first differences. Each run's CPU seconds
(user + system of memlint and its workers) are printed with the load. Exit status 1 when a
tree's findings differ. Saving once and comparing after each change spares re-running the
baseline on a shared machine.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path


def check(tree: Path, jobs: int, pythonpath: str | None) -> tuple[list, float, float]:
    """The tree's findings, the CPU and wall seconds of the run."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "memlint", "check", ".", "--no-cache", "--offline",
                           "--jobs", str(jobs), "--output-format", "json"],
                          cwd=tree, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        sys.exit(f"{tree}: exit {done.returncode}\n{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads(done.stdout), cpu, wall


def saved_name(tree: Path) -> str:
    """One file per tree, named after its path (two trees may share a last component)."""
    digest = hashlib.sha1(str(tree.resolve()).encode()).hexdigest()[:8]
    return f"{tree.resolve().name}-{digest}.json"


def key(finding: dict) -> str:
    return json.dumps(finding, sort_keys=True)


def differences(before: list, after: list) -> tuple[list[str], list[str]]:
    """Findings only before, findings only after (as multisets, order aside)."""
    counted_before, counted_after = Counter(map(key, before)), Counter(map(key, after))
    return list((counted_before - counted_after).elements()), list((counted_after - counted_before).elements())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trees", nargs="+", type=Path)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--save", type=Path, help="write each tree's findings under this folder")
    mode.add_argument("--compare", type=Path, help="compare with the findings saved under this folder")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--memlint", help="PYTHONPATH of the memlint to run (default: this interpreter's)")
    args = parser.parse_args()
    differ = False
    for tree in args.trees:
        findings, cpu, wall = check(tree, args.jobs, args.memlint)
        line = f"{tree}: {len(findings)} findings, CPU {cpu:.1f} s, wall {wall:.1f} s, load {os.getloadavg()[0]:.1f}"
        if args.save:
            args.save.mkdir(parents=True, exist_ok=True)
            (args.save / saved_name(tree)).write_text(json.dumps(findings, indent=1, sort_keys=True))
            print(f"{line}; saved", flush=True)
            continue
        before = json.loads((args.compare / saved_name(tree)).read_text())
        same = before == findings
        differ |= not same
        print(f"{line}; {'identical' if same else 'DIFFER'}", flush=True)
        if not same:
            gone, new = differences(before, findings)
            if not gone and not new:
                print("    same findings in another order", flush=True)
            for label, items in (("only before", gone), ("only after", new)):
                for finding in items[:5]:
                    print(f"    {label}: {finding[:300]}", flush=True)
                if len(items) > 5:
                    print(f"    {label}: ... {len(items) - 5} more", flush=True)
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
