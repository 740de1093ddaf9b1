"""Helpers for the fact-extraction tests: write a project, extract a document's facts, and
name exact ranges by marking them in the source (``"per_device_train_batch_size=«4»"``)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from memlint.documents.parsed import parse_document
from memlint.documents.reading import document_from_text
from memlint.facts.extract import extract
from memlint.facts.plan import RunFacts
from memlint.model.diagnostics import Range
from memlint.model.provenance import Sourced


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def facts_of(text: str, path: str = "train.py") -> list[RunFacts]:
    """The RunFacts memlint extracts from ``text`` as the document ``path``."""
    return extract(parse_document(document_from_text(path, text)))


def one(text: str, path: str = "train.py") -> RunFacts:
    found = facts_of(text, path)
    assert len(found) == 1, f"expected one run, got {len(found)}"
    return found[0]


def span(text: str, marked: str, occurrence: int = 1) -> tuple[int, int, int, int]:
    """(line, column, end line, end column) of the «marked» part of the ``occurrence``-th
    place ``marked`` (markers removed) occurs in ``text``."""
    before, rest = marked.split("«", 1)
    inside, after = rest.split("»", 1)
    needle = before + inside + after
    index = -1
    for _ in range(occurrence):
        index = text.find(needle, index + 1)
        assert index >= 0, f"{needle!r} not found"
    start = index + len(before)
    end = start + len(inside)
    return _position(text, start) + _position(text, end)


def _position(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1)
    return line, column


def where(fact: Sourced | None) -> tuple[int, int, int, int]:
    assert fact is not None, "fact missing"
    assert fact.origin is not None, "fact has no location"
    r: Range = fact.origin.range
    return r.start.line, r.start.column, r.end.line, r.end.column


def checked_project(root: Path, files: dict[str, str]):
    """A git checkout of ``files`` under ``root``, checked as on 8 H100s, offline: its settings."""
    from memlint.project.settings import Settings

    write(root, files)
    (root / ".git").mkdir(exist_ok=True)
    return Settings(root=root).with_overrides(gpu="h100", gpus=8, cache=False, offline=True)


def only_run(settings, path: str):
    """The one run the document at ``path`` (relative to the project root) takes part in, estimated."""
    from memlint.lint.engine import run_context
    from memlint.project.project import Project

    [run] = Project(settings).runs_for(settings.root / path, run_context(settings))
    assert run.setup is not None, run.problem
    return run


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return root
