"""Variant rules: which catalogued model a name that is not in the catalogue is an upload of.

The rules, all of which keep the architecture and the size:

1. *Suffixes.* A name's dash-separated words ``instruct``, ``chat``, ``it``, ``pt``, ``base``,
   ``hf``, ``thinking``, ``bnb``/``4bit`` and a release date (``2407``, ``2507``: YYMM) are
   dropped, as is a leading ``Meta-`` (meta-llama renamed ``Meta-Llama-3.1-8B`` to
   ``Llama-3.1-8B``). ``Qwen3-4B-Instruct-2507`` and ``Qwen3-4B`` become the same key.
   A version word (``v0.3``) is kept: Mistral v0.2 and v0.3 differ in vocabulary.
2. *Orgs.* The catalogued entry must be in the same org, unless the name has no org
   (``Llama-3.2-1B``) or its org is a known mirror that re-uploads other orgs' weights
   unchanged or pre-quantized (``MIRROR_ORGS``).
3. *Pre-quantized uploads.* A ``bnb-4bit`` name means bitsandbytes 4-bit (NF4) weights: the
   match says so, and a run with no quantization of its own trains QLoRA-style.

A key that reaches entries of different sizes is ambiguous and matches nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Orgs whose uploads are other orgs' checkpoints (same weights, sometimes pre-quantized).
MIRROR_ORGS = frozenset({"unsloth", "nousresearch", "huggyllama", "hf-internal-testing", "unslothai"})

_SUFFIX_WORDS = frozenset({"instruct", "chat", "it", "pt", "base", "hf", "thinking", "bnb", "4bit",
                           "unsloth", "dynamic"})
_DATE = re.compile(r"^2[3-9](0[1-9]|1[0-2])$")  # 2407, 2501, 2507: a release month
_WORD = re.compile(r"[-_]")


@dataclass(frozen=True)
class Name:
    """A model name split into what the variant rules compare."""

    org: str | None  # lower case; None without an org
    key: str  # the base name with suffix words dropped, lower case
    four_bit: bool  # a bitsandbytes 4-bit upload


def split(name: str) -> Name:
    name = name.strip().strip("/")
    org, _, base = name.rpartition("/")
    words = [w for w in _WORD.split(base.lower()) if w]
    four_bit = "bnb" in words and "4bit" in words
    if words and words[0] == "meta" and len(words) > 1:
        words = words[1:]
    kept = [words[0]] + [w for w in words[1:] if w not in _SUFFIX_WORDS and not _DATE.match(w)] if words else []
    return Name(org.lower() or None, "-".join(kept), four_bit)


def org_matches(asked: str | None, entry_org: str) -> bool:
    return asked is None or asked == entry_org.lower() or asked in MIRROR_ORGS


_SIZE = re.compile(r"(?<![a-z0-9.])(\d+(?:\.\d+)?)([bm])(?![a-z])", re.IGNORECASE)


def family_and_size(name: str) -> tuple[str, str | None]:
    """``Qwen2.5-7B-Instruct`` -> (``qwen2.5``, ``7b``): what did-you-mean ranks by."""
    base = name.rpartition("/")[2].lower()
    base = re.sub(r"^meta-", "", base)
    match = _SIZE.search(base.replace("_", "-"))
    if not match:
        return base.split("-")[0], None
    family = base[: match.start()].strip("-_ ")
    return family, (match.group(1) + match.group(2)).lower()
