"""What a rule sees while it checks one document."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memlint.documents.kinds import DocumentKind
from memlint.documents.parsed import ParsedDocument
from memlint.documents.structured import Structured
from memlint.estimate import Budget, Capacity, estimate_training, suggest
from memlint.facts.resolve import ResolvedRun
from memlint.project.settings import Settings
from memlint.python.source import PythonSource

if TYPE_CHECKING:
    from collections.abc import Callable

    from memlint.estimate import Suggestion
    from memlint.facts.plan import RunFacts
    from memlint.project.project import Project


@dataclass
class RuleContext:
    """What a rule sees while it checks one document: the parsed document, the settings, the
    target GPU's capacity and the training runs the document takes part in, with the estimates
    and suggestions of those runs."""

    parsed: ParsedDocument
    settings: Settings
    capacity: Capacity | None  # the target GPU's capacity, when one is known
    # the training runs this document takes part in (as entry or as a linked config)
    runs: list[ResolvedRun] = field(default_factory=list)
    # for a DeepSpeed/Accelerate config: finds the runs other configs' comments launch with it
    # (judged in those configs; a rule about the shared config asks whether any of them needs it)
    find_commented_runs: "Callable[[], list[ResolvedRun]] | None" = field(default=None, repr=False, compare=False)
    # the project the document belongs to: other documents are read through it, so a rule sees
    # the editor's unsaved buffers and the result cache knows what a finding depended on
    project: "Project | None" = None
    # what several rules work out once per lint of this document (the schema rules' issues)
    shared: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def path(self) -> str:
        return self.parsed.path

    @property
    def kind(self) -> DocumentKind:
        return self.parsed.kind

    @property
    def python(self) -> PythonSource | None:
        return self.parsed.python

    @property
    def structured(self) -> Structured | None:
        return self.parsed.structured

    # ----------------------------------------------------------------- other documents

    def facts(self) -> "list[RunFacts]":
        """What this document states about runs (its extracted facts)."""
        return self._project().facts(self.path)

    def resolve_reference(self, written: str, from_path: str | Path | None = None) -> Path | None:
        """A path as this document (or ``from_path``) writes it -> the file, the way the tools look it up."""
        return self._project().resolve_reference(written, self.path if from_path is None else from_path)

    def names_the_clone(self, written: str) -> bool:
        """Does an absolute path this document writes name a folder of the author's clone of the
        project (``DocumentStore.names_the_clone``)?"""
        return self._project().names_the_clone(written, self.path)

    def facts_of(self, path: str | Path) -> "list[RunFacts]":
        """What another document of the project states about runs."""
        return self._project().facts(path)

    def kind_of(self, path: str | Path) -> DocumentKind:
        """The kind of another document of the project."""
        return DocumentKind(self._project().kind(path))

    def parsed_document(self, path: str | Path) -> ParsedDocument:
        """Another document of the project, parsed (an open editor buffer, not the file, when there is one)."""
        return self._project().parsed(path)

    def imported_module(self, path: str | Path) -> ParsedDocument:
        """A Python module of the project that this one imports, parsed with libcst even where
        ``check``'s prefilter set it aside (a loss class in ``utils/loss.py`` trains nothing)."""
        return self._project().documents.module(path)

    def project_files(self) -> list[Path]:
        """The lintable files of the project (listed once per project)."""
        return self._project().links.candidates()

    def launches_of_this_config(self) -> "list[RunFacts]":
        """The launches that pass this config to a script: the commands of the documents that name
        it (a README's ``python train.py --config x.yaml``), and the launch documented for it through
        a launcher that takes it from its caller (a template's ``--config recipes/$MODEL/x.yaml``:
        ``memlint.project.config_launchers``)."""
        project = self._project()
        found = [facts for referrer in project.referrers(self.path) for facts in project.facts(referrer)
                 if facts.launches is not None]
        return found + [launch.launch for launch in project.runs.config_launchers.launches_for(self.path)
                        if launch.launch.launches is not None]

    def text_of(self, path: str | Path) -> str:
        """Another document's text, unparsed (its editor buffer when there is one); the result
        cache learns that the finding depended on it."""
        from memlint.documents import reads

        text = self._project().documents.text_for_scan(Path(path)) or ""
        reads.document(str(path), reads.digest(text, None))
        return text

    def _project(self) -> "Project":
        if self.project is None:  # a context built outside a Linter: a project of its own
            from memlint.project.project import Project

            self.project = Project(self.settings)
        return self.project

    # ----------------------------------------------------------------- runs and budgets

    def commented_runs(self) -> list[ResolvedRun]:
        """The runs other configs' own comments launch with this DeepSpeed/Accelerate config
        (``# accelerate launch --config_file fsdp_config.yaml src/train.py x.yaml``), found on
        first asking: only a rule that weighs the config's users needs them."""
        if "commented_runs" not in self.shared:
            self.shared["commented_runs"] = self.find_commented_runs() if self.find_commented_runs else []
        return self.shared["commented_runs"]

    def capacity_for(self, run: ResolvedRun) -> Capacity | None:
        """The GPU ``run`` is judged against: the settings' (``gpu``, ``--gpu``) when they name
        one, else the one an infrastructure file of the project requests for it."""
        if self.capacity is not None or run.gpu is None:
            return self.capacity
        return _infrastructure_capacity(run.gpu.gpu, self.settings.cuda_context_gib, self.settings.headroom,
                                        self.settings.fragmentation)

    def gpu_origin(self, run: ResolvedRun) -> str:
        """`` (requested by `#SBATCH --gres=gpu:a100:8` in job.slurm:4)`` when the GPU
        came from a file, for the memory findings' messages."""
        if self.capacity is not None or run.gpu is None:
            return ""
        return f" (requested by {run.gpu.describe(str(self.settings.root.resolve()))})"

    def budget(self, run: ResolvedRun) -> Budget | None:
        return _budget(run, self.capacity_for(run))

    def suggestions(self, run: ResolvedRun) -> "list[Suggestion]":
        budget = self.budget(run)
        if budget is None or run.arch is None or run.setup is None:
            return []
        return _suggestions(run, self.capacity_for(run))


@functools.lru_cache(maxsize=64)
def _infrastructure_capacity(gpu, context_gib: float, headroom: float, fragmentation: float) -> Capacity:
    from memlint.estimate import capacity_for
    from memlint.model.units import GiB

    return capacity_for(gpu, int(context_gib * GiB), headroom, fragmentation)


@functools.lru_cache(maxsize=256)
def _cached_budget(arch, setup, capacity) -> Budget:
    return estimate_training(arch, setup, capacity)


def _budget(run: ResolvedRun, capacity: Capacity | None) -> Budget | None:
    if run.arch is None or run.setup is None:
        return None
    budget = _cached_budget(run.arch, run.setup, capacity)
    if run.assumptions:
        from dataclasses import replace

        budget = replace(budget, assumptions=tuple(run.assumptions) + budget.assumptions)
    return budget


@functools.lru_cache(maxsize=256)
def _cached_suggestions(arch, setup, capacity) -> tuple:
    return tuple(suggest(arch, setup, _cached_budget(arch, setup, capacity)))


def _suggestions(run: ResolvedRun, capacity: Capacity | None) -> list:
    return list(_cached_suggestions(run.arch, run.setup, capacity))
