"""Finding a model's architecture: the bundled catalogues, a local path, the HF cache, the Hub.

A name resolves, in order, to a bundled entry (by id, alias or LitGPT name: the hand-sourced
``models/`` first, then the generated ``litgpt.json``), the entry of a mirror upload that a kept
table lists (``mirrors.py``), a ``config.json`` at a local path, a snapshot in the local Hugging
Face cache, a catalogued entry by the variant rules (``variants.py``), the Hub's ``config.json`` when online (``hub.py``), and last, for a local
path that does not exist here, the catalogued model its folder is named after. Every step
past an exact match says what it assumed.
"""

from __future__ import annotations

import difflib

import functools
import json
import os
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from memlint.catalog import mirrors, variants
from memlint.catalog.config_file import UnknownModel, read_config
from memlint.catalog.names import normalize, suggestions
from memlint.estimate.architecture import Architecture, UnsupportedArchitecture
from memlint.estimate.config_json import from_config


@dataclass(frozen=True)
class CatalogEntry:
    id: str
    aliases: tuple[str, ...]
    config: dict[str, Any]
    published_parameters: int | None
    source: str
    origin: str = "memlint/catalog/models"  # or "LitGPT 0.5.13 (name)" for a generated entry


@dataclass(frozen=True)
class Resolution:
    """A model's architecture, and what was assumed to find it (None: the name was exact)."""

    arch: Architecture
    note: str | None = None
    # a pre-quantized upload's weight format, as ``Lora.quantization`` names it ("nf4" for
    # ``*-bnb-4bit``, "int4" for ``*-GPTQ``/``*-AWQ``, "nvfp4", "aqlm-2bit-1x16"); None: plain weights
    quantization: str | None = None

    @property
    def four_bit(self) -> bool:
        """A bitsandbytes 4-bit (NF4) upload."""
        return self.quantization == "nf4"


def _litgpt_entries() -> list[CatalogEntry]:
    raw = json.loads(resources.files("memlint.catalog").joinpath("litgpt.json").read_text("utf-8"))
    stamp = raw["x-memlint-generated-from"]
    return [
        CatalogEntry(
            id=e["id"],
            aliases=(e["litgpt_name"],),
            config=e["config"],
            published_parameters=None,
            source=e["source"],
            origin=f"LitGPT {stamp['version']} ({e['litgpt_name']})",
        )
        for e in raw["entries"]
    ]


@functools.lru_cache(maxsize=1)
def _catalogue() -> tuple[dict[str, CatalogEntry], dict[str, str]]:
    entries: dict[str, CatalogEntry] = {}
    index: dict[str, str] = {}
    folder = resources.files("memlint.catalog").joinpath("models")
    hand = []
    for item in sorted(folder.iterdir(), key=lambda p: p.name):
        if not item.name.endswith(".json"):
            continue
        raw = json.loads(item.read_text("utf-8"))
        published = raw.get("published_parameters", {}).get("count")
        hand.append(CatalogEntry(
            id=raw["id"],
            aliases=tuple(raw.get("aliases", [])),
            config=raw["config"],
            published_parameters=int(published) if published else None,
            source=raw.get("sources", {}).get("config", ""),
        ))
    # hand-sourced entries first: their names win over generated ones
    for entry in hand + _litgpt_entries():
        if entry.id in entries:
            continue
        entries[entry.id] = entry
        for name in (entry.id, entry.id.split("/")[-1], *entry.aliases):
            index.setdefault(normalize(name), entry.id)
    return entries, index


@functools.lru_cache(maxsize=1)
def _variant_index() -> dict[str, list[CatalogEntry]]:
    """Catalogued entries by their variant key (``variants.split``), hand-sourced first."""
    by_key: dict[str, list[CatalogEntry]] = {}
    for entry in _catalogue()[0].values():
        for name in (entry.id, *(a for a in entry.aliases if "/" in a)):
            bucket = by_key.setdefault(variants.split(name).key, [])
            if entry not in bucket:
                bucket.append(entry)
    return by_key


def catalog_entries() -> list[CatalogEntry]:
    return list(_catalogue()[0].values())


def find_entry(model_id: str) -> CatalogEntry | None:
    entries, index = _catalogue()
    key = index.get(normalize(model_id))
    return entries[key] if key else None


def find_variant(name: str) -> tuple[CatalogEntry, variants.Name] | None:
    """The catalogued entry ``name`` is a variant of, by the rules in ``variants.py``."""
    asked = variants.split(name)
    found = [e for e in _variant_index().get(asked.key, []) if variants.org_matches(asked, e.id.split("/")[0])]
    if not found:
        return None
    sizes = {from_config(e.config, e.id).n_params for e in found if _countable(e)}
    if len(sizes) > 1:
        # one key, several architectures: no guess, unless a mirror uploaded it under the original's name
        base = name.strip().strip("/").rpartition("/")[2].lower()
        same = [e for e in found if e.id.rpartition("/")[2].lower() == base]
        if asked.org in variants.MIRROR_ORGS and len(same) == 1:
            return same[0], asked
        return None
    return found[0], asked


def _countable(entry: CatalogEntry) -> bool:
    try:
        from_config(entry.config, entry.id)
    except UnsupportedArchitecture:
        return False
    return True


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


_PLACEHOLDER_WORDS = re.compile(r"path/to|^path[-_]to[-_]|<|>|\{|\}|\$|\byour[-_ ]|\bpath to\b|(^|/)x{3,}(/|$)|"
                                r"^(model|models|checkpoint|ckpt|"
                                r"model[-_]name(_or_path)?|model[-_]path|base[-_]model|pretrained[-_]model)$",
                                re.IGNORECASE)


# a placeholder whatever its shape: ``<your_model>``, ``{model}``, ``$MODEL`` (documentation's fill-ins)
# (and ``path_to_llama2_chat_models``, one word naming a path to fill in; ``YOUR_MODEL_PATH``,
# ``xxx``; and words, ``model name or path``: no Hub id nor model folder has a space)
_FILL_IN = re.compile(r"^<.*>$|^\{.*\}$|^\$|^path[-_]to[-_][^/]*$|^your[-_]|(^|/)x{3,}(/|$)|\s", re.IGNORECASE)


def looks_like_placeholder(name: str) -> bool:
    """``/path/to/model``, ``<your-model>``, ``${MODEL}``, ``model name or path``: documentation,
    not a model. Words are a placeholder only where the name is no path (a folder may have a space)."""
    last = name.rstrip("/").rpartition("/")[2]
    return bool(_PLACEHOLDER_WORDS.search(name) or _PLACEHOLDER_WORDS.search(last)
                or (not looks_like_path(name) and re.search(r"\s", name)))


def looks_like_path(name: str) -> bool:
    """A local path rather than a Hub id (``org/name``: one slash, no leading ``.``/``/``/``~``)."""
    return (name.endswith(".json") or name.startswith((".", "/", "~")) or "\\" in name
            or name.count("/") > 1 or re.match(r"^[A-Za-z]:", name) is not None)


# what a re-upload's storage word means for its weights, said in the finding
STORAGE_NOTES = {
    "nf4": "a bnb-4bit upload: 4-bit NF4 base weights",
    "int4": "a GPTQ/AWQ upload: 4-bit integer base weights in groups of 128 with fp16 scales",
    "int8": "an 8-bit upload: int8 base weights",
    "nvfp4": "an NVFP4 upload: 4-bit FP4 base weights with one FP8 scale per 16",
}


def storage_note(quantization: str | None, reupload: bool = True) -> str | None:
    if quantization is None:
        return "an upload of the same weights, stored unquantized" if reupload else None
    if quantization.startswith("aqlm-"):
        _, bits, shape = quantization.split("-")
        return f"an AQLM upload: {bits[:-3]}-bit additive-quantized base weights, codebooks {shape}"
    return STORAGE_NOTES.get(quantization, f"{quantization} base weights")


def _variant_note(name: str, entry: CatalogEntry, asked: variants.Name) -> str:
    note = f"{name!r} is not catalogued: took the architecture of {entry.id} ({entry.origin})"
    said = storage_note(asked.storage, asked.reupload)
    return note + f"; {said}" if said else note


def _from_entry(entry: CatalogEntry) -> Architecture:
    return from_config(entry.config, entry.id)


def resolve(name: str, base_dir: Path | None = None, *, offline: bool | None = None) -> Resolution:
    """A :class:`Resolution` for a Hub id, alias, ``config.json`` path or model directory.

    Relative paths are taken from ``base_dir`` (the file that named the model). ``offline``
    None follows ``HF_HUB_OFFLINE``. Raises :class:`UnknownModel` (with suggestions) or
    :class:`UnsupportedArchitecture`.
    """
    name = name.strip()
    if not name:
        raise UnknownModel("no model given")
    entry = find_entry(name)
    if entry is not None:
        return Resolution(_from_entry(entry))
    mirror = mirrors.find(name)
    if mirror is not None:
        original = find_entry(mirror.entry)
        assert original is not None, mirror.entry  # the table keeps only mirrors of catalogued models
        return Resolution(_from_entry(original), mirrors.note(name, mirror), "nf4" if mirror.four_bit else None)
    candidate = Path(name).expanduser()
    if base_dir is not None and not candidate.is_absolute():
        candidate = base_dir / candidate
    path_like = looks_like_path(name)
    try:
        exists = candidate.exists()
    except OSError:
        exists = False
    if exists and (candidate.is_file() or (candidate / "config.json").is_file()):
        return Resolution(from_config(read_config(candidate), name))
    if (path_like or _FILL_IN.search(name)) and looks_like_placeholder(name):
        raise UnknownModel(
            f"{name!r} looks like a placeholder{' path' if path_like else ''}, not a model: set `model` (a Hub id) or "
            "`model-config` (a config.json) in [tool.memlint], or pass --model"
        )
    if not path_like:
        cached = cached_config(name)
        if cached is not None:
            return Resolution(from_config(read_config(cached), name))
        variant = find_variant(name)
        if variant is not None:
            entry, asked = variant
            return Resolution(_from_entry(entry), _variant_note(name, entry, asked), asked.storage)
        if _hub_id_like(name):
            from memlint.catalog import hub

            config = hub.fetch_config(name, offline=offline)
            if config is not None:
                return Resolution(from_config(config, name), f"{name}: config.json read from the Hugging Face Hub")
    cached_id = _HUB_CACHE_FOLDER.search(name) if path_like else None
    if cached_id is not None:
        # a snapshot in another machine's Hugging Face cache (``~/.cache/huggingface/hub/
        # models--meta-llama--Llama-3.2-1B/snapshots/<commit>``): the folder names the Hub id
        hub_id = f"{cached_id.group(1)}/{cached_id.group(2)}"
        try:
            resolved = resolve(hub_id, offline=offline)
        except UnknownModel:
            resolved = None
        if resolved is not None:
            return Resolution(resolved.arch, f"{name}: the Hugging Face cache's snapshot of {hub_id}"
                              + (f"; {resolved.note}" if resolved.note else ""), resolved.quantization)
    # a Windows path (``G:\models\Qwen3-1.7B``, a script written on Windows) ends in its folder name
    folder = name.replace("\\", "/").rstrip("/").rpartition("/")[2]
    local = path_like or (name.count("/") == 1 and not _known_org(name.split("/")[0]))
    if local and folder:
        found = find_entry(folder) or (find_variant(folder) or (None,))[0]
        if found is not None:
            storage = variants.split(folder).storage
            return Resolution(
                _from_entry(found),
                f"{name}: no config.json here; assumed the architecture of {found.id} from the folder name"
                + (f" ({storage_note(storage)})" if storage else ""),
                storage,
            )
        if path_like:
            raise UnknownModel(f"{name}: no such file or directory, and its folder name is not a catalogued model")
    raise UnknownModel(_unknown_message(name, offline))


_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")
# a Hugging Face hub cache folder: ``models--{org}--{name}`` (the Hub id with ``/`` as ``--``)
_HUB_CACHE_FOLDER = re.compile(r"(?:^|/)models--([A-Za-z0-9][\w.-]*?)--([A-Za-z0-9][\w.-]*)(?:/|$)")


def _hub_id_like(name: str) -> bool:
    """``org/name``, or a bare ``name``: the Hub still serves the early models without an org
    (``gpt2``, ``bert-base-uncased``, ``t5-small``) by redirecting to their organisation."""
    return bool(_HUB_ID.fullmatch(name)) and ".." not in name


def _known_org(org: str) -> bool:
    org = org.lower()
    return org in variants.MIRROR_ORGS or any(e.id.split("/")[0].lower() == org for e in catalog_entries())


def _unknown_message(name: str, offline: bool | None) -> str:
    hint = did_you_mean(name)
    more = f" Did you mean {', '.join(hint)}?" if hint else ""
    from memlint.catalog import hub

    where = "memlint's catalogue nor in the local Hugging Face cache"
    if _hub_id_like(name) and not looks_like_path(name):
        why_not_hub = hub.why_offline(offline)
        failed = hub.last_failure(name)
        if why_not_hub:
            where += f" (the Hub was not asked: {why_not_hub})"
        elif hub.pending(name):
            where += " (its config.json is being fetched from the Hub; this answer will be updated)"
        elif failed:
            where += f", and the Hub gave no config.json: {failed}"
    return (
        f"unknown model {name!r}: not in {where}.{more} Pass a config.json path, or set "
        "`model-config` (a config.json) in [tool.memlint]."
    )


def did_you_mean(name: str, limit: int = 3) -> list[str]:
    """Catalogued ids close to ``name``: the same family and size first, then by spelling."""
    return list(_did_you_mean(name, limit))


@functools.lru_cache(maxsize=4096)
def _did_you_mean(name: str, limit: int) -> tuple[str, ...]:
    """Remembered per name: a spelling comparison with every catalogued id and alias takes
    10-20 ms, and a tree of configs names the same uncatalogued model many times."""
    family, size = variants.family_and_size(name)
    ids = [e.id for e in catalog_entries()]
    same = [i for i in ids if variants.family_and_size(i) == (family, size)] if size else []
    same.sort(key=lambda i: (len(i), i))
    # a misspelling keeps the family: `openai/whisper-medium` is no misspelt
    # `openai-community/gpt2-medium` (the shared org and size made their spellings 0.6 alike)
    close = [c for c in suggestions(name, ids + [a for e in catalog_entries() for a in e.aliases], limit=limit)
             if _same_family(family, variants.family_and_size(c)[0])]
    out: list[str] = []
    for candidate in same + close:
        entry = find_entry(candidate)
        shown = entry.id if entry else candidate
        if shown not in out:
            out.append(shown)
    return tuple(out[:limit])


def _same_family(one: str, other: str) -> bool:
    """Are two families (``llama-3.1``, ``gpt2``, ``whisper``) one, up to a typo?"""
    return difflib.SequenceMatcher(None, one, other).ratio() >= 0.75


def resolve_model(name: str, base_dir: Path | None = None, *, offline: bool | None = None) -> Architecture:
    """The architecture only (see :func:`resolve` for what was assumed)."""
    return resolve(name, base_dir, offline=offline).arch


__all__ = [
    "CatalogEntry",
    "Resolution",
    "resolve",
    "did_you_mean",
    "UnknownModel",
    "UnsupportedArchitecture",
    "catalog_entries",
    "find_entry",
    "resolve_model",
    "read_config",
]
