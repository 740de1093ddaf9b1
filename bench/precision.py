"""Findings of ``memlint check`` on public training repositories, for triage by hand.

The precision table (``docs/precision.md``) is a person's judgement of each finding; this
script regenerates the findings it judges. Every checkout the document measures is listed in
``bench/precision_repos.tsv`` (generated from the document's tables by ``manifest``). With
the snapshots that the agent's ``fetch`` tool brings under ``/work/.mirror``, one command
rebuilds them and one runs them all:

    python bench/precision.py restore --mirrors /work/.mirror --into /tmp/prec
    python bench/precision.py check --manifest --root /tmp/prec --json after.json > after.txt
    python bench/precision.py compare before.json after.json

``restore`` writes each checkout at its commit (a snapshot's largest files may be absent:
those are skipped, they are data and images, never code or configs), skips the checkouts
already there and lists the rows it cannot restore (no snapshot, or a snapshot without the
commit: ``fetch`` them and run it again). ``materialize`` makes one checkout by hand.

``check`` runs ``memlint check . --gpu h100 --gpus 8 --format json --no-cache`` in each
checkout (as a new user would, with a target GPU and count stated on the command line, offline
unless ``--online``), prints every finding of the mission codes and a fixed sample of the
others (the first ``--sample`` of each code, in file order, so reruns show the same ones), and
a count per code. ``--json FILE`` keeps them all. Checkouts are named ``NAME=PATH``, or taken
from the manifest (``--manifest [FILE] --root DIR``, ``--only`` to pick some).

``compare`` prints the mission-code findings that appeared, disappeared or changed severity
or message between two ``--json`` files, and the count of every code in each.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import precision_compare  # noqa: E402
import precision_manifest  # noqa: E402
from precision_manifest import Checkout  # noqa: E402

MISSION = ("MEM001", "MEM002", "AMP001", "ACC001", "CKP001", "ZRO001")


def _git(git_dir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "--git-dir", str(git_dir), *args], capture_output=True)


def resolve(git_dir: Path, commit: str) -> str | None:
    """The full commit ``commit`` names in the snapshot, or None when the snapshot lacks it."""
    done = _git(git_dir, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}")
    return done.stdout.decode().strip() if done.returncode == 0 else None


def materialize(git_dir: Path, dest: Path, commit: str) -> str:
    """Write every blob of ``commit`` that the snapshot holds under ``dest``; say what was written.

    The blobs are read through one ``git cat-file --batch``: one process per file took
    minutes on the larger repositories. A symbolic link is made as a clone makes it, when it
    points inside the checkout (CosyVoice's recipes share ``conf`` through links).
    """
    full = resolve(git_dir, commit)
    if full is None:
        raise ValueError(f"{git_dir}: no commit {commit}")
    listing = _git(git_dir, "ls-tree", "-r", "-z", full).stdout.decode()
    files: list[tuple[str, str]] = []
    links: set[str] = set()
    for entry in filter(None, listing.split("\0")):
        meta, path = entry.split("\t", 1)
        mode, kind, sha = meta.split()
        if kind == "blob":
            files.append((sha, path))
            if mode == "120000":
                links.add(path)
    batch = subprocess.Popen(
        ["git", "--git-dir", str(git_dir), "cat-file", "--batch"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )
    assert batch.stdin is not None and batch.stdout is not None
    requests = "".join(f"{sha}\n" for sha, _ in files).encode()

    def ask(stream=batch.stdin) -> None:
        stream.write(requests)
        stream.close()

    writer = threading.Thread(target=ask)
    writer.start()
    skipped = 0
    for _, path in files:
        header = batch.stdout.readline().split()
        if len(header) < 3 or header[1] == b"missing":
            skipped += 1
            continue
        content = batch.stdout.read(int(header[2]))
        batch.stdout.read(1)  # the newline after each object
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if path in links:
            _link(dest, target, content.decode("utf-8", "replace"))
        else:
            target.write_bytes(content)
    writer.join()
    batch.wait()
    subprocess.run(["git", "init", "-q", str(dest)], check=True)  # a checkout has a .git: the project root
    return f"{full} ({skipped} absent blobs skipped)"


def _link(dest: Path, target: Path, pointed: str) -> None:
    """``target`` as a link to ``pointed``, when that stays inside the checkout ``dest``."""
    inside = os.path.normpath(os.path.join(os.path.dirname(target), pointed))
    if os.path.isabs(pointed) or not (inside + os.sep).startswith(os.path.normpath(dest) + os.sep):
        return
    if not os.path.lexists(target):
        os.symlink(pointed, target)


def _picked(path: Path, args: argparse.Namespace) -> list[Checkout]:
    try:
        return precision_manifest.select(precision_manifest.read(path), args.only, args.round)
    except precision_manifest.ManifestError as error:
        sys.exit(str(error))


def restore(checkouts: list[Checkout], mirrors: Path, into: Path) -> list[tuple[Checkout, str]]:
    """Materialize every checkout not yet under ``into``; the ones that cannot be, with why."""
    missing: list[tuple[Checkout, str]] = []
    into.mkdir(parents=True, exist_ok=True)
    for checkout in checkouts:
        dest = into / checkout.name
        if dest.is_dir():
            print(f"{dest}: present, kept")
            continue
        git_dir = mirrors / checkout.snapshot / "repo"
        if not git_dir.is_dir():
            missing.append((checkout, f"no snapshot {git_dir}"))
            continue
        if resolve(git_dir, checkout.commit) is None:
            missing.append((checkout, f"the snapshot {git_dir} lacks commit {checkout.commit}"))
            continue
        partial = into / f".{checkout.name}.partial"  # a stopped restore leaves no half checkout
        shutil.rmtree(partial, ignore_errors=True)
        written = materialize(git_dir, partial, checkout.commit)
        partial.rename(dest)
        print(f"{dest}: {written}")
    for checkout, why in missing:
        print(f"not restored: {checkout.name} ({checkout.repository} {checkout.commit}): {why}")
    print(f"{len(checkouts) - len(missing)} of {len(checkouts)} checkouts under {into}")
    return missing


def check(memlint: str, name: str, path: Path, extra: list[str], online: bool = False) -> list[dict]:
    """memlint's findings in one checkout, with file names relative to it."""
    env = dict(os.environ) if online else {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [memlint, "check", ".", "--gpu", "h100", "--gpus", "8", "--format", "json", "--no-cache", *extra],
        cwd=path, capture_output=True, text=True, env=env,
    )
    if done.returncode not in (0, 1):
        raise RuntimeError(f"{name}: memlint exited {done.returncode}: {done.stderr[-2000:]}")
    findings = json.loads(done.stdout or "[]")
    for finding in findings:
        finding["repository"] = name
        if os.path.isabs(finding["filename"]):
            finding["filename"] = os.path.relpath(finding["filename"], path)
    return sorted(findings, key=lambda f: (f["filename"], f["location"]["row"], f["code"]))


def _print_findings(name: str, findings: list[dict], sample: int, seconds: float) -> None:
    counts = Counter(f["code"] for f in findings)
    listed = ", ".join(f"{c} {n}" for c, n in sorted(counts.items()))
    print(f"## {name}: {len(findings)} findings {listed} ({seconds:.1f} s)")
    shown: Counter = Counter()
    for f in findings:
        if f["code"] not in MISSION:
            shown[f["code"]] += 1
            if shown[f["code"]] > sample:
                continue
        mark = "*" if f["code"] in MISSION else " "
        print(f"{mark} {f['code']} {f['severity']:<7} {f['filename']}:{f['location']['row']}: {f['message']}")
    print(flush=True)


def _checkouts_to_run(args: argparse.Namespace) -> list[tuple[str, Path]]:
    named = [(name, Path(path)) for name, _, path in (item.partition("=") for item in args.checkouts)]
    if args.manifest is None:
        if not named:
            sys.exit("name checkouts as NAME=PATH, or give --manifest and --root")
        return named
    if args.root is None:
        sys.exit("--manifest needs --root, the folder `restore --into` filled")
    listed = _picked(args.manifest, args)
    absent = [c.name for c in listed if not (args.root / c.name).is_dir()]
    if absent:
        print(f"not restored under {args.root}, not run: {', '.join(absent)}\n")
    return named + [(c.name, args.root / c.name) for c in listed if c.name not in absent]


def run_checks(args: argparse.Namespace) -> int:
    everything: list[dict] = []
    failed: list[str] = []
    started = time.monotonic()
    for name, path in _checkouts_to_run(args):
        began = time.monotonic()
        try:
            findings = check(args.memlint, name, path, [], online=args.online)
        except (RuntimeError, json.JSONDecodeError) as error:
            print(f"## {name}: FAILED {error}\n", flush=True)
            failed.append(name)
            continue
        everything.extend(findings)
        _print_findings(name, findings, args.sample, time.monotonic() - began)
    total = Counter(f["code"] for f in everything)
    print("## all: " + ", ".join(f"{c} {n}" for c, n in sorted(total.items())))
    print("mission-code findings:", sum(total[c] for c in MISSION))
    children = resource.getrusage(resource.RUSAGE_CHILDREN)  # CPU time: the machine is shared
    cpu = children.ru_utime + children.ru_stime
    print(f"{len(everything)} findings in {time.monotonic() - started:.0f} s ({cpu:.0f} s of memlint's CPU)")
    if failed:
        print(f"memlint failed on: {', '.join(failed)}")
    if args.json:
        args.json.write_text(json.dumps(everything, indent=1))
    return 1 if failed else 0


def _selection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--only", action="append", help="manifest names (comma-separated, or repeated)")
    parser.add_argument("--round", help="the checkouts these measurements' tables list: 11, 2-8, 1,9")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("materialize", help="a checkout from a bare git directory")
    make.add_argument("git_dir", type=Path)
    make.add_argument("dest", type=Path)
    make.add_argument("--commit", default="HEAD")
    listing = sub.add_parser("manifest", help="write bench/precision_repos.tsv from docs/precision.md")
    listing.add_argument("--doc", type=Path, default=precision_manifest.DOC)
    listing.add_argument("--out", type=Path, default=precision_manifest.MANIFEST)
    listing.add_argument("--check", action="store_true", help="only say whether the file is up to date")
    back = sub.add_parser("restore", help="materialize the manifest's checkouts from snapshots")
    back.add_argument("--manifest", type=Path, default=precision_manifest.MANIFEST)
    back.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    back.add_argument("--into", type=Path, required=True)
    _selection(back)
    run = sub.add_parser("check", help="memlint's findings on checkouts")
    run.add_argument("checkouts", nargs="*", help="NAME=PATH")
    run.add_argument(
        "--manifest", type=Path, nargs="?", const=precision_manifest.MANIFEST,
        help=f"run every restored checkout of this manifest (default {precision_manifest.MANIFEST.name})",
    )
    run.add_argument("--root", type=Path, help="the folder `restore --into` filled")
    _selection(run)
    run.add_argument("--memlint", default=str(Path(sys.executable).with_name("memlint")))
    run.add_argument("--online", action="store_true", help="let memlint ask the Hugging Face Hub")
    run.add_argument("--sample", type=int, default=3, help="findings shown per other code and repository")
    run.add_argument("--json", type=Path, help="write every finding here")
    diff = sub.add_parser("compare", help="the findings that moved between two --json runs")
    diff.add_argument("before", type=Path)
    diff.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.command == "materialize":
        print(f"{args.dest}: {materialize(args.git_dir, args.dest, args.commit)}")
    elif args.command == "manifest":
        text = precision_manifest.render(args.doc.read_text())
        if args.check:
            current = args.out.read_text() if args.out.exists() else ""
            sys.exit(0 if current == text else f"{args.out} is out of date: run `python bench/precision.py manifest`")
        args.out.write_text(text)
    elif args.command == "restore":
        checkouts = _picked(args.manifest, args)
        sys.exit(1 if restore(checkouts, args.mirrors, args.into) else 0)
    elif args.command == "compare":
        before, after = precision_compare.load(args.before), precision_compare.load(args.after)
        print(precision_compare.report(before, after, MISSION))
    else:
        sys.exit(run_checks(args))


if __name__ == "__main__":
    main()
