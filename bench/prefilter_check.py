"""The prefilter changes no finding on real code: ``memlint check`` on each tree with the
prefilter on and off (``MEMLINT_PREFILTER``), the JSON compared, with each run's CPU time.
``off`` also turns off the per-reader gates (a kept module read only by the rules and the
extractor whose own need it meets: ``memlint.lint.needs.rule_gates``), so both are checked.
``bench/findings_check.py`` compares two checkouts instead (a speed change against main).

    python bench/prefilter_check.py TREE [TREE ...] [--jobs N] [--memlint PYTHONPATH]

``--no-cache --offline``: nothing is written into the trees. Prints one line per tree and run:
findings, the --statistics line, CPU seconds (user + system of the memlint process and its
workers), and whether the two runs' findings are identical. Exit status 1 when they differ.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time


def run(tree: str, prefilter: str, jobs: int, pythonpath: str | None) -> tuple[list, str, float, float]:
    env = {**os.environ, "MEMLINT_PREFILTER": prefilter}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "memlint", "check", ".", "--no-cache", "--offline", "--statistics",
                           "--jobs", str(jobs), "--output-format", "json"],
                          cwd=tree, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    statistics = next((line for line in done.stderr.splitlines() if line.startswith("memlint: ")), "")
    if done.returncode not in (0, 1):
        sys.exit(f"{tree}: exit {done.returncode}\n{done.stderr[-2000:]}")
    return json.loads(done.stdout), statistics, cpu, wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trees", nargs="+")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--memlint", help="PYTHONPATH of the memlint to run (default: this interpreter's)")
    args = parser.parse_args()
    differ = False
    for tree in args.trees:
        found = {}
        for prefilter in ("on", "off"):
            findings, statistics, cpu, wall = run(tree, prefilter, args.jobs, args.memlint)
            found[prefilter] = findings
            load = os.getloadavg()[0]
            print(f"{tree} prefilter {prefilter}: {len(findings)} findings, CPU {cpu:.1f} s, wall {wall:.1f} s, "
                  f"load {load:.1f}\n    {statistics}", flush=True)
        same = found["on"] == found["off"]
        differ |= not same
        print(f"{tree}: findings {'identical' if same else 'DIFFER'}", flush=True)
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
