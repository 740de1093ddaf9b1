"""The ``memlint`` command line: check, estimate, rule, lsp, trace, gpus, models.

Exit codes (as ruff): 0 clean, 1 findings at or above the failure threshold, 2 usage or
configuration error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Sequence

from memlint import __version__
from memlint.cli.errors import EXIT_OK, EXIT_USAGE, UsageError


def _add_estimate(sub) -> None:
    from memlint.cli import estimate as estimate_cli

    p = sub.add_parser(
        "estimate",
        help="print the memory budget sheet of a model and training setup",
        description="Estimate the per-GPU peak memory of a training step (or a serving setup) "
        "without a GPU and without downloading weights.",
    )
    estimate_cli.add_arguments(p)
    p.set_defaults(handler=estimate_cli.run)


def _add_trace(sub) -> None:
    from memlint.cli import trace as trace_cli

    p = sub.add_parser(
        "trace",
        help="measure a training step on fake tensors beside the estimate (needs memlint[trace])",
        description="Build the model from its config.json on fake tensors (no GPU, no weights, no real "
        "memory), measure two full training steps with PyTorch's memory tracker, and print the measured "
        "breakdown beside the static estimate of the same setup.",
    )
    trace_cli.add_arguments(p)
    p.set_defaults(handler=trace_cli.run)


def _add_check(sub) -> None:
    from memlint.cli import check as check_cli

    p = sub.add_parser(
        "check",
        help="lint training scripts and configs (pre-commit and CI)",
        description="Find out-of-memory runs and well-known training mistakes in scripts and configs.",
    )
    check_cli.add_arguments(p)
    p.set_defaults(handler=check_cli.run)


def _add_lsp(sub) -> None:
    p = sub.add_parser(
        "lsp",
        help="run the language server on stdin/stdout (needs memlint[lsp])",
        description="Serve diagnostics, budget hovers, estimates and quick fixes to an editor over "
        "the Language Server Protocol (stdio).",
    )
    p.add_argument("--stdio", action="store_true", help="talk over stdin/stdout (the default and only transport)")
    p.add_argument("--debounce-ms", type=int, default=50, metavar="MS",
                   help="edits of a document closer together than this are linted once, this long after the "
                        "last; an edit after a quiet spell is linted at once (default: 50)")
    p.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="warning",
                   help="what the server logs to stderr (default: warning)")
    p.set_defaults(handler=_run_lsp)


def _run_lsp(args) -> int:
    from memlint.lsp import missing_dependency

    problem = missing_dependency()
    if problem is not None:
        print(f"memlint: error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    if args.debounce_ms < 0:
        raise UsageError("--debounce-ms must be 0 or more")
    from memlint.lsp.server import serve

    return serve(debounce=args.debounce_ms / 1000, log_level=args.log_level)


def _add_rule(sub) -> None:
    from memlint.output import rule_pages as docs

    p = sub.add_parser(
        "rule",
        help="print a rule's documentation (--all lists the rules)",
        description="Print the page of a rule: what it finds, why it matters, an example and the fix.",
    )
    docs.add_rule_arguments(p)
    p.set_defaults(handler=docs.run_rule_command)


def _add_catalogues(sub) -> None:
    p = sub.add_parser("gpus", help="list the GPUs memlint knows, with their usable capacity")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(handler=_run_gpus)
    p = sub.add_parser("models", help="list the bundled model catalogue")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(handler=_run_models)


def _run_gpus(args) -> int:
    from memlint.catalog.gpus import all_gpus
    from memlint.model.units import GiB

    gpus = all_gpus()
    if args.format == "json":
        print(json.dumps([{"id": g.id, "name": g.name, "total_bytes": g.total_bytes} for g in gpus], indent=2))
        return EXIT_OK
    for g in gpus:
        print(f"{g.id:<22} {g.total_bytes / GiB:8.2f} GiB  {g.name}")
    return EXIT_OK


def _run_models(args) -> int:
    from memlint.catalog.models import catalog_entries
    from memlint.estimate import from_config
    from memlint.model.units import format_count

    rows: list[dict[str, Any]] = []
    for entry in catalog_entries():
        arch = from_config(entry.config, entry.id)
        rows.append({"id": entry.id, "aliases": list(entry.aliases), "model_type": arch.model_type,
                     "parameters": arch.n_params})
    if args.format == "json":
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    for r in rows:
        print(f"{r['id']:<45} {r['model_type']:<12} {format_count(r['parameters']):>7}  {', '.join(r['aliases'])}")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memlint",
        description="Will this training run fit in GPU memory, and which well-known mistakes does it make?",
    )
    parser.add_argument("--version", action="version", version=f"memlint {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_check(sub)
    _add_estimate(sub)
    _add_trace(sub)
    _add_rule(sub)
    _add_catalogues(sub)
    _add_lsp(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return args.handler(args)
    except UsageError as error:
        print(f"memlint: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK


def entry() -> None:
    """The ``memlint`` command and ``python -m memlint``: :func:`main`, then the process ends
    at once, as mypy's does, its output flushed: tearing the interpreter down (freeing the
    imports, the rules, the catalogue, what the last check kept) took 0.05 s at the end of every
    run, with nothing left to do on any core."""
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (BrokenPipeError, OSError):  # a reader that went away (``memlint check | head``)
        pass
    if "multiprocessing" in sys.modules:
        # the workers of ``check``, told to end with its last lint, are waited for (as
        # multiprocessing's exit handler would): their CPU time and memory stay counted as
        # this process's children's (``time``, ``wait4``: the benchmarks' figures)
        import multiprocessing

        for child in multiprocessing.active_children():
            child.join()
    os._exit(code)


if __name__ == "__main__":
    entry()
