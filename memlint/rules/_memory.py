"""Shared by the memory rules: where a run's memory finding belongs, and what it says."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from memlint.estimate import Budget
from memlint.facts.pinned_defaults import PINNED_EAGER
from memlint.facts.resolve import ResolvedRun
from memlint.lint.context import RuleContext
from memlint.model.provenance import Location, Sourced
from memlint.model.units import GiB
from memlint.rules.base import Finding

# The facts that control each budget component, most direct first.
CONTROLS: dict[str, tuple[str, ...]] = {
    "activations": ("micro_batch", "seq_len", "grad_ckpt"),
    "logits": ("micro_batch", "seq_len", "fused_loss"),
    "recompute": ("micro_batch", "seq_len"),
    "autocast_weight_copies": ("mixed", "autocast", "grad_ckpt"),
    "optimizer_states": ("optimizer", "zero_stage", "fsdp", "model"),
    "paged_optimizer_states": ("optimizer", "zero_stage", "fsdp", "model"),
    "optimizer_step_temp": ("optimizer",),
    "weights": ("model", "load_dtype", "half_model", "quantization", "zero_stage", "fsdp"),
    "master_weights": ("ds_bf16", "ds_fp16", "zero_stage"),
    "gradients": ("model", "zero_stage", "lora_r"),
    "fp32_gradients": ("zero_stage", "ds_bf16", "ds_fp16"),
    "flat_gradients": ("zero_stage", "ds_bf16", "ds_fp16"),
    "tied_head_gradient": ("model",),
    "head_gradient": ("model",),
    "reduce_copy": ("reduce_bucket", "zero_stage"),
    "tied_embedding_gradients": ("model",),
    "ddp_buckets": ("world_size",),
    "gathered_params": ("zero_stage", "fsdp"),
    "all_gather": ("fsdp", "zero_stage"),
    "reduce_scatter": ("fsdp", "zero_stage"),
    "unsharded_grads": ("fsdp", "zero_stage"),
    "reduce_bucket": ("reduce_bucket", "zero_stage"),
    "allgather_bucket": ("allgather_bucket", "zero_stage"),
}


def gib(n: float) -> str:
    return f"{n / GiB:.1f} GiB"


# Facts that only change per-GPU memory when several GPUs share the work.
_SHARDING_FACTS = {"zero_stage", "fsdp", "world_size", "reduce_bucket", "allgather_bucket"}


def location_for(run: ResolvedRun, budget: Budget, within: Callable[[str], bool] | None = None) -> Location | None:
    """The line that sets the dominant factor of the peak, else the run's anchor; with
    ``within``, only a line of a document it accepts, else None (see ``memlint.lint.verdicts``).

    On one GPU the ZeRO stage or FSDP strategy shards nothing, so it is never blamed there.
    """
    single_gpu = run.setup is not None and run.setup.world_size <= 1
    for component in sorted(budget.components, key=lambda c: -c.bytes):
        for name in CONTROLS.get(component.key, ()):
            if single_gpu and name in _SHARDING_FACTS:
                continue
            fact: Sourced[Any] | None = run.plan.get(name)
            if fact is not None and fact.origin is not None and (within is None or within(fact.origin.path)):
                return fact.origin
    return run.plan.anchor if within is None else None


def describe_dominant(budget: Budget, run: ResolvedRun | None = None) -> str:
    """The largest part of the peak, and the pin that made the attention eager when it decides."""
    dominant = budget.dominant
    said = f"{dominant.label.split(' (')[0].split(':')[0].lower()} {gib(dominant.bytes)}"
    attention = run.provenance.get("attention") if run is not None else None
    if attention is not None and attention.note.startswith(PINNED_EAGER):
        said += f"; {attention.note.split('; ')[0]}"
    return said


def resting_assumptions(ctx: RuleContext, run: ResolvedRun) -> list:
    """The assumed facts an out-of-memory verdict rests on: an assumed sequence length or
    micro-batch always could be otherwise; an assumed GPU count (of a sharded run) only when a
    full node of 8 would make the run fit; assumed plain data parallelism only when sharding
    across the same GPUs would; a launch inherited from the configs of its folder (which shards)
    only when the config would fit judged alone, without it; every batch as long as a truncation
    limit only when batches of short samples (``SHORT_SAMPLES`` tokens) would fit; a library's default
    micro-batch that nothing in the project sets only when micro-batch 1 would fit; the GPU count of
    a launch over a hostfile's machines only when twice as many GPUs would fit."""
    from memlint.estimate import Sharding, estimate_training

    truths: dict[str, dict[str, Any]] = {"parallelism": {"sharding": Sharding.ZERO3},
                                         "unread_parallelism": {"sharding": Sharding.ZERO3},
                                         "seq_len_limit": {"seq_len": SHORT_SAMPLES},
                                         "world_size": {"world_size": FULL_NODE},
                                         "launch": {"sharding": Sharding.NONE},
                                         "images": {"image_tokens": 0},
                                         "default_micro_batch": {"micro_batch": 1}}
    out = []
    standing: list[tuple[Any, dict[str, Any]]] = []  # assumptions no likelier truth overturns alone
    for assumed in run.assumed:
        truth = truths.get(assumed.fact)
        if assumed.fact == "hostfile" and run.setup is not None:
            truth = {"world_size": 2 * run.setup.world_size}  # a hostfile names two machines at least
        if truth is not None:
            capacity = ctx.capacity_for(run)
            if run.arch is None or run.setup is None or capacity is None:
                continue
            if estimate_training(run.arch, run.setup.but(**truth), capacity).fits is False:
                standing.append((assumed, truth))
                continue  # it would not fit with the likelier truth either: the verdict stands
        out.append(assumed)
    if len(standing) > 1 and run.arch is not None and run.setup is not None:
        # two assumptions that each leave the verdict standing may overturn it together (a missing
        # ZeRO-3 config and batches at a truncation limit, LLaVA-pp's full fine-tune): it rests on both
        joint = {key: value for _, truth in standing for key, value in truth.items()}
        if estimate_training(run.arch, run.setup.but(**joint), ctx.capacity_for(run)).fits is not False:
            out.extend(assumed for assumed, _ in standing)
    return out


def rests_on_unread_config(assumed: list) -> bool:
    """Does the verdict hold only if a DeepSpeed config the run names, which memlint cannot
    find, does not shard? Then there is no verdict: the file's stage decides, and CFG015 names
    the missing file."""
    return any(a.fact == "unread_parallelism" for a in assumed)


def unread_config_clause(ctx: RuleContext, run: ResolvedRun, assumed: list) -> str:
    """A verdict that stands even if the DeepSpeed config the run names, which memlint cannot
    find, shards with ZeRO-3 (LightSFT's ``deepspeed: .../ds_z3_config.json``): the figure the
    message leads with is the unsharded one, so say what ZeRO-3 would leave."""
    from memlint.estimate import Sharding, estimate_training

    unread = next((a for a in run.assumed if a.fact == "unread_parallelism"), None)
    capacity = ctx.capacity_for(run)
    if unread is None or unread in assumed or run.arch is None or run.setup is None or capacity is None:
        return ""
    sharded = estimate_training(run.arch, run.setup.but(sharding=Sharding.ZERO3), capacity)
    if sharded.fits is not False:
        return ""
    name = str(run.plan.value("unread_parallelism") or "").rsplit("/", 1)[-1]
    return (f"; whatever ZeRO stage `{name}` (which memlint cannot find) asks for, it needs at least "
            f"{gib(sharded.peak_bytes)} (ZeRO-3)")


def rests_on_data(assumed: list) -> bool:
    """Does the verdict hold only if a batch holds a sample as long as a truncation limit? Then
    the data decides, which memlint cannot read."""
    return any(a.fact == "seq_len_limit" for a in assumed)


def short_data(run: ResolvedRun) -> Sourced | None:
    """The fact that says the run's samples are short, when one does: a vision-language model's
    alignment stage trains its projector alone on image-caption pairs (LLaVA's BLIP-558k: ~600
    tokens with the image), which never reach a truncation limit of thousands of tokens; an
    instruction or chat set over an epoch of batches usually does."""
    fact = run.plan.get("projector_only")
    return fact if fact is not None and fact.value is True else None


def longest_fitting(ctx: RuleContext, run: ResolvedRun) -> int | None:
    """The longest sample (a multiple of 64 tokens, ``SHORT_SAMPLES`` or more) a dynamically
    padded batch of the run may hold and still fit by the estimate; None when even short ones
    do not (or the run cannot be estimated)."""
    from memlint.estimate import estimate_training

    capacity = ctx.capacity_for(run)
    if run.arch is None or run.setup is None or capacity is None:
        return None
    arch, setup = run.arch, run.setup

    def fits(length: int) -> bool:
        return estimate_training(arch, setup.but(seq_len=length), capacity).fits is not False

    low, high = SHORT_SAMPLES // 64, setup.seq_len // 64  # in steps of 64 tokens
    if not fits(low * 64):
        return None
    while high - low > 1:  # fits(low * 64), not fits(high * 64)
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle * 64) else (low, middle)
    return low * 64


#: the length of a batch of short samples (an instruction pair, an image caption): a run padded
#: dynamically that would not fit even so does not fit whatever its data
SHORT_SAMPLES = 512

#: the GPU count an unknown sharded run is tried at: one full node
FULL_NODE = 8


def assumption_clause(assumed: list) -> str:
    """``; this assumes X (nothing here states it; to state the truth: ...)``."""
    if not assumed:
        return ""
    what = ", ".join(a.value for a in assumed)
    where = "; ".join(dict.fromkeys(a.where for a in assumed))
    return f". This rests on an assumption: {what}, which no file states ({where})"


def _same_file(path: str, other: str) -> bool:
    return Path(path).resolve() == Path(other).resolve()


def memory_finding(ctx: RuleContext, run: ResolvedRun, budget: Budget, message: str,
                   assumed: list | None = None, severity=None) -> Finding:
    home = run.plan.home
    where: Location | None = location_for(run, budget)
    if home is not None:  # the config's own deciding line, else its anchor
        where = location_for(run, budget, within=lambda path: _same_file(path, home)) or run.plan.anchor
    assert where is not None  # without ``within``: the deciding fact's line, else the run's anchor
    suggestions = ctx.suggestions(run)
    data = {
        "budget": budget.to_json(),
        "suggestions": [s.to_json() for s in suggestions],
        "entry": run.plan.entry,
    }
    if ctx.capacity is None and run.gpu is not None:
        data["gpu"] = {"id": run.gpu.gpu.id, "count": run.gpu.count, "file": run.gpu.origin.path,
                       "line": run.gpu.origin.range.start.line, "said": run.gpu.said}
    if assumed:
        data["assumed"] = [{"fact": a.fact, "value": a.value, "where": a.where} for a in assumed]
    if run.model_note:
        message = f"{message} (model: {run.model_note})"
    return Finding(range=where.range, path=where.path, message=message, data=data, severity=severity)


def fix_hint(ctx: RuleContext, run: ResolvedRun, verb: str = "makes it fit") -> str:
    """The cheapest change that makes the run fit, as a clause for the message."""
    fitting = [s for s in ctx.suggestions(run) if s.fits]
    if not fitting:
        return ""
    best = fitting[0]
    if verb == "frees":
        return f"; {best.change} frees {gib(best.saves_bytes)}"
    reason = lower_bound_reason(run)
    if reason is not None:  # the estimate is a lower bound: "fits" is no verdict
        said = "" if run.lower_bound is not None else f" ({reason})"  # the message said why already
        return (f"; {best.change} (−{gib(best.saves_bytes)}) would make it fit by the estimate, a lower bound "
                f"here{said}")
    return f"; {best.change} (−{gib(best.saves_bytes)}) {verb}"


def lower_bound_reason(run: ResolvedRun) -> str | None:
    """Why the run's estimate is only a lower bound (a trainer's loss memlint does not model, a
    micro-batch it cannot evaluate), or None."""
    if run.lower_bound is not None:
        return run.lower_bound
    lower = run.plan.get("lower_bound")
    return f"{lower.value} is not modelled" if lower is not None else None


_FORMS = {"none": "plain data parallelism", "zero1": "ZeRO-1", "zero2": "ZeRO-2", "zero3": "ZeRO-3",
          "fsdp-full": "FSDP full shard", "fsdp-grad-op": "FSDP SHARD_GRAD_OP", "fsdp-hybrid": "FSDP hybrid shard"}


def fitting_alternative(ctx: RuleContext, run: ResolvedRun) -> ResolvedRun | None:
    """Another documented launch of the same document's run in another parallelism form, which
    fits (Online-RLHF's README launches ``sft/llama3-8b-it.yaml`` with torchrun alone, then with
    ``--deepspeed ../configs/deepspeed_stage3.json``): the launches disagree on the form, so
    neither is an assumption; the verdict is the form's, and names the one that fits."""
    if run.setup is None:
        return None
    for other in ctx.runs:
        if other is run or other.setup is None or other.setup.sharding == run.setup.sharding:
            continue
        same = (other.arch is not None and run.arch is not None and other.arch.name == run.arch.name
                and (other.setup.micro_batch, other.setup.seq_len) == (run.setup.micro_batch, run.setup.seq_len))
        if not same or other.plan.anchor is None or run.plan.anchor is None:
            continue  # another model or batch: another run, not another form of this one
        budget = ctx.budget(other)
        if budget is not None and budget.fits is True:
            return other
    return None


def alternative_clause(ctx: RuleContext, run: ResolvedRun, other: ResolvedRun) -> str:
    """``; the launch at README.md:145 (ZeRO-3) fits (23.0 GiB)``."""
    assert run.setup is not None and other.setup is not None
    budget = ctx.budget(other)
    peak = f" ({gib(budget.peak_bytes)})" if budget is not None else ""
    return (f" under {_FORMS.get(run.setup.sharding.value, run.setup.sharding.value)}, as the launch at "
            f"{_shown(ctx, run.plan.anchor)} runs it; the launch at {_shown(ctx, other.plan.anchor)} "
            f"({_FORMS.get(other.setup.sharding.value, other.setup.sharding.value)}) fits{peak}")


def _shown(ctx: RuleContext, where: Location) -> str:
    shown = Path(where.path)
    root = ctx.settings.root.resolve()
    if shown.is_absolute() and root in shown.resolve().parents:
        shown = shown.resolve().relative_to(root)
    return f"{shown.as_posix()}:{where.range.start.line}"

