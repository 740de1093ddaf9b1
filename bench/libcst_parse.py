"""What libcst's per-node checks cost ``memlint check``'s parse, on the modules a real tree keeps.

``memlint check`` parses with libcst only the Python modules CPython accepted and the prefilter
kept (``memlint.python.source.parse`` with ``whole=True``), and since the sixth pass without
libcst's per-node validation (``memlint.python.unvalidated``). This script takes those modules
of a tree (by default ``bench/real_speed.py``'s) and times, in one process with the collector
off as in ``check``, ``libcst.parse_module`` (every node checked), the unchecked parse with
libcst's own dataclass constructors (the sixth pass) and the unchecked parse as ``check`` runs it
(each node class's constructor replaced for the parse), alternately, ``--repeat`` times each; it
prints each round's CPU seconds and the best of each.

    python bench/libcst_parse.py /tmp/memlint-real-bench/tree
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path

import libcst as cst

from memlint.lint.needs import Prefilter
from memlint.project.settings import discover
from memlint.project.walk import iter_files
from memlint.python import source as python_source
from memlint.python.unvalidated import parse_module, parse_without_checks


def kept_modules(tree: Path) -> list[str]:
    """The texts of the tree's Python modules that ``check`` parses with libcst."""
    settings = discover(tree)
    wanted = Prefilter(settings)
    texts = []
    for path in iter_files([tree], settings):
        if path.suffix != ".py":
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if isinstance(python_source.parse(text, whole=True, wanted=wanted), python_source.PythonSource):
            texts.append(text)
    return texts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tree", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    texts = kept_modules(args.tree)
    lines = sum(text.count("\n") for text in texts)
    print(f"{len(texts)} modules kept ({lines:,} lines); load {os.getloadavg()[0]:.1f}")
    best: dict[str, float] = {}
    gc.disable()
    for round_ in range(1, args.repeat + 1):
        for name, parse in (("checked (libcst.parse_module)", cst.parse_module),
                            ("unchecked, dataclass constructors", lambda text: parse_without_checks(text, False)),
                            ("unchecked, fast constructors (check's)", parse_module)):
            started = time.process_time()
            for text in texts:
                parse(text)
            seconds = time.process_time() - started
            best[name] = min(seconds, best.get(name, seconds))
            print(f"  round {round_}: {name}: {seconds:.2f} s of CPU (load {os.getloadavg()[0]:.1f})", flush=True)
    checked, before, unchecked = best.values()
    print(f"best: checked {checked:.2f} s; unchecked with dataclass constructors {before:.2f} s "
          f"({1 - before / checked:.0%} less); as check parses {unchecked:.2f} s ({1 - unchecked / checked:.0%} "
          f"less, {1 - unchecked / before:.0%} less than the dataclass constructors)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
