"""Time ``memlint check`` on a large generated repository, cold and warm, beside other linters.

Builds (or reuses) the monorepo of :mod:`make_tree` — training projects in the shapes people
write, their configs and launchers, and thousands of ordinary Python modules — and times, in
one run and on the same tree:

- memlint: cold (empty result cache), warm (nothing changed), warm after one edit of a
  DeepSpeed config (its script is re-checked), and ``--no-cache``;
- the per-file cost of ordinary Python (no ML import) apart from that of training files;
- TorchFix and Fixit, libcst-based linters that parse every file (they keep no cache: each run
  is cold);
- ruff, the speed ceiling, cold (``--no-cache``) and warm.

Every tool gets the same cores (``--jobs``, default all this process may use). A tool that is
not found (``--ruff PATH`` etc., else on PATH) is skipped with a message; nothing is installed.
Each figure is the best of ``--repeat`` runs (default 3), which is the least disturbed by other
load on a shared machine (a run over a minute is not repeated); the load average is printed
before and after.

    python bench/check_speed.py /tmp/bench-tree --projects 400 --other 3000
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import make_tree  # noqa: E402  (the generator beside this script)


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def load() -> str:
    try:
        return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())
    except OSError:
        return "unknown"


def timed(command: list[str], env: dict[str, str] | None = None, cwd: Path | None = None,
          ok: tuple[int, ...] = (0, 1)) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=cwd)
    elapsed = time.perf_counter() - started
    if done.returncode not in ok:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}: {done.stderr.decode(errors='replace')[-2000:]}")
    return elapsed


SLOW_S = 60.0  # a run this long is not repeated: its noise is small beside it


def best(repeat: int, run, before=None) -> float:
    times: list[float] = []
    for _ in range(repeat):
        if before is not None:
            before()
        times.append(run())
        if times[-1] > SLOW_S:
            break
    return min(times)


def version(command: list[str]) -> str:
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=60)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


def find_tool(given: str | None, name: str) -> str | None:
    if given:
        return given if os.access(given, os.X_OK) else None
    return shutil.which(name)


def build_tree(root: Path, projects: int, other: int, seed: int) -> None:
    import random

    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    for i in range(projects):
        make_tree.make_project(root, i, rng)
    for i in range(other):
        make_tree.make_utility(root, i, rng)
    (root / "pyproject.toml").write_text('[tool.memlint]\ngpu = "h100"\n[tool.ruff]\n')


def count(root: Path, suffixes: tuple[str, ...] = (".py", ".json", ".yml", ".yaml", ".sh", ".toml")) -> int:
    return sum(1 for p in root.rglob("*") if p.is_file() and p.suffix in suffixes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tree", type=Path, nargs="?", help="where the tree is (built when missing)")
    parser.add_argument("--projects", type=int, default=400, help="training projects (default 400)")
    parser.add_argument("--other", type=int, default=3000, help="ordinary Python modules (default 3000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=cores(), help="cores for every tool (default: all usable)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure; the best is kept (default 3)")
    parser.add_argument("--python", default=sys.executable, help="the Python that runs memlint")
    parser.add_argument("--ruff", help="ruff executable (default: on PATH)")
    parser.add_argument("--torchfix", help="torchfix executable (default: on PATH)")
    parser.add_argument("--fixit", help="fixit executable (default: on PATH)")
    args = parser.parse_args()

    tree = args.tree or Path(tempfile.mkdtemp(prefix="memlint-bench-")) / "tree"
    if not tree.exists():
        build_tree(tree, args.projects, args.other, args.seed)
    work = Path(tempfile.mkdtemp(prefix="memlint-bench-work-"))
    memlint_cache = work / "memlint-cache"
    ruff_cache = work / "ruff-cache"
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("MEMLINT_CACHE_DIR", None)
    memlint = [args.python, "-m", "memlint", "check", "--jobs", str(args.jobs), "--exit-zero",
               "--output-format", "concise"]

    files = count(tree)
    training = count(tree / "projects")
    ordinary = count(tree / "services")
    print("machine:", platform.machine(), platform.processor() or "", f"{os.cpu_count()} cpus,",
          f"{cores()} usable, jobs {args.jobs}; {platform.system()} {platform.release()}")
    print("python:", platform.python_version(), args.python)
    print(f"tree: {tree} — {files} files ({training} in projects/: training scripts, configs, launchers "
          f"and their helpers; {ordinary} ordinary modules in services/)")
    print(f"best of {args.repeat}; load average before: {load()}")
    print()

    class Results(dict):
        """Printed as measured (a slow tool does not hide the figures before it)."""

        def __setitem__(self, name: str, seconds: float) -> None:
            super().__setitem__(name, seconds)
            print(f"  {name}: {seconds:.2f} s", flush=True)

    results: dict[str, float] = Results()

    def clear_memlint_cache() -> None:
        shutil.rmtree(memlint_cache, ignore_errors=True)

    mem_version = version([args.python, "-m", "memlint", "--version"])
    print(mem_version)
    with_cache = memlint + ["--cache-dir", str(memlint_cache)]
    results["memlint cold"] = best(args.repeat, lambda: timed(with_cache + [str(tree)], env), clear_memlint_cache)
    timed(with_cache + [str(tree)], env)  # a full cache, then warm runs
    results["memlint warm"] = best(args.repeat, lambda: timed(with_cache + [str(tree)], env))
    config = next((tree / "projects").rglob("ds_config.json"), None)
    if config is not None:
        original = config.read_text()

        def one_edit() -> float:
            config.write_text(original + "\n")  # new content, same meaning
            elapsed = timed(with_cache + [str(tree)], env)
            config.write_text(original)
            timed(with_cache + [str(tree)], env)  # back to a warm cache of the original
            return elapsed

        results["memlint warm, one ds_config.json edited"] = best(args.repeat, one_edit)
    results["memlint --no-cache"] = best(args.repeat, lambda: timed(memlint + ["--no-cache", str(tree)], env))
    results["memlint startup (empty directory)"] = best(
        args.repeat, lambda: timed(memlint + ["--no-cache", str(work / "empty")], env),
        lambda: (work / "empty").mkdir(exist_ok=True))
    results["memlint --no-cache, services/ only"] = best(
        args.repeat, lambda: timed(memlint + ["--no-cache", str(tree / "services")], env))
    results["memlint --no-cache, projects/ only"] = best(
        args.repeat, lambda: timed(memlint + ["--no-cache", str(tree / "projects")], env))

    tools: dict[str, str | None] = {
        "ruff": find_tool(args.ruff, "ruff"),
        "torchfix": find_tool(args.torchfix, "torchfix"),
        "fixit": find_tool(args.fixit, "fixit"),
    }
    for name, path in tools.items():
        if path is None:
            print(f"{name}: not found (pass --{name} PATH or put it on PATH); skipped")
            continue
        print(f"{name} {version([path, '--version'])} ({path})")
    ruff = tools["ruff"]
    if ruff:
        ruff_cmd = [ruff, "check", "--exit-zero", "--quiet"]
        ruff_env = dict(os.environ, RAYON_NUM_THREADS=str(args.jobs))
        results["ruff cold (--no-cache)"] = best(args.repeat, lambda: timed(ruff_cmd + ["--no-cache", str(tree)], ruff_env))
        timed(ruff_cmd + ["--cache-dir", str(ruff_cache), str(tree)], ruff_env)
        results["ruff warm"] = best(args.repeat, lambda: timed(ruff_cmd + ["--cache-dir", str(ruff_cache), str(tree)], ruff_env))
    if tools["torchfix"]:
        results["torchfix"] = best(args.repeat, lambda: timed([tools["torchfix"], "--jobs", str(args.jobs), str(tree)],
                                                              ok=(0, 1)))
    if tools["fixit"]:
        fixit_env = dict(os.environ)
        results["fixit"] = best(args.repeat, lambda: timed([tools["fixit"], "lint", str(tree)], fixit_env, ok=(0, 1)),)
    print()
    print(f"summary (best of {args.repeat}):")
    width = max(len(k) for k in results)
    for name, seconds in results.items():
        print(f"{name:<{width}}  {seconds:8.2f} s")
    print()
    startup = results["memlint startup (empty directory)"]
    per = lambda key, n: (results[key] - startup) / n * 1000  # noqa: E731
    print(f"memlint per file (startup {startup:.2f} s taken off), --no-cache:")
    print(f"  ordinary Python (services/, {ordinary} files): {per('memlint --no-cache, services/ only', ordinary):.3f} ms")
    print(f"  training projects (projects/, {training} files): {per('memlint --no-cache, projects/ only', training):.3f} ms")
    print()
    cold, warm = results["memlint cold"], results["memlint warm"]
    for other in ("torchfix", "fixit"):
        if other in results:
            print(f"memlint cold vs {other}: {results[other] / cold:.1f}x faster "
                  f"({cold:.2f} s vs {results[other]:.2f} s)")
    if "ruff warm" in results:
        print(f"memlint cold / ruff cold: {cold / results['ruff cold (--no-cache)']:.1f}x")
        print(f"memlint warm / ruff warm: {warm / results['ruff warm']:.1f}x")
    print(f"\nload average after: {load()}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
