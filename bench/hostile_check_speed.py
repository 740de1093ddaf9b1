"""Time ``memlint check`` on a training project with hostile files beside it.

The tree is ``tests/robustness/hostile_tree.py``'s (the test there checks the findings; this
script measures the time): a DeepSpeed config with a 5,000-digit integer, a FIFO, a symlink to
``/dev/zero``, a symlink loop, a YAML alias bomb, a binary ``.py``, a 400,000-line generated
module, JSON nested 100,000 levels deep. Prints the wall time of each run (cold: no result
cache) and each file's codes; the goal is under 60 s.

    python bench/hostile_check_speed.py [--repeat 3] [--jobs N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "robustness"))

from hostile_tree import write_hostile_files, write_project  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--jobs", type=int, help="memlint's --jobs (default: its own)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="memlint-hostile-") as tmp:
        root = write_project(Path(tmp))
        described = write_hostile_files(root)
        command = [sys.executable, "-m", "memlint", "check", "--format", "json", "--gpu", "a10g", "--no-cache", "."]
        if args.jobs:
            command[4:4] = ["--jobs", str(args.jobs)]
        print(f"load average before: {os.getloadavg()[0]:.2f}")
        times = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            done = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=600)
            times.append(time.perf_counter() - started)
            if done.returncode not in (0, 1) or "Traceback" in done.stderr:
                print(done.stderr, file=sys.stderr)
                return 1
        codes: dict[str, set[str]] = {}
        for finding in json.loads(done.stdout):
            name = finding["filename"]
            name = os.path.relpath(name, root) if os.path.isabs(name) else name
            codes.setdefault(name, set()).add(finding["code"])
        for name in sorted(codes):
            what = described.get(Path(name).name, "")
            print(f"  {name:32} {', '.join(sorted(codes[name])):16} {what}")
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        print(f"memlint check (cold, exit {done.returncode}): " + ", ".join(f"{t:.1f} s" for t in times)
              + f"; best {min(times):.1f} s (goal: under 60 s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
