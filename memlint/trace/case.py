"""What one measured training step is: the :class:`Case` dataclass, its defaults and its validation.

This module does not import torch, so cases can be loaded, checked and listed without the
``memlint[trace]`` extra.

A case file is either one case dict, a list of case dicts, or ``{"models": {...}, "cases": [...]}``
where ``models`` maps a Hugging Face Hub id (or any name) to that model's published
``config.json`` dict (it must hold ``model_type``). A case's ``model`` is such a key, or an
inline config dict.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import json
import os
from dataclasses import dataclass, field
from typing import Any

# The names below are fixed across memlint (facts/, estimate/ and the trace use the same words).
PRECISIONS = ("fp32", "bf16", "fp16", "amp-bf16", "amp-fp16")
OPTIMIZERS = (
    "adamw",  # torch.optim.AdamW, foreach (what torch picks by itself for CUDA params)
    "adamw-fused",  # torch.optim.AdamW(fused=True)
    "adamw-forloop",  # torch.optim.AdamW(foreach=False)
    "adam",  # torch.optim.Adam, foreach
    "sgd",  # torch.optim.SGD, no momentum (no state)
    "sgd-momentum",  # torch.optim.SGD(momentum=0.9), foreach
    "adafactor",  # transformers.optimization.Adafactor, as HF Trainer's optim="adafactor"
    "adamw-8bit",  # bitsandbytes.optim.AdamW8bit
)
ATTN_IMPLS = ("sdpa", "eager")
SHARDINGS = ("none", "fsdp-full")
# "method": "oft" builds PEFT's OFTConfig(oft_block_size=block_size) instead of a LoraConfig
LORA_KEYS = ("r", "alpha", "dropout", "target_modules", "method", "block_size")
IMAGE_KEYS = ("per_sequence", "height", "width")



class CaseError(ValueError):
    """A case that cannot be measured as written (unknown name, missing field, bad value)."""


def _did_you_mean(value: object, choices: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(str(value), choices, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"must be one of {', '.join(repr(c) for c in choices)}{hint}"


@dataclass
class Case:
    """One training step to measure.

    ``model`` is the model's Hugging Face ``config.json`` as a dict (with ``model_type``);
    ``model_name`` is the Hub id it came from (or ``model_type`` for an inline config).
    """

    id: str
    model: dict[str, Any]
    batch_size: int
    seq_len: int
    precision: str
    model_name: str = ""
    # an encoder-decoder's label length when it differs from the inputs' (a summarisation
    # step's ``max_target_length``); 0: labels as long as the inputs
    target_len: int = 0
    # a vision-language model's alignment stage: the whole model frozen, a trainable two-layer MLP
    # of its width between the embedding and the first block (memlint.trace.build._train_a_projector)
    projector: bool = False
    optimizer: str = "adamw"
    grad_ckpt: bool = False
    attn: str = "sdpa"
    lora: dict[str, Any] | None = None
    # QLoRA: {"r","alpha","dropout","target_modules"} like ``lora`` plus optional
    # "quant_type" (nf4) and "double_quant" (true); base linear layers become bnb Linear4bit.
    qlora: dict[str, Any] | None = None
    world_size: int = 1
    sharding: str = "none"
    use_cache: bool = False
    # false: HF-Trainer style, only the loss survives the forward; true: the output object
    # (logits) stays alive through backward (``out = model(...); out.loss.backward()``)
    keep_outputs: bool = False
    steps: int = 2
    # micro-batches of the last step (gradient accumulation): from the second on, every forward
    # and backward runs with the accumulated gradients alive (see memlint.trace.measure)
    grad_accum: int = 1
    # vision-language models: the images of each sequence, {"per_sequence": 1, "height": 448,
    # "width": 448} (pixels, resized as the model's image processor does); None: text only
    images: dict[str, Any] | None = None
    emulate_cuda_autocast: bool = True
    emulate_cuda_sdpa: bool = True
    round_bytes: int = 512
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_dict(cls, data: dict[str, Any], models: dict[str, dict] | None = None) -> "Case":
        """Build and validate a case from its JSON dict; ``models`` resolves string model names."""
        if not isinstance(data, dict):
            raise CaseError(f"a case must be a JSON object, got {type(data).__name__}")
        d = copy.deepcopy(data)
        cid = d.get("id")
        for k in ("model", "batch_size", "seq_len", "precision"):
            if k not in d:
                raise CaseError(f"case {cid!r}: missing field {k!r}")
        if cid is None:
            d["id"] = _auto_id(d)
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            hints = []
            for u in unknown:
                close = difflib.get_close_matches(u, sorted(names), n=1, cutoff=0.6)
                hints.append(f"{u!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
            raise CaseError(f"case {d['id']!r}: unknown field(s) {', '.join(hints)}")
        m = d["model"]
        if isinstance(m, str):
            if not models or m not in models:
                known = sorted(models or {})
                close = difflib.get_close_matches(m, known, n=1, cutoff=0.5)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise CaseError(f"case {d['id']!r}: model {m!r} is not in the file's 'models' table{hint}")
            d.setdefault("model_name", m)
            d["model"] = copy.deepcopy(models[m])
        elif isinstance(m, dict):
            d.setdefault("model_name", str(m.get("_name_or_path") or m.get("model_type", "custom")))
        else:
            raise CaseError(f"case {d['id']!r}: model must be a name or a config dict")
        case = cls(**d)
        case.validate()
        return case

    def validate(self) -> None:
        """Raise :class:`CaseError` with a message that says what to write instead."""
        p = f"case {self.id!r}"
        if not isinstance(self.model, dict) or "model_type" not in self.model:
            raise CaseError(f"{p}: the model config needs a 'model_type' (as in a config.json)")
        if self.precision not in PRECISIONS:
            raise CaseError(f"{p}: precision {self.precision!r} {_did_you_mean(self.precision, PRECISIONS)}")
        if self.optimizer not in OPTIMIZERS:
            raise CaseError(f"{p}: optimizer {self.optimizer!r} {_did_you_mean(self.optimizer, OPTIMIZERS)}")
        if self.attn not in ATTN_IMPLS:
            raise CaseError(f"{p}: attn {self.attn!r} {_did_you_mean(self.attn, ATTN_IMPLS)}")
        if self.sharding not in SHARDINGS:
            raise CaseError(f"{p}: sharding {self.sharding!r} {_did_you_mean(self.sharding, SHARDINGS)}")
        for k in ("batch_size", "seq_len", "world_size", "steps", "grad_accum"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise CaseError(f"{p}: {k} must be a positive integer, got {v!r}")
        if isinstance(self.target_len, bool) or not isinstance(self.target_len, int) or self.target_len < 0:
            raise CaseError(f"{p}: target_len must be a positive integer (0: as long as the inputs), "
                            f"got {self.target_len!r}")
        if self.round_bytes < 1:
            raise CaseError(f"{p}: round_bytes must be >= 1 (1 = no rounding)")
        if self.sharding == "none" and self.world_size != 1:
            raise CaseError(f"{p}: world_size={self.world_size} needs sharding='fsdp-full' (plain DDP keeps "
                            "a full replica per GPU: measure it with world_size 1)")
        if self.sharding == "fsdp-full" and self.world_size < 2:
            raise CaseError(f"{p}: sharding='fsdp-full' needs world_size >= 2")
        if self.sharding == "fsdp-full" and self.precision in ("amp-fp16",):
            raise CaseError(f"{p}: amp-fp16 with FSDP needs ShardedGradScaler, which is not modelled")
        if self.lora is not None and self.qlora is not None:
            raise CaseError(f"{p}: give either lora or qlora, not both")
        if self.projector and (self.lora is not None or self.qlora is not None or self.sharding != "none"):
            raise CaseError(f"{p}: a projector case trains the projector alone (no adapters, no sharding)")
        for name in ("lora", "qlora"):
            lc = getattr(self, name)
            if lc is None:
                continue
            if not isinstance(lc, dict):
                raise CaseError(f"{p}: {name} must be null or an object with {LORA_KEYS}")
            allowed = LORA_KEYS + (("quant_type", "double_quant", "compute_dtype") if name == "qlora" else ())
            bad = sorted(set(lc) - set(allowed))
            if bad:
                raise CaseError(f"{p}: {name} has unknown key(s) {bad}; allowed: {list(allowed)}")
            if lc.get("method", "lora") not in ("lora", "oft"):
                raise CaseError(f"{p}: {name}.method must be lora or oft")
            if lc.get("method") == "oft":
                if int(lc.get("block_size", 32)) < 2:
                    raise CaseError(f"{p}: {name}.block_size must be >= 2")
            elif int(lc.get("r", 8)) < 1:
                raise CaseError(f"{p}: {name}.r must be >= 1")
        if self.images is not None:
            if not isinstance(self.images, dict):
                raise CaseError(f"{p}: images must be null or an object with {IMAGE_KEYS}")
            bad = sorted(set(self.images) - set(IMAGE_KEYS))
            if bad:
                raise CaseError(f"{p}: images has unknown key(s) {bad}; allowed: {list(IMAGE_KEYS)}")
            for k, v in self.images.items():
                if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                    raise CaseError(f"{p}: images.{k} must be a positive integer, got {v!r}")
        if self.qlora is not None and self.sharding != "none":
            raise CaseError(f"{p}: qlora with FSDP is not modelled")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def lora_config(self) -> dict[str, Any] | None:
        """The adapter settings of ``lora`` or ``qlora`` (whichever is set), with defaults."""
        lc = self.lora if self.lora is not None else self.qlora
        if lc is None:
            return None
        return {
            "r": int(lc.get("r", 8)),
            "alpha": float(lc.get("alpha", 16)),
            "dropout": float(lc.get("dropout", 0.05)),
            "target_modules": lc.get("target_modules", "all-linear"),
            "method": str(lc.get("method", "lora")),
            "block_size": int(lc.get("block_size", 32)),
        }


def _auto_id(d: dict[str, Any]) -> str:
    m = d.get("model_name") or (d["model"] if isinstance(d["model"], str) else d["model"].get("model_type", "custom"))
    parts = [str(m).split("/")[-1], d["precision"], d.get("optimizer", "adamw"),
             f"b{d['batch_size']}", f"s{d['seq_len']}"]
    if d.get("target_len"):
        parts.append(f"t{d['target_len']}")
    if d.get("projector"):
        parts.append("proj")
    if d.get("grad_ckpt"):
        parts.append("gc")
    if d.get("attn", d.get("attn_impl", "sdpa")) != "sdpa":
        parts.append(d.get("attn", d.get("attn_impl")))
    if d.get("lora"):
        parts.append(f"lora{d['lora'].get('r', 8)}")
    if d.get("qlora"):
        parts.append(f"qlora{d['qlora'].get('r', 8)}")
    if d.get("world_size", 1) > 1:
        parts.append(f"fsdp{d['world_size']}")
    if d.get("grad_accum", 1) > 1:
        parts.append(f"ga{d['grad_accum']}")
    if d.get("images"):
        im = d["images"]
        parts.append(f"img{im.get('per_sequence', 1)}x{im.get('height', 448)}")
    return "-".join(parts)


def from_oracle_dict(data: dict[str, Any]) -> dict[str, Any]:
    """Rewrite a case written in the ground-truth oracle's spelling (``shared/oracle/cases.json``)
    into memlint's names: ``attn_impl`` -> ``attn``; ``sharding: fsdp2`` -> ``fsdp-full``;
    the oracle's ``sgd`` had momentum 0.9 -> ``sgd-momentum``; ``optimizer_impl`` fused/forloop
    -> ``adamw-fused`` / ``adamw-forloop`` (foreach is memlint's plain ``adamw``)."""
    d = copy.deepcopy(data)
    if "attn_impl" in d:
        d["attn"] = d.pop("attn_impl")
    if d.get("sharding") == "fsdp2":
        d["sharding"] = "fsdp-full"
    opt = d.get("optimizer", "adamw")
    impl = d.pop("optimizer_impl", "foreach")
    if opt == "sgd":
        if impl != "foreach":
            raise CaseError(f"case {d.get('id')!r}: oracle sgd with optimizer_impl={impl!r} has no memlint name")
        d["optimizer"] = "sgd-momentum"
    elif opt == "adamw" and impl in ("fused", "forloop"):
        d["optimizer"] = f"adamw-{impl}"
    elif impl != "foreach":
        raise CaseError(f"case {d.get('id')!r}: unknown oracle optimizer_impl {impl!r}")
    return d


def parse_cases(data: Any, oracle: bool = False) -> list[Case]:
    """Cases from the JSON value of a case file (one case, a list, or {"models", "cases"})."""
    models: dict[str, dict] = {}
    if isinstance(data, dict) and "cases" in data:
        models = data.get("models") or {}
        items = data["cases"]
    elif isinstance(data, list):
        items = data
    else:
        items = [data]
    if oracle:
        items = [from_oracle_dict(c) for c in items]
    cases = [Case.from_dict(c, models) for c in items]
    seen: set[str] = set()
    for c in cases:
        if c.id in seen:
            raise CaseError(f"duplicate case id {c.id!r}")
        seen.add(c.id)
    return cases


def load_cases(path: str | os.PathLike[str], oracle: bool = False) -> list[Case]:
    """Load and validate every case of a case file (``oracle=True``: written in the oracle's
    spelling, see :func:`from_oracle_dict`)."""
    with open(path, encoding="utf-8") as f:
        try:
            data = json.load(f)
        except json.JSONDecodeError as e:
            raise CaseError(f"{path}: not valid JSON: {e}") from e
    return parse_cases(data, oracle=oracle)


def load_model_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A model's config dict from a ``config.json`` file, a directory holding one, or a memlint
    catalogue entry (a JSON object with a ``"config"`` key)."""
    p = os.fspath(path)
    if os.path.isdir(p):
        p = os.path.join(p, "config.json")
    with open(p, encoding="utf-8") as f:
        data = json.load(f)
    if isinstance(data, dict) and "model_type" not in data and isinstance(data.get("config"), dict):
        data = data["config"]
    if not isinstance(data, dict) or "model_type" not in data:
        raise CaseError(f"{path}: not a Hugging Face config.json (no 'model_type')")
    return data
