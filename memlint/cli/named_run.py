"""The training run a command line names: the run a PATH defines or takes part in, or
``--model`` with the setup flags (``memlint estimate`` and ``memlint trace``).

The path goes through the same machinery as ``memlint check``: the project around it (its
settings discovered from the path), the documents it links and those that link it, the plan
merged from all of them, resolved with the project's settings. A DeepSpeed JSON on its own
defines no run — the Axolotl YAML or script that names it does — so it is estimated through
them. Command-line flags then override what the files say.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from memlint.catalog.models import UnknownModel
from memlint.catalog.models import resolve as resolve_model
from memlint.cli.errors import UsageError
from memlint.cli.run_flags import setup_from_args
from memlint.documents.reading import is_linted
from memlint.estimate import Architecture, TrainingSetup, UnsupportedArchitecture
from memlint.facts.resolve import ResolvedRun, resolve
from memlint.lint.engine import run_context
from memlint.model.provenance import Sourced
from memlint.project.settings import Settings, SettingsError, discover
from memlint.project.project import Project
from memlint.project.walk import iter_files

LINKED_ONLY = ("deepspeed", "accelerate")  # kinds that only take part in runs others define


def plan_for_path(path: str, args: argparse.Namespace) -> tuple[Architecture, TrainingSetup, str | None]:
    """(architecture, setup, target GPU) of the run ``path`` defines or takes part in.

    ``args.model``, when given, replaces the model the files name. Raises
    ``UsageError`` with a clear message when the path cannot be read, defines no
    run, or names a model memlint does not know.
    """
    target = Path(path)
    if not target.is_file():
        raise UsageError(f"{path}: no such file" if not target.exists() else f"{path}: not a file")
    try:
        settings = discover(target)
    except SettingsError as error:
        raise UsageError(str(error)) from None
    settings = settings.with_overrides(gpus=getattr(args, "gpus", None))
    project, runs = _runs(target, settings)
    if not runs:
        raise UsageError(_why_no_run(project, target))
    run = _choose(project, runs, target)
    return _finish(project, run, settings, args, path)


def plans_in_directory(path: str, args: argparse.Namespace) -> list[tuple[str, Architecture, TrainingSetup, str | None]]:
    """(entry file, architecture, setup, target GPU) of every run defined under a directory.

    A run is listed once, under its entry (the launcher of a launched script, the script or
    config that names the model). Runs that cannot be estimated are reported on stderr and
    left out; a directory with none raises ``UsageError``.
    """
    target = Path(path)
    if not target.is_dir():
        raise UsageError(f"{path}: no such directory")
    try:
        settings = discover(target)
    except SettingsError as error:
        raise UsageError(str(error)) from None
    settings = settings.with_overrides(gpus=getattr(args, "gpus", None))
    project = Project(settings)
    context = run_context(settings)
    found: list[tuple[str, Architecture, TrainingSetup, str | None]] = []
    seen: set[tuple] = set()
    skipped: list[str] = []
    for file in iter_files([target], settings):
        if not is_linted(file):
            continue
        for run in project.runs_for(file, context):
            marker = (run.plan.entry, run.plan.documents)
            if project.key(run.plan.entry) != project.key(file) or marker in seen:
                continue
            seen.add(marker)
            try:
                arch, setup, gpu = _finish(project, run, settings, args, _shown(project, run.plan.entry))
            except UsageError as error:
                skipped.append(str(error))
                continue
            found.append((_shown(project, run.plan.entry), arch, setup, gpu))
    for reason in skipped:
        print(f"memlint: skipped: {reason}", file=sys.stderr)
    if not found:
        raise UsageError(f"{path}: no training run memlint can estimate in this directory"
                         + (f" ({len(skipped)} skipped)" if skipped else ""))
    return found


def _finish(project: Project, run: ResolvedRun, settings: Settings, args: argparse.Namespace,
            path: str) -> tuple[Architecture, TrainingSetup, str | None]:
    """A resolved run with the command line's overrides: --model, then the setup flags."""
    model = getattr(args, "model", None)
    if model:  # --model replaces the model the files name, the rest of the run stays
        plan = replace(run.plan, facts={**run.plan.facts, "model": Sourced(model, None, "--model")})
        run = resolve(plan, run_context(settings), Path(plan.entry).parent)
    if run.arch is None or run.setup is None:
        where = f" ({run.problem_fact.origin})" if run.problem_fact is not None and run.problem_fact.origin else ""
        raise UsageError(f"{path}: cannot estimate this run: {run.problem}{where}")
    _explain(project, run)
    setup = setup_from_args(args, base=run.setup)
    gpu = getattr(args, "gpu", None) or settings.gpu or run.plan.value("gpu")
    return run.arch, setup, gpu


def _runs(target: Path, settings: Settings) -> tuple[Project, list[ResolvedRun]]:
    project = Project(settings)
    runs = project.runs_for(target, run_context(settings))
    if project.parsed(target).kind in LINKED_ONLY and all(
        r.arch is None and project.key(r.plan.entry) == project.key(target) for r in runs
    ):
        runs = []  # the check's note on the project's unused configs: the estimate says why itself
    if runs or project.parsed(target).kind not in LINKED_ONLY:
        return project, runs
    # A linked config in a project without settings or .git: look for its users from the
    # working directory, where the tools are launched, when that contains the file.
    cwd = Path.cwd().resolve()
    if cwd != settings.root.resolve() and cwd in target.resolve().parents:
        wider = Project(replace(settings, root=cwd))
        return wider, wider.runs_for(target, run_context(settings))
    return project, runs


def _why_no_run(project: Project, target: Path) -> str:
    parsed = project.parsed(target)
    if parsed.document.problem is not None:
        return f"{target}: {parsed.document.problem}"
    if parsed.syntax_error is not None:
        start = parsed.syntax_error.range.start
        return f"{target}:{start.line}:{start.column + 1}: {parsed.syntax_error.message}"
    if parsed.structured is not None and not parsed.structured.ok:
        problem = next(p for p in parsed.structured.problems if p.kind != "duplicate-key")
        return f"{target}:{problem.range.start.line}:{problem.range.start.column + 1}: {problem.message}"
    kind = parsed.kind
    if kind in LINKED_ONLY:
        return (f"{target} is a{'n' if kind == 'accelerate' else ''} {kind.capitalize()} config, and no script or "
                "YAML in the project uses it; estimate the file that defines the run, or pass --model")
    if kind in ("json", "yaml", "other", "shell"):
        return (f"{target} is not a training config memlint recognises (DeepSpeed, Accelerate, Axolotl, "
                "LLaMA-Factory, TrainingArguments/TRL); pass --model and the setup as flags")
    return f"{target} defines no training run memlint can see (no model, trainer or launcher); pass --model"


def _choose(project: Project, runs: list[ResolvedRun], target: Path) -> ResolvedRun:
    """The run the path defines itself, else the first that uses it (and say so)."""
    key = project.key(target)
    own = [r for r in runs if project.key(r.plan.entry) == key]
    if own:
        return own[0]
    if len(runs) > 1:
        entries = ", ".join(_shown(project, r.plan.entry) for r in runs)
        print(f"memlint: {target} takes part in {len(runs)} runs ({entries}); estimating the first — "
              "give its entry file to choose another", file=sys.stderr)
    return runs[0]


def _explain(project: Project, run: ResolvedRun) -> None:
    """What the estimate is built from, on stderr (stdout stays the sheet, or JSON)."""
    documents = [_shown(project, d) for d in run.plan.documents]
    linked = f" with {', '.join(documents[1:])}" if len(documents) > 1 else ""
    print(f"memlint: the run of {documents[0]}{linked}", file=sys.stderr)
    defaults = [f.note for name, f in run.plan.facts.items() if f.origin is None and f.note and name != "framework"]
    for note in list(dict.fromkeys(run.assumptions + defaults)):
        print(f"memlint: assumed: {note}", file=sys.stderr)


def _shown(project: Project, path: str) -> str:
    try:
        return Path(path).resolve().relative_to(project.root).as_posix()
    except ValueError:
        return path


def plan_from_args(args: argparse.Namespace) -> tuple[Architecture, TrainingSetup, str | None]:
    """(architecture, setup, target GPU) of the run the command line names: the run of a PATH
    (with the flags overriding its files), else --model and the setup flags."""
    if args.path and not args.model:
        return plan_for_path(args.path, args)
    if not args.model:
        raise UsageError("give --model (a Hub id, alias or config.json) or a script/config path")
    try:
        found = resolve_model(args.model, offline=getattr(args, "offline", False) or None)
    except (UnknownModel, UnsupportedArchitecture) as error:
        raise UsageError(str(error)) from None
    for note in (found.note, found.arch.generic_note):
        if note:
            print(f"memlint: note: {note}", file=sys.stderr)
    if found.quantization and args.lora_r and not args.qlora:
        args.qlora = found.quantization  # a pre-quantized upload's weights are quantized under the adapters
    return found.arch, setup_from_args(args), args.gpu
