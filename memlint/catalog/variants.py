"""Variant rules: which catalogued model a name that is not in the catalogue is an upload of.

The rules, all of which keep the architecture and the size:

1. *Suffixes.* A name's dash-separated words ``instruct``, ``chat``, ``it``, ``pt``, ``base``,
   ``hf``, ``thinking``, ``bnb``/``4bit`` and a release date (``2407``, ``2507``: YYMM; DeepSeek's
   ``0324``, ``0528``: MMDD, post-training updates of the same architecture) are dropped, as is
   a leading ``Meta-`` (meta-llama renamed ``Meta-Llama-3.1-8B`` to ``Llama-3.1-8B``). ``Qwen3-4B-Instruct-2507`` and ``Qwen3-4B`` become the same key.
   A version word (``v0.3``) is kept: Mistral v0.2 and v0.3 differ in vocabulary.
2. *Orgs.* The catalogued entry must be in the same org, unless the name has no org
   (``Llama-3.2-1B``) or its org is a known mirror that re-uploads other orgs' weights
   unchanged or pre-quantized (``MIRROR_ORGS``). A mirror's upload under the original's own name
   is that model, even where the key also reaches an entry of another size.
3. *Re-uploads in another storage format.* A name that ends in a storage word is the same model
   stored another way, and may come from any org (quantizers re-upload other orgs' weights under
   the original name plus the format): ``bnb-4bit``/``bnb-nf4`` (bitsandbytes NF4), ``AWQ`` and
   ``GPTQ`` (4-bit integers in groups, 8-bit with ``Int8``/``8bit``), ``AQLM-2Bit-1x16``
   (additive codebooks), ``NVFP4`` (FP4 values with FP8 block scales), and ``BF16``/``fp16``/
   ``dequantized``/``prequantized``/``Linearized`` (plain weights). A quantized upload's format
   is the run's quantization when the run sets none: its adapters train over frozen quantized
   weights, as in QLoRA.

A key that reaches entries of different sizes is ambiguous and matches nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Orgs whose uploads are other orgs' checkpoints (same weights, sometimes pre-quantized).
# mistral-community ("Unofficial Mistral Community") converts Mistral AI's releases to the
# transformers format: its Mixtral-8x22B-v0.1 is mistralai's weights, its pixtral-12b Pixtral 12B.
MIRROR_ORGS = frozenset({"unsloth", "nousresearch", "huggyllama", "hf-internal-testing", "unslothai",
                         "mistral-community"})

_SUFFIX_WORDS = frozenset({"instruct", "chat", "it", "pt", "base", "hf", "thinking", "bnb", "4bit",
                           "unsloth", "dynamic"})
# words that name how an upload stores the weights (rule 3)
_PLAIN_STORAGE = frozenset({"bf16", "fp16", "fp32", "dequantized", "prequantized", "linearized"})
_QUANTIZED = frozenset({"bnb", "nf4", "awq", "gptq", "aqlm", "nvfp4", "int4", "int8", "8bit", "4bit"})
_AQLM_BITS = re.compile(r"^(\d)bit$")
_AQLM_SHAPE = re.compile(r"^(\d)x(\d{1,2})$")
_DATE = re.compile(r"^2[3-9](0[1-9]|1[0-2])$")  # 2407, 2501, 2507: a release month
_MONTH_DAY = re.compile(r"^(0[1-9]|1[0-2])(0[1-9]|[12][0-9]|3[01])$")  # 0324, 0528, 1210: a release day
_WORD = re.compile(r"[-_]")


@dataclass(frozen=True)
class Name:
    """A model name split into what the variant rules compare."""

    org: str | None  # lower case; None without an org
    key: str  # the base name with suffix words dropped, lower case
    storage: str | None = None  # the upload's quantization ("nf4", "int4", "nvfp4", ...), None: plain
    reupload: bool = False  # the name carries a storage word (rule 3): any org may upload it

    @property
    def four_bit(self) -> bool:
        """A bitsandbytes 4-bit (NF4) upload."""
        return self.storage == "nf4"


def storage_of(words: list[str]) -> str | None:
    """The quantization a re-upload's name states, as the estimator names it (``Lora.quantization``).

    ``int4``/``int8``: GPTQ/AWQ integer weights; ``aqlm-<bits>bit-<codebooks>x<codebook bits>``;
    ``nvfp4``; ``nf4``: bitsandbytes. None for a name with no quantization word.
    """
    found = set(words)
    if "aqlm" in found:
        bits = next((m.group(1) for w in words if (m := _AQLM_BITS.match(w))), None)
        shape = next((m.group(0) for w in words if (m := _AQLM_SHAPE.match(w))), None)
        return f"aqlm-{bits}bit-{shape}" if bits and shape else None
    if "nvfp4" in found:
        return "nvfp4"
    if found & {"awq", "gptq"}:
        return "int8" if found & {"int8", "8bit"} else "int4"
    if "bnb" in found and found & {"4bit", "nf4"}:
        return "nf4"
    if "bnb" in found and "8bit" in found:
        return "int8"
    return None

def split(name: str) -> Name:
    name = name.strip().strip("/")
    org, _, base = name.rpartition("/")
    words = [w for w in _WORD.split(base.lower()) if w]
    storage = storage_of(words)
    reupload = bool(storage) or bool(words and words[-1] in _PLAIN_STORAGE)
    if reupload:  # the storage words are a tail: ``...-Instruct-AQLM-2Bit-1x16``, ``...-bnb-nf4-bf16``
        while len(words) > 1 and _storage_word(words[-1]):
            words.pop()
    if words and words[0] == "meta" and len(words) > 1:
        words = words[1:]
    kept = [words[0]] + [w for w in words[1:] if w not in _SUFFIX_WORDS and not _release_date(w)] if words else []
    return Name(org.lower() or None, "-".join(kept), storage, reupload)


def _release_date(word: str) -> bool:
    return bool(_DATE.match(word) or _MONTH_DAY.match(word))


def _storage_word(word: str) -> bool:
    return (word in _PLAIN_STORAGE or word in _QUANTIZED or bool(_AQLM_BITS.match(word))
            or bool(_AQLM_SHAPE.match(word)))


def org_matches(asked: Name | str | None, entry_org: str) -> bool:
    """Rule 2, and rule 3's exception: a re-upload in another storage format may be any org's."""
    if isinstance(asked, Name):
        if asked.reupload:
            return True
        asked = asked.org
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
