"""Time ``memlint check`` on real code: pinned releases' sources from PyPI, beside ruff and TorchFix.

The generated tree of :mod:`make_tree` has short template scripts; real training libraries
have 3,000-line trainer modules, model files and recipe configs. This benchmark downloads
pinned releases of the libraries ML engineers train with (wheels, else the source
distribution, with ``pip download --no-deps``), unpacks their sources into one tree under
``--cache`` (kept between runs: the download happens once), and times, in one run and on the
same tree:

- memlint cold (empty result cache), warm (nothing changed), warm after one edit of a config
  (a torchtune recipe YAML: the files that read it are checked again), ``--no-cache``, and
  ``--jobs 1`` beside the default ``--jobs``;
- the cost of each Python file linted alone in one process (p50, p95, mean), after warm-up, as
  ``check``'s workers lint (the prefilter on, the collector paused);
- the peak resident memory of the largest memlint process (``wait4``'s ``ru_maxrss``);
- ruff (cold with ``--no-cache``, and warm) and TorchFix (no cache: every run is cold), with
  the ratios to memlint's figures. A tool that is not found is skipped with a message.

The generated tree (``bench/make_tree.py``, 400 projects and 3,000 ordinary modules by
default) is measured the same way as a second row. ``--baseline DIR`` (another memlint
checkout, e.g. a ``git worktree`` of an older commit) measures it too, alternating with this
checkout run by run, so that a before/after comparison is made under the same load.

Each figure is the best of ``--repeat`` runs (the least disturbed by other load on a shared
machine), printed with the load average when it was measured.

    python bench/real_speed.py --cache ~/.cache/memlint-real-bench
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import make_tree  # (the generator beside this script)
from check_speed import cores, load  # the same cores and load average as the generated-tree benchmark

# (distribution, version, what of its sources is kept: paths under the unpacked root, None = all)
PACKAGES: list[tuple[str, str, tuple[str, ...] | None]] = [
    ("transformers", "4.57.1", (
        # the trainer, its arguments and integrations, and the model files people fine-tune
        "transformers/trainer.py", "transformers/trainer_utils.py", "transformers/trainer_pt_utils.py",
        "transformers/trainer_seq2seq.py", "transformers/trainer_callback.py", "transformers/training_args.py",
        "transformers/training_args_seq2seq.py", "transformers/modeling_utils.py", "transformers/hf_argparser.py",
        "transformers/integrations", "transformers/models/llama", "transformers/models/mistral",
        "transformers/models/qwen2", "transformers/models/gemma", "transformers/models/gpt2",
        "transformers/models/bert", "transformers/models/t5",
    )),
    ("trl", "0.24.0", None),
    ("accelerate", "1.11.0", None),
    ("peft", "0.17.1", None),
    ("torchtune", "0.6.1", None),  # its wheel carries the recipes and their YAML configs
    # a source distribution only (its metadata step imports torch: run with a Python that has it);
    # the engine, the launcher, the autotuner and their utilities, not the kernels' builders
    ("deepspeed", "0.18.1", ("deepspeed/__init__.py", "deepspeed/runtime", "deepspeed/launcher",
                             "deepspeed/autotuning", "deepspeed/utils")),
]
SUFFIXES = (".py", ".json", ".yml", ".yaml", ".sh", ".toml")
SLOW_S = 60.0  # a run this long is not repeated: its noise is small beside it


class Run:
    """One timed command: wall seconds and the peak RSS (MiB) of its largest process."""

    def __init__(self, command: list[str], env: dict[str, str] | None = None, ok: tuple[int, ...] = (0, 1)) -> None:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        assert process.stderr is not None
        error = process.stderr.read()
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        self.seconds = time.perf_counter() - started
        self.peak_mib = usage.ru_maxrss / 1024  # KiB on Linux; the process or a child it waited for
        # CPU seconds of the process and the children it waited for (check's workers): on a
        # shared machine a steadier figure than the wall time
        self.cpu = usage.ru_utime + usage.ru_stime
        if process.returncode not in ok:
            raise RuntimeError(f"{' '.join(command)} exited {process.returncode}: "
                               f"{error.decode(errors='replace')[-2000:]}")


def best(repeat: int, run, before=None) -> tuple[float, float, str]:
    """(best seconds, peak MiB of that run, its CPU seconds and the load average at the end)."""
    runs: list[Run] = []
    for _ in range(repeat):
        if before is not None:
            before()
        runs.append(run())
        if runs[-1].seconds > SLOW_S:
            break
    fastest = min(runs, key=lambda r: r.seconds)
    return fastest.seconds, fastest.peak_mib, f"{load()}; CPU {fastest.cpu:.2f} s"


def version(command: list[str]) -> str:
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=120)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "unknown"


def find_tool(given: str | None, name: str) -> str | None:
    if given:
        return given if os.access(given, os.X_OK) else None
    return shutil.which(name)


# ----------------------------------------------------------------- the real tree


def download(name: str, pinned: str, into: Path) -> Path | None:
    """The wheel, else the source distribution, of ``name==pinned`` (downloaded once)."""
    into.mkdir(parents=True, exist_ok=True)
    stem = name.replace("-", "_")
    for pattern in (f"{stem}-{pinned}-*.whl", f"{stem}-{pinned}.tar.gz", f"{name}-{pinned}.tar.gz"):
        found = sorted(into.glob(pattern))
        if found:
            return found[0]
    pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--dest", str(into)]
    for how in (["--only-binary", ":all:"], ["--no-binary", ":all:", "--no-build-isolation"]):
        done = subprocess.run(pip + how + [f"{name}=={pinned}"], capture_output=True, text=True, check=False)
        if done.returncode == 0:
            return download(name, pinned, into)
    print(f"  {name}=={pinned}: pip download failed; skipped ({done.stderr.strip().splitlines()[-1:]})")
    return None


def unpack(archive: Path, keep: tuple[str, ...] | None, into: Path) -> int:
    """The archive's sources (``keep``: only these paths), under ``into``; the files written."""
    written = 0

    def wanted(name: str) -> bool:
        if not name.endswith(SUFFIXES) or ".dist-info/" in name or ".egg-info/" in name:
            return False
        return keep is None or any(name == k or name.startswith(k + "/") for k in keep)

    def write(name: str, data: bytes) -> None:
        nonlocal written
        target = into / name
        if ".." in Path(name).parts:
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        written += 1

    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as wheel:
            for info in wheel.infolist():
                if not info.is_dir() and wanted(info.filename):
                    write(info.filename, wheel.read(info))
    else:
        with tarfile.open(archive) as sdist:
            for member in sdist.getmembers():
                name = member.name.split("/", 1)[1] if "/" in member.name else member.name
                if member.isfile() and wanted(name):
                    source = sdist.extractfile(member)
                    if source is not None:
                        write(name, source.read())
    return written


def real_tree(cache: Path, only: set[str] | None = None) -> Path:
    """The pinned releases' sources, one folder each, under ``cache/tree`` (made once)."""
    tree = cache / ("tree" if only is None else "tree-" + "-".join(sorted(only)))
    done = tree / ".complete"
    if done.exists():
        return tree
    shutil.rmtree(tree, ignore_errors=True)
    for name, pinned, keep in PACKAGES:
        if only is not None and name not in only:
            continue
        archive = download(name, pinned, cache / "downloads")
        if archive is None:
            continue
        count = unpack(archive, keep, tree / f"{name}-{pinned}")
        print(f"  {name}=={pinned}: {count} files from {archive.name}")
    (tree / "pyproject.toml").write_text('[tool.memlint]\ngpu = "h100"\n[tool.ruff]\n')
    subprocess.run(["git", "init", "-q", str(tree)], check=False)  # a checkout, as a user's would be
    done.write_text("")
    return tree


def generated_tree(path: Path, projects: int, other: int) -> Path:
    import random

    if not (path / "pyproject.toml").exists():
        rng = random.Random(0)
        path.mkdir(parents=True, exist_ok=True)
        for i in range(projects):
            make_tree.make_project(path, i, rng)
        for i in range(other):
            make_tree.make_utility(path, i, rng)
        (path / "pyproject.toml").write_text('[tool.memlint]\ngpu = "h100"\n[tool.ruff]\n')
    return path


def count(root: Path, suffixes: tuple[str, ...] = SUFFIXES) -> tuple[int, int, int]:
    """(files, of them Python, lines of Python)."""
    files = python = lines = 0
    for path in root.rglob("*"):
        if path.is_file() and path.suffix in suffixes and ".git" not in path.parts:
            files += 1
            if path.suffix == ".py":
                python += 1
                with open(path, "rb") as handle:
                    lines += sum(1 for _ in handle)
    return files, python, lines


# ----------------------------------------------------------------- per file, in one process


PER_FILE = """
import json, os, statistics, sys, time
from pathlib import Path
from memlint.project.settings import discover
from memlint.project.project import Project
from memlint.lint.engine import Linter
from memlint.lint.collector import collector_paused
from memlint.lint.needs import Prefilter
from memlint.project.walk import iter_files
tree = Path(sys.argv[1])
settings = discover(tree)
files = [p for p in iter_files([tree], settings) if p.suffix == ".py"]
def once():
    project = Project(settings, snapshot=True)
    project.documents.wanted = Prefilter(settings)  # as check's workers lint: the prefilter on,
    linter = Linter(settings, project)
    project.mentions()  # the referrer index, once per run, is not any one file's cost
    costs = []
    for path in files:
        started = time.perf_counter()
        with collector_paused(keep=True):  # what the pause made kept out of the collector's passes
            linter.lint_path(path)
        costs.append(time.perf_counter() - started)
    return costs
warm_up = files
files = files[:20]
once()  # warm-up: imports, the rules, the catalogues
files = warm_up
best = min((once() for _ in range(int(sys.argv[2]))), key=sum)
print(json.dumps(best))
"""


def per_file(python: str, env: dict[str, str], tree: Path, repeat: int) -> list[float]:
    done = subprocess.run([python, "-c", PER_FILE, str(tree), str(repeat)], env=env,
                          capture_output=True, text=True, check=True)
    import json

    return json.loads(done.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------- the measurements


class Report:
    def __init__(self) -> None:
        self.rows: dict[str, dict[str, tuple[float, float, str]]] = {}

    def add(self, tree: str, name: str, figure: tuple[float, float, str]) -> None:
        self.rows.setdefault(tree, {})[name] = figure
        seconds, peak, at = figure
        print(f"  {name}: {seconds:.2f} s (peak {peak:.0f} MiB; load {at})", flush=True)


def measure(report: Report, label: str, tree: Path, memlints: dict[str, tuple[str, dict[str, str]]],
            edited: Path | None, args, tools: dict[str, str | None]) -> None:
    files, python_files, lines = count(tree)
    print(f"\n{label}: {tree} — {files} files, {python_files} Python ({lines:,} lines); load {load()}")
    work = Path(tempfile.mkdtemp(prefix="memlint-real-"))
    try:
        _measure_memlints(report, label, memlints, tree, work, edited, args)
        for name, (python, env) in memlints.items():
            costs = sorted(per_file(python, env, tree, 1 if args.repeat < 3 else 2))
            ms = [c * 1000 for c in costs]
            p50, p95 = ms[len(ms) // 2], ms[min(len(ms) - 1, int(len(ms) * 0.95))]
            mean = statistics.fmean(ms)
            print(f"  {name} per Python file, one process, {len(ms)} files: p50 {p50:.1f} ms, p95 {p95:.1f} ms, "
                  f"mean {mean:.1f} ms, max {ms[-1]:.0f} ms (load {load()})", flush=True)
            report.rows.setdefault(label, {})[f"{name} per file"] = (mean, p95, f"p50 {p50:.1f}")
        ruff, torchfix = tools.get("ruff"), tools.get("torchfix")
        if ruff:
            cmd = [ruff, "check", "--exit-zero", "--quiet"]
            ruff_env = dict(os.environ, RAYON_NUM_THREADS=str(args.jobs))
            report.add(label, "ruff cold (--no-cache)",
                       best(args.repeat, lambda: Run(cmd + ["--no-cache", str(tree)], ruff_env)))
            Run(cmd + ["--cache-dir", str(work / "ruff"), str(tree)], ruff_env)
            report.add(label, "ruff warm", best(args.repeat, lambda: Run(cmd + ["--cache-dir", str(work / "ruff"),
                                                                                 str(tree)], ruff_env)))
        if torchfix:
            report.add(label, "torchfix", best(args.torchfix_repeat,
                                               lambda: Run([torchfix, "--jobs", str(args.jobs), str(tree)])))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = report.rows[label]
    for name in memlints:
        cold = rows[f"{name} cold"][0]
        if "torchfix" in rows:
            print(f"  {name} cold vs torchfix: {rows['torchfix'][0] / cold:.1f}x faster")
        if "ruff cold (--no-cache)" in rows:
            print(f"  {name} cold / ruff cold: {cold / rows['ruff cold (--no-cache)'][0]:.1f}x; "
                  f"warm / ruff warm: {rows[f'{name} warm'][0] / rows['ruff warm'][0]:.1f}x")
        print(f"  {name} cold per Python file: {cold / python_files * 1000:.1f} ms")


def alternate(repeat: int, runs: dict[str, tuple]) -> dict[str, tuple[float, float, str]]:
    """``best`` of each (run, before) in ``runs``, taking turns run by run: every checkout meets
    the same load."""
    done: dict[str, list[tuple[Run, str]]] = {name: [] for name in runs}
    for _ in range(repeat):
        for name, (run, before) in runs.items():
            if before is not None:
                before()
            done[name].append((run(), load()))
        if all(r[-1][0].seconds > SLOW_S for r in done.values()):
            break
    out = {}
    for name, measured in done.items():
        fastest, at = min(measured, key=lambda r: r[0].seconds)
        out[name] = (fastest.seconds, fastest.peak_mib, f"{at}; CPU {fastest.cpu:.2f} s")
    return out


def _measure_memlints(report: Report, label: str, memlints: dict[str, tuple[str, dict[str, str]]], tree: Path,
                      work: Path, edited: Path | None, args) -> None:
    commands = {}
    for name, (python, env) in memlints.items():
        cache = work / name / "cache"
        base = [python, "-m", "memlint", "check", "--exit-zero", "--output-format", "concise", "--offline"]
        commands[name] = (base, base + ["--jobs", str(args.jobs), "--cache-dir", str(cache), str(tree)], env, cache)
        print(f"  {name}: {version([python, '-m', 'memlint', '--version'])} "
              f"({env.get('PYTHONPATH', '').split(os.pathsep)[0]})")

    def figure(title: str, runs: dict[str, tuple]) -> None:
        for name, result in alternate(args.repeat, runs).items():
            report.add(label, f"{name} {title}", result)

    def cold(name):
        _, with_cache, env, cache = commands[name]
        return (lambda: Run(with_cache, env), lambda: shutil.rmtree(cache, ignore_errors=True))

    def warm(name):
        _, with_cache, env, _ = commands[name]
        Run(with_cache, env)  # fill the cache
        return (lambda: Run(with_cache, env), None)

    edits = itertools.count()

    def one_edit(name):
        _, with_cache, env, _ = commands[name]
        original = edited.read_text()

        def run() -> Run:
            # new content, the same meaning; never content a cache has seen (its result would be kept)
            edited.write_text(original + f"\n# edited {os.getpid()}-{next(edits)}\n")
            try:
                return Run(with_cache, env)
            finally:
                edited.write_text(original)
                Run(with_cache, env)  # back to a warm cache of the original

        return (run, None)

    def no_cache(name, jobs):
        base, _, env, _ = commands[name]
        return (lambda: Run(base + ["--no-cache", "--jobs", str(jobs), str(tree)], env), None)

    figure("cold", {name: cold(name) for name in commands})
    figure("warm", {name: warm(name) for name in commands})
    if edited is not None:
        figure(f"warm, {edited.name} edited", {name: one_edit(name) for name in commands})
    for jobs in sorted({args.jobs, 1}, reverse=True):
        figure(f"--no-cache --jobs {jobs}", {name: no_cache(name, jobs) for name in commands})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "memlint-real-bench",
                        help="downloads and unpacked trees, kept between runs")
    parser.add_argument("--packages", help="comma-separated: only these of the pinned releases")
    parser.add_argument("--no-real", action="store_true", help="skip the real tree's row")
    parser.add_argument("--no-generated", action="store_true", help="skip the generated tree's row")
    parser.add_argument("--projects", type=int, default=400, help="generated tree: training projects")
    parser.add_argument("--other", type=int, default=3000, help="generated tree: ordinary Python modules")
    parser.add_argument("--jobs", type=int, default=cores(), help="cores for every tool (default: all usable)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure; the best is kept (default 3)")
    parser.add_argument("--torchfix-repeat", type=int, default=1, help="TorchFix runs (default 1: minutes each)")
    parser.add_argument("--python", default=sys.executable, help="the Python that runs memlint")
    parser.add_argument("--baseline", type=Path, help="another memlint checkout, measured alternately")
    parser.add_argument("--ruff", help="ruff executable (default: on PATH)")
    parser.add_argument("--torchfix", help="torchfix executable (default: on PATH)")
    args = parser.parse_args()

    print("machine:", platform.machine(), f"{os.cpu_count()} cpus, {cores()} usable, jobs {args.jobs};",
          platform.system(), platform.release(), "; python", platform.python_version())
    print(f"best of {args.repeat} (TorchFix: {args.torchfix_repeat}); load average (1, 5, 15 min) now {load()}")
    tools = {"ruff": find_tool(args.ruff, "ruff"), "torchfix": find_tool(args.torchfix, "torchfix")}
    for name, path in tools.items():
        if path is None:
            print(f"{name}: not found (pass --{name} PATH or put it on PATH); skipped")
        else:
            print(f"{name}: {version([path, '--version'])} ({path})")

    def env_for(checkout: Path) -> dict[str, str]:
        env = dict(os.environ, PYTHONPATH=str(checkout) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        env.pop("MEMLINT_CACHE_DIR", None)
        return env

    memlints = {"memlint": (args.python, env_for(REPO))}
    if args.baseline is not None:
        memlints = {"baseline": (args.python, env_for(args.baseline.resolve())), **memlints}

    report = Report()
    if not args.no_real:
        print("\nthe real tree (pinned releases from PyPI):")
        tree = real_tree(args.cache, set(args.packages.split(",")) if args.packages else None)
        edited = next(iter(sorted(tree.glob("torchtune-*/recipes/configs/llama3/8B_lora.yaml"))), None)
        measure(report, "real", tree, memlints, edited, args, tools)
    if not args.no_generated:
        generated = generated_tree(args.cache / f"generated-{args.projects}-{args.other}", args.projects, args.other)
        edited = next(iter(sorted((generated / "projects").rglob("ds_config.json"))), None)
        measure(report, "generated", generated, memlints, edited, args, tools)
    print(f"\nload average at the end: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
