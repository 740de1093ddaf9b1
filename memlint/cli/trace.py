"""``memlint trace``: measure a run's training step on fake tensors, beside its static estimate.

The run comes from the same places as ``memlint estimate``'s (a script or config PATH, a
directory of them, or --model and the setup flags). It becomes a :mod:`memlint.trace` case
(:func:`memlint.trace.setup_case.trace_plan`), measured in a worker subprocess (a crash or a
hang cannot take memlint down; ``--timeout`` bounds it), and the measured breakdown is printed
beside the estimate of the same setup (:mod:`memlint.trace.compare`).

Needs the optional extra ``memlint[trace]`` (torch, transformers, peft); nothing here imports
torch: the worker does.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
from dataclasses import dataclass
from typing import Any

from memlint.cli.estimate import budget_json
from memlint.cli.run_flags import add_run_arguments

EXTRA_MESSAGE = "memlint trace needs the optional extra: pip install 'memlint[trace]'"
BITSANDBYTES_MESSAGE = ("memlint trace: QLoRA and 8-bit AdamW also need bitsandbytes: "
                        "pip install bitsandbytes==0.50.2")
EXIT_MEASUREMENT_FAILED = 1


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_run_arguments(p, "measured (a directory: every run in it)")
    p.add_argument("--model-config", metavar="CONFIG_JSON",
                   help="the model's config.json (or a directory holding one) instead of --model")
    p.add_argument("--timeout", type=float, default=600, metavar="SECONDS",
                   help="give up on a measurement after this long (default: 600)")
    p.add_argument("--format", choices=("text", "json"), default="text")


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # an import hook refusing it, or a broken half-installed module
        return False


def missing_extra(needs_peft: bool = False) -> bool:
    """Is a package of ``memlint[trace]`` missing (found without importing it)?"""
    return not all(_installed(n) for n in ("torch", "transformers") + (("peft",) if needs_peft else ()))


@dataclass(frozen=True)
class _Run:
    entry: str | None  # the file that defines the run (None: from flags)
    arch: Any
    setup: Any
    gpu: str | None


def _runs(args: argparse.Namespace) -> list[_Run]:
    from memlint.cli.errors import UsageError

    if args.model_config:
        if args.model:
            raise UsageError("give --model or --model-config, not both")
        args.model = os.path.abspath(args.model_config)  # from here, not from the directory of PATH's files
    # a PATH with --model / --model-config: the run of PATH with that model instead
    if args.path and os.path.isdir(args.path):
        from memlint.cli.named_run import plans_in_directory

        return [_Run(*found) for found in plans_in_directory(args.path, args)]
    if args.path:
        from memlint.cli.named_run import plan_for_path

        return [_Run(args.path, *plan_for_path(args.path, args))]
    from memlint.cli.named_run import plan_from_args

    arch, setup, gpu = plan_from_args(args)
    return [_Run(None, arch, setup, gpu)]


def run(args: argparse.Namespace) -> int:
    from memlint.cli.errors import EXIT_OK, EXIT_USAGE, UsageError
    from memlint.trace.setup_case import NotMeasurable, trace_plan

    if missing_extra():
        print(EXTRA_MESSAGE, file=sys.stderr)
        return EXIT_USAGE
    if args.timeout <= 0:
        raise UsageError("--timeout must be more than 0 seconds")
    runs = _runs(args)
    planned = []
    for r in runs:
        try:
            planned.append((r, trace_plan(r.arch, r.setup), _capacity(r.gpu)))
        except NotMeasurable as error:
            if len(runs) == 1:
                raise UsageError(f"{r.entry + ': ' if r.entry else ''}cannot measure this run: {error}") from None
            print(f"memlint: skipped {r.entry}: cannot measure this run: {error}", file=sys.stderr)
    if not planned:
        raise UsageError(f"{args.path}: no run in this directory can be measured")
    cases = [plan.case for _, plan, _ in planned]
    if missing_extra(needs_peft=any(c.lora_config is not None for c in cases)):
        print(EXTRA_MESSAGE, file=sys.stderr)
        return EXIT_USAGE
    if any(c.qlora is not None or c.optimizer == "adamw-8bit" for c in cases) and not _installed("bitsandbytes"):
        print(BITSANDBYTES_MESSAGE, file=sys.stderr)
        return EXIT_USAGE

    reports = [_measure(r, plan, capacity, args) for r, plan, capacity in planned]
    if args.format == "json":
        docs = [rep["json"] for rep in reports]
        print(json.dumps(docs[0] if len(docs) == 1 and not _is_directory(args) else docs, indent=2))
    else:
        print("\n\n".join(rep["text"] for rep in reports))
    return EXIT_OK if all(rep["ok"] for rep in reports) else EXIT_MEASUREMENT_FAILED


def _is_directory(args: argparse.Namespace) -> bool:
    return bool(args.path) and os.path.isdir(args.path)


def _capacity(gpu: str | None) -> Any:
    """The usable capacity of the target GPU (an unknown name is a usage error, found before
    anything is measured)."""
    from memlint.catalog.gpus import UnknownGpu, lookup_gpu
    from memlint.cli.errors import UsageError
    from memlint.estimate import capacity_for

    if not gpu:
        return None
    try:
        return capacity_for(lookup_gpu(gpu))
    except UnknownGpu as error:
        raise UsageError(str(error)) from None


def _measure(r: _Run, plan: Any, capacity: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Measure one planned run and render it (text and JSON)."""
    from memlint.estimate import estimate_training
    from memlint.trace.batch import run_one_in_subprocess
    from memlint.trace.compare import compare

    budget = estimate_training(r.arch, plan.setup, capacity)
    own = estimate_training(r.arch, r.setup, capacity) if plan.differences else None
    where = f" ({r.entry})" if r.entry else ""
    print(f"memlint: measuring {plan.case.id}{where} on fake tensors...", file=sys.stderr, flush=True)
    result = run_one_in_subprocess(plan.case, timeout=args.timeout)
    doc: dict[str, Any] = {
        "entry": r.entry,
        "model": budget.model,
        "status": result.get("status"),
        "setup": budget.setup,
        "differences": list(plan.differences),
        "notes": list(plan.notes),
    }
    ok = result.get("status") == "ok"
    if ok:
        comparison = compare(result, budget)
        doc["comparison"] = comparison.to_json()
    else:
        comparison = None
        doc["error"] = result.get("error")
    doc["estimate"] = budget_json(budget, [])
    if own is not None:
        doc["run_estimate"] = {"setup": own.setup, "peak_bytes": own.peak_bytes, "peak_phase": own.peak_phase.name}
    doc["measurement"] = result
    text = _render(r, plan, budget, own, result, comparison)
    return {"ok": ok, "json": doc, "text": text}


def _render(r: _Run, plan: Any, budget: Any, own: Any, result: dict[str, Any], comparison: Any) -> str:
    from memlint.model.units import GiB, format_count
    from memlint.output.sheet import describe_setup
    from memlint.trace.compare import render_table, verdict

    lines = []
    if r.entry:
        lines.append(f"Run of {r.entry}")
    trained = (f", {format_count(budget.trainable_parameters)} trained"
               if budget.trainable_parameters != budget.parameters else "")
    lines.append(f"{budget.model} — {format_count(budget.parameters)} parameters{trained}")
    lines.append(describe_setup(budget))
    if plan.differences:
        lines.append("Measured instead of the run as written:")
        lines += [f"  - {d}" for d in plan.differences]
    for note in plan.notes:
        lines.append(f"Note: {note}")
    if result.get("status") != "ok":
        lines.append("")
        lines.append(f"✗ The measurement failed ({result.get('status')}): {result.get('error')}")
        detail = str(result.get("detail") or "").strip().splitlines()
        if detail:
            lines.append("  " + detail[-1])
        return "\n".join(lines)
    case = plan.case
    used = ["torch", "transformers"] + (["peft"] if case.lora_config else []) + (
        ["bitsandbytes"] if case.qlora is not None or case.optimizer == "adamw-8bit" else [])
    versions = result.get("versions", {})
    libs = ", ".join(f"{name} {versions[name]}" for name in used if name in versions)
    micro = f" (the last of {case.grad_accum} micro-batches)" if case.grad_accum > 1 else ""
    lines.append(f"Measured: {case.steps} training steps{micro} on fake tensors ({libs}) "
                 f"in {result.get('wall_s', result.get('timing_s', {}).get('total_s', 0)):.1f} s")
    lines.append("")
    lines += render_table(comparison)
    lines.append("")
    cap = budget.capacity
    if cap is not None:
        fits = "fits" if result["peak_bytes"] <= cap.usable_bytes else "does not fit"
        lines.append(f"On {cap.gpu_name}: the measured peak {result['peak_bytes'] / GiB:,.2f} GiB {fits} in "
                     f"{cap.usable_bytes / GiB:,.2f} GiB usable.")
    lines.append(verdict(comparison))
    if own is not None and own.peak_bytes != budget.peak_bytes:
        lines.append(f"The run as written is estimated at {own.peak_bytes / GiB:,.2f} GiB per GPU "
                     f"({describe_setup(own)}).")
    return "\n".join(lines)
