"""AMP002: bfloat16 compute or weights on a target GPU without bfloat16 support."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from memlint.catalog.gpus import UnknownGpu, lookup_gpu
from memlint.documents.kinds import DocumentKind
from memlint.lint.context import RuleContext
from memlint.model.diagnostics import Severity
from memlint.project.settings import Settings
from memlint.python.index import ModuleIndex, index_for
from memlint.python.syntax import argument, is_false, method_name, string_value
from memlint.python.training import autocast_of, bf16_support_choice, dtype_choices, trained_models
from memlint.rules.base import Example, Finding, Rule

_SCRIPT = """\
import torch
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-1.5B").cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
model.train()
for batch in loader:
    with torch.autocast("cuda", dtype={dtype}):
        loss = model(**batch).loss
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad()
"""

_CHECKED = """\
import torch

amp_dtype = torch.bfloat16 if torch.cuda.is_bf16_supported({args}) else torch.float16


def train(model, loader, optimizer, scaler):
    for x, y in loader:
        with torch.autocast(device_type="cuda", dtype=amp_dtype):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
"""


class Bf16UnsupportedGpu(Rule):
    """## What it does
    When the target GPU is known (``gpu`` in ``[tool.memlint]`` or ``--gpu``) and has no
    bfloat16 support — V100 (compute capability 7.0), T4 and the RTX 20 series (7.5) — finds
    the code that computes or stores in bfloat16 there: ``torch.autocast(...,
    dtype=torch.bfloat16)``, ``model.bfloat16()`` / ``model.to(torch.bfloat16)`` on a trained
    model, ``from_pretrained(..., torch_dtype=torch.bfloat16)``, FSDP
    ``MixedPrecision(param_dtype=torch.bfloat16)``, ``bnb_4bit_compute_dtype=torch.bfloat16``
    and ``Accelerator(mixed_precision="bf16")``.

    A dtype chosen with ``torch.bfloat16 if torch.cuda.is_bf16_supported() else
    torch.float16`` (or under ``if torch.cuda.is_bf16_supported():``) is reported too: that
    check counts emulation and answers True on a V100 or T4. A choice guarded by
    ``is_bf16_supported(including_emulation=False)`` or by the compute capability is not, nor
    is bfloat16 on a branch the user selects (``if args.bf16:``, ``torch.bfloat16 if
    args.bf16 else torch.float32``).

    ## Why it matters
    GPUs before Ampere have no bfloat16 tensor cores. Depending on the torch and CUDA
    version, ``torch.autocast(dtype=torch.bfloat16)`` raises "Current CUDA Device does not
    support bfloat16. Please switch dtype to float16.", or bfloat16 runs emulated — the
    arithmetic done in float32 without tensor cores, several times slower than float16 —
    and cuDNN has no bfloat16 convolutions for these GPUs. The run either fails after the
    model loaded or trains at a fraction of the speed it would in float16.

    ## Fix
    Use float16 with ``torch.amp.GradScaler("cuda")`` on these GPUs (or float32), and pick
    the dtype with ``torch.cuda.is_bf16_supported(including_emulation=False)``.

    ## Settings
    ``gpu``: the target GPU. Without one the rule stays quiet.
    """

    code = "AMP002"
    name = "bf16-unsupported-gpu"
    severity = Severity.WARNING
    kinds = frozenset({DocumentKind.PYTHON})
    # a bfloat16 choice: a dtype, autocast, Accelerator(mixed_precision="bf16"), a "bf16" flag
    python_needs = r"bf16|bfloat16|autocast|dtype|Accelerator|mixed_precision"

    @classmethod
    def needs(cls, settings: Settings) -> str | tuple[str, ...] | None:
        """Nothing to find on a GPU that runs bfloat16 natively, or with no GPU set."""
        if not settings.gpu:
            return None
        try:
            return None if lookup_gpu(settings.gpu).bf16 else cls.python_needs
        except UnknownGpu:
            return None

    VALID = (
        Example(
            _SCRIPT.format(dtype="torch.float16"),
            settings={"gpu": "v100"},
            title="float16 autocast with a GradScaler on a V100",
        ),
        Example(
            _SCRIPT.format(dtype="torch.bfloat16"),
            settings={"gpu": "a100"},
            title="bfloat16 on an A100 (Ampere has bfloat16 tensor cores)",
        ),
        Example(
            _CHECKED.format(args="including_emulation=False"),
            settings={"gpu": "t4"},
            title="The dtype is picked by a check that does not count emulation",
        ),
    )
    INVALID = (
        Example(
            _SCRIPT.format(dtype="torch.bfloat16"),
            settings={"gpu": "v100"},
            lines=(8,),
            message="no bfloat16 support",
            title="bfloat16 autocast on a V100",
        ),
        Example(
            _CHECKED.format(args=""),
            settings={"gpu": "t4"},
            lines=(3,),
            message="is_bf16_supported()",
            title="is_bf16_supported() counts emulation: it picks bfloat16 on a T4",
        ),
    )

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        if not ctx.settings.gpu:
            return
        try:
            gpu = lookup_gpu(ctx.settings.gpu)
        except UnknownGpu:
            return
        if gpu.bf16:
            return
        index = index_for(ctx.python)
        if index is None:
            return
        capability = f" (compute capability {gpu.compute_capability})" if gpu.compute_capability else ""
        seen: set[int] = set()
        for node, what, trap in _bf16_uses(index):
            if id(node) in seen or (trap is None and _chosen_by_a_condition(index, node)):
                continue
            seen.add(id(node))
            message = (
                f"{gpu.name}{capability} has no bfloat16 support: {what} runs bfloat16 emulated without "
                "tensor cores (or fails with 'Current CUDA Device does not support bfloat16'); "
                "use float16 with torch.amp.GradScaler"
            )
            if trap is not None:
                message += (
                    f"; `torch.cuda.is_bf16_supported()` (line {index.py.range_of(trap).start.line}) counts "
                    "emulation and returns True here: pass including_emulation=False"
                )
            yield Finding(range=index.py.range_of(node), message=message)


def _bf16_uses(index: ModuleIndex) -> Iterator[tuple[cst.CSTNode, str, cst.Call | None]]:
    """(where to report, what it is, the emulation-counting check that chose it, if any)."""
    trained = trained_models(index)
    for node in index.calls:
        autocast = autocast_of(index, node)
        if autocast is not None and not autocast.disabled and "bf16" in autocast.cuda_dtypes:
            decided = _decides(index, autocast.dtype, autocast.cuda_dtypes)
            if decided is not None:
                yield _reported_at(decided, node), "bfloat16 autocast", decided[1]
        elif method_name(node) == "Accelerator" and string_value(argument(node, None, "mixed_precision")) == "bf16":
            yield node, 'Accelerator(mixed_precision="bf16")', None
    for choice in dtype_choices(index):
        if "bf16" not in choice.dtypes:
            continue
        if choice.what in (".bfloat16()", ".to(dtype)") and (
            choice.model is None or (choice.model not in trained and choice.model.split(".")[0] not in trained)
        ):
            continue
        value = _dtype_argument(choice.node)
        decided = _decides(index, value, choice.dtypes)
        if decided is not None:
            yield _reported_at(decided, choice.node), f"`{choice.what}`", decided[1]


def _reported_at(decided: tuple[cst.CSTNode | None, cst.Call | None], use: cst.CSTNode) -> cst.CSTNode:
    """The choice made by an emulation-counting check is reported there; a certain one at its use."""
    choice, check = decided
    return choice if check is not None and choice is not None else use


def _dtype_argument(call: cst.Call) -> cst.BaseExpression | None:
    for name in ("torch_dtype", "dtype", "param_dtype", "bnb_4bit_compute_dtype"):
        value = argument(call, None, name)
        if value is not None:
            return value
    return None


def _decides(
    index: ModuleIndex, dtype: cst.BaseExpression | None, dtypes
) -> tuple[cst.CSTNode | None, cst.Call | None] | None:
    """Is bfloat16 certain, or chosen by ``is_bf16_supported()`` counting emulation? Returns
    (where the choice is made, the check) — or None when another condition decides."""
    if dtypes == frozenset({"bf16"}):
        return (dtype, None) if dtype is not None else (None, None)
    found = bf16_support_choice(index, dtype)
    if found is None or is_false(argument(found[1], 0, "including_emulation")):
        return None
    return found


def _chosen_by_a_condition(index: ModuleIndex, node: cst.CSTNode) -> bool:
    """Inside ``if args.bf16:`` (a choice the user makes at run time), unless the condition is
    the emulation-counting ``is_bf16_supported()`` check."""
    conditions = index.conditions(node)
    if not conditions:
        return False
    return not any("is_bf16_supported" in text and "including_emulation" not in text for text, _ in conditions)
