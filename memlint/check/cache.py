"""The result cache: a file's diagnostics are reused while nothing they depend on changed.

A result is reused only when all of these are unchanged: memlint (its version and the files of
the package, so an upgrade or a local edit of a rule starts afresh), the effective settings of
the file, the file's content, and every input its lint recorded (:mod:`memlint.documents.reads`) — the
content of each other document it read (the DeepSpeed config its script names, the launcher
that binds its arguments), each existence check (a referenced file that is still missing), and
each "who references this file" answer (a new launcher of the script). Editing only
``ds_config.json`` therefore re-checks the script that uses it, and nothing else.

It lives in ``.memlint_cache/`` at the project root, or where ``--cache-dir`` /
``MEMLINT_CACHE_DIR`` say (with a ``CACHEDIR.TAG`` and a ``.gitignore`` of ``*``), as one JSON
file replaced atomically. Content is hashed; a file whose
``mtime_ns`` and size match what the last run saw is not read again — unless it was modified
within two seconds of that run, where a same-size edit could hide. A cache that cannot be read
or parsed, or holds something unexpected, is an empty one: never an error.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from dataclasses import fields
from pathlib import Path
from typing import Any, Protocol

from memlint import __version__
from memlint.model.diagnostics import Applicability, Diagnostic, Edit, Fix, Position, Range, Related, Severity
from memlint.project.settings import Settings

CACHE_DIR = ".memlint_cache"
CACHE_FILE = "results.json"
FORMAT = 1
RACY_NS = 2_000_000_000  # a file changed this close to a run may change again unseen
CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by memlint.\n"
    "# For information about cache directory tags see https://bford.info/cachedir/\n"
)

Stat = tuple[int, int]  # (mtime_ns, size)


class TreeState(Protocol):
    """How the files look now, answered by the engine for :meth:`ResultCache.reusable`."""

    def digest(self, path: str) -> str | None: ...

    def is_file(self, path: str) -> bool: ...

    def referrers(self, root: str, path: str) -> tuple[str, ...]: ...


class ResultCache:
    """``.memlint_cache/results.json`` of one project root: each file's stat and digest, what
    linking needs of its content, and each result with the reads it depended on."""

    def __init__(self, root: Path, data: dict[str, Any] | None = None, directory: Path | None = None) -> None:
        self.root = root
        self.directory = directory if directory is not None else root / CACHE_DIR
        data = data or {}
        self._stats: dict[str, list] = data.get("stats", {})  # path -> [mtime_ns, size, digest]
        self._contents: dict[str, dict] = data.get("contents", {})  # digest -> record fields
        self._results: dict[str, dict] = data.get("results", {})  # result key -> entry
        self._started = time.time_ns()
        self._changed = False
        self._seen_results: set[str] = set()

    # ----------------------------------------------------------------- loading, saving

    @classmethod
    def load(cls, root: Path, directory: Path | None = None) -> "ResultCache":
        """The cache of ``root`` (kept in ``directory``, by default ``.memlint_cache`` in the
        root); an empty one when there is none or it is unusable."""
        empty = cls(root, directory=directory)
        try:
            with open(empty.directory / CACHE_FILE, "rb") as handle:
                data = json.loads(handle.read())
            if not (isinstance(data, dict) and data.get("format") == FORMAT and data.get("memlint") == code_fingerprint()):
                return empty
            for name in ("stats", "contents", "results"):
                if not isinstance(data.get(name), dict):
                    return empty
            return cls(root, data, directory)
        except (OSError, ValueError, RecursionError, MemoryError):
            return empty

    def save(self) -> None:
        """Write the cache atomically (a concurrent reader sees the old file or the new one);
        a cache that cannot be written costs the next run its speed, nothing else."""
        if not self._changed:
            return
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            tag = self.directory / "CACHEDIR.TAG"
            if not tag.exists():
                tag.write_text(CACHEDIR_TAG, encoding="utf-8")
            ignore = self.directory / ".gitignore"
            if not ignore.exists():  # also in a cache an older memlint made: never in git status
                ignore.write_text("# created by memlint\n*\n", encoding="utf-8")
            live_digests = {entry[2] for entry in self._stats.values()}
            data = {
                "format": FORMAT,
                "memlint": code_fingerprint(),
                "stats": self._stats,
                "contents": {d: c for d, c in self._contents.items() if d in live_digests},
                "results": self._results,
            }
            handle = tempfile.NamedTemporaryFile("w", dir=self.directory, prefix=".results-", suffix=".tmp",
                                                 delete=False, encoding="utf-8")
            try:
                with handle:  # one string, by json's C encoder: ``json.dump`` encodes in Python, a
                    # write per token (0.1-0.2 s of a cold run on real code, both cores idle)
                    handle.write(json.dumps(data, separators=(",", ":")))
                os.replace(handle.name, self.directory / CACHE_FILE)
            except BaseException:
                os.unlink(handle.name)
                raise
        except (OSError, TypeError, ValueError) as error:
            print(f"memlint: warning: cannot write the cache in {self.directory}: {error}", file=sys.stderr)

    # ----------------------------------------------------------------- contents

    def digest_for(self, path: str, stat: Stat | None) -> str | None:
        """The content digest of ``path`` when its stat shows it unchanged since it was hashed."""
        entry = self._stats.get(path)
        if stat is None or not isinstance(entry, list) or len(entry) != 3:
            return None
        return entry[2] if (entry[0], entry[1]) == stat and isinstance(entry[2], str) else None

    def remember_digest(self, path: str, stat: Stat | None, digest: str) -> None:
        if stat is None or stat[0] >= self._started - RACY_NS:
            if self._stats.pop(path, None) is not None:
                self._changed = True
            return  # too fresh to trust its stat next time: hash it again then
        entry = [stat[0], stat[1], digest]
        if self._stats.get(path) != entry:
            self._stats[path] = entry
            self._changed = True

    def forget_missing(self, walked: set[str], under: list[str]) -> None:
        """Drop what is known of files that were under a walked directory and are gone (or
        excluded now): every file under it was either hashed or linted in this run."""
        prefixes = tuple(p.rstrip(os.sep) + os.sep for p in under)
        if not prefixes:
            return
        gone = [p for p in self._stats if p.startswith(prefixes) and p not in walked]
        for path in gone:
            del self._stats[path]
        stale = [k for k, entry in self._results.items() if k not in self._seen_results
                 and isinstance(entry, dict) and str(entry.get("file", "")).startswith(prefixes)]
        for key in stale:
            del self._results[key]
        if gone or stale:
            self._changed = True

    def content(self, digest: str) -> dict | None:
        """What is known of a content without reading it: kind, links, mentions."""
        entry = self._contents.get(digest)
        return entry if isinstance(entry, dict) else None

    def remember_content(self, digest: str, kind: str | None, links, mentions) -> None:
        entry = {
            "kind": kind,
            "links": list(links) if links is not None else None,
            "mentions": list(mentions) if mentions is not None else None,
        }
        known = self._contents.get(digest)
        if isinstance(known, dict):  # keep what an earlier run knew and this one did not
            entry = {k: v if v is not None else known.get(k) for k, v in entry.items()}
        if known != entry:
            self._contents[digest] = entry
            self._changed = True

    # ----------------------------------------------------------------- results

    def reusable(self, key: str, digest: str, settings: str, root: str, state: TreeState) -> list[Diagnostic] | None:
        """The cached diagnostics of a file, when nothing they depend on has changed."""
        entry = self._results.get(key)
        if not isinstance(entry, dict):
            return None
        try:
            if entry["digest"] != digest or entry["settings"] != settings or entry["root"] != root:
                return None
            reads = entry["reads"]
            for path, expected in reads["documents"].items():
                if state.digest(path) != expected:
                    return None
            for path, expected in reads["probes"].items():
                if state.is_file(path) != expected:
                    return None
            for path, expected in reads["referrers"].items():
                if list(state.referrers(root, path)) != expected:
                    return None
            diagnostics = [diagnostic_from_json(d) for d in entry["diagnostics"]]
        except (KeyError, TypeError, ValueError, AttributeError, IndexError):
            return None
        self._seen_results.add(key)
        return diagnostics

    def remember_result(self, key: str, digest: str, settings: str, root: str, diagnostics: list[Diagnostic],
                        reads: dict) -> None:
        try:
            encoded = [diagnostic_to_json(d) for d in diagnostics]
            json.dumps(encoded)  # data a rule attached must survive the round trip
        except (TypeError, ValueError):
            return
        self._results[key] = {"file": _file_of(key), "digest": digest, "settings": settings, "root": root,
                              "reads": reads, "diagnostics": encoded}
        self._seen_results.add(key)
        self._changed = True


def result_key(path: str) -> str:
    """Results are kept per path as given: diagnostics name files the way the user did, so a
    relative path is only the same request from the same working directory."""
    return path if os.path.isabs(path) else f"{os.getcwd()}\0{path}"


def _file_of(key: str) -> str:
    cwd, separator, path = key.partition("\0")
    return os.path.abspath(os.path.join(cwd, path) if separator else key)


# ----------------------------------------------------------------- fingerprints


def settings_fingerprint(settings: Settings) -> str:
    """Every setting that can change a result, as one string."""
    values = {f.name: getattr(settings, f.name) for f in fields(settings)}
    return json.dumps(values, sort_keys=True, default=str)


_code: str | None = None


def code_directories() -> tuple[Path, ...]:
    """The folders whose files make memlint's behaviour: the whole package (not only this module's
    ``check/``), and the JSON Schemas beside it in a checkout (a wheel keeps them inside, as
    ``memlint/_schemas``)."""
    package = Path(__file__).resolve().parents[1]
    return (package,) if (package / "_schemas").is_dir() else (package, package.parent / "schemas")


def code_fingerprint() -> str:
    """memlint's version and the size and mtime of every file of the package (its rules,
    catalogues and schemas): a changed memlint never reuses an old result."""
    global _code
    if _code is None:
        import hashlib

        stamp = hashlib.blake2b(__version__.encode(), digest_size=16)
        for directory in code_directories():
            for base, dirs, files in os.walk(directory):
                dirs[:] = sorted(d for d in dirs if d != "__pycache__")
                for name in sorted(files):
                    if name.endswith((".py", ".json", ".toml", ".yaml")):
                        try:
                            info = os.stat(os.path.join(base, name))
                        except OSError:
                            continue
                        stamp.update(f"{base}/{name}:{info.st_size}:{info.st_mtime_ns}\n".encode())
        _code = f"{__version__}-{stamp.hexdigest()}"
    return _code


# ----------------------------------------------------------------- diagnostics as JSON


def _range(r: Range) -> list[int]:
    return [r.start.line, r.start.column, r.end.line, r.end.column]


def _unrange(v: list[int]) -> Range:
    return Range(Position(int(v[0]), int(v[1])), Position(int(v[2]), int(v[3])))


def diagnostic_to_json(d: Diagnostic) -> dict:
    return {
        "code": d.code,
        "message": d.message,
        "path": d.path,
        "range": _range(d.range),
        "severity": int(d.severity),
        "fix": None if d.fix is None else {
            "message": d.fix.message,
            "applicability": d.fix.applicability,
            "edits": [[e.path, _range(e.range), e.new_text] for e in d.fix.edits],
        },
        "related": [[r.path, _range(r.range), r.message] for r in d.related],
        "data": d.data,
    }


def diagnostic_from_json(v: dict) -> Diagnostic:
    fix = v["fix"]
    return Diagnostic(
        code=str(v["code"]),
        message=str(v["message"]),
        path=str(v["path"]),
        range=_unrange(v["range"]),
        severity=Severity(int(v["severity"])),
        fix=None if fix is None else Fix(
            message=str(fix["message"]),
            edits=tuple(Edit(str(p), _unrange(r), str(t)) for p, r, t in fix["edits"]),
            applicability=Applicability(fix["applicability"]),
        ),
        related=tuple(Related(str(p), _unrange(r), str(m)) for p, r, m in v["related"]),
        data=v["data"] if isinstance(v["data"], dict) else {},
    )
