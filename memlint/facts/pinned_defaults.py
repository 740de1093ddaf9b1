"""Defaults the pinned transformers release decides: the attention a model runs and the dtype it
loads in, when nothing in the run names them.

Since transformers 4.36 a model that supports it runs PyTorch's ``scaled_dot_product_attention``
(SDPA) unless ``from_pretrained`` asks otherwise, on ``torch>=2.1.1`` (transformers PR #26572,
"F.scaled_dot_product_attention support"; issue #28005: "In Transformers 4.36, we started adding
native support of SDPA, enabled by default"; ``docs/source/en/perf_infer_gpu_one.md``: "SDPA is
used by default for torch>=2.1.1"). Before it, every model transformers ships ran its eager
attention, which materialises the (tokens x tokens) scores and probabilities of every head: a
project that pins ``transformers==4.31.0`` (2023's fine-tuning repositories) trains with eager
attention unless it patches the attention itself (FastChat's
``replace_llama_attn_with_flash_attn()``, xformers patches) or asks for FlashAttention 2
(``use_flash_attention_2=True``, read elsewhere). Long sequences change the verdict: LLaMA-2-7B at
10 x 4,096 tokens holds ~48 GiB more under eager attention than under SDPA.

transformers 4's ``from_pretrained`` loads the weights in fp32 unless ``torch_dtype`` says
otherwise; transformers 5 loads the checkpoint's dtype (``dtype="auto"``). A project that pins a
4.x release and loads without a dtype trains fp32 weights (under ``bf16=True``: autocast over fp32
weights, gradients and optimizer states), twice the bytes of the bf16 checkpoint it names.

A pin that admits any release from 4.36 on (``transformers>=4.28``) installs the newest, which
runs SDPA: only a pin whose every admitted release predates 4.36 (``==4.31.0``, ``<4.34``,
``~=4.33.0``) or a torch pin before 2.1.1 states eager attention.

Accelerate upcasts the half-precision parameters an FSDP run trains under mixed precision to fp32
since 0.30.0 (PR #2674, "Add Upcasting for FSDP in Mixed Precision"); before it the shards, their
gradients and the optimizer states keep the dtype the model loaded in. A project pinning an
earlier release (GritLM's ``accelerate==0.26.1``) trains bf16 shards.

TRL's configs turn on gradient checkpointing and bf16, unlike ``TrainingArguments``, only from the
release whose config class first declares those fields (``schemas/history/trl.json``, read from
TRL's releases: ``gradient_checkpointing`` from 0.22, ``bf16`` from 0.19). A project pinning an
earlier TRL (s1's ``trl==0.12.0``) trains with ``TrainingArguments``' defaults: no checkpointing,
fp32 unless the launch says ``--bf16``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable

from packaging.version import Version

from memlint.facts.pinned_versions import Pin, pins
from memlint.model.diagnostics import Range
from memlint.model.provenance import Location, Sourced

TRANSFORMERS_SDPA = Version("4.36.0")
TORCH_SDPA = Version("2.1.1")
TRANSFORMERS_5 = Version("5.0.0")
ACCELERATE_FSDP_UPCAST = Version("0.30.0")
PINNED_EAGER = "eager attention: `"  # how the fact's note begins (the rules quote it)

# a script that replaces the attention of the model it loads: flash-attn or xformers patches
# (FastChat's ``replace_llama_attn_with_flash_attn``, LongLoRA's ``replace_llama_attn``,
# ``llama_flash_attn_monkey_patch``), or that calls a kernel library's attention itself
_PATCHED = re.compile(r"\b(?:\w*flash_attn\w*|\w*flash_attention\w*|xformers|replace_\w*attn\w*)\b")


def pinned_eager_attention(root: Path, near: str | Path) -> Sourced[str] | None:
    """``"eager"`` with the pin that makes it so, when the project's pins select a transformers
    (or torch) release that does not run SDPA by default; else None."""
    found = pins(root, near)
    for package, threshold in (("transformers", TRANSFORMERS_SDPA), ("torch", TORCH_SDPA)):
        pin = found.get(package)
        if pin is not None and pin.only_before(threshold):
            return Sourced("eager", _at(root, pin),
                           f"{PINNED_EAGER}{package}{pin.specifier}` ({pin.where}) predates SDPA by default "
                           f"({package} {threshold}); the model's attention materialises its scores")
    return None


def pinned_fp32_load(root: Path, near: str | Path) -> Sourced[str] | None:
    """``"fp32"`` with the pin, when the project's transformers pin admits only 4.x releases."""
    pin = pins(root, near).get("transformers")
    if pin is None or not pin.only_before(TRANSFORMERS_5):
        return None
    return Sourced("fp32", _at(root, pin),
                   f"weights load in fp32: `transformers{pin.specifier}` ({pin.where}) is a 4.x release, whose "
                   "from_pretrained loads fp32 unless torch_dtype says otherwise")


def pinned_without_fsdp_upcast(root: Path, near: str | Path) -> Sourced[bool] | None:
    """True with the pin, when the project's accelerate pin admits only releases before the FSDP
    upcast of half-precision parameters."""
    pin = pins(root, near).get("accelerate")
    if pin is None or not pin.only_before(ACCELERATE_FSDP_UPCAST):
        return None
    return Sourced(True, _at(root, pin),
                   f"`accelerate{pin.specifier}` ({pin.where}) predates the FSDP upcast of half-precision "
                   f"parameters ({ACCELERATE_FSDP_UPCAST}): the shards keep the dtype the model loads in")


# TRL's defaults that differ from TrainingArguments' -> the fact each decides
TRL_OWN_DEFAULTS = {"gradient_checkpointing": "grad_ckpt", "bf16": "mixed"}


def pinned_trl_predates(root: Path, near: str | Path) -> Sourced[tuple[str, ...]] | None:
    """The facts (``grad_ckpt``, ``mixed``) whose TRL default the project's TRL pin predates,
    with the pin: those keep ``TrainingArguments``' defaults. None without such a pin."""
    pin = pins(root, near).get("trl")
    if pin is None:
        return None
    predated = [(key, first) for key, first in _trl_first_declared().items() if pin.only_before(first)]
    if not predated:
        return None
    said = ", ".join(f"`{key}` from {first}" for key, first in predated)
    return Sourced(tuple(TRL_OWN_DEFAULTS[key] for key, _ in predated), _at(root, pin),
                   f"`trl{pin.specifier}` ({pin.where}) predates TRL's own defaults ({said}): "
                   "TrainingArguments' apply (no gradient checkpointing, no bf16 unless set)")


def _trl_first_declared() -> dict[str, str]:
    """Each of ``TRL_OWN_DEFAULTS``' keys -> the first TRL release whose config declares it."""
    from memlint.configs.key_history import history

    kept = history("trl") or {}
    keys = kept.get("schemas", {}).get("trl-sft-config", {}).get("keys", {})
    found: dict[str, str] = {}
    for key in TRL_OWN_DEFAULTS:
        spans = keys.get(key, {}).get("read") or []
        firsts = [Version(first) for first, _ in spans]
        if firsts:
            found[key] = str(min(firsts))
    return found


def _at(root: Path, pin: Pin) -> Location:
    line = max(pin.line, 1)
    return Location(str(Path(root) / pin.path), Range.of(line, 0, line, 0))


def patches_attention(texts: Iterable[str | None]) -> bool:
    """Whether a script of the run replaces or bypasses the model's own attention."""
    return any(text is not None and _PATCHED.search(text) is not None for text in texts)




def pinned_auto_bf16(root: Path, near: str | Path) -> str | None:
    """Why a legacy ``"bfloat16": {"enabled": "auto"}`` trains in bf16, or None when it does not:
    the HF Trainer and Accelerate fill ``bf16.enabled`` only, and a DeepSpeed before 0.17.1 reads
    the section by hand and takes the string as true (the engine then calls ``module.bfloat16()``;
    ``memlint.configs.deepspeed_releases._auto_read_as_true``). From 0.17.1 the "auto" is dropped."""
    from memlint.configs.deepspeed_releases import VALIDATED_SINCE, unvalidated

    pin = pins(root, near).get("deepspeed")
    if pin is None or not unvalidated(pin):
        return None
    return (f"the DeepSpeed you pin (`deepspeed{pin.specifier}`, {pin.where}) reads the unfilled \"auto\" as true "
            f"(DeepSpeed {VALIDATED_SINCE} and later drop it)")
