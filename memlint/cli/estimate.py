"""``memlint estimate``: the budget sheet for a model and setup named on the command line."""

from __future__ import annotations

import argparse
import json

from memlint.catalog.gpus import UnknownGpu, lookup_gpu
from memlint.cli.errors import EXIT_OK, UsageError
from memlint.cli.run_flags import add_run_arguments
from memlint.estimate import Budget, ServingSetup, capacity_for, estimate_serving, estimate_training, suggest
from memlint.model.units import GiB
from memlint.output.sheet import render_serving, render_text


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_run_arguments(p, "estimated")
    p.add_argument("--serve", action="store_true", help="inference serving sheet (KV cache) instead of training")
    p.add_argument("--kv-dtype", default="bf16", help="KV-cache dtype for --serve (bf16, fp8, ...)")
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel degree for --serve")
    p.add_argument("--format", choices=("text", "json", "html"), default="text",
                   help="html: a self-contained page with bars per component and phase (CI artifacts)")


def budget_json(budget: Budget, suggestions) -> dict:
    out = budget.to_json()
    out["peak_gib"] = round(budget.peak_bytes / GiB, 3)
    out["suggestions"] = [s.to_json() for s in suggestions]
    return out


def run(args: argparse.Namespace) -> int:
    from memlint.cli.named_run import plan_from_args  # the project machinery loads only when used

    arch, setup, gpu_name = plan_from_args(args)
    capacity = None
    if gpu_name:
        try:
            capacity = capacity_for(lookup_gpu(gpu_name))
        except UnknownGpu as error:
            raise UsageError(str(error)) from None
    if args.serve:
        sheet = estimate_serving(
            arch, ServingSetup(seq_len=setup.seq_len, kv_dtype=args.kv_dtype, tensor_parallel=args.tp), capacity
        )
        print(json.dumps(sheet.to_json(), indent=2) if args.format == "json" else render_serving(sheet))
        return EXIT_OK
    budget = estimate_training(arch, setup, capacity)
    suggestions = suggest(arch, setup, budget) if capacity is not None else []
    if args.format == "json":
        print(json.dumps(budget_json(budget, suggestions), indent=2))
    elif args.format == "html":
        from memlint.output.sheet_html import RunView, render_html

        title = f"memlint budget: {args.path or budget.model}"
        print(render_html([RunView(budget.model, budget, suggestions)], title=title), end="")
    else:
        print(render_text(budget, suggestions))
    return EXIT_OK
