"""A project: its documents, the links between them, and the training runs they define.

A run is defined by an entry document (a training script, an Axolotl or LLaMA-Factory YAML, a
launcher script) and the documents it links (``deepspeed="ds.json"``, ``--deepspeed zero3.json``,
``--config_file accelerate.yaml``). Linking works both ways: when only ``ds_config.json``
changed, the scripts that use it are found (by scanning the project for its file name and
confirming the reference) and checked again.

Parsed documents and their facts are cached by path and content, so the language server
re-parses only what changed. ``memlint check`` opens a project as a *snapshot* (the files do not
change while it runs: each is read once) and may seed it with :class:`DocumentRecord` s — what
other documents need to know about a file (its kind, the files it names, its facts) — computed
by another process or taken from the result cache, so that linking never parses a file twice.
Every read of another document is reported to :mod:`memlint.documents.reads`, which is how a cached
result knows when it is stale.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from memlint.documents import reads
from memlint.documents.kinds import ENTRY_KINDS, RUN_KINDS, DocumentKind
from memlint.documents.reading import LINTED_SUFFIXES, Document, document_from_text, read_document
from memlint.project.settings import Settings
from memlint.project.walk import iter_files

if TYPE_CHECKING:
    from memlint.documents.parsed import ParsedDocument
    from memlint.facts.plan import RunFacts, TrainingPlan
    from memlint.facts.resolve import ResolvedRun, RunContext

MAX_LINK_DEPTH = 3
MAX_SCAN_BYTES = 4 * 1024 * 1024
# file names a document can link: ds_config.json, configs/zero3.yaml, train.py, launch.sh
_FILE_NAME = re.compile(r"[\w.\-/]+\.(?:json|ya?ml|py|sh)\b")
# ``python -m pkg.mod`` / ``deepspeed --module pkg.mod`` / ``accelerate launch -m pkg.mod``
_EXTENSION = re.compile(r"\.(?:json|ya?ml|py|sh)\b")
_MODULE_FLAG = re.compile(r"(?<![\w-])(?:-m|--module)(?![\w-])")
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
        if item.launches is not None:
            out.append(str(item.launches.value))
    return tuple(out)



_FROM_IMPORT = re.compile(r"^\s*from\s+([A-Za-z_][\w.]*)\s+import\b", re.MULTILINE)

class Project:
    def __init__(self, settings: Settings, snapshot: bool = False) -> None:
        self.settings = settings
        self.root = settings.root.resolve()
        # a snapshot's files do not change while it lives (one `memlint check`): each is read once
        self.snapshot = snapshot
        self._cache: dict[str, _Cached] = {}
        self._overlays: dict[str, str] = {}  # unsaved editor buffers, by absolute path
        self._candidates: list[Path] | None = None
        self._mentions: dict[str, list[Path]] | None = None  # file name -> files naming it
        self._referrers: dict[str, dict[str, list[Path]]] = {}  # file name -> target key -> referrers
        self._keys: dict[str, str] = {}
        self._records: dict[str, DocumentRecord] = {}  # seeded: known without parsing
        self._files: frozenset[str] | None = None  # absolute paths known to be regular files
        self._names: dict[str, str] = {}  # key -> the path a file was walked as
        self._infrastructure: list | None = None  # the GPUs the project's infrastructure files request

    # ----------------------------------------------------------------- documents

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
        self._records[self.key(path)] = record

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
            self._candidates = candidates

    def set_overlay(self, path: str | Path, text: str | None) -> None:
        """Lint ``path`` with this text (an editor buffer) instead of the file; None drops it."""
        key = self.key(path)
        if text is None:
            self._overlays.pop(key, None)
        else:
            self._overlays[key] = text
        self._referrers.clear()
        if self._mentions is not None:  # re-index just this buffer's mentions
            target = Path(path)
            for paths in self._mentions.values():
                if target in paths:
                    paths.remove(target)
            source = text if text is not None else self._read_for_scan(target)
            for name in mentioned_names(str(target), source or ""):
                self._mentions.setdefault(name, []).append(target)

    def invalidate(self, path: str | Path | None = None) -> None:
        if path is None:
            self._cache.clear()
            self._keys.clear()
            self._records.clear()
        else:
            self._cache.pop(self.key(path), None)
            self._records.pop(self.key(path), None)
        self._candidates = None
        self._mentions = None
        self._infrastructure = None
        self._referrers.clear()

    def document(self, path: str | Path) -> Document:
        key = self.key(path)
        if key in self._overlays:
            return document_from_text(str(path), self._overlays[key])
        return read_document(path)

    def _entry(self, path: str | Path) -> _Cached:
        from memlint.documents.parsed import ParsedDocument, parse_document
        from memlint.facts.extract import extract
        from memlint.lint import failures

        key = self.key(path)
        cached = self._cache.get(key)
        if cached is not None and self.snapshot:
            reads.document(key, cached.digest)
            return cached
        document = self.document(self._names.get(key, path))
        digest = reads.digest(document.text, document.problem)
        if cached is None or cached.digest != digest:
            # whatever the document makes memlint raise stays with it (memlint.lint.failures): it is
            # reported on the document when it is linted, and every other one goes on
            try:
                parsed = parse_document(document, previous=cached.parsed if cached is not None else None,
                                        whole=self.snapshot)
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
        if not self._records:
            return None
        key = self.key(path)
        record = self._records.get(key)
        if record is None or key in self._cache:
            return None
        reads.document(key, record.digest)
        return record

    def parsed(self, path: str | Path) -> ParsedDocument:
        return self._entry(path).parsed

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
        )

    # ----------------------------------------------------------------- links

    def _is_file(self, candidate: Path) -> bool:
        if self._files is not None and os.path.abspath(candidate) in self._files:
            exists = True
        else:
            try:
                exists = candidate.is_file()
            except OSError:
                exists = False
        reads.probe(os.path.abspath(candidate), exists)
        return exists

    def resolve_reference(self, reference: str, from_path: str | Path) -> Path | None:
        """A path as written in ``from_path`` -> the file, relative to the referencing file
        first, then to the project root. Files outside the project are allowed (a shared
        DeepSpeed config) but must exist."""
        written = Path(os.path.expanduser(reference))
        candidates = [written] if written.is_absolute() else [Path(from_path).parent / written, self.root / written]
        for candidate in candidates:
            if self._is_file(candidate):
                return candidate
        return None

    def linked(self, facts: RunFacts, seen: set[str], depth: int = 0) -> list[RunFacts]:
        """Facts of every document ``facts`` references, transitively."""
        out: list[RunFacts] = []
        if depth >= MAX_LINK_DEPTH:
            return out
        for reference in facts.references:
            target = self.resolve_reference(str(reference.value), facts.path)
            if target is None:
                continue
            key = self.key(target)
            if key in seen:
                continue
            seen.add(key)
            for child in self.facts(target):
                out.append(child)
                out.extend(self.linked(child, seen, depth + 1))
        return out

    def candidates(self) -> list[Path]:
        """Files of the project that could reference another (cached until invalidated)."""
        if self._candidates is None:
            self._candidates = [
                p for p in iter_files([self.root], self.settings) if p.suffix.lower() in LINTED_SUFFIXES
            ]
        return self._candidates

    def mentions(self) -> dict[str, list[Path]]:
        """For every file name a project file mentions (``ds_config.json``, ``train.py``), the
        files that mention it. Built once by a text scan (no parsing), so finding who links a
        config is a dictionary look-up, not a pass over the project."""
        if self._mentions is None:
            index: dict[str, list[Path]] = {}
            for candidate in self.candidates():
                key = self.key(candidate)
                record = self._records.get(key)
                if record is not None and record.mentions is not None and key not in self._overlays:
                    names = record.mentions
                else:
                    text = self._overlays.get(key) or self._read_for_scan(candidate)
                    names = mentioned_names(str(candidate), text or "")
                for name in names:
                    index.setdefault(name, []).append(candidate)
            self._mentions = index
        return self._mentions

    @staticmethod
    def _read_for_scan(path: Path) -> str | None:
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

    def referrers(self, path: str | Path) -> list[Path]:
        """Documents whose facts reference ``path`` (directly): among the files that mention
        its name, those whose references resolve to it. Resolved once per file name, so asking
        for every script of a monorepo is not quadratic in the files that say ``train.py``."""
        target = self.key(path)
        name = Path(path).name
        index = self._referrers.get(name)
        if index is None:
            index = self._referrers[name] = self._referrer_index(name)
        found = [c for c in index.get(target, ()) if self.key(c) != target]
        reads.referrers(target, tuple(str(c) for c in found))
        return found

    def _referrer_index(self, name: str) -> dict[str, list[Path]]:
        """Target key -> the files that mention ``name`` and reference that target. Building
        it reads many documents; what a result depends on is the answer (recorded above)."""
        index: dict[str, list[Path]] = {}
        with reads.paused():
            for candidate in self.mentions().get(name, ()):
                targets = []
                for written in self.links(candidate):
                    resolved = self.resolve_reference(written, candidate)
                    if resolved is not None:
                        targets.append(self.key(resolved))
                for target in dict.fromkeys(targets):
                    index.setdefault(target, []).append(candidate)
        return index

    def linked_with(self, files: list[Path], settings: Settings) -> list[Path]:
        """The documents of the project linked with ``files`` either way (the scripts that use
        a changed ds_config.json, the config a changed script names) and not among them."""
        keys = {self.key(f) for f in files}
        inside = os.path.join(str(self.settings.root), "")  # a target under the root starts so
        extra: list[Path] = []
        for path in files:
            if self.kind(path) not in RUN_KINDS:
                continue
            neighbours: list[Path] = []
            try:
                neighbours += self.referrers(path)
                for written in self.links(path):
                    target = self.resolve_reference(written, path)
                    if target is not None and self.key(target).startswith(inside):
                        neighbours.append(target)
            except (OSError, RecursionError):
                continue
            for other in neighbours:
                key = self.key(other)
                if key not in keys and not settings.is_excluded(other):
                    keys.add(key)
                    extra.append(other)
        return extra

    def _entries_through(self, referrer: Path) -> list[RunFacts]:
        """The entries of the runs a referencing document takes part in: its own, or — for a
        script that a launcher starts (``torchrun train.py`` naming ``ds_config.json`` in its
        argparse defaults) — the launcher's, whose options and GPU count apply to the config too."""
        own = [f for f in self.facts(referrer) if f.launches is not None or self.kind(referrer) in ENTRY_KINDS]
        if own and all(f.launches is None for f in own):
            launchers = [
                f for launcher in self.referrers(referrer) if self.key(launcher) != self.key(referrer)
                for f in self.facts(launcher)
                if f.launches is not None and self._same(self.resolve_reference(str(f.launches.value), launcher),
                                                         self.key(referrer))
            ]
            if launchers:
                return launchers
        return own

    def _same(self, path: Path | None, key: str) -> bool:
        return path is not None and self.key(path) == key

    # ----------------------------------------------------------------- runs

    def plan_for(self, facts: RunFacts) -> TrainingPlan:
        """The plan of a run whose entry is ``facts``; a launcher's script joins with its options."""
        from memlint.facts.plan import merge

        seen = {self.key(facts.path)}
        overrides = {}
        entry = facts
        linked: list[RunFacts] = []
        if facts.launches is not None:
            script = self.resolve_reference(str(facts.launches.value), facts.path)
            script_facts_found = self.facts(script) if script is not None else []
            if script is not None:
                seen.add(self.key(script))
                for script_facts in script_facts_found:
                    if script_facts.launches is not None:
                        continue  # a command in the script's docstring: another run of it
                    overrides = apply_cli(script_facts, facts)
                    linked.append(script_facts)
                    linked.extend(self.linked(script_facts, seen))
            if not script_facts_found and (script is None or self._delegates_to_project_module(script)):
                # a framework's entry point outside the project (installed with the framework, run
                # as a module), or a script in the project that trains through an import of the
                # project's own code (FastChat's train_mem.py calls fastchat.train.train.train()):
                # its options still state the run when they read as a training config. A script
                # that trains nothing and calls none of the project's code (a tokenization step)
                # states no run, whatever its options are named.
                from memlint.configs.command_line import options_as_config

                options = options_as_config(facts)
                if options is not None:
                    linked.append(options)
        linked.extend(self.linked(facts, seen))
        return merge(entry, linked, overrides)

    def _delegates_to_project_module(self, script: Path) -> bool:
        """Whether ``script`` imports from a package or module of this project (``from pkg.mod
        import train`` with ``pkg/`` or ``pkg.py`` under the project root)."""
        try:
            text = self.document(script).text
        except (OSError, ValueError):
            return False
        for match in _FROM_IMPORT.finditer(text):
            top = match.group(1).split(".")[0]
            if top and ((self.root / top).is_dir() or (self.root / f"{top}.py").is_file()):
                return True
        return False

    def runs_for(self, path: str | Path, context: RunContext) -> list[ResolvedRun]:
        """Every run ``path`` takes part in: as an entry, or linked from an entry."""
        from memlint.facts.resolve import resolve

        key = self.key(path)
        entries: list[RunFacts] = []
        launched_by = []
        for referrer in self.referrers(path):
            launched_by.extend(self._entries_through(referrer))
        own = [f for f in self.facts(path) if self.kind(path) in ENTRY_KINDS and is_entry(f)]
        documented = [f for f in own if f.kind == "shell" and f.path == own[0].path]
        if documented and len(documented) < len(own):
            own = documented  # the script runs as its docstring says: those options apply
        launchers = [f for f in launched_by if f.launches is not None]
        if launchers and own:
            entries = launchers  # the script runs through its launcher(s): their options apply
        else:
            entries = own + [f for f in launched_by if is_entry(f)]
        runs = []
        seen_plans = set()
        for facts in entries:
            plan = self.plan_for(facts)
            marker = (plan.entry, plan.documents, plan.anchor)
            if marker in seen_plans:
                continue
            seen_plans.add(marker)
            if key not in {self.key(d) for d in plan.documents}:
                continue
            infra = self._gpu_for(plan) if context.gpu is None else None
            run_context = context
            if infra is not None and context.world_size is None and plan.get("world_size") is None and infra.count:
                run_context = replace(context, world_size=infra.count)
            run = resolve(plan, run_context, Path(plan.entry).parent)
            if infra is not None:
                run.gpu = infra
                stated = f", {infra.count} GPUs" if run_context is not context else ""
                run.assumptions.append(f"target GPU: {infra.gpu.name}{stated}, requested by {infra.describe(str(self.root))}")
            runs.append(run)
        return runs

    # ----------------------------------------------------------------- target GPU

    def infrastructure(self) -> list:
        """The GPUs the project's infrastructure files request (slurm scripts, SkyPilot tasks,
        Kubernetes manifests, Modal apps): one text pass over the project, kept until invalidated."""
        from memlint.facts.infrastructure import read

        if self._infrastructure is None:
            found = []
            with reads.paused():
                for candidate in self.candidates():
                    key = self.key(candidate)
                    text = self._overlays.get(key) or self._read_for_scan(candidate)
                    if text and ("#SBATCH" in text or "accelerators" in text or "nvidia.com/gpu" in text
                                 or ("modal" in text and "gpu" in text)):
                        infra = read(str(candidate), text)
                        if infra is not None:
                            found.append((infra, reads.digest(text, None)))
            self._infrastructure = found
        return self._infrastructure

    def _gpu_for(self, plan: TrainingPlan):
        """The infrastructure GPU a run is judged against: the one its own documents request (a
        slurm script that launches it), else one whose file names the run's entry script, else the
        project's when all its infrastructure files request the same GPU."""
        found = self.infrastructure()
        if not found:
            return None
        documents = {self.key(d) for d in plan.documents}
        entry_name = Path(plan.entry).name
        own = [(i, d) for i, d in found if self.key(i.origin.path) in documents]
        naming = [(i, d) for i, d in found if entry_name in self.mentions_of(i.origin.path)]
        for group in (own, naming, found):
            if group and len({i.gpu.id for i, _ in group}) == 1:
                infra, digest = group[0]
                reads.document(self.key(infra.origin.path), digest)
                return infra
        return None

    def mentions_of(self, path: str) -> tuple[str, ...]:
        """The file names one document mentions (its own text, not the project index)."""
        text = self._overlays.get(self.key(path)) or self._read_for_scan(Path(path)) or ""
        return tuple(name.rsplit("/", 1)[-1] for line in _lines_naming_files(text) for name in _FILE_NAME.findall(line))


def is_entry(facts: RunFacts) -> bool:
    """Does a document define a run of its own (a model, a trainer, or a launched script)?"""
    return facts.model is not None or facts.framework is not None or facts.launches is not None


def apply_cli(script: RunFacts, launcher: RunFacts) -> dict:
    """The facts a launcher's options set through the script's command-line bindings."""
    from memlint.facts.launch_options import facts_from_cli

    return facts_from_cli(script, launcher)
