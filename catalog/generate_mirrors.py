#!/usr/bin/env python3
"""Generate memlint's table of mirror uploads from a pinned Unsloth release's model mapper.

    python catalog/generate_mirrors.py             # download unsloth==PIN (pip, no deps), rewrite the table
    python catalog/generate_mirrors.py --check     # exit 1 if the committed table is stale
    python catalog/generate_mirrors.py --wheel W   # read an already downloaded wheel

Unsloth (Apache-2.0) keeps, in ``unsloth/models/mapper.py``, the table it uses to swap a
model id for its own uploads: each row names an ``unsloth/*`` bitsandbytes 4-bit upload, the
``unsloth/*`` 16-bit re-upload, and the original Hub id whose weights both hold. That table
is the kept source for the uploads people fine-tune from (``unsloth/llama-3-8b-bnb-4bit``,
``unsloth/mistral-7b-v0.3``...). A row becomes memlint entries only when its original id is
an entry of memlint's catalogue (``memlint/catalog/models`` or the LitGPT table): a mirror
then has that entry's architecture, and a ``bnb-4bit`` name means 4-bit NF4 weights. FP8
re-uploads (the rows' ``"8"`` part) are left out: their weights are neither the original's
dtype nor NF4. Rows whose original memlint does not hold are listed under ``not_catalogued``.

The mapper is parsed with ``ast.literal_eval`` and never executed; memlint never imports Unsloth.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memlint.catalog.models import find_entry  # noqa: E402

PIN = "2026.10.9"
FILE = "unsloth/models/mapper.py"
TABLE = "__INT_TO_FLOAT_MAPPER"
OUTPUT = ROOT / "memlint" / "catalog" / "unsloth.json"
MIRROR_ORG = "unsloth/"


def fetch_wheel(directory: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(directory),
                    f"unsloth=={PIN}"], check=True)
    return next(p for p in directory.iterdir() if p.name.startswith("unsloth-"))


def read_table(archive: Path) -> dict:
    """The mapper's source table, as data."""
    with zipfile.ZipFile(archive) as z:
        source = z.read(FILE).decode("utf-8")
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == TABLE for t in node.targets):
            return ast.literal_eval(node.value)
    raise SystemExit(f"{FILE} has no {TABLE} table: the pinned release changed its layout")


def catalogued(model_id: str) -> str | None:
    """The catalogue entry whose Hub id (or an org/name alias) is ``model_id``, case aside."""
    entry = find_entry(model_id)
    if entry is None:
        return None
    names = {entry.id.lower(), *(a.lower() for a in entry.aliases if "/" in a)}
    return entry.id if model_id.lower() in names else None


def generate(table: dict) -> dict:
    mirrors: dict[str, dict] = {}
    not_catalogued: list[dict] = []
    for key, values in table.items():
        sixteen = values["16"] if isinstance(values, dict) else values
        names = [key, *sixteen]
        originals = [n for n in names if not n.lower().startswith(MIRROR_ORG)]
        uploads = [n for n in names if n.lower().startswith(MIRROR_ORG)]
        if len(originals) != 1:
            not_catalogued.append({"row": key, "reason": f"{len(originals)} non-unsloth ids in the row"})
            continue
        original = originals[0]
        entry_id = catalogued(original)
        if entry_id is None:
            not_catalogued.append({"row": key, "original": original, "reason": "not in memlint's catalogue"})
            continue
        for upload in uploads:
            if catalogued(upload) or upload in mirrors:
                continue
            mirrors[upload] = {
                "id": upload,
                "original": original,
                "entry": entry_id,
                "four_bit": "bnb-4bit" in upload.lower(),
                "row": key,
            }
    return {
        "x-memlint-generated-from": {
            "package": "unsloth", "version": PIN, "file": FILE, "table": TABLE, "license": "Apache-2.0",
            "by": "catalog/generate_mirrors.py",
        },
        "mirrors": sorted(mirrors.values(), key=lambda m: m["id"].lower()),
        "not_catalogued": not_catalogued,
    }


def dumps(data: dict) -> str:
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed table is stale")
    parser.add_argument("--wheel", type=Path, help="a downloaded unsloth wheel (default: pip download)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        data = generate(read_table(args.wheel or fetch_wheel(Path(tmp))))
    text = dumps(data)
    four = sum(m["four_bit"] for m in data["mirrors"])
    summary = (f"{len(data['mirrors'])} mirror ids ({four} bnb-4bit) of "
               f"{len({m['entry'] for m in data['mirrors']})} catalogue entries; "
               f"{len(data['not_catalogued'])} rows whose original memlint does not hold")
    if args.check:
        stale = not OUTPUT.exists() or OUTPUT.read_text("utf-8") != text
        print(("STALE " if stale else "up to date: ") + summary)
        return 1 if stale else 0
    OUTPUT.write_text(text, "utf-8")
    print(f"wrote {OUTPUT.relative_to(ROOT)}: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
