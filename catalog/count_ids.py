#!/usr/bin/env python3
"""How many distinct Hugging Face Hub ids memlint's catalogue answers for, by source.

    python catalog/count_ids.py           # a table: hand-sourced, LitGPT-generated, listed mirrors, total
    python catalog/count_ids.py --json    # the same figures as JSON

An id counts once, under the first source that holds it (hand-sourced entries and their
``org/name`` aliases first, then the LitGPT table, then the mirror uploads Unsloth's table lists).
Names the variant rules or the Hub would answer are not counted: only ids a source lists.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memlint.catalog import mirrors  # noqa: E402
from memlint.catalog.models import catalog_entries  # noqa: E402


def counts() -> dict[str, int]:
    seen: set[str] = set()
    out: dict[str, int] = {}

    def add(source: str, ids: list[str]) -> None:
        fresh = {i.lower() for i in ids} - seen
        seen.update(fresh)
        out[source] = len(fresh)

    entries = catalog_entries()
    add("hand-sourced (memlint/catalog/models)",
        [n for e in entries if e.origin == "memlint/catalog/models" for n in (e.id, *e.aliases) if "/" in n])
    add("LitGPT table (memlint/catalog/litgpt.json)", [e.id for e in entries if e.origin != "memlint/catalog/models"])
    add("Unsloth's mirror table (memlint/catalog/unsloth.json)", [m.id for m in mirrors.mirrors()])
    out["total"] = len(seen)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    figures = counts()
    if args.json:
        print(json.dumps(figures, indent=1))
    else:
        for source, n in figures.items():
            print(f"{n:5d}  {source}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
