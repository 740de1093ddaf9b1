"""A project's documents: each read once (or taken from an editor buffer), parsed once per
version, its facts extracted; or known from a seeded record without being parsed at all.

``memlint check`` opens a project as a *snapshot* (the files do not change while it runs: each
is read once) and may seed it with :class:`DocumentRecord` s — what other documents need to know
about a file (its kind, the files it names, its facts) — computed by another process or taken
from the result cache, so that linking never parses a file twice. Every read of another
document is reported to :mod:`memlint.documents.reads`, which is how a cached result knows
when it is stale.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from memlint.documents import reads
from memlint.documents.kinds import DocumentKind
from memlint.documents.reading import Document, document_from_text, read_document
from memlint.project.settings import Settings

if TYPE_CHECKING:
    from memlint.documents.parsed import ParsedDocument
    from memlint.facts.plan import RunFacts
    from memlint.python.prefilter import UsedNames

MAX_SCAN_BYTES = 4 * 1024 * 1024
# file names a document can link: ds_config.json, configs/zero3.yaml, train.py, launch.sh
_FILE_NAME = re.compile(r"[\w.\-/]+\.(?:json|ya?ml|py|sh)\b")
_EXTENSION = re.compile(r"\.(?:json|ya?ml|py|sh)\b")
# ``python -m pkg.mod`` / ``deepspeed --module pkg.mod`` / ``accelerate launch -m pkg.mod``
# (not after a word character or a dash, checked by hand: a pattern that starts with a look-behind
# is tried at every character of the text, 5 ms of each edit of a 4,000-line module)
_MODULE_FLAG = re.compile(r"-(?:-module|m)(?![\w-])")
_WORD_OR_DASH = re.compile(r"[\w-]")
_MODULE_WORD = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_WORDS_AFTER_MODULE_FLAG = 6  # launcher options may come between the flag and the module


@dataclass
class DocumentRecord:
    """What linking needs to know about a document without its tree. ``None`` = not known
    yet (``kind`` and ``links`` need a parse, ``mentions`` only the text)."""

    digest: str
    kind: str | None = None
    links: tuple[str, ...] | None = None  # paths as written: references, then the launched script
    mentions: tuple[str, ...] | None = None  # file names the text mentions (the referrer index)
    facts: "list[RunFacts] | None" = None  # passed between processes, never stored on disk
    set_aside: bool = False  # Python the prefilter read and set aside (counted by --statistics)


@dataclass
class _Cached:
    digest: str
    parsed: "ParsedDocument"
    facts: "list[RunFacts]"


def mentioned_names(path: str, text: str) -> tuple[str, ...]:
    """The file names a document's text may link, for the referrer index: ``ds_config.json``,
    ``configs/train.py`` (as ``train.py``), and the modules it runs (``deepspeed --module
    openrlhf.cli.train_sft`` names ``train_sft.py``). A prefilter only: a referrer is confirmed
    by its facts. Python that is not training code has no facts, so it references nothing: it
    is not even scanned."""
    if path.endswith((".py", ".pyi")):
        from memlint.documents.parsed import is_training_code

        if not is_training_code(text):
            return ()
    names = {name.rsplit("/", 1)[-1] for line in _lines_naming_files(text) for name in _FILE_NAME.findall(line)}
    for match in _MODULE_FLAG.finditer(text):
        if match.start() and _WORD_OR_DASH.match(text, match.start() - 1):
            continue
        line = text[match.end():match.end() + 400].replace("\\\n", " ").split("\n", 1)[0]
        for word in line.split()[:_WORDS_AFTER_MODULE_FLAG]:
            if _MODULE_WORD.fullmatch(word):
                names.add(word.rsplit(".", 1)[-1] + ".py")
    return tuple(sorted(names))


def _lines_naming_files(text: str) -> list[str]:
    """The lines of ``text`` with a file extension in them. ``_FILE_NAME`` scanned over a whole
    large script tries a match at every word character; its matches never cross a line, so the
    lines around the extensions (found by a scan that starts only at dots) give the same ones."""
    lines: dict[int, str] = {}
    for match in _EXTENSION.finditer(text):
        start = text.rfind("\n", 0, match.start()) + 1
        if start not in lines:
            end = text.find("\n", match.end())
            lines[start] = text[start:end if end >= 0 else len(text)]
    return list(lines.values())


def links_of(facts: "list[RunFacts]") -> tuple[str, ...]:
    """The paths a document's facts name: configs it references, the script it launches."""
    out: list[str] = []
    for item in facts:
        out.extend(str(r.value) for r in item.references)
        out.extend(str(r.value) for _, _, r in item.switched_references)
        if item.launches is not None:
            out.append(str(item.launches.value))
    return tuple(out)


class DocumentStore:
    """The documents of one project by canonical path: parsed and extracted on demand, cached
    by content, editor buffers in place of files."""

    def __init__(self, settings: Settings, snapshot: bool = False) -> None:
        self.settings = settings
        self.root = settings.root.resolve()
        # a snapshot's files do not change while it lives (one `memlint check`): each is read once
        self.snapshot = snapshot
        self._cache: dict[str, _Cached] = {}
        # a key -> (digest, the module parsed whole): helpers another module imports (``module``)
        self._modules: dict[str, tuple[str, ParsedDocument]] = {}
        self.overlays: dict[str, str] = {}  # unsaved editor buffers, by absolute path
        # key -> (a buffer, its digest): a buffer is hashed once, not each time a lint asks for
        # its document (ten times an edit in the language server, 0.1-0.2 ms each on a 4,000-line module)
        self._overlay_digests: dict[str, tuple[str, str]] = {}
        self._keys: dict[str, str] = {}
        self.records: dict[str, DocumentRecord] = {}  # seeded: known without parsing
        self._files: frozenset[str] | None = None  # absolute paths known to be regular files
        self._names: dict[str, str] = {}  # key -> the path a file was walked as
        self.walked: list[Path] | None = None  # the walk of the project root, when seeded
        # (a folder, a file name) -> the files of that name below it (``moved_in_clone``): a missing
        # path is resolved by every run and rule that names it, the folder walked once
        self._named: dict[tuple[Path, str], list[Path]] = {}
        # a snapshot's prefilter (``memlint check``): does anything need this Python module's
        # tree? (memlint.python.prefilter; None: every module is parsed)
        self.wanted: Callable[[UsedNames], bool] | None = None  # asked of a module's names (python.prefilter)

    def key(self, path: str | Path) -> str:
        """A canonical name for a file (symlinks resolved); memoised, it is asked often."""
        text = str(path)
        found = self._keys.get(text)
        if found is None:
            try:
                found = str(Path(text).resolve())
            except (OSError, RuntimeError):  # a symlink loop
                found = os.path.abspath(text)
            self._keys[text] = found
        return found

    def seed(self, path: str | Path, record: DocumentRecord) -> None:
        """Know a document's record without reading it (a snapshot only)."""
        self.records[self.key(path)] = record

    def seed_files(self, names: dict[str, str], candidates: list[Path] | None = None) -> None:
        """A walk of a tree without symlinks: ``names`` maps each file's absolute path (its
        key, and a regular file) to the path it was walked as, which is the name it is parsed
        under whoever asks for it first; ``candidates`` is the walk of the project root."""
        for key, name in names.items():
            self._keys[key] = key
            self._keys[name] = key
        self._files = frozenset(names)
        self._names = names
        if candidates is not None:
            self.walked = candidates

    def set_overlay(self, path: str | Path, text: str | None) -> None:
        """Read ``path`` as this text (an editor buffer) instead of the file; None drops it."""
        key = self.key(path)
        if text is None:
            self.overlays.pop(key, None)
            self._overlay_digests.pop(key, None)
        else:
            self.overlays[key] = text

    def invalidate(self, path: str | Path | None = None) -> None:
        self.walked = None  # the project's files may have changed too
        self._named.clear()
        if path is None:
            self._cache.clear()
            self._keys.clear()
            self.records.clear()
        else:
            self._cache.pop(self.key(path), None)
            self.records.pop(self.key(path), None)

    def text_for_scan(self, path: Path) -> str | None:
        """A document's text for a text scan: its buffer, else the file (see ``read_for_scan``)."""
        return self.overlays.get(self.key(path)) or self.read_for_scan(path)

    def document(self, path: str | Path) -> Document:
        key = self.key(path)
        if key in self.overlays:
            return document_from_text(str(path), self.overlays[key])
        return read_document(path)

    def _entry(self, path: str | Path) -> _Cached:
        from memlint.documents import failures
        from memlint.documents.parsed import ParsedDocument, parse_document
        from memlint.facts.extract import extract

        key = self.key(path)
        cached = self._cache.get(key)
        if cached is not None and self.snapshot:
            reads.document(key, cached.digest)
            return cached
        overlay = self.overlays.get(key)
        hashed = self._overlay_digests.get(key)
        if cached is not None and overlay is not None and hashed is not None and hashed[0] is overlay \
                and hashed[1] == cached.digest:
            reads.document(key, cached.digest)  # the same buffer as when it was parsed
            return cached
        document = self.document(self._names.get(key, path))
        digest = reads.digest(document.text, document.problem)
        if overlay is not None:
            self._overlay_digests[key] = (overlay, digest)
        if cached is None or cached.digest != digest:
            # whatever the document makes memlint raise stays with it (memlint.documents.failures): it is
            # reported on the document when it is linted, and every other one goes on
            try:
                parsed = parse_document(document, previous=cached.parsed if cached is not None else None,
                                        whole=self.snapshot, wanted=self.wanted if self.snapshot else None)
            except Exception as error:
                parsed = ParsedDocument(document, DocumentKind.OTHER, failures=[failures.describe("reading it", error)])
            try:
                facts = extract(parsed)
            except Exception as error:
                facts = []
                parsed.failures.append(failures.describe("extracting its facts", error))
            cached = _Cached(digest, parsed, facts)
            self._cache[key] = cached
        reads.document(key, digest)
        return cached

    def _seeded(self, path: str | Path) -> DocumentRecord | None:
        """The seeded record of a document not parsed here (recorded as read)."""
        if not self.records:
            return None
        key = self.key(path)
        record = self.records.get(key)
        if record is None or key in self._cache:
            return None
        reads.document(key, record.digest)
        return record

    def parsed(self, path: str | Path) -> ParsedDocument:
        return self._entry(path).parsed

    def module(self, path: str | Path) -> ParsedDocument:
        """A Python module another one imports, parsed with libcst even where the prefilter set
        it aside: a helper that loads the model trains nothing itself (parsed once per version)."""
        from memlint.documents.parsed import parse_document

        parsed = self.parsed(path)
        if not parsed.set_aside:
            return parsed
        key, digest = self.key(path), self.digest(path)
        kept = self._modules.get(key)
        if kept is None or kept[0] != digest:
            kept = (digest, parse_document(self.document(self._names.get(key, path)), whole=True))
            self._modules[key] = kept
        return kept[1]

    def digest(self, path: str | Path) -> str:
        record = self._seeded(path)
        return record.digest if record is not None else self._entry(path).digest

    def facts(self, path: str | Path) -> list[RunFacts]:
        record = self._seeded(path)
        if record is not None and record.facts is not None:
            return record.facts
        return self._entry(path).facts

    def kind(self, path: str | Path) -> str:
        record = self._seeded(path)
        if record is not None and record.kind is not None:
            return record.kind
        return self._entry(path).parsed.kind

    def links(self, path: str | Path) -> tuple[str, ...]:
        """The paths ``path`` names (references and launched script), as written."""
        record = self._seeded(path)
        if record is not None and record.links is not None:
            return record.links
        return links_of(self.facts(path))

    def record(self, path: str | Path) -> DocumentRecord:
        """Everything other processes need to know about a document (parses it here)."""
        entry = self._entry(path)
        return DocumentRecord(
            digest=entry.digest,
            kind=entry.parsed.kind,
            links=links_of(entry.facts),
            mentions=mentioned_names(str(path), entry.parsed.text),
            facts=entry.facts,
            set_aside=entry.parsed.set_aside,
        )

    def is_file(self, candidate: Path) -> bool:
        if self._files is not None and os.path.abspath(candidate) in self._files:
            exists = True
        else:
            try:
                exists = candidate.is_file()
            except OSError:
                exists = False
        reads.probe(os.path.abspath(candidate), exists)
        return exists

    def shown(self, path: str | Path) -> str:
        """A path as messages show it: from the project's root when it lies inside, else as given."""
        written = Path(path)
        if written.is_absolute():
            try:
                return written.resolve().relative_to(self.root).as_posix()
            except (ValueError, OSError):
                pass
        return written.as_posix()

    def resolve_reference(self, reference: str, from_path: str | Path) -> Path | None:
        """A path as written in ``from_path`` -> the file, relative to the referencing file
        first, then to each folder between it and the root, then to the project root. The tools
        open these paths from the working directory the run starts in, which is often a folder
        above the file: DeepSpeedExamples' ``compression/bert/bash_script/XTC/*.sh`` run from
        ``compression/bert`` (naming ``./config/XTC/ds.json`` there), smollm's
        ``vision/experiments/.../accelerate_config_*.yaml`` naming
        ``./experiments/.../ds_config.json`` from ``vision/``. Files outside the project are
        allowed (a shared DeepSpeed config) but must exist. An absolute path that does not exist
        may name the project where the author cloned it (accelerate's slurm example:
        ``${ACCELERATE_DIR:-/accelerate}/examples/slurm/fsdp_config.yaml``): a tail of at least a
        folder and the file that exists under the referencing file's folder, a folder above it or
        the project root is that file; failing that, the one
        file of its name below the deepest folder of the clone the project has (``moved_in_clone``)."""
        written = Path(os.path.expanduser(reference))
        candidates = [written] if written.is_absolute() else [Path(from_path).parent / written, self.root / written]
        if written.is_absolute():
            parts = written.parts[1:]
            # the clone's layout from the referencing file's folder up to the root (SkyThought's
            # ``skythought/train/LLaMA-Factory/single_node.sh`` names ``/lustre/.../LLaMA-Factory/
            # examples/deepspeed/ds_z3_config.json``, its own copy's file)
            bases = [Path(from_path).parent, *self._folders_above(Path(from_path)), self.root]
            candidates += [base.joinpath(*parts[i:]) for base in bases for i in range(1, len(parts) - 1)]
        if not written.is_absolute():
            candidates[1:1] = [folder / written for folder in self._folders_above(Path(from_path))]
        for candidate in candidates:
            if self.is_file(candidate):
                return candidate
        return self.moved_in_clone(written) if written.is_absolute() else None

    def names_the_clone(self, reference: str, from_path: str | Path) -> bool:
        """Does an absolute path name a place in the author's clone of this project: does it pass
        through a folder named as the referencing file's folder, one above it or the project root
        (SkyThought's ``skythought/train/LLaMA-Factory/single_node.sh`` naming ``/lustre/.../
        LLaMA-Factory/examples/deepspeed/ds_z3_config.json``), or is a tail of at least two of its
        folders a folder of the project? Then a file the project lacks there is missing from the
        project, not a file of another machine."""
        written = Path(os.path.expanduser(reference))
        if not written.is_absolute():
            return False
        folders = written.parts[1:-1]
        bases = [Path(from_path).parent, *self._folders_above(Path(from_path)), self.root]
        if {base.resolve().name for base in bases} & set(folders):
            return True
        return any((base.joinpath(*folders[start:])).is_dir()
                   for base in bases for start in range(0, max(len(folders) - 1, 0)))

    def moved_in_clone(self, written: Path) -> Path | None:
        """An absolute path into the author's clone whose file the author kept in a subfolder of
        their own (GritLM's launches name ``/home/niklas/gritlm/scripts/configs/confnew/
        config_8gpusfsdp_m7.yml``; the project publishes ``scripts/configs/config_8gpusfsdp_m7.yml``).
        The deepest folder of the path that the project has, named by a tail of at least two
        folders (``scripts/configs``: the clone's layout, not a common name like ``configs``),
        stands for where the author kept it; the one file of that name below it is the file. Two
        such files, or none, and the path names nothing."""
        folders, name = written.parts[1:-1], written.name
        for end in range(len(folders), 1, -1):
            for start in range(0, end - 1):
                folder = self.root.joinpath(*folders[start:end])
                if folder.is_dir():
                    found = self._named_below(folder, name)
                    return found[0] if len(found) == 1 else None
        return None

    def _named_below(self, folder: Path, name: str, most: int = 2000) -> list[Path]:
        """The files called ``name`` in ``folder`` and its subfolders (a bounded walk; hidden
        folders skipped); each one found is recorded as probed, for the cache."""
        found = self._named.get((folder, name))
        if found is None:
            found = []
            seen = 0
            for directory, subfolders, files in os.walk(folder):
                subfolders[:] = [d for d in subfolders if not d.startswith(".")]
                seen += len(files)
                if name in files:
                    found.append(Path(directory) / name)
                if seen > most or len(found) > 1:
                    break
            self._named[(folder, name)] = found
        for path in found:
            reads.probe(os.path.abspath(path), True)
        return found

    def _folders_above(self, path: Path) -> list[Path]:
        """The folders between ``path``'s own folder and the project root (both left out)."""
        root = self.root.resolve()
        try:
            folder = path.resolve().parent
        except OSError:
            return []
        out = []
        while folder != root and root in folder.parents:
            folder = folder.parent
            if folder != root:
                out.append(folder)
        return out

    @staticmethod
    def read_for_scan(path: Path) -> str | None:
        """A file's text for the mention index: regular files only (a FIFO would block the
        read forever, a link to /dev/zero never end it), and not huge ones."""
        import stat as stat_module

        try:
            info = os.stat(path)
            if not stat_module.S_ISREG(info.st_mode) or info.st_size > MAX_SCAN_BYTES:
                return None
            with open(path, "rb") as handle:
                return handle.read(MAX_SCAN_BYTES).decode("utf-8", errors="ignore")
        except OSError:
            return None

    def mentions_of(self, path: str) -> tuple[str, ...]:
        """The file names one document mentions (its own text, not the project index)."""
        text = self.overlays.get(self.key(path)) or self.read_for_scan(Path(path)) or ""
        return tuple(name.rsplit("/", 1)[-1] for line in _lines_naming_files(text) for name in _FILE_NAME.findall(line))
