"""Generate ``schemas/history/deepspeed-removed.json``: the DeepSpeed release that removed each key.

DeepSpeed refuses the keys of removed features at start-up (``_REMOVED_TOP_LEVEL_CONFIG_KEYS`` and
``_REMOVED_ZERO_CONFIG_KEYS`` in ``deepspeed/runtime/config.py``: MiCS, Nebula, the Apex ``amp``
block, ...), each with its own message; the schema carries those messages. A project that pins an
older DeepSpeed (VILA's ``train`` extra: ``deepspeed==0.9.5``) runs a release that still reads
them, so "removed" is a fact about a release, not about DeepSpeed. This script reads every
release's source distribution from PyPI (DeepSpeed publishes no wheels) into a cache folder
outside the repository, reads that file of each with ``ast`` (nothing is imported or built), and
writes, per key, the first release whose tables list it, with each release's sha256.

    python schemas/deepspeed_removals.py                      # 0.17.0 up to the schema's release
    python schemas/deepspeed_removals.py --cache /tmp/ds-sdists

The tables first appear in 0.19.7 (six keys) and grow in 0.19.8; the releases before read the
keys (or ignore them) without refusing the config.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import html.parser
import json
import tarfile
import urllib.request
from pathlib import Path

from packaging.version import InvalidVersion, Version

HERE = Path(__file__).resolve().parent
OUT = HERE / "history" / "deepspeed-removed.json"
SIMPLE = "https://pypi.org/simple/deepspeed/"
TABLES = {"_REMOVED_TOP_LEVEL_CONFIG_KEYS": "", "_REMOVED_ZERO_CONFIG_KEYS": "zero_optimization"}


class _Links(html.parser.HTMLParser):
    """The ``href`` of every link of a PEP 503 project page."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.links += [value for name, value in attrs if name == "href" and value]


def sdists(page: str) -> dict[Version, str]:
    """Release -> the address of its ``.tar.gz`` on a project page (pre-releases left out)."""
    parser = _Links()
    parser.feed(page)
    out: dict[Version, str] = {}
    for link in parser.links:
        name = link.split("#")[0].rsplit("/", 1)[-1]
        if not (name.startswith("deepspeed-") and name.endswith(".tar.gz")):
            continue
        try:
            version = Version(name[len("deepspeed-"):-len(".tar.gz")])
        except InvalidVersion:
            continue
        if not version.is_prerelease:
            out[version] = link.split("#")[0]
    return out


def removed_keys(config_source: str) -> dict[str, set[str]]:
    """Section ('' for the top level) -> the keys the release's removal tables list."""
    out: dict[str, set[str]] = {section: set() for section in TABLES.values()}
    for node in ast.parse(config_source).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id in TABLES:
                    out[TABLES[target.id]] |= {k.value for k in node.value.keys
                                               if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    return out


def _download(url: str, version: Version, cache: Path) -> Path:
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / f"deepspeed-{version}.tar.gz"
    if not path.exists():
        with urllib.request.urlopen(url, timeout=120) as response:  # noqa: S310 (a PyPI address)
            data = response.read()
        path.with_suffix(".part").write_bytes(data)
        path.with_suffix(".part").replace(path)
    return path


def _config_source(sdist: Path, version: Version) -> str:
    with tarfile.open(sdist) as archive:
        member = archive.extractfile(f"deepspeed-{version}/deepspeed/runtime/config.py")
        return member.read().decode() if member is not None else ""


def build(first: Version, last: Version, cache: Path, page: str) -> dict:
    releases = sorted(v for v in sdists(page) if first <= v <= last)
    removed: dict[str, dict[str, str]] = {section: {} for section in TABLES.values()}
    read = []
    for version in releases:
        sdist = _download(sdists(page)[version], version, cache)
        for section, keys in removed_keys(_config_source(sdist, version)).items():
            for key in sorted(keys):
                removed[section].setdefault(key, str(version))
        read.append({"version": str(version),
                     "read from": f"{sdist.name} sha256:{hashlib.sha256(sdist.read_bytes()).hexdigest()}"})
    return {
        "removed": {section: dict(sorted(keys.items())) for section, keys in removed.items()},
        "releases": [str(v) for v in sorted(sdists(page))],  # every release on PyPI, to judge range pins
        "x-memlint-generated-from": {
            "by": "schemas/deepspeed_removals.py",
            "from": "deepspeed/runtime/config.py of each release's PyPI source distribution, read with ast",
            "package": "deepspeed",
            "releases": read,
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--first", default="0.17.0", help="the oldest release read (default 0.17.0)")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "memlint-history" / "deepspeed")
    args = parser.parse_args(argv)
    schema = json.loads((HERE / "deepspeed.schema.json").read_text())
    last = Version(schema["x-memlint-generated-from"]["version"])
    with urllib.request.urlopen(SIMPLE, timeout=120) as response:  # noqa: S310 (a PyPI address)
        page = response.read().decode()
    data = build(Version(args.first), last, args.cache, page)
    OUT.write_text(json.dumps(data, indent=2) + "\n")
    print(f"wrote {OUT.relative_to(HERE.parent)}: "
          + ", ".join(f"{k} {v}" for section in data["removed"].values() for k, v in section.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
