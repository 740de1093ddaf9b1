"""Findings of ``memlint check`` on public training repositories, for triage by hand.

The precision table (``docs/precision.md``) is a person's judgement of each finding; this
script regenerates the findings it judges. Give it checkouts of the repositories at the
commits the table names (``NAME=PATH``); ``materialize`` makes such a checkout from a bare git
directory (a snapshot whose largest files may be absent: those are skipped, they are data and
images, never code or configs).

    python bench/precision.py materialize /work/.mirror/karpathy+minGPT/repo /tmp/rw/minGPT
    python bench/precision.py check minGPT=/tmp/rw/minGPT alignment-handbook=/tmp/rw/ah ...

``check`` runs ``memlint check PATH --gpu h100 --gpus 8 --format json`` in each checkout
(as a new user would, with a target GPU and count stated on the command line), prints every
finding of the mission codes and a fixed sample of the others (the first ``--sample`` of each
code, in file order, so reruns show the same ones), and a count per code. ``--json FILE``
keeps them all.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

MISSION = ("MEM001", "MEM002", "AMP001", "ACC001", "CKP001", "ZRO001")


def materialize(git_dir: Path, dest: Path, commit: str) -> None:
    """Write every blob of ``commit`` that the snapshot holds under ``dest``."""
    commit = subprocess.run(
        ["git", "--git-dir", str(git_dir), "rev-parse", commit], check=True, capture_output=True, text=True
    ).stdout.strip()
    listing = subprocess.run(
        ["git", "--git-dir", str(git_dir), "ls-tree", "-r", "-z", commit],
        check=True, capture_output=True,
    ).stdout.decode()
    skipped = 0
    for entry in filter(None, listing.split("\0")):
        meta, path = entry.split("\t", 1)
        mode, kind, sha = meta.split()
        if kind != "blob" or mode == "120000":
            continue
        blob = subprocess.run(["git", "--git-dir", str(git_dir), "cat-file", "blob", sha], capture_output=True)
        if blob.returncode != 0:
            skipped += 1
            continue
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(blob.stdout)
    subprocess.run(["git", "init", "-q", str(dest)], check=True)  # a checkout has a .git: the project root
    print(f"{dest}: {commit} ({skipped} absent blobs skipped)")


def check(memlint: str, name: str, path: Path, extra: list[str]) -> list[dict]:
    done = subprocess.run(
        [memlint, "check", ".", "--gpu", "h100", "--gpus", "8", "--format", "json", "--no-cache", *extra],
        cwd=path, capture_output=True, text=True,
    )
    if done.returncode not in (0, 1):
        sys.exit(f"{name}: memlint exited {done.returncode}: {done.stderr[-2000:]}")
    findings = json.loads(done.stdout or "[]")
    for finding in findings:
        finding["repository"] = name
        if os.path.isabs(finding["filename"]):
            finding["filename"] = os.path.relpath(finding["filename"], path)
    return sorted(findings, key=lambda f: (f["filename"], f["location"]["row"], f["code"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("materialize", help="a checkout from a bare git directory")
    make.add_argument("git_dir", type=Path)
    make.add_argument("dest", type=Path)
    make.add_argument("--commit", default="HEAD")
    run = sub.add_parser("check", help="memlint's findings on checkouts")
    run.add_argument("checkouts", nargs="+", help="NAME=PATH")
    run.add_argument("--memlint", default=str(Path(sys.executable).with_name("memlint")))
    run.add_argument("--sample", type=int, default=3, help="findings shown per other code and repository")
    run.add_argument("--json", type=Path, help="write every finding here")
    args = parser.parse_args()
    if args.command == "materialize":
        materialize(args.git_dir, args.dest, args.commit)
        return
    everything: list[dict] = []
    for item in args.checkouts:
        name, _, path = item.partition("=")
        findings = check(args.memlint, name, Path(path), [])
        everything.extend(findings)
        counts = Counter(f["code"] for f in findings)
        print(f"## {name}: {len(findings)} findings " + ", ".join(f"{c} {n}" for c, n in sorted(counts.items())))
        shown: Counter = Counter()
        for f in findings:
            if f["code"] not in MISSION:
                shown[f["code"]] += 1
                if shown[f["code"]] > args.sample:
                    continue
            mark = "*" if f["code"] in MISSION else " "
            print(f"{mark} {f['code']} {f['severity']:<7} {f['filename']}:{f['location']['row']}: {f['message']}")
        print()
    total = Counter(f["code"] for f in everything)
    print("## all: " + ", ".join(f"{c} {n}" for c, n in sorted(total.items())))
    print("mission-code findings:", sum(total[c] for c in MISSION))
    if args.json:
        args.json.write_text(json.dumps(everything, indent=1))


if __name__ == "__main__":
    main()
