"""What a lint result depended on, recorded while one file is linted.

A file's diagnostics depend on more than its own text: the DeepSpeed config its script names,
the launcher whose options bind the script's arguments, whether a referenced file exists at
all, which documents of the project reference it. The result cache (``memlint.check.cache``) may
reuse a result only while all of that is unchanged, so the places that read other documents
report here what they read:

- a document's content (``document``: path -> content digest),
- an existence check (``probe``: path -> was it a regular file),
- the answer to "who references this file" (``referrers``: path -> the referring files).

Recording is off unless the engine opens a :func:`recording` around one file's lint; the
hooks then cost one global look-up.
"""

from __future__ import annotations

import hashlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator


@dataclass
class Reads:
    documents: dict[str, str] = field(default_factory=dict)  # path -> content digest
    probes: dict[str, bool] = field(default_factory=dict)  # path -> is a regular file
    referrers: dict[str, tuple[str, ...]] = field(default_factory=dict)  # path -> its referrers

    def to_json(self) -> dict:
        return {
            "documents": self.documents,
            "probes": self.probes,
            "referrers": {k: list(v) for k, v in self.referrers.items()},
        }


_current: Reads | None = None
_paused = 0


def digest(text: str, problem: str | None) -> str:
    """The content digest of a document: its text, or why it could not be read."""
    data = (problem or "").encode() + b"\0" + text.encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=16).hexdigest()


@contextmanager
def recording() -> Iterator[Reads]:
    """Record every read made inside the block (one file's lint)."""
    global _current
    outer, _current = _current, Reads()
    try:
        yield _current
    finally:
        _current = outer


@contextmanager
def paused() -> Iterator[None]:
    """Reads inside the block are bookkeeping (building an index), not dependencies."""
    global _paused
    _paused += 1
    try:
        yield
    finally:
        _paused -= 1


def active() -> bool:
    return _current is not None and not _paused


def document(path: str, content_digest: str) -> None:
    if _current is not None and not _paused:
        _current.documents.setdefault(path, content_digest)


def probe(path: str, exists: bool) -> None:
    if _current is not None and not _paused:
        _current.probes.setdefault(path, exists)


def referrers(path: str, found: tuple[str, ...]) -> None:
    if _current is not None and not _paused:
        _current.referrers.setdefault(path, found)
