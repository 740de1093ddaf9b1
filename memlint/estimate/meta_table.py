"""Meta-device counts of the catalogue's models, kept so an install without torch answers too.

``meta_count.py`` builds a model that memlint has no recipe for with transformers on the meta
device. That needs the ``trace`` extra (torch + transformers, gigabytes) and a second or two of
imports per process. For the ``config.json`` files memlint ships in its catalogue the answer is
fixed by the pinned transformers release, so ``catalog/generate_meta_counts.py`` computes it once
and stores the resulting :class:`Architecture` here, keyed by a fingerprint of the config. A
config that is not in the table (a Hub download, a local checkpoint) still goes through
``meta_count`` when the extra is installed.
"""

from __future__ import annotations

import functools
import hashlib
import json
from importlib import resources
from typing import Any, Mapping

from memlint.estimate.architecture import Architecture, BlockGroup, Linear

TABLE = "meta_counts.json"

NOTE = (
    "no memlint recipe for model_type {model_type!r}: parameters counted by transformers "
    "{version} on the meta device when memlint's catalogue was generated; activations use the "
    "Llama recipe (an approximation); run `memlint trace` to measure this model"
)


def fingerprint(config: Mapping[str, Any]) -> str:
    """A stable digest of a ``config.json`` mapping (key order and whitespace do not count)."""
    text = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


def to_row(arch: Architecture) -> dict[str, Any]:
    """The JSON form of an architecture counted on the meta device (its config left out)."""
    return {
        "model_type": arch.model_type,
        "hidden_size": arch.hidden_size,
        "num_layers": arch.num_layers,
        "num_heads": arch.num_heads,
        "num_kv_heads": arch.num_kv_heads,
        "head_dim": arch.head_dim,
        "intermediate_size": arch.intermediate_size,
        "vocab_size": arch.vocab_size,
        "tie_word_embeddings": arch.tie_word_embeddings,
        "blocks": [
            {
                "kind": group.kind,
                "count": group.count,
                "other_params": group.other_params,
                "linears": [[lin.name, lin.in_features, lin.out_features, lin.bias, lin.copies]
                            for lin in group.linears],
            }
            for group in arch.blocks
        ],
        "embedding_params": arch.embedding_params,
        "final_params": arch.final_params,
        "lm_head": None if arch.lm_head is None else [
            arch.lm_head.name, arch.lm_head.in_features, arch.lm_head.out_features, arch.lm_head.bias],
        "max_position_embeddings": arch.max_position_embeddings,
        "extra_params": arch.extra_params,
        "activation": arch.activation,
        "parameters": arch.n_params,
    }


def from_row(row: Mapping[str, Any], version: str, config: Mapping[str, Any], name: str) -> Architecture:
    blocks = tuple(
        BlockGroup(
            kind=group["kind"],
            count=int(group["count"]),
            linears=tuple(Linear(n, int(i), int(o), bool(b), int(c)) for n, i, o, b, c in group["linears"]),
            other_params=int(group["other_params"]),
        )
        for group in row["blocks"]
    )
    head = row["lm_head"]
    return Architecture(
        name=name,
        model_type=row["model_type"],
        family="llama",
        hidden_size=int(row["hidden_size"]),
        num_layers=int(row["num_layers"]),
        num_heads=int(row["num_heads"]),
        num_kv_heads=int(row["num_kv_heads"]),
        head_dim=int(row["head_dim"]),
        intermediate_size=int(row["intermediate_size"]),
        vocab_size=int(row["vocab_size"]),
        tie_word_embeddings=bool(row["tie_word_embeddings"]),
        blocks=blocks,
        embedding_params=int(row["embedding_params"]),
        final_params=int(row["final_params"]),
        lm_head=None if head is None else Linear(head[0], int(head[1]), int(head[2]), bool(head[3])),
        max_position_embeddings=row.get("max_position_embeddings"),
        extra_params=int(row["extra_params"]),
        activation=str(row["activation"]),
        config=config,
        generic_note=NOTE.format(model_type=row["model_type"], version=version),
    )


@functools.lru_cache(maxsize=1)
def _table() -> dict[str, Any]:
    try:
        text = resources.files("memlint.estimate").joinpath(TABLE).read_text("utf-8")
    except FileNotFoundError:
        return {"transformers": "", "rows": {}}
    return json.loads(text)


def lookup(config: Mapping[str, Any], name: str) -> Architecture | None:
    """The stored meta-device count of exactly this ``config.json``, if the catalogue holds it."""
    table = _table()
    row = table["rows"].get(fingerprint(config))
    if row is None:
        return None
    return from_row(row["architecture"], table["transformers"], config, name)
