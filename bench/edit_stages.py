"""Where a warm edit of a real module spends its CPU, stage by stage, in one process.

The language server's path without JSON-RPC: ``Linter.lint_path`` after ``set_overlay`` with the
integer nearest the middle of the file changed (``bench/lint_latency.py``'s edit), in a project
like ``bench/lsp_latency.py``'s (``--project``) or the file alone with ``gpu = "h100"``. Timers
(process CPU) are put around the stage functions: the parse (of which libcst's parse of the
changed members, their record and the class's new version), the facts (of which the scopes),
the runs, each rule and the rules' index. A stage's figure counts what it calls. ``--profile N``
also prints cProfile's N functions of most own time over the counted edits (``--profile-out``:
the profile, for ``pstats``); ``--time module:function`` (or ``module:Class.method``; repeatable)
also times that function where its module holds it (a caller that imported it by name calls it
untimed), without cProfile's cost per call. ``--freeze`` handles the collector as the language
server does (each lint's objects frozen at its end), so that no young collection, which the
server never makes between an edit and its diagnostics, is counted in a stage.

    python bench/edit_stages.py path/to/grpo_trainer.py [--edits 10] [--project] [--profile 40]
    python bench/edit_stages.py path/to/accelerator.py --project --freeze --time memlint.python.member_scopes:_taken_over
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import functools
import importlib
import pstats
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import memlint.documents.parsed as parsed_module  # noqa: E402
import memlint.facts.extract as extract_module  # noqa: E402
import memlint.python.class_units as class_units  # noqa: E402
import memlint.python.index as index_module  # noqa: E402
import memlint.python.method_units as method_units  # noqa: E402
import memlint.python.source as source_module  # noqa: E402
from lint_latency import edited  # noqa: E402
from lsp_latency import write_project  # noqa: E402
from memlint.lint.collector import IdleCollection, collector_paused, freeze_long_lived  # noqa: E402
from memlint.lint.engine import Linter  # noqa: E402
from memlint.project.runs import RunFinder  # noqa: E402
from memlint.project.settings import discover  # noqa: E402

SPENT: collections.Counter[str] = collections.Counter()


def _timed(owner: object, name: str, label: str) -> None:
    function = getattr(owner, name)

    @functools.wraps(function)
    def timed(*args, **kwargs):
        start = time.process_time()
        try:
            return function(*args, **kwargs)
        finally:
            SPENT[label] += time.process_time() - start

    setattr(owner, name, timed)


def _timed_rule(rule) -> None:
    check = rule.check

    def timed(ctx):
        start = time.process_time()
        try:
            return list(check(ctx))
        finally:
            SPENT[f"rules: {rule.code}"] += time.process_time() - start

    rule.check = timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", type=Path)
    parser.add_argument("--edits", type=int, default=10)
    parser.add_argument("--project", action="store_true", help="in bench/lsp_latency.py's project (configs, a script)")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="also print cProfile's N functions of most own time over the counted edits")
    parser.add_argument("--profile-out", type=Path, help="with --profile: where to write the profile (pstats)")
    parser.add_argument("--freeze", action="store_true",
                        help="freeze what each lint made, as the language server does (``IdleCollection``): "
                             "no young collection lands in the figures")
    parser.add_argument("--time", action="append", default=[], metavar="MODULE:FUNCTION",
                        help="also time this function or MODULE:CLASS.METHOD (repeatable)")
    args = parser.parse_args()
    for spec in args.time:
        module_name, _, name = spec.partition(":")
        owner: object = importlib.import_module(module_name)
        *path, name = name.split(".")  # ``module:Class.method`` times a method
        for part in path:
            owner = getattr(owner, part)
        _timed(owner, name, f"also: {spec}")
    for owner, name, label in (
        (parsed_module, "parse_document", "parse"), (class_units.cst, "parse_module", "parse: libcst"),
        (class_units, "record", "parse: record"), (method_units, "record", "parse: record"),
        (class_units, "_rebuilt", "parse: new class"),
        (extract_module, "extract", "facts"), (source_module, "scopes_of", "facts: scopes"),
        (RunFinder, "runs_for", "runs"),
        (index_module, "index_for", "rules: index"),
    ):
        _timed(owner, name, label)
    with tempfile.TemporaryDirectory(prefix="memlint-bench-") as tmp:
        folder = Path(tmp)
        if args.project:
            write_project(folder, 2000)
        else:
            (folder / "memlint.toml").write_text('gpu = "h100"\n')
        path = folder / args.path.name
        shutil.copy(args.path, path)
        linter = Linter(discover(folder))
        for rule in linter.rules:  # ``check`` is a generator: timed while it is run through
            _timed_rule(rule)
        text = path.read_text(encoding="utf-8")
        linter.lint_path(path)
        collection = IdleCollection()
        if args.freeze:
            freeze_long_lived()
        for n in range(3):  # warm-up edits, not counted
            linter.project.set_overlay(path, edited(text, n))
            linter.lint_path(path)
        SPENT.clear()
        profiler = cProfile.Profile() if args.profile else None
        start = time.process_time()
        if profiler is not None:
            profiler.enable()
        for n in range(args.edits):
            linter.project.set_overlay(path, edited(text, n + 3))
            if args.freeze:
                with collector_paused():
                    linter.lint_path(path)
                    collection.linted()
            else:
                linter.lint_path(path)
        if profiler is not None:
            profiler.disable()
        total = (time.process_time() - start) * 1000 / args.edits
    per_edit = {label: seconds * 1000 / args.edits for label, seconds in SPENT.items()}
    rules = sum(ms for label, ms in per_edit.items() if label.startswith("rules: ") and label != "rules: index")
    print(f"{args.path.name}: {total:.1f} ms of CPU per edit ({args.edits} edits)")
    for stage in ("parse", "facts", "runs"):
        print(f"  {stage:24s} {per_edit.get(stage, 0.0):7.1f}")
        for label in sorted((k for k in per_edit if k.startswith(stage + ": ")), key=lambda k: -per_edit[k]):
            print(f"    {label[len(stage) + 2:]:22s} {per_edit[label]:7.1f}")
    print(f"  {'rules':24s} {rules:7.1f}")
    for label in sorted((k for k in per_edit if k.startswith("rules: ")), key=lambda k: -per_edit[k])[:6]:
        print(f"    {label[7:]:22s} {per_edit[label]:7.1f}")
    for label in sorted((k for k in per_edit if k.startswith("also: ")), key=lambda k: -per_edit[k]):
        print(f"  {label[6:]:50s} {per_edit[label]:7.1f}")
    if profiler is not None:  # timers included: the stage figures above are without the profiler
        stats = pstats.Stats(profiler)
        if args.profile_out:
            stats.dump_stats(args.profile_out)
        stats.sort_stats("tottime").print_stats(args.profile)


if __name__ == "__main__":
    main()
