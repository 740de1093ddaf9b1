#!/usr/bin/env python
"""Reach through the Hub: each Hub id of a list answered from a ``config.json`` downloaded over
the Hub's file API, with memlint's bundled catalogue out of the way.

    .venv/bin/python bench/online_reach.py [../shared/realworld/models.tsv] [--verbose]

What it measures is memlint's online path (``memlint.catalog.models.resolve`` -> ``hub.py`` ->
``huggingface_hub.hf_hub_download`` -> ``config_json.from_config``), end to end over HTTP, for the
ids a user would name. It cannot reach huggingface.co from here, so a local server that speaks the
Hub's file API (``tests/fake_hub.py``, the one the tests use) stands in for it, at ``HF_ENDPOINT``,
with an empty Hugging Face cache.

Which files the fake Hub serves, plainly: for each id, the published ``config.json`` that memlint
holds for it, that is the ``config`` of the bundled catalogue entry the id answers to offline (its
own entry, or for an instruct/base/mirror/``bnb-4bit`` variant the entry of the model it is a
variant of: the same architecture, and in the real Hub's file a few token ids differ). Ids for which
memlint holds no published ``config.json`` are not served (the server answers 404 as the Hub
answers for an unknown repository) and count as not answered. So the figure measures the online
path on files we hold; it is not a measurement of huggingface.co.

While the ids are resolved, the catalogue lookups (the hand-sourced and LitGPT entries, Unsloth's
mirror table, the variant rules) are replaced by functions that find nothing, so every answer
comes from the downloaded file. Each answer's parameter count is compared with the list's
approximate public count (within 3 %), as ``shared/realworld/reach.py models`` does offline.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from fake_hub import Answers, FakeHubServer  # noqa: E402

from memlint.catalog import mirrors  # noqa: E402
from memlint.catalog import models as catalog  # noqa: E402
from memlint.catalog.config_file import UnknownModel  # noqa: E402
from memlint.estimate.architecture import UnsupportedArchitecture  # noqa: E402

DEFAULT_LIST = ROOT.parent / "shared" / "realworld" / "models.tsv"


def read_list(path: Path) -> list[tuple[str, float]]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            model, public = line.split("\t")[:2]
            rows.append((model.strip(), float(public)))
    return rows


def held_config(model_id: str) -> tuple[dict[str, Any], str] | None:
    """The published config.json memlint holds for ``model_id`` and the entry it belongs to."""
    entry = catalog.find_entry(model_id)
    if entry is None:
        mirror = mirrors.find(model_id)
        if mirror is not None:
            entry = catalog.find_entry(mirror.entry)
    if entry is None:
        variant = catalog.find_variant(model_id)
        entry = variant[0] if variant else None
    if entry is None:
        return None
    return dict(entry.config), entry.id


def resolve_online(model_id: str) -> int:
    """``model_id``'s parameter count through the Hub path alone (UnknownModel if not answered)."""
    with mock.patch.object(catalog, "find_entry", lambda name: None), \
            mock.patch.object(catalog, "find_variant", lambda name: None), \
            mock.patch.object(mirrors, "find", lambda name: None):
        resolution = catalog.resolve(model_id, offline=False)
    if "config.json read from the Hugging Face Hub" not in resolution.note:
        raise UnknownModel(f"answered without the Hub: {resolution.note}")
    return int(resolution.arch.n_params)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("list", nargs="?", type=Path, default=DEFAULT_LIST)
    parser.add_argument("--verbose", action="store_true", help="one line per id")
    args = parser.parse_args(argv)
    rows = read_list(args.list)

    files: dict[str, object] = {}
    served_from: dict[str, str] = {}
    for model_id, _ in rows:
        held = held_config(model_id)
        if held is not None:
            config, entry_id = held
            files[model_id] = json.dumps(config).encode()
            served_from[model_id] = entry_id
    answers = Answers(files)

    answered = close = 0
    with tempfile.TemporaryDirectory(prefix="memlint-online-reach-") as cache, FakeHubServer(answers) as endpoint:
        os.environ.pop("HF_HUB_OFFLINE", None)
        os.environ.pop("TRANSFORMERS_OFFLINE", None)
        os.environ["HF_ENDPOINT"] = endpoint
        os.environ["HF_HUB_CACHE"] = cache
        from huggingface_hub import constants

        constants.HF_HUB_OFFLINE = False
        constants.HF_HUB_CACHE = cache
        for model_id, public in rows:
            try:
                count = resolve_online(model_id)
            except (UnknownModel, UnsupportedArchitecture) as error:
                print(f"REFUSED {model_id}: {str(error)[:160]}")
                continue
            answered += 1
            off = count / public - 1
            within = abs(off) <= 0.03
            close += within
            if args.verbose or not within:
                tag = "" if within else "FAR "
                print(f"{tag}{model_id}: {count / 1e9:.3f}B vs about {public / 1e9:.3f}B ({off:+.1%}), "
                      f"served {served_from[model_id]}'s config.json")
        requests = len(answers.asked)
    print(f"served: {len(files)} of {len(rows)} ids have a published config.json that memlint holds "
          f"({len(set(served_from.values()))} distinct files); the fake Hub received {requests} requests")
    print(f"online (fake Hub, catalogue bypassed): {answered}/{len(rows)} answered, "
          f"{close}/{len(rows)} within 3% of the public count")
    return 0


if __name__ == "__main__":
    sys.exit(main())
