"""A project: its documents, the links between them, and the training runs they define.

Three parts, each with one job: :class:`DocumentStore` reads and parses documents (editor
buffers in place of files), :class:`LinkIndex` knows who names whom, :class:`RunFinder` merges
an entry's documents into runs. ``Project`` holds the three for one settings root and offers
the questions the engine, ``memlint check`` and the language server ask; rules reach it
through :class:`memlint.lint.context.RuleContext`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from memlint.project.documents import DocumentRecord, DocumentStore
from memlint.project.links import LinkIndex
from memlint.project.runs import RunFinder
from memlint.project.settings import Settings

if TYPE_CHECKING:
    from memlint.documents.parsed import ParsedDocument
    from memlint.documents.reading import Document
    from memlint.facts.plan import RunFacts, TrainingPlan
    from memlint.facts.resolve import ResolvedRun, RunContext


class Project:
    """The documents, links and runs of one project root (see the module docstring)."""

    def __init__(self, settings: Settings, snapshot: bool = False) -> None:
        self.settings = settings
        self.root = settings.root.resolve()
        self.documents = DocumentStore(settings, snapshot)
        self.links = LinkIndex(self.documents)
        self.runs = RunFinder(self.documents, self.links)

    # ----------------------------------------------------------------- changes

    def set_overlay(self, path: str | Path, text: str | None) -> None:
        """Lint ``path`` with this text (an editor buffer) instead of the file; None drops it."""
        self.documents.set_overlay(path, text)
        self.links.buffer_changed(path, text)

    def invalidate(self, path: str | Path | None = None) -> None:
        self.documents.invalidate(path)
        self.links.invalidate()
        self.runs.invalidate()

    def seed(self, path: str | Path, record: DocumentRecord) -> None:
        self.documents.seed(path, record)

    def seed_files(self, names: dict[str, str], candidates: list[Path] | None = None) -> None:
        self.documents.seed_files(names, candidates)

    # ----------------------------------------------------------------- documents

    def key(self, path: str | Path) -> str:
        return self.documents.key(path)

    def document(self, path: str | Path) -> Document:
        return self.documents.document(path)

    def parsed(self, path: str | Path) -> ParsedDocument:
        return self.documents.parsed(path)

    def facts(self, path: str | Path) -> list[RunFacts]:
        return self.documents.facts(path)

    def kind(self, path: str | Path) -> str:
        return self.documents.kind(path)

    def digest(self, path: str | Path) -> str:
        return self.documents.digest(path)

    def record(self, path: str | Path) -> DocumentRecord:
        return self.documents.record(path)

    def resolve_reference(self, reference: str, from_path: str | Path) -> Path | None:
        return self.documents.resolve_reference(reference, from_path)

    def names_the_clone(self, reference: str, from_path: str | Path) -> bool:
        return self.documents.names_the_clone(reference, from_path)

    # ----------------------------------------------------------------- links and runs

    def referrers(self, path: str | Path) -> list[Path]:
        return self.links.referrers(path)

    def mentions(self) -> dict[str, list[Path]]:
        return self.links.mentions()

    def linked_with(self, files: list[Path], settings: Settings) -> list[Path]:
        return self.links.linked_with(files, settings)

    def plan_for(self, facts: RunFacts) -> TrainingPlan:
        return self.runs.plan_for(facts)

    def runs_for(self, path: str | Path, context: RunContext) -> list[ResolvedRun]:
        return self.runs.runs_for(path, context)

    def commented_runs(self, path: str | Path, context: RunContext) -> list[ResolvedRun]:
        return self.runs.commented_runs(path, context)
