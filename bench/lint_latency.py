"""Where does linting one file spend its time, cold and warm?

For each file, prints the median over ``--runs`` runs of:

* the stages of a first analysis, each timed on its own: ``parse`` (CPython's syntax check and
  libcst's parse, or the JSON/YAML loader), ``structure`` (positions, parents and children of
  every node), ``names`` (scopes: what each name refers to), ``facts`` (the extractor),
  ``runs`` (linking the project's documents, resolving and estimating the run) and ``rules``;
* ``cold``: ``Linter.lint_path`` on a document the process has not seen (a fresh project; the
  imports are warm) -- the CLI's case;
* ``warm``: ``Linter.lint_path`` after an edit, in the same process and project -- the
  language server's case (no debounce, no JSON-RPC: ``bench/lsp_latency.py`` measures those).
  The edit changes a number near the middle of the file, as a user tuning a run does.

On a busy machine ``--cpu`` (the process's CPU time) varies far less than the wall clock.

    python bench/lint_latency.py                       # the default set (below)
    python bench/lint_latency.py path/to/train.py --runs 20

Without a path: a generated 2,000-line fine-tuning script (the one ``bench/lsp_latency.py``
edits) in a project with a DeepSpeed config and a TrainingArguments YAML, those two configs,
``bench/scripts/train_clm_no_trainer.py`` (a 300-line Accelerate loop) and the examples'
training scripts. A file is linted in its own directory's project (its ``memlint.toml``).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from lsp_latency import write_project  # noqa: E402

try:
    from memlint.lint.collector import collector_paused  # noqa: E402
except ImportError:  # an older memlint, measured for comparison
    from contextlib import nullcontext as collector_paused  # noqa: E402
from memlint.documents.parsed import parse_document  # noqa: E402
from memlint.documents.reading import read_document  # noqa: E402
from memlint.facts.extract import extract  # noqa: E402
from memlint.lint.context import RuleContext  # noqa: E402
from memlint.lint.engine import Linter, capacity_of, run_context  # noqa: E402
from memlint.project.settings import discover  # noqa: E402
from memlint.project.project import Project  # noqa: E402

STAGES = ("parse", "structure", "names", "facts", "runs", "rules")
_NUMBER = re.compile(r"(?<![\w.])\d+(?![\w.])")


CLOCK = time.perf_counter  # --cpu: time.process_time


def _timed(function) -> tuple[float, object]:
    start = CLOCK()
    result = function()
    return (CLOCK() - start) * 1000, result


def stage_times(path: Path, linter: Linter) -> dict[str, float]:
    """One first analysis of ``path``, stage by stage (milliseconds), with the cycle collector
    paused as ``Linter.lint_path`` pauses it."""
    with collector_paused():
        return _stage_times(path, linter)


def _stage_times(path: Path, linter: Linter) -> dict[str, float]:
    out: dict[str, float] = {}
    out["parse"], parsed = _timed(lambda: parse_document(read_document(path)))
    python = parsed.python
    out["structure"] = _timed(lambda: (python.positions, python.parents) if python else None)[0]
    out["names"] = _timed(lambda: python.scopes if python else None)[0]
    out["facts"] = _timed(lambda: extract(parsed))[0]
    settings = linter.settings
    project = Project(settings)
    project.facts(path)  # its own parse and facts, timed above
    out["runs"], runs = _timed(lambda: project.runs_for(path, run_context(settings)))
    ctx = RuleContext(parsed=parsed, settings=settings, capacity=capacity_of(settings), runs=runs, project=project)

    def check() -> None:
        for rule in linter.rules:
            if rule.applies_to(parsed.kind, bool(runs)):
                list(rule.check(ctx))

    out["rules"] = _timed(check)[0]
    return out


def edited(text: str, n: int) -> str:
    """``text`` with the number nearest its middle line replaced (a different value each ``n``)."""
    lines = text.splitlines(keepends=True)
    middle = len(lines) // 2
    for offset in sorted(range(len(lines)), key=lambda i: abs(i - middle)):
        match = _NUMBER.search(lines[offset])
        if match:
            value = str(int(match.group()) + 1 + n % 7)
            lines[offset] = lines[offset][: match.start()] + value + lines[offset][match.end():]
            return "".join(lines)
    return text + f"\n# edit {n}\n" if not text.lstrip().startswith("{") else text + "\n" * (n % 5 + 1)


def measure(path: Path, runs: int) -> dict[str, float]:
    settings = discover(path.parent)
    samples: dict[str, list[float]] = {}
    for _ in range(runs):
        for name, value in stage_times(path, Linter(settings)).items():
            samples.setdefault(name, []).append(value)
        samples.setdefault("cold", []).append(_timed(lambda: Linter(settings).lint_path(path))[0])
    linter = Linter(settings)
    text = path.read_text(encoding="utf-8")
    linter.lint_path(path)
    for n in range(runs + 2):  # the first two edits are not counted
        linter.project.set_overlay(path, edited(text, n))
        took = _timed(lambda: linter.lint_path(path))[0]
        if n >= 2:
            samples.setdefault("warm", []).append(took)
    return {name: statistics.median(values) for name, values in samples.items()}


def default_files(scratch: Path) -> list[Path]:
    script = write_project(scratch, 2000)
    files = [script, scratch / "ds_config.json", scratch / "args.yaml", ROOT / "bench" / "scripts" / "train_clm_no_trainer.py"]
    files += sorted((ROOT / "examples").glob("*/train.py"))
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", type=Path, help="files to lint (default: the set described above)")
    parser.add_argument("--runs", type=int, default=7, help="runs per figure; medians are printed")
    parser.add_argument("--cpu", action="store_true",
                        help="time the process's CPU, not the wall clock (steadier on a busy machine)")
    args = parser.parse_args()
    global CLOCK
    if args.cpu:
        CLOCK = time.process_time
    with tempfile.TemporaryDirectory(prefix="memlint-bench-") as tmp:
        files = args.paths or default_files(Path(tmp))
        header = f"{'file':42s} {'lines':>6s} " + " ".join(f"{s:>9s}" for s in STAGES) + f" {'cold':>9s} {'warm':>9s}"
        print(f"median of {args.runs} runs, milliseconds of {'CPU' if args.cpu else 'wall-clock'} time")
        print(header)
        for path in files:
            figures = measure(path.resolve(), args.runs)
            name = path.name if not str(path).startswith(tmp) else f"(generated) {path.name}"
            try:
                name = str(path.resolve().relative_to(ROOT))
            except ValueError:
                pass
            lines = path.read_text(encoding="utf-8").count("\n")
            row = f"{name[-42:]:42s} {lines:6d} " + " ".join(f"{figures.get(s, 0):9.1f}" for s in STAGES)
            print(row + f" {figures['cold']:9.1f} {figures['warm']:9.1f}", flush=True)


if __name__ == "__main__":
    main()
