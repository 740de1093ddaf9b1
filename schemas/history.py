"""Generate ``schemas/history/<tool>.json``: which releases of a tool read each config key.

The schemas describe one release of each tool (the version stamped in each file). Projects pin
others: a repository that pins ``transformers==4.34`` may set ``evaluation_strategy`` or
``optim: adamw_hf``, which that release reads and the schema's release does not. This script
reads the first release of every minor version: from its tag in a clone of the tool's
repository when one is given (``--git``), else from its PyPI wheel (``pip download --no-deps``,
kept in a cache folder outside the repository), reads each one's config class with
``ast`` (``schemas/_generators/release_history.py``; nothing is imported or installed) and
writes, per key, the spans of releases that read it and that mark it deprecated, per value
of an enum-typed key the spans that accept it, and for a key whose annotation changed the spans
that declare each one. Each release is recorded with its wheel's
sha256 or its tag's commit, so the file says exactly what it was made from.

    python schemas/history.py                     # every tool, wheels cached in ~/.cache/memlint-history
    python schemas/history.py axolotl --git axolotl=/path/to/axolotl/.git --cache /tmp/wheels

The newest release read is the one the tool's schema was generated from, so the history and
the schema end at the same release. Releases are sampled per minor version (x.y.0, or the first
patch when there is no .0): "removed in 4.46" means 4.45's first release read the key and
4.46's did not.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _generators.release_history import GitFiles, Release, Source, WheelFiles, read_release  # noqa: E402

HERE = Path(__file__).resolve().parent
OUT = HERE / "history"

# tool -> (first release sampled, the schema files whose stamp ends the history, sources)
TOOLS: dict[str, tuple[str, tuple[str, ...], tuple[Source, ...]]] = {
    "transformers": (
        "4.20.0",
        ("hf-training-arguments",),
        (Source("hf-training-arguments", "TrainingArguments", (r"^transformers/training_args\.py$",)),),
    ),
    "trl": (
        "0.9.0",  # SFTConfig and DPOConfig arrive in 0.9
        ("trl-sft-config",),
        (Source("trl-sft-config", "SFTConfig", (r"^trl/trainer/sft_config\.py$",)),
         Source("trl-dpo-config", "DPOConfig", (r"^trl/trainer/dpo_config\.py$",)),
         Source("trl-grpo-config", "GRPOConfig", (r"^trl/trainer/grpo_config\.py$",))),  # from 0.14
    ),
    "accelerate": (
        "0.12.0",  # projects of 2023 pin 0.18-0.20 (alpaca_farm: accelerate>=0.18.0,<=0.20.0)
        ("accelerate",),
        # the top-level keys of `accelerate config`'s file (ClusterConfig and its BaseConfig, and
        # the old keys its loader converts), and the keys of its fsdp_config section, which
        # `accelerate launch` copies onto its --fsdp_* options
        (Source("accelerate", "ClusterConfig", (r"^accelerate/commands/config/config_args\.py$",),
                legacy="config_dict"),
         Source("accelerate-fsdp", "", (r"^accelerate/commands/launch\.py$",), options=r"fsdp_\w+")),
    ),
    "axolotl": (
        "0.5.0",
        ("axolotl",),
        # the bundled plugins' keys are left out: they take effect only with their plugin listed,
        # and the schema knows only the plugins its generator could import
        (Source("axolotl", "AxolotlInputConfig", (r"^axolotl/utils/(config|schemas)/.*\.py$",)),),
    ),
}


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def _tags(git_dir: Path | None) -> dict[str, str]:
    """Release version -> tag in a clone of the tool's repository (``v0.12.0`` -> 0.12.0)."""
    if git_dir is None:
        return {}
    listed = subprocess.run(["git", "--git-dir", str(git_dir), "tag"], capture_output=True, text=True).stdout
    return {t.lstrip("v"): t for t in listed.split() if re.fullmatch(r"v?\d+\.\d+\.\d+", t)}


def _releases(package: str, first: str, last: str, tags: dict[str, str]) -> list[str]:
    """The first release of every minor version from ``first`` to ``last``, as PyPI (and the
    repository's release tags) list them."""
    listed = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "--ignore-requires-python", package],
                            capture_output=True, text=True, check=True).stdout
    versions = [v.strip() for v in listed.split("Available versions:")[1].splitlines()[0].split(",")]
    versions += list(tags)
    finals = [v for v in versions if re.fullmatch(r"\d+\.\d+\.\d+", v)]
    chosen: dict[tuple[int, ...], str] = {}
    for version in finals:
        key = _version(version)
        if _version(first) <= key <= _version(last):
            minor = key[:2]
            if minor not in chosen or key < _version(chosen[minor]):
                chosen[minor] = version
    chosen[_version(last)[:2]] = last  # the schema's own release ends the history
    return [chosen[k] for k in sorted(chosen)]


def _wheel(package: str, version: str, cache: Path) -> Path:
    folder = cache / package
    found = sorted(folder.glob(f"{package}-{version}-*.whl"))
    if not found:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "-q",
                        "--ignore-requires-python",  # only the files are read: any Python will do
                        f"{package}=={version}", "-d", str(folder)], check=True)
        found = sorted(folder.glob(f"{package}-{version}-*.whl"))
    return found[0]


def _spans(releases: list[str], present: list[bool]) -> list[list[str]]:
    """Runs of consecutive releases where ``present`` holds, as [first, last] pairs."""
    spans: list[list[str]] = []
    for release, here in zip(releases, present):
        if here and spans and spans[-1][1] == releases[releases.index(release) - 1]:
            spans[-1][1] = release
        elif here:
            spans.append([release, release])
    return spans


def _files(tool: str, version: str, cache: Path, git_dir: Path | None, tags: dict[str, str]):
    """A release's files and their provenance: the release tag's tree when a clone has it, else
    the wheel from PyPI."""
    if version in tags:
        commit = subprocess.run(["git", "--git-dir", str(git_dir), "rev-parse", f"{tags[version]}^{{commit}}"],
                                capture_output=True, text=True, check=True).stdout.strip()
        return GitFiles(git_dir, tags[version]), f"git tag {tags[version]} ({commit})"
    wheel = _wheel(tool, version, cache)
    return WheelFiles(wheel), f"{wheel.name} sha256:{hashlib.sha256(wheel.read_bytes()).hexdigest()}"


def build(tool: str, cache: Path, git_dir: Path | None = None) -> dict:
    first, stamped_by, sources = TOOLS[tool]
    stamp = json.loads((HERE / f"{stamped_by[0]}.schema.json").read_text())["x-memlint-generated-from"]
    last = stamp["version"] if stamp["package"] == tool else next(
        a["version"] for a in stamp.get("also", []) if a["package"] == tool)
    tags = _tags(git_dir)
    releases = _releases(tool, first, last, tags)
    opened = {version: _files(tool, version, cache, git_dir, tags) for version in releases}
    schemas = {}
    for source in sources:
        read: dict[str, Release] = {version: read_release(files, source) for version, (files, _) in opened.items()}
        keys = sorted(set().union(*(r.keys for r in read.values())))
        history = {}
        for key in keys:
            entry = {"read": _spans(releases, [key in read[v].keys for v in releases])}
            deprecated = _spans(releases, [key in read[v].deprecated for v in releases])
            if deprecated:
                entry["deprecated"] = deprecated
            annotations = sorted({read[v].types[key] for v in releases if key in read[v].types})
            if len(annotations) > 1:  # a type that changed: the releases that declare each
                entry["types"] = {a: _spans(releases, [read[v].types.get(key) == a for v in releases])
                                  for a in annotations}
            values = sorted(set().union(*(read[v].values.get(key, set()) for v in releases)))
            if values:
                entry["values"] = {value: _spans(releases, [value in read[v].values.get(key, ()) for v in releases])
                                   for value in values}
            history[key] = entry
        schemas[source.schema] = {"class": source.cls, "keys": history}
    return {
        "x-memlint-generated-from": {
            "package": tool,
            "by": "schemas/history.py",
            "from": "each release's files, read with ast: its PyPI wheel (pip download --no-deps) or its git tag",
            "releases": [{"version": v, "read from": opened[v][1]} for v in releases],  # oldest first
        },
        "schemas": schemas,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tools", nargs="*", default=sorted(TOOLS), choices=sorted(TOOLS))
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "memlint-history")
    parser.add_argument("--git", action="append", default=[], metavar="TOOL=GIT_DIR",
                        help="a clone of the tool's repository: releases it tags are read from their tags")
    args = parser.parse_args(argv)
    clones = {name: Path(path) for name, _, path in (item.partition("=") for item in args.git)}
    OUT.mkdir(exist_ok=True)
    for tool in args.tools:
        data = build(tool, args.cache, clones.get(tool))
        target = OUT / f"{tool}.json"
        target.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        releases = [r["version"] for r in data["x-memlint-generated-from"]["releases"]]
        print(f"{target.relative_to(HERE.parent)}: {len(releases)} releases ({releases[0]} .. {releases[-1]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
