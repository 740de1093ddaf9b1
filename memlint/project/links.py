"""The links between a project's documents, both ways: the configs a script names, and the
scripts that name a config (found by scanning the project's text for its file name, then
confirmed by their facts), so that when only ``ds_config.json`` changed the scripts that use
it are checked again.
"""

from __future__ import annotations

import os
from pathlib import Path

from memlint.documents import reads
from memlint.documents.kinds import RUN_KINDS
from memlint.documents.reading import is_linted
from memlint.project.documents import DocumentStore, mentioned_names
from memlint.project.settings import Settings
from memlint.project.walk import iter_files


class LinkIndex:
    """Who names whom in a project: its candidate files, the file names each mentions, and the
    documents that reference a given one. Built lazily, kept until invalidated."""

    def __init__(self, documents: DocumentStore) -> None:
        self.documents = documents
        self._candidates: list[Path] | None = None
        self._mentions: dict[str, list[Path]] | None = None  # file name -> files naming it
        self._referrers: dict[str, dict[str, list[Path]]] = {}  # file name -> target key -> referrers

    def invalidate(self) -> None:
        self._candidates = None
        self._mentions = None
        self._referrers.clear()

    def buffer_changed(self, path: str | Path, text: str | None) -> None:
        """An editor buffer changed (or closed: ``text`` None): re-index just its mentions."""
        self._referrers.clear()
        if self._mentions is not None:
            target = Path(path)
            for paths in self._mentions.values():
                if target in paths:
                    paths.remove(target)
            source = text if text is not None else self.documents.read_for_scan(target)
            for name in mentioned_names(str(target), source or ""):
                self._mentions.setdefault(name, []).append(target)

    def candidates(self) -> list[Path]:
        """Files of the project that could reference another (cached until invalidated)."""
        if self._candidates is None and self.documents.walked is not None:
            self._candidates = self.documents.walked
        if self._candidates is None:
            self._candidates = [
                p for p in iter_files([self.documents.root], self.documents.settings) if is_linted(p)
            ]
        return self._candidates

    def mentions(self) -> dict[str, list[Path]]:
        """For every file name a project file mentions (``ds_config.json``, ``train.py``), the
        files that mention it. Built once by a text scan (no parsing), so finding who links a
        config is a dictionary look-up, not a pass over the project."""
        if self._mentions is None:
            index: dict[str, list[Path]] = {}
            for candidate in self.candidates():
                key = self.documents.key(candidate)
                record = self.documents.records.get(key)
                if record is not None and record.mentions is not None and key not in self.documents.overlays:
                    names = record.mentions
                else:
                    text = self.documents.overlays.get(key) or self.documents.read_for_scan(candidate)
                    names = mentioned_names(str(candidate), text or "")
                for name in names:
                    index.setdefault(name, []).append(candidate)
            self._mentions = index
        return self._mentions

    def referrers(self, path: str | Path) -> list[Path]:
        """Documents whose facts reference ``path`` (directly): among the files that mention
        its name, those whose references resolve to it. Resolved once per file name, so asking
        for every script of a monorepo is not quadratic in the files that say ``train.py``."""
        target = self.documents.key(path)
        name = Path(path).name
        index = self._referrers.get(name)
        if index is None:
            index = self._referrers[name] = self._referrer_index(name)
        found = [c for c in index.get(target, ()) if self.documents.key(c) != target]
        reads.referrers(target, tuple(str(c) for c in found))
        return found

    def _referrer_index(self, name: str) -> dict[str, list[Path]]:
        """Target key -> the files that mention ``name`` and reference that target. Building
        it reads many documents; what a result depends on is the answer (recorded above)."""
        index: dict[str, list[Path]] = {}
        with reads.paused():
            for candidate in self.mentions().get(name, ()):
                targets = []
                for written in self.documents.links(candidate):
                    resolved = self.documents.resolve_reference(written, candidate)
                    if resolved is not None:
                        targets.append(self.documents.key(resolved))
                for target in dict.fromkeys(targets):
                    index.setdefault(target, []).append(candidate)
        return index

    def linked_with(self, files: list[Path], settings: Settings) -> list[Path]:
        """The documents of the project linked with ``files`` either way (the scripts that use
        a changed ds_config.json, the config a changed script names) and not among them."""
        keys = {self.documents.key(f) for f in files}
        inside = os.path.join(str(self.documents.settings.root), "")  # a target under the root starts so
        extra: list[Path] = []
        for path in files:
            if self.documents.kind(path) not in RUN_KINDS:
                continue
            neighbours: list[Path] = []
            try:
                neighbours += self.referrers(path)
                for written in self.documents.links(path):
                    target = self.documents.resolve_reference(written, path)
                    if target is not None and self.documents.key(target).startswith(inside):
                        neighbours.append(target)
            except (OSError, RecursionError):
                continue
            for other in neighbours:
                key = self.documents.key(other)
                if key not in keys and not settings.is_excluded(other):
                    keys.add(key)
                    extra.append(other)
        return extra
