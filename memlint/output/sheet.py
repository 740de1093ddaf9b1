"""The memory budget sheet, as terminal text or Markdown (hovers, PR comments)."""

from __future__ import annotations

from typing import Sequence

from memlint.estimate import Budget, ServingSheet, Suggestion
from memlint.model.units import GiB, format_count

BAR_WIDTH = 28
MIN_SHOWN_BYTES = 1024**2  # rows under 1 MiB (input ids, ...) are left out of the table


def _gib(n: float) -> str:
    return f"{n / GiB:,.2f}"


def _bar(fraction: float, width: int = BAR_WIDTH) -> str:
    fraction = max(fraction, 0.0)
    filled = min(int(round(fraction * width)), width)
    bar = "█" * filled + "░" * (width - filled)
    return bar + ("▶" if fraction > 1 else " ")


def describe_setup(budget: Budget) -> str:
    s = budget.setup
    parts = []
    lora = s.get("lora")
    if lora:
        if lora.get("method") == "oft":
            kind = "quantized-base OFT" if lora.get("quantization") else "OFT"
            parts.append(f"{kind} blocks of {lora['block_size']} ({', '.join(lora['targets'])})")
        else:
            kind = "QLoRA" if lora.get("quantization") else "LoRA"
            parts.append(f"{kind} r={lora['r']} ({', '.join(lora['targets'])})")
    elif s.get("trained_blocks") is not None:
        parts.append(f"{s['trained_blocks']} block{'s' if s['trained_blocks'] != 1 else ''} trained")
    elif s.get("sampled_blocks") is not None:
        parts.append(f"LISA ({s['sampled_blocks']} sampled block{'s' if s['sampled_blocks'] != 1 else ''} at a time)")
    elif s.get("frozen"):
        parts.append(f"freeze tuning ({s['frozen']['layers']} blocks frozen)")
    else:
        parts.append("full fine-tuning")
    projection = s.get("projection")
    if projection:
        parts.append(f"{projection['name']} rank {projection['rank']}" + (" layer-wise" if projection["layerwise"] else ""))
    if s.get("experts_on_host"):
        parts.append("routed experts on the CPU (KTransformers)")
    parts.append(s.get("precision", "?"))
    parts.append(s.get("optimizer", "?"))
    labels = f" ({s['decoder_len']} of labels)" if s.get("decoder_len") else ""
    parts.append(f"micro-batch {s.get('micro_batch')} × {s.get('seq_len')} tokens{labels}")
    ckpt = s.get("grad_ckpt", 0)
    parts.append("checkpointing " + ("on" if ckpt == 1 else f"every {ckpt} layers" if ckpt else "off"))
    parts.append(f"{s.get('attention')} attention")
    world = s.get("world_size", 1)
    sharding = s.get("sharding", "none")
    parts.append(f"{world} GPU{'s' if world != 1 else ''}" + (f", {sharding}" if sharding != "none" else ""))
    split = s.get("model_parallel")
    if split:
        sizes = " × ".join(f"{name} {split[key]}" for name, key in (("TP", "tensor"), ("PP", "pipeline"),
                                                                  ("EP", "expert")) if split[key] > 1)
        parts.append(("Megatron " if split["megatron"] else "") + sizes
                     + (", sequence parallel" if split["sequence_parallel"] else "")
                     + (", distributed optimizer" if split["distributed_optimizer"] else ""))
    if s.get("offload_optimizer"):
        parts.append("optimizer offloaded")
    if s.get("grad_accum", 1) > 1:
        parts.append(f"accumulation ×{s['grad_accum']}")
    return " · ".join(parts)


def verdict_line(budget: Budget) -> str:
    cap, margin = budget.capacity, budget.margin_bytes
    if cap is None or margin is None:  # the margin is known exactly when the GPU is
        return f"Peak {_gib(budget.peak_bytes)} GiB per GPU (no target GPU given)."
    if not budget.fits:
        short = -margin
        return (
            f"✗ Does not fit on {cap.gpu_name}: needs {_gib(budget.peak_bytes)} GiB, "
            f"{_gib(cap.usable_bytes)} GiB usable — {_gib(short)} GiB short."
        )
    if not budget.comfortable:
        return (
            f"! Fits on {cap.gpu_name} with little headroom: {_gib(budget.peak_bytes)} of "
            f"{_gib(cap.usable_bytes)} GiB usable (allocator fragmentation can push it over)."
        )
    return (
        f"✓ Fits on {cap.gpu_name}: {_gib(budget.peak_bytes)} of {_gib(cap.usable_bytes)} GiB usable, "
        f"{_gib(margin)} GiB to spare."
    )


def render_text(budget: Budget, suggestions: Sequence[Suggestion] = ()) -> str:
    cap = budget.capacity
    scale = cap.usable_bytes if cap else budget.peak_bytes
    lines = [
        f"{budget.model} — {format_count(budget.parameters)} parameters"
        + (f", {format_count(budget.trainable_parameters)} trained" if budget.trainable_parameters != budget.parameters else ""),
        describe_setup(budget),
    ]
    if cap:
        lines.append(
            f"Target: {cap.gpu_name} — {_gib(cap.total_bytes)} GiB total, {_gib(cap.usable_bytes)} GiB "
            f"usable after {_gib(cap.reserved_bytes)} GiB for the CUDA context and kernels and "
            f"{cap.fragmentation_fraction:.1%} for allocator fragmentation"
        )
    lines.append("")
    peak = budget.peak_phase
    shown = [c for c in sorted(peak.components, key=lambda c: -c.bytes) if c.bytes >= MIN_SHOWN_BYTES]
    width = max([len(c.label) for c in shown] + [24])
    header = f"Peak during {peak.name.replace('_', ' ')}"
    lines.append(f"{header:<{width + 2}}  {'GiB':>8}  " + (f"share of {_gib(scale)} GiB usable" if cap else ""))
    for c in shown:
        lines.append(f"  {c.label:<{width}}  {_gib(c.bytes):>8}  {_bar(c.bytes / scale)}")
    lines.append("  " + "─" * (width + 12 + BAR_WIDTH))
    pct = f" {budget.peak_bytes / scale * 100:.0f}%" if cap else ""
    lines.append(f"  {'Peak':<{width}}  {_gib(budget.peak_bytes):>8}  {_bar(budget.peak_bytes / scale)}{pct}")
    lines.append("")
    lines.append("Phases: " + " · ".join(f"{p.name.replace('_', ' ')} {_gib(p.bytes)} GiB" for p in budget.phases))
    if budget.host_bytes:
        lines.append(f"Host (CPU) memory for offloaded state: {_gib(budget.host_bytes)} GiB per node")
    lines.append("")
    lines.append(verdict_line(budget))
    if suggestions:
        fitting = budget.fits is False
        lines.append("")
        lines.append("Cheapest changes that make it fit:" if fitting else "Changes that lower the peak:")
        w = max(len(s.change) for s in suggestions)
        for s in suggestions:
            mark = "" if s.fits is None else (" ✓" if s.fits else " ✗")
            lines.append(
                f"  {s.change:<{w}}  −{_gib(s.saves_bytes):>6} GiB → {_gib(s.peak_bytes)} GiB{mark}   {s.how}"
            )
    if budget.assumptions:
        lines.append("")
        lines.append("Assumptions: " + "; ".join(budget.assumptions) + ".")
    return "\n".join(lines)


def render_markdown(budget: Budget, suggestions: Sequence[Suggestion] = ()) -> str:
    """A compact table for editor hovers and pull-request comments: the verdict first (a
    hover shows its first 250 px), the table after."""
    cap = budget.capacity
    out = [f"**{verdict_line(budget)}**", "",
           f"**memlint** — {budget.model}: ~{_gib(budget.peak_bytes)} GiB per GPU at the peak "
           f"({budget.peak_phase.name.replace('_', ' ')})", "", describe_setup(budget), ""]
    out += ["| component | GiB |", "|---|---:|"]
    for c in sorted(budget.components, key=lambda c: -c.bytes):
        out.append(f"| {c.label} | {_gib(c.bytes)} |")
    out.append(f"| **peak** | **{_gib(budget.peak_bytes)}** |")
    if cap:
        out.append(f"| usable on {cap.gpu_name} | {_gib(cap.usable_bytes)} |")
    if suggestions:
        out += ["", "Cheapest changes:"]
        for s in suggestions[:4]:
            out.append(f"- {s.change}: −{_gib(s.saves_bytes)} GiB → {_gib(s.peak_bytes)} GiB (`{s.how}`)")
    return "\n".join(out)


def render_serving(sheet: ServingSheet) -> str:
    cap = sheet.capacity
    lines = [f"{sheet.model} — serving sheet", ""]
    rows = [
        ("Weights", sheet.weight_bytes),
        ("Activations (profiling forward pass)", sheet.activation_bytes),
        ("KV cache budget", sheet.kv_budget_bytes),
    ]
    for label, n in rows:
        lines.append(f"  {label:<38} {_gib(n):>9} GiB")
    lines.append(f"  {'KV cache per token':<38} {sheet.kv_bytes_per_token / 1024:>9.1f} KiB")
    lines.append(f"  {'KV cache per sequence':<38} {_gib(sheet.kv_bytes_per_sequence):>9} GiB")
    lines.append("")
    if cap:
        lines.append(
            f"On {cap.gpu_name} ({_gib(sheet.budget_bytes)} GiB claimed): {sheet.blocks:,} KV blocks, "
            f"{sheet.max_tokens:,} tokens, {sheet.max_sequences:,} concurrent full-length sequences."
        )
        if sheet.max_sequences == 0:
            lines.append("✗ Not even one full-length sequence fits.")
    return "\n".join(lines)
