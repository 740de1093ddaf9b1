"""The GPU catalogue: capacity in bytes as ``torch.cuda.mem_get_info()`` reports it.

Lookup is forgiving: ``a100``, ``A100-80GB`` and ``NVIDIA A100-SXM4-80GB`` (what nvidia-smi
prints) all find the same entry.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources

from memlint.catalog.names import normalize, suggestions


class UnknownGpu(LookupError):
    pass


@dataclass(frozen=True)
class Gpu:
    id: str
    name: str
    vendor: str
    total_bytes: int
    label: str
    bf16: bool
    fp8: bool
    unified_memory: bool
    compute_capability: str | None
    source: str


@functools.lru_cache(maxsize=1)
def _catalogue() -> tuple[dict[str, Gpu], dict[str, str]]:
    raw = json.loads(resources.files("memlint.catalog").joinpath("gpus.json").read_text("utf-8"))
    gpus: dict[str, Gpu] = {}
    index: dict[str, str] = {}
    for entry in raw["gpus"]:
        gpu = Gpu(
            id=entry["id"],
            name=entry["name"],
            vendor=entry["vendor"],
            total_bytes=int(entry["total_memory_bytes"]),
            label=entry.get("label", ""),
            bf16=bool(entry.get("bf16")),
            fp8=bool(entry.get("fp8")),
            unified_memory=bool(entry.get("unified_memory")),
            compute_capability=entry.get("compute_capability"),
            source=entry.get("total_memory_source", {}).get("url", ""),
        )
        gpus[gpu.id] = gpu
        for name in [gpu.id, gpu.name, *entry.get("aliases", [])]:
            index.setdefault(normalize(name), gpu.id)
    return gpus, index


def all_gpus() -> list[Gpu]:
    return list(_catalogue()[0].values())


def lookup_gpu(name: str) -> Gpu:
    """Find a GPU by id, name or alias; raise :class:`UnknownGpu` with suggestions."""
    gpus, index = _catalogue()
    key = normalize(name)
    if key in index:
        return gpus[index[key]]
    # "NVIDIA GeForce RTX 4090" → try without the vendor words people add or drop
    for prefix in ("nvidia", "geforce", "tesla", "amd", "instinct"):
        if key.startswith(prefix) and key[len(prefix):] in index:
            return gpus[index[key[len(prefix):]]]
    names = [g.id for g in gpus.values()] + [g.name for g in gpus.values()]
    hint = suggestions(name, names)
    more = f"; did you mean {', '.join(hint)}?" if hint else ""
    raise UnknownGpu(f"unknown GPU {name!r}{more} (`memlint gpus` lists the catalogue)")
