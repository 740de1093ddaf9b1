#!/usr/bin/env python3
"""Generate memlint's JSON Schemas from the installed tools' own sources of truth.

    python schemas/generate.py                 # regenerate every schema whose tool is installed
    python schemas/generate.py deepspeed trl   # regenerate some
    python schemas/generate.py --check         # exit 1 if a committed schema is stale
    python schemas/generate.py --upgrade trl   # regenerate from a newer installed version

A tool that is not installed is skipped with a message, and so is one whose installed version
differs from the version stamped in the committed file (``x-memlint-generated-from``), unless
``--upgrade`` is given: the committed files name their pins, and one environment may hold
the pins of some tools only (LLaMA-Factory needs an older Transformers). schemas/README.md
says how to build those environments; memlint itself never imports the tools.
"""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import json
import os
import sys
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from _generators import TARGETS  # noqa: E402
from _generators.common import Target, dumps, version_of  # noqa: E402


def missing_modules(target: Target) -> list[str]:
    """Import names of ``target`` that cannot be found (without importing anything)."""
    return [name for name in target.modules if importlib.util.find_spec(name) is None]


def version_mismatches(target: Target, directory: Path = HERE) -> list[str]:
    """``"pkg: installed X, <file> from Y"`` for each package whose installed version is not the
    one stamped in the committed file (a file that does not exist yet has no pins)."""
    out = []
    for name in target.outputs:
        path = directory / name
        if not path.exists():
            continue
        try:
            stamp = json.loads(path.read_text(encoding="utf-8"))["x-memlint-generated-from"]
        except (ValueError, KeyError):
            continue
        for entry in [stamp, *stamp.get("also", [])]:
            installed = version_of(entry["package"])
            if installed != entry["version"]:
                out.append(f"{entry['package']}: installed {installed}, {name} from {entry['version']}")
    return sorted(set(out))


def quiet_environment() -> None:
    """Tools that probe for accelerators or check their neighbours' versions on import stay
    CPU-only and quiet, so the output does not depend on the machine."""
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    os.environ.setdefault("DISABLE_VERSION_CHECK", "1")


def render(target: Target) -> dict[str, str]:
    """``{file name: file text}`` as the installed package generates them."""
    quiet_environment()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        schemas = target.build()
    return {name: dumps(schema) for name, schema in sorted(schemas.items())}


def select(names: list[str]) -> list[Target]:
    if not names:
        return list(TARGETS)
    by_name = {}
    for target in TARGETS:
        for key in (target.name, *target.aliases, *(o.removesuffix(".schema.json") for o in target.outputs)):
            by_name[key] = target
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise SystemExit(f"unknown target(s) {unknown}; choose from {sorted(t.name for t in TARGETS)}")
    chosen: list[Target] = []
    for name in names:
        if by_name[name] not in chosen:
            chosen.append(by_name[name])
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("targets", nargs="*", help="tools to generate (default: all)")
    parser.add_argument("--check", action="store_true", help="compare with the committed files, write nothing")
    parser.add_argument("--out", type=Path, default=HERE, help="directory to write to (default: schemas/)")
    parser.add_argument("--upgrade", action="store_true", help="regenerate even if the installed versions differ")
    args = parser.parse_args(argv)
    quiet_environment()

    stale = 0
    for target in select(args.targets):
        missing = missing_modules(target)
        if missing:
            print(f"skip {target.name}: not installed ({', '.join(missing)})")
            continue
        mismatches = version_mismatches(target, args.out)
        if mismatches and not args.upgrade:
            print(f"skip {target.name}: other versions ({'; '.join(mismatches)}); --upgrade to regenerate")
            continue
        for name, text in render(target).items():
            path = args.out / name
            old = path.read_text(encoding="utf-8") if path.exists() else None
            if args.check:
                if old == text:
                    print(f"ok   {name}")
                else:
                    stale += 1
                    print(f"STALE {name}: differs from what {target.package} generates")
                    diff = difflib.unified_diff(
                        (old or "").splitlines(), text.splitlines(), "committed", "generated", lineterm="", n=1
                    )
                    for line in list(diff)[:40]:
                        print("    " + line)
            elif old != text:
                path.write_text(text, encoding="utf-8")
                print(f"wrote {path}")
            else:
                print(f"same {path}")
    if stale:
        print(f"{stale} schema(s) stale: run `python schemas/generate.py` with the pinned versions (schemas/README.md)")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
