"""``memlint.trace``: measure the per-GPU peak memory of a real training step on fake tensors.

A Hugging Face model is built from its ``config.json`` inside ``FakeTensorMode`` (no GPU, no
weights, no real memory), and full training steps (forward with the loss, backward, optimizer
step, twice) run under PyTorch's ``MemTracker`` (``FSDPMemTracker`` with a fake process group for
FSDP2). Needs the optional extra ``memlint[trace]`` (torch, transformers, peft); nothing else in
memlint imports this package at import time, and importing it does not import torch either:
:mod:`memlint.trace.case` is torch-free, the measuring modules import torch when used.

    from memlint.trace import Case, measure_case, run_cases
    result = measure_case(Case.from_dict({...}))

See ``docs/trace.md``.
"""

from __future__ import annotations

from typing import Any

from memlint.trace.case import (
    ATTN_IMPLS,
    OPTIMIZERS,
    PRECISIONS,
    SHARDINGS,
    Case,
    CaseError,
    load_cases,
    load_model_config,
    parse_cases,
)

__all__ = [
    "ATTN_IMPLS",
    "OPTIMIZERS",
    "PRECISIONS",
    "SHARDINGS",
    "Case",
    "CaseError",
    "load_cases",
    "load_model_config",
    "measure_case",
    "parse_cases",
    "run_cases",
]


def measure_case(case: Case, *, fake: bool = True, device: str = "cpu") -> dict[str, Any]:
    """Measure one case in this process (imports torch); see :func:`memlint.trace.measure.measure_case`."""
    from memlint.trace.measure import measure_case as _measure

    return _measure(case, fake=fake, device=device)


def run_cases(cases: list[Case], **kwargs: Any) -> list[dict[str, Any]]:
    """Measure cases in worker subprocesses; see :func:`memlint.trace.batch.run_cases`."""
    from memlint.trace.batch import run_cases as _run

    return _run(cases, **kwargs)
