"""An edited real module's diagnostics, worked out from its previous version, are a fresh lint's.

The language server's path (``Linter.lint_path`` after ``set_overlay``, one ``Linter`` for every
version) against a new ``Linter`` on the same text, after edits spread over the file: the number
nearest each of ``--edits`` evenly spaced lines changed, and every other edit a comment line put
above that line at its indentation (every line below moves down). ``--analysis`` also compares
the Python analysis itself with libcst's for the new text (module, positions, parents in order,
children, scopes, qualified names: the tests' ``assert_same_module`` and ``assert_same_names``;
slow). Prints each difference and exits with status 1 when there is one.

    python bench/edit_equivalence.py path/to/accelerator.py [--edits 12] [--analysis]
"""

from __future__ import annotations

import argparse
import re
import shutil
import sys
import tempfile
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from lsp_latency import write_project  # noqa: E402
from memlint.lint.engine import Linter  # noqa: E402
from memlint.project.settings import discover  # noqa: E402

_NUMBER = re.compile(r"(?<![\w.])\d+(?![\w.])")


def edits_of(text: str, count: int) -> list[str]:
    """The versions: one edit after another, each near one of ``count`` evenly spaced lines."""
    versions = []
    for n in range(count):
        lines = text.splitlines(keepends=True)
        target = (n + 1) * len(lines) // (count + 1)
        for offset in sorted(range(len(lines)), key=lambda i: abs(i - target)):
            match = _NUMBER.search(lines[offset])
            if match:
                lines[offset] = lines[offset][:match.start()] + str(int(match.group()) + 1) + lines[offset][match.end():]
                if n % 2:
                    indent = lines[offset][:len(lines[offset]) - len(lines[offset].lstrip(" "))]
                    lines.insert(offset, f"{indent}# note {n}\n")
                break
        text = "".join(lines)
        versions.append(text)
    return versions


def key(diagnostic) -> tuple:
    return (diagnostic.code, diagnostic.range.start.line, diagnostic.range.start.column, diagnostic.range.end.line,
            diagnostic.range.end.column, diagnostic.message, str(diagnostic.severity))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", type=Path, nargs="+")
    parser.add_argument("--edits", type=int, default=12)
    parser.add_argument("--analysis", action="store_true")
    args = parser.parse_args()
    if args.analysis:
        sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "python")]
        from test_python_analysis import assert_same_module, assert_same_names
    differ = False
    for source in args.paths:
        with tempfile.TemporaryDirectory(prefix="memlint-equivalence-") as tmp:
            folder = Path(tmp)
            write_project(folder, 200)
            path = folder / source.name
            shutil.copy(source, path)
            settings = discover(folder)
            linter = Linter(settings)
            linter.lint_path(path)
            compared, differing = 0, 0
            for number, text in enumerate(edits_of(path.read_text(encoding="utf-8"), args.edits)):
                linter.project.set_overlay(path, text)
                incremental = sorted(map(key, linter.lint_path(path)))
                fresh = Linter(settings)
                fresh.project.set_overlay(path, text)
                expected = sorted(map(key, fresh.lint_path(path)))
                compared += len(expected)
                if args.analysis:
                    python = linter.project.parsed(path).python
                    try:
                        assert_same_module(python, text)
                        assert_same_names(python)
                    except AssertionError as error:  # the failed check's line
                        differ, differing = True, differing + 1
                        print(f"{source.name}, edit {number}: the analysis differs: "
                              f"{traceback.extract_tb(error.__traceback__)[-1].line} {error}")
                if incremental != expected:
                    differ, differing = True, differing + 1
                    print(f"{source.name}, edit {number}: differs")
                    for item in sorted(set(incremental) ^ set(expected)):
                        print("   ", "incremental" if item in incremental else "fresh", item)
            print(f"{source.name}: {args.edits} edits, {compared} diagnostics compared"
                  f"{f', {differing} differences (above)' if differing else ', the same'}")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
