"""The one lint function: documents in, diagnostics out. The CLI and the language server both
call it; it never imports either of them.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from memlint.documents.kinds import RUN_KINDS
from memlint.documents import failures
from memlint.lint import suppress
from memlint.lint.collector import collector_paused
from memlint.model.diagnostics import Diagnostic, Range, Related
from memlint.project.settings import Settings
from memlint.project.project import Project
from memlint.project.walk import iter_files

if TYPE_CHECKING:  # the rules, the estimator and libcst load with the first file linted, so
    # that a run whose results all come from the cache never imports them
    from memlint.estimate import Capacity
    from memlint.facts.resolve import RunContext
    from memlint.python.prefilter import Needs, UsedNames
    from memlint.rules.base import Finding, Rule

__all__ = ["Linter", "RUN_KINDS", "capacity_of", "run_context"]


def run_context(settings: Settings) -> RunContext:
    from memlint.facts.resolve import RunContext

    return RunContext(
        gpu=settings.gpu,
        world_size=settings.gpus,
        seq_len=settings.seq_len,
        micro_batch=settings.micro_batch,
        model=settings.model,
        model_config=settings.model_config_for,
        offline=settings.offline,
    )


def capacity_of(settings: Settings, gpu: str | None = None) -> Capacity | None:
    from memlint.catalog.gpus import UnknownGpu, lookup_gpu
    from memlint.estimate import capacity_for
    from memlint.model.units import GiB

    name = gpu or settings.gpu
    if not name:
        return None
    try:
        gpu_info = lookup_gpu(name)
    except UnknownGpu:
        return None
    return capacity_for(gpu_info, int(settings.cuda_context_gib * GiB), settings.headroom, settings.fragmentation)


class Linter:
    """Lints documents of one project; keeps parsed documents cached between calls."""

    def __init__(self, settings: Settings, project: Project | None = None) -> None:
        from memlint.rules import all_rules

        self.settings = settings
        self.project = project or Project(settings)
        self.rules: list[Rule] = [cls() for code, cls in all_rules().items() if settings.enabled(code)]
        self.internal_errors: list[str] = []
        # the language server's view: a run's memory verdict also in each document of the run,
        # and its suggestions with the edits that make them (memlint.lint.verdicts, memlint.lint.suggestion_edits)
        self.editor_view = False
        self._gates: dict[str, Needs] | None = None  # each rule's need (memlint.lint.needs.rule_gates)

    def lint_path(self, path: str | Path) -> list[Diagnostic]:
        """The document's diagnostics. Never raises: whatever the document makes memlint
        raise is reported on it (:mod:`memlint.documents.failures`), and the caller goes on."""
        with collector_paused():  # see memlint.lint.collector: a third of a big file's lint otherwise
            try:
                return self._lint_path(path)
            except Exception as error:
                self.internal_errors.append(failures.note("linting", str(path), error))
                found = failures.diagnostic(str(path), failures.describe("linting it", error), self.settings)
                return [found] if found is not None else []

    def _lint_path(self, path: str | Path) -> list[Diagnostic]:
        from memlint.lint.context import RuleContext
        from memlint.rules.base import Finding

        parsed = self.project.parsed(path)
        failed: dict[str, list[str]] = {}  # the error -> the stages it broke
        for message in parsed.failures:  # reading it, extracting its facts (memlint.project.project)
            self.internal_errors.append(f"{path}: {message}")
            print(f"memlint: internal error: {path}: {message}", file=sys.stderr)
        capacity = capacity_of(self.settings)
        runs = []
        needs_runs = parsed.kind in RUN_KINDS and any(r.judges_runs for r in self.rules)
        if needs_runs:
            try:
                runs = self.project.runs_for(path, run_context(self.settings))
            except Exception as error:
                self._failed(failed, "linking and estimating its training runs", path, error)
        ctx = RuleContext(parsed=parsed, settings=self.settings, capacity=capacity, runs=runs, project=self.project,
                          find_commented_runs=lambda: self.project.commented_runs(path, run_context(self.settings)))
        findings: list[tuple[Rule, Finding]] = []
        names = parsed.python.names if parsed.python is not None else None  # read by check's prefilter
        for rule in self.rules:
            if not rule.applies_to(parsed.kind, bool(runs)):
                continue
            if names is not None and not self._needed_by(rule, names):
                continue
            try:
                for finding in rule.check(ctx):
                    findings.append((rule, finding))
            except Exception as error:  # a rule's bug must not take the run down
                self._failed(failed, f"running rule {rule.code}", path, error)
        if runs:
            findings = self._kept_here(findings, runs, parsed.path)
        if self.editor_view and runs:
            findings = self._with_edits(findings, runs, ctx)
            findings += self._verdicts_here(findings, runs, parsed.path, ctx)
        reporter = next((r for r in self.rules if r.code == failures.CODE), None)
        if reporter is not None:
            messages = list(parsed.failures)
            messages += [failures.describe(", ".join(stages), error) for error, stages in failed.items()]
            findings += [(reporter, Finding(Range.file_start(), message)) for message in messages]
        return self._diagnostics(parsed.path, parsed.document.syntax, parsed.text, findings)

    def _needed_by(self, rule: Rule, names: "UsedNames") -> bool:
        """Does the module name what the rule needs to find anything in it (the prefilter's
        promise, per rule: ``memlint.lint.needs.rule_gates``)?"""
        if self._gates is None:
            from memlint.lint.needs import rule_gates

            self._gates = rule_gates(self.settings)
        gate = self._gates.get(rule.code)
        return gate is None or gate.wanted(names)

    def _failed(self, failed: dict[str, list[str]], stage: str, path: str | Path, error: Exception) -> None:
        """A stage failed on the document: said on stderr, reported on the document once per
        error (a broken estimate fails every memory rule the same way)."""
        self.internal_errors.append(failures.note(stage, str(path), error))
        failed.setdefault(failures.error_text(error), []).append(stage)

    def _with_edits(self, findings, runs, ctx) -> list:
        """Each memory finding's suggestions with the edits that make them true."""

        from memlint.lint.suggestion_edits import edits_json, suggestion_edits
        from memlint.lint.verdicts import VERDICT_CODES

        def read(path: str) -> str | None:
            try:
                return self.project.parsed(path).text
            except (OSError, ValueError, UnicodeDecodeError):
                return None

        out = []
        for rule, finding in findings:
            run = next((r for r in runs if r.plan.entry == finding.data.get("entry")), None)
            listed = finding.data.get("suggestions")
            if rule.code in VERDICT_CODES and run is not None and listed:
                try:
                    made = [edits_json(suggestion_edits(s, run, read)) for s in ctx.suggestions(run)]
                except (RecursionError, ValueError, TypeError, KeyError, IndexError) as error:
                    self._internal(f"edits of {rule.code}'s suggestions: {type(error).__name__}: {error}")
                    made = []
                if len(made) == len(listed):
                    listed = [{**s, "edits": e} if e else s for s, e in zip(listed, made)]
                    finding = replace(finding, data={**finding.data, "suggestions": listed})
            out.append((rule, finding))
        return out

    def _kept_here(self, findings, runs, path: str) -> list:
        """Findings about a run, placed on a fact that a file memlint does not lint for runs states
        (``model: {id: Qwen/Qwen3-30B-A3B}`` in the YAML a script reads with ``yaml.safe_load``),
        reported at the run's anchor in this document instead, pointing at that fact: no one would
        see them where they were placed."""
        here = self.project.key(path)
        anchored = [r for r in runs if r.plan.anchor is not None and self.project.key(r.plan.anchor.path) == here]
        out = []
        for rule, finding in findings:
            target = finding.path
            if target is None or self.project.key(target) == here or self.project.kind(target) in RUN_KINDS:
                out.append((rule, finding))
                continue
            entry = finding.data.get("entry")
            there = self.project.key(target)
            if entry is not None:
                owners = [r for r in anchored if r.plan.entry == entry]
            else:  # the runs of which a fact stands where the finding does
                owners = [r for r in anchored if any(
                    f.origin is not None and f.origin.range == finding.range and self.project.key(f.origin.path) == there
                    for f in r.plan.facts.values())]
            run = owners[0] if owners and all(r.plan.anchor == owners[0].plan.anchor for r in owners) else None
            if run is None:
                out.append((rule, finding))
                continue
            shown = f"{self.project.documents.shown(target)}:{finding.range.start.line}"
            moved = Related(target, finding.range, f"decided by what {Path(target).name} writes here")
            out.append((rule, replace(finding, path=run.plan.anchor.path, range=run.plan.anchor.range,
                                      message=f"{finding.message} (the value that decides it is written at {shown})",
                                      related=(moved, *finding.related))))
        return out

    def _verdicts_here(self, findings, runs, path: str, ctx) -> list:
        from memlint.lint.verdicts import mirrored

        out = []
        for rule, finding in findings:
            try:
                here = mirrored(rule.code, finding, runs, path, self.project.key, ctx.budget)
            except (RecursionError, ValueError, TypeError, KeyError) as error:
                self._internal(f"placing {rule.code} in {path}: {type(error).__name__}: {error}")
                continue
            if here is not None:
                out.append((rule, here))
        return out

    def _internal(self, message: str) -> None:
        self.internal_errors.append(message)
        print(f"memlint: internal error: {message} (please report it)", file=sys.stderr)

    def _diagnostics(self, path: str, syntax: str, text: str, findings) -> list[Diagnostic]:
        suppressions = suppress.find(text, syntax)
        key = self.project.key(path)
        out: list[Diagnostic] = []
        seen = set()
        for rule, finding in findings:
            target = finding.path or path
            if self.project.key(target) != key:
                continue  # reported when the document it points into is linted
            if suppressions.silences(rule.code, finding.range.start.line):
                continue
            if self.settings.ignored_in_file(rule.code, Path(target)):
                continue
            diagnostic = Diagnostic(
                code=rule.code,
                message=finding.message,
                path=path,
                range=finding.range,
                severity=self.settings.severity_of(rule.code, finding.severity or rule.severity),
                fix=finding.fix,
                related=finding.related,
                data=finding.data,
            )
            marker = (diagnostic.code, diagnostic.range, diagnostic.message)
            if marker in seen:
                continue
            seen.add(marker)
            out.append(diagnostic)
        return sorted(out, key=lambda d: d.sort_key)


def expand(paths: Iterable[Path], settings: Settings, project: Project, force_exclude: bool = False) -> list[Path]:
    """The files to lint: those named or found under directories, plus the documents linked
    with them both ways (a changed ds_config.json re-checks the scripts that use it)."""
    files = list(dict.fromkeys(iter_files(paths, settings, explicit_too=not force_exclude)))
    return files + project.linked_with(files, settings)
