"""What a rule sees while it checks one document."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memlint.documents.kinds import DocumentKind
from memlint.documents.parsed import ParsedDocument
from memlint.documents.structured import Structured
from memlint.estimate import Budget, Capacity, estimate_training, suggest
from memlint.facts.resolve import ResolvedRun
from memlint.project.settings import Settings
from memlint.python.source import PythonSource

if TYPE_CHECKING:
    from memlint.estimate import Suggestion


@dataclass
class RuleContext:
    parsed: ParsedDocument
    settings: Settings
    capacity: Capacity | None  # the target GPU's capacity, when one is known
    # the training runs this document takes part in (as entry or as a linked config)
    runs: list[ResolvedRun] = field(default_factory=list)

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
