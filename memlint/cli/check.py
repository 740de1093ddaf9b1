"""``memlint check``: lint paths (or the current directory), print, exit 0 / 1 / 2."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from memlint.model.diagnostics import Diagnostic, Severity
from memlint.output import FORMATS, FormatContext, formatter
from memlint.project.settings import Settings, SettingsError, discover, load_file


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", type=Path, help="files or directories (default: the current directory)")
    p.add_argument("--gpu", help="target GPU (overrides `gpu` in [tool.memlint])")
    p.add_argument("--gpus", type=int, help="GPUs per run when no launcher says (overrides `gpus`)")
    p.add_argument("--seq-len", type=int, help="sequence length when the code sets none")
    p.add_argument("--output-format", "--format", dest="format", choices=FORMATS, default="text",
                   help="output format (default: text)")
    p.add_argument("--select", help="comma-separated rule codes or prefixes to enable (replaces the settings' select and ignore)")
    p.add_argument("--extend-select", help="comma-separated codes or prefixes to add")
    p.add_argument("--ignore", help="comma-separated codes or prefixes to disable (added to the settings')")
    p.add_argument("--fail-on", choices=("error", "warning", "info"),
                   help="exit 1 when a finding is at least this severe (default: warning)")
    p.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    p.add_argument("--fix", action="store_true", help="apply safe fixes, writing files atomically")
    p.add_argument("--unsafe-fixes", action="store_true", help="with --fix, also apply unsafe fixes")
    p.add_argument("--force-exclude", action="store_true",
                   help="apply excludes to files named on the command line too (for pre-commit)")
    p.add_argument("--config", type=Path, help="a memlint.toml or pyproject.toml to use instead of discovery")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the result cache")
    p.add_argument("--offline", action="store_true",
                   help="never ask the Hugging Face Hub for an uncatalogued model's config.json "
                        "(as HF_HUB_OFFLINE=1 or `offline = true`)")
    p.add_argument("--cache-dir", type=Path, metavar="DIR",
                   help="where the result cache lives (default: $MEMLINT_CACHE_DIR, else .memlint_cache in the project root)")
    p.add_argument("-j", "--jobs", type=int, metavar="N",
                   help="worker processes (default: every core; small inputs run in one process)")
    p.add_argument("--statistics", action="store_true",
                   help="print where the time went (files parsed, set aside, seconds per stage) on stderr")
    p.add_argument("--output-file", type=Path, help="write the report to this file instead of stdout")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto")


def _codes(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    return tuple(c.strip().upper() for c in text.split(",") if c.strip())


def settings_for(args: argparse.Namespace) -> Settings:
    """The settings for the paths' common directory, with the command line's flags applied."""
    from memlint.cli.errors import UsageError

    try:
        if args.config is not None:
            settings = load_file(args.config)
            if settings is None:
                raise UsageError(f"{args.config}: no [tool.memlint] table")
        else:
            anchor = Path(os.path.commonpath([str(p.resolve()) for p in args.paths])) if args.paths else Path.cwd()
            settings = discover(anchor)
    except SettingsError as error:
        raise UsageError(str(error)) from None
    return apply_flags(settings, args)


def apply_flags(settings: Settings, args: argparse.Namespace) -> Settings:
    """Command-line flags win over any settings file."""
    from memlint.cli.errors import UsageError

    if args.gpu:
        from memlint.catalog.gpus import UnknownGpu, lookup_gpu

        try:
            lookup_gpu(args.gpu)
        except UnknownGpu as error:
            raise UsageError(str(error)) from None
    ignore = _codes(args.ignore)
    select = _codes(args.select)
    if select is not None:  # as in ruff: a new selection starts over, the file's ignores included
        ignore = ignore or ()
    elif ignore:
        ignore = settings.ignore + ignore
    if getattr(args, "offline", False):
        os.environ["HF_HUB_OFFLINE"] = "1"  # worker processes and nested settings files inherit it
    return settings.with_overrides(
        offline=True if getattr(args, "offline", False) else None,
        gpu=args.gpu,
        gpus=args.gpus,
        seq_len=args.seq_len,
        select=select,
        extend_select=_codes(args.extend_select),
        ignore=ignore,
        fail_on=Severity.parse(args.fail_on) if args.fail_on else None,
        cache=False if args.no_cache else None,
    )


def _read(path: str) -> str | None:
    """A file's text for source snippets, read as safely as linting reads it (never a FIFO)."""
    from memlint.documents.reading import read_document

    document = read_document(path)
    return None if document.problem else document.text


def run(args: argparse.Namespace) -> int:
    from memlint.check.run import lint
    from memlint.cli.errors import EXIT_FINDINGS, EXIT_OK, UsageError

    if args.unsafe_fixes and not args.fix:
        raise UsageError("--unsafe-fixes needs --fix")
    if args.jobs is not None and args.jobs < 1:
        raise UsageError("--jobs must be 1 or more")
    settings = settings_for(args)
    paths = args.paths or [Path.cwd()]
    for path in paths:
        if not path.exists() and not path.is_symlink():
            raise UsageError(f"{path}: no such file or directory")
    cache_dir = args.cache_dir or (Path(os.environ["MEMLINT_CACHE_DIR"]) if os.environ.get("MEMLINT_CACHE_DIR") else None)
    overrides = None if args.config is not None else (lambda found: apply_flags(found, args))
    try:
        result = lint(paths, settings, force_exclude=args.force_exclude, overrides=overrides, jobs=args.jobs,
                      cache_dir=cache_dir)
    except SettingsError as error:
        raise UsageError(str(error)) from None
    diagnostics = result.diagnostics
    if args.fix:
        from memlint.check.fix_loop import fix_files

        diagnostics = fix_files(result, settings, paths, args.force_exclude, args.unsafe_fixes, overrides, args.jobs,
                                cache_dir)
    color = args.color == "always" or (args.color == "auto" and sys.stdout.isatty() and not args.output_file
                                       and "NO_COLOR" not in os.environ)
    ctx = FormatContext(Path.cwd(), _read, color=color and args.format in ("text", "concise"))
    report, diagnostics = write_report(diagnostics, args.format, ctx, settings)
    if args.output_file:
        args.output_file.write_text(report, encoding="utf-8")
    else:
        sys.stdout.write(report)
    if args.statistics:
        print(result.statistics.line(), file=sys.stderr)
    if args.exit_zero:
        return EXIT_OK
    failing = [d for d in diagnostics if d.severity >= settings.fail_on]
    return EXIT_FINDINGS if failing else EXIT_OK


def write_report(diagnostics: list[Diagnostic], name: str, ctx: FormatContext,
                 settings: Settings) -> tuple[str, list[Diagnostic]]:
    """The report, and the diagnostics it holds. A file whose diagnostics the format fails on
    is reported by one diagnostic saying so (memlint.documents.failures) instead of by them; the rest
    of the report is written as usual."""
    from memlint.documents import failures

    write = formatter(name)
    try:
        return write(diagnostics, ctx), diagnostics
    except Exception:
        pass
    by_file: dict[str, list[Diagnostic]] = {}
    for diagnostic in diagnostics:
        by_file.setdefault(diagnostic.path, []).append(diagnostic)
    kept: list[Diagnostic] = []
    for path, found in by_file.items():
        try:
            write(found, ctx)
            kept.extend(found)
        except Exception as error:
            failures.note("writing the findings of", path, error)
            replacement = failures.diagnostic(path, failures.describe("writing its findings", error), settings)
            kept.extend([replacement] if replacement is not None else [])
    return write(kept, ctx), kept
