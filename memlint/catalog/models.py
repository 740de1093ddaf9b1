"""Finding a model's architecture offline: the bundled catalogue, a local path, or the HF cache.

memlint never downloads anything. A Hub id resolves, in order, to a bundled entry (by id or
alias), then to a snapshot in the local Hugging Face cache. A path to a ``config.json`` or to
a directory holding one is read directly.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from memlint.catalog.names import normalize, suggestions
from memlint.estimate.architecture import Architecture, UnsupportedArchitecture, from_config

MAX_CONFIG_BYTES = 4 * 1024 * 1024  # a config.json is kilobytes; refuse anything absurd


class UnknownModel(LookupError):
    pass


@dataclass(frozen=True)
class CatalogEntry:
    id: str
    aliases: tuple[str, ...]
    config: dict[str, Any]
    published_parameters: int | None
    source: str


@functools.lru_cache(maxsize=1)
def _catalogue() -> tuple[dict[str, CatalogEntry], dict[str, str]]:
    entries: dict[str, CatalogEntry] = {}
    index: dict[str, str] = {}
    folder = resources.files("memlint.catalog").joinpath("models")
    for item in sorted(folder.iterdir(), key=lambda p: p.name):
        if not item.name.endswith(".json"):
            continue
        raw = json.loads(item.read_text("utf-8"))
        published = raw.get("published_parameters", {}).get("count")
        entry = CatalogEntry(
            id=raw["id"],
            aliases=tuple(raw.get("aliases", [])),
            config=raw["config"],
            published_parameters=int(published) if published else None,
            source=raw.get("sources", {}).get("config", ""),
        )
        entries[entry.id] = entry
        for name in (entry.id, entry.id.split("/")[-1], *entry.aliases):
            index.setdefault(normalize(name), entry.id)
    return entries, index


def catalog_entries() -> list[CatalogEntry]:
    return list(_catalogue()[0].values())


def find_entry(model_id: str) -> CatalogEntry | None:
    entries, index = _catalogue()
    key = index.get(normalize(model_id))
    return entries[key] if key else None


def _hf_cache_roots() -> list[Path]:
    roots = []
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            roots.append(Path(os.environ[var]))
    hf_home = os.environ.get("HF_HOME")
    roots.append(Path(hf_home) / "hub" if hf_home else Path.home() / ".cache" / "huggingface" / "hub")
    return roots


def cached_config(model_id: str) -> Path | None:
    """``config.json`` of ``org/name`` in the local Hugging Face cache, if it was downloaded."""
    if "/" not in model_id:
        return None
    folder_name = "models--" + model_id.replace("/", "--")
    for root in _hf_cache_roots():
        repo = root / folder_name
        if not repo.is_dir():
            continue
        ref = repo / "refs" / "main"
        snapshots = repo / "snapshots"
        candidates = []
        if ref.is_file():
            candidates.append(snapshots / ref.read_text("utf-8").strip() / "config.json")
        if snapshots.is_dir():
            candidates += sorted(snapshots.glob("*/config.json"), key=lambda p: p.stat().st_mtime, reverse=True)
        for path in candidates:
            if path.is_file():
                return path
    return None


def read_config(path: Path) -> dict[str, Any]:
    """Read a ``config.json`` file, or the one inside a directory."""
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise UnknownModel(f"{path}: no config.json here")
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise UnknownModel(f"{path}: too large to be a model config ({path.stat().st_size} bytes)")
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UnknownModel(f"{path}: not a readable config.json ({error})") from None
    if not isinstance(data, dict):
        raise UnknownModel(f"{path}: config.json must hold a JSON object")
    return data


def resolve_model(name: str, base_dir: Path | None = None) -> Architecture:
    """An :class:`Architecture` for a Hub id, alias, ``config.json`` path or model directory.

    Relative paths are taken from ``base_dir`` (the file that named the model). Raises
    :class:`UnknownModel` (with suggestions) or :class:`UnsupportedArchitecture`.
    """
    name = name.strip()
    if not name:
        raise UnknownModel("no model given")
    entry = find_entry(name)
    if entry is not None:
        return from_config(entry.config, entry.id)
    candidate = Path(name).expanduser()
    if base_dir is not None and not candidate.is_absolute():
        candidate = base_dir / candidate
    looks_like_path = name.endswith(".json") or name.startswith((".", "/", "~"))
    try:
        exists = candidate.exists()
    except OSError:
        exists = False
    if exists:
        return from_config(read_config(candidate), name)
    cached = cached_config(name)
    if cached is not None:
        return from_config(read_config(cached), name)
    if looks_like_path:
        raise UnknownModel(f"{name}: no such file or directory")
    ids = [e.id for e in catalog_entries()] + [a for e in catalog_entries() for a in e.aliases]
    hint = suggestions(name, ids)
    more = f" Did you mean {', '.join(hint)}?" if hint else ""
    raise UnknownModel(
        f"unknown model {name!r}: not in memlint's catalogue nor in the local Hugging Face cache."
        f"{more} Pass a config.json path, or set `model-config` in [tool.memlint]."
    )


__all__ = [
    "CatalogEntry",
    "UnknownModel",
    "UnsupportedArchitecture",
    "catalog_entries",
    "find_entry",
    "resolve_model",
    "read_config",
]
