#!/usr/bin/env python3
"""Store the meta-device counts of the catalogue's models that memlint has no recipe for.

    python catalog/generate_meta_counts.py          # rewrite memlint/estimate/meta_counts.json
    python catalog/generate_meta_counts.py --check  # exit 1 when the stored table is stale

Needs the ``trace`` extra (the pinned torch and transformers): each catalogued ``config.json``
whose ``model_type`` has no memlint recipe is built by transformers on the meta device
(``memlint/estimate/meta_count.py``) and the resulting architecture is stored, keyed by the
config's fingerprint, so that installs without torch answer for it as well.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memlint.catalog.models import catalog_entries  # noqa: E402
from memlint.estimate import meta_count, meta_table  # noqa: E402
from memlint.estimate.architecture import UnsupportedArchitecture, text_config  # noqa: E402
from memlint.estimate.config_json import BUILDERS  # noqa: E402

TABLE = Path(__file__).resolve().parent.parent / "memlint" / "estimate" / meta_table.TABLE


def build_table() -> dict:
    import transformers

    rows: dict[str, dict] = {}
    refused: list[str] = []
    for entry in sorted(catalog_entries(), key=lambda e: e.id):
        _, model_type = text_config(entry.config)
        if not model_type or model_type in BUILDERS:
            continue
        try:
            arch = meta_count.from_meta(entry.config, entry.id)
        except UnsupportedArchitecture as error:
            refused.append(f"{entry.id}: {error}")
            continue
        rows[meta_table.fingerprint(entry.config)] = {"id": entry.id, "architecture": meta_table.to_row(arch)}
    for line in refused:
        print(f"not stored: {line}", file=sys.stderr)
    return {
        "x-memlint-generated-by": "catalog/generate_meta_counts.py",
        "transformers": transformers.__version__,
        "rows": dict(sorted(rows.items(), key=lambda kv: kv[1]["id"])),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when the stored table is stale")
    args = parser.parse_args()
    if not meta_count.available():
        print("needs the trace extra: pip install -e '.[trace]'", file=sys.stderr)
        return 2
    text = json.dumps(build_table(), indent=1, sort_keys=False) + "\n"
    if args.check:
        stale = not TABLE.exists() or TABLE.read_text("utf-8") != text
        print("stale: run python catalog/generate_meta_counts.py" if stale else "up to date")
        return 1 if stale else 0
    TABLE.write_text(text, "utf-8")
    print(f"wrote {TABLE} ({text.count(chr(10))} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
