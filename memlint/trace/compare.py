"""A measured training step beside the static estimate of the same step.

The tracker names memory by what holds it (parameters, gradients, optimizer states, forward
activations, backward temporaries, inputs; FSDP2 also sharded/unsharded and communication
buffers); the estimator names its components by what they are (weights, master weights, the
logits, the block being recomputed, ...). Both are grouped into the few rows where the two
agree on what is counted, at each one's peak; the peak of every phase is compared too.

No torch here: this reads a result dict of :func:`memlint.trace.measure.measure_case`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from memlint.estimate import Budget
from memlint.model.units import GiB
from memlint.trace.measure import phase_kind

# (key, label) of the rows, in the order they are shown
ROWS = (
    ("weights", "Weights"),
    ("gradients", "Gradients"),
    ("optimizer_states", "Optimizer states"),
    ("optimizer_step_temp", "Optimizer step temporaries"),
    ("activations", "Activations, logits and backward temporaries"),
    ("inputs", "Input ids and labels"),
    ("other", "Other"),
)

# tracker category -> row (optimizer states are split into states and step temporaries below)
MEASURED_ROW = {
    "Parameter": "weights", "Buffer": "weights", "Sharded Param": "weights", "Unsharded Param": "weights",
    "All Gather": "weights",
    "Gradient": "gradients", "Sharded Grad": "gradients", "Unsharded Grad": "gradients",
    "Reduce Scatter": "gradients",
    "Activation": "activations", "Temp": "activations",
    "Other": "inputs", "Inputs": "inputs",
}
OPTIMIZER_CATEGORIES = ("Optstate", "OptState")

# estimator component key -> row
ESTIMATED_ROW = {
    "weights": "weights", "gathered_params": "weights", "all_gather": "weights", "allgather_bucket": "weights",
    "gradients": "gradients", "fp32_gradients": "gradients", "flat_gradients": "gradients",
    "tied_head_gradient": "gradients", "tied_embedding_gradients": "gradients", "head_gradient": "gradients",
    "reduce_copy": "gradients",
    "unsharded_grads": "gradients",
    "reduce_scatter": "gradients", "reduce_bucket": "gradients", "ddp_buckets": "gradients",
    "optimizer_states": "optimizer_states", "paged_optimizer_states": "optimizer_states",
    "master_weights": "optimizer_states",
    "optimizer_step_temp": "optimizer_step_temp",
    "activations": "activations", "autocast_weight_copies": "activations", "logits": "activations",
    "recompute": "activations", "block_backward": "activations",
    "inputs": "inputs",
}

# measured phase kind -> the estimator's phase name
PHASE_NAMES = {"forward": "forward", "backward": "backward", "optimizer": "optimizer_step"}
SHOWN_BYTES = 1024**2  # rows under 1 MiB on both sides are left out of the text table


@dataclass(frozen=True)
class Row:
    key: str
    label: str
    measured: int
    estimated: int

    @property
    def difference(self) -> int:
        """Estimated minus measured: positive when the estimate is above the measurement."""
        return self.estimated - self.measured

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "label": self.label, "measured_bytes": self.measured,
                "estimated_bytes": self.estimated, "difference_bytes": self.difference}


@dataclass(frozen=True)
class Comparison:
    model: str
    rows: tuple[Row, ...]  # at each one's peak
    phases: tuple[Row, ...]  # the peak of each phase (key: the estimator's phase name)
    measured_peak: int
    measured_phase: str  # the tracker's name: "backward2", "forward1.2", ...
    estimated_peak: int
    estimated_phase: str  # the estimator's: "forward", "backward", "optimizer_step"
    # what the logits and the loss keep alive at the end of the model's forward (measured only:
    # the estimator prices the cross-entropy's high point inside the forward, not what survives it)
    logits_measured: int | None

    @property
    def error(self) -> float:
        """(estimated - measured) / measured: the estimate's relative error."""
        return (self.estimated_peak - self.measured_peak) / self.measured_peak if self.measured_peak else 0.0

    @property
    def same_phase(self) -> bool:
        return PHASE_NAMES.get(phase_kind(self.measured_phase)) == self.estimated_phase

    def to_json(self) -> dict[str, Any]:
        return {
            "rows": [r.to_json() for r in self.rows],
            "phases": [p.to_json() for p in self.phases],
            "peak": {"measured_bytes": self.measured_peak, "measured_phase": self.measured_phase,
                     "estimated_bytes": self.estimated_peak, "estimated_phase": self.estimated_phase,
                     "difference_bytes": self.estimated_peak - self.measured_peak,
                     "error_percent": round(self.error * 100, 2), "same_phase": self.same_phase},
            "logits_and_loss_after_forward_bytes": self.logits_measured,
        }


def persistent_optimizer_bytes(result: Mapping[str, Any]) -> int:
    """Optimizer states alive after the last optimizer step (the tracker also files the step's
    transient buffers under optimizer states while the step runs)."""
    ends = [p for p in result.get("phases", []) if phase_kind(p["phase"]) == "optimizer"]
    if not ends:
        return 0
    return sum(int(ends[-1]["end_breakdown"].get(c, 0)) for c in OPTIMIZER_CATEGORIES)


def compare(result: Mapping[str, Any], budget: Budget) -> Comparison:
    """Side by side: a measured result (status ``ok``) and the estimate of the same setup."""
    measured = dict.fromkeys((k for k, _ in ROWS), 0)
    at_peak = result["breakdown"]
    states = persistent_optimizer_bytes(result)
    for category, n in at_peak.items():
        if category in OPTIMIZER_CATEGORIES:
            kept = min(int(n), states)
            measured["optimizer_states"] += kept
            measured["optimizer_step_temp"] += int(n) - kept
        else:
            measured[MEASURED_ROW.get(category, "other")] += int(n)
    estimated = dict.fromkeys((k for k, _ in ROWS), 0)
    for component in budget.components:
        estimated[ESTIMATED_ROW.get(component.key, "other")] += int(component.bytes)
    rows = tuple(Row(k, label, measured[k], estimated[k]) for k, label in ROWS if measured[k] or estimated[k])

    phase_peaks: dict[str, int] = {}
    for p in result.get("phases", []):
        name = PHASE_NAMES.get(phase_kind(p["phase"]))
        if name is not None:
            phase_peaks[name] = max(phase_peaks.get(name, 0), int(p["peak_bytes"]))
    phases = tuple(Row(p.name, p.name.replace("_", " "), phase_peaks.get(p.name, 0), p.bytes)
                   for p in budget.phases if p.name in phase_peaks)
    return Comparison(
        model=budget.model,
        rows=rows,
        phases=phases,
        measured_peak=int(result["peak_bytes"]),
        measured_phase=str(result.get("peak_phase") or "?"),
        estimated_peak=budget.peak_bytes,
        estimated_phase=budget.peak_phase.name,
        logits_measured=(result.get("loss_head") or {}).get("logits_and_loss_bytes"),
    )


def describe_phase(name: str) -> str:
    """``backward2`` -> ``backward (step 2)``; ``forward1.2`` -> ``forward (step 1, micro-batch 2)``;
    ``optimizer_step`` -> ``optimizer step``."""
    kind = phase_kind(name)
    number = name[len(kind):]
    label = "optimizer step" if kind in ("optimizer", "optimizer_step") else kind.replace("_", " ")
    if not number:
        return label
    step, _, micro = number.partition(".")
    return f"{label} (step {step}" + (f", micro-batch {micro})" if micro else ")")


def _percent(x: float) -> str:
    text = f"{x * 100:+.1f}%"
    return "0.0%" if text in ("+0.0%", "-0.0%") else text


def _gib(n: float) -> str:
    return f"{n / GiB:,.2f}"


def _signed(n: float) -> str:
    text = f"{n / GiB:+,.2f}"
    return "0.00" if text in ("+0.00", "-0.00") else text


def render_table(c: Comparison) -> list[str]:
    """The rows at the peak, the peaks, and the peak of each phase, as text lines."""
    rows = [r for r in c.rows if max(r.measured, r.estimated) >= SHOWN_BYTES]
    width = max([len(r.label) for r in rows] + [len("Peak of each phase (GiB)"), 30])
    head = f"{{:<{width + 2}}}  {{:>10}}  {{:>10}}  {{:>10}}"
    line = "  {:<" + str(width) + "}  {:>10}  {:>10}  {:>10}"
    out = [head.format("At the peak (GiB)", "measured", "estimated", "difference")]
    out += [line.format(r.label, _gib(r.measured), _gib(r.estimated), _signed(r.difference)) for r in rows]
    out.append("  " + "─" * (width + 36))
    out.append(line.format("Peak", _gib(c.measured_peak), _gib(c.estimated_peak),
                           _signed(c.estimated_peak - c.measured_peak)) + f"  {_percent(c.error)}")
    out.append(f"Measured peak: {describe_phase(c.measured_phase)}; estimated peak: "
               f"{describe_phase(c.estimated_phase)}.")
    if c.phases:
        out.append("")
        out.append(head.format("Peak of each phase (GiB)", "measured", "estimated", "difference"))
        out += [line.format(p.label, _gib(p.measured), _gib(p.estimated), _signed(p.difference)) for p in c.phases]
    if c.logits_measured:
        out.append("")
        out.append(f"The logits and the loss keep {_gib(c.logits_measured)} GiB alive after the forward (measured).")
    return out


def verdict(c: Comparison) -> str:
    """One line: how far the estimate is from the measurement."""
    pct = abs(c.error) * 100
    where = "above" if c.error > 0 else "below"
    if pct < 0.05:
        return "The estimate matches the measured peak."
    return f"The estimate is {pct:.1f}% {where} the measured peak ({_signed(c.estimated_peak - c.measured_peak)} GiB)."
