"""Check, on real code, that ``memlint check``'s tree answers what the whole-module pass does.

``memlint check`` reads children from the nodes' fields and records positions per statement
when asked (``memlint.python.shape``, ``memlint.python.positions``); the language server's
units, and earlier versions, record every position by regenerating the module's code
(``memlint.python.tree.record``). For every Python file under the given folders this compares
every syntax node's position, the order of ``parents`` and ``nodes_in_order`` for several
node classes, and prints the files that differ (none expected).

    python bench/positions_check.py ~/src/transformers ~/src/trl
"""

from __future__ import annotations

import argparse
import pathlib

import libcst as cst

from memlint.python import source as python_source
from memlint.python.tree import record

KINDS = [(cst.Call,), (cst.Name,), (cst.FunctionDef, cst.ClassDef),
         (cst.Decorator, cst.Call, cst.FunctionDef, cst.ClassDef),
         (cst.Assign, cst.AnnAssign, cst.Attribute, cst.Param)]


def differences(text: str) -> str | None:
    """What differs for one module (None: nothing, or not valid Python)."""
    by_statement = python_source.parse(text, whole=True)
    if not isinstance(by_statement, python_source.PythonSource):
        return None
    recorded = record(by_statement.module)
    whole = python_source.PythonSource(by_statement.module, text)
    if list(by_statement.parents) != list(whole.parents):
        return "parents"
    for node, where in recorded.positions.items():
        if node in recorded.shape and by_statement.positions.get(node) != where:
            return f"position of a {type(node).__name__}: {by_statement.positions.get(node)} != {where}"
    for kinds in KINDS:
        if by_statement.nodes_in_order(*kinds) != whole.nodes_in_order(*kinds):
            return f"order of {[k.__name__ for k in kinds]}"
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+", type=pathlib.Path)
    args = parser.parse_args()
    checked = differ = 0
    for path in sorted(p for folder in args.folders for p in folder.rglob("*.py")):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        checked += 1
        found = differences(text)
        if found is not None:
            differ += 1
            print(f"{path}: {found}")
    print(f"{checked} Python files, {differ} differ")


if __name__ == "__main__":
    main()
