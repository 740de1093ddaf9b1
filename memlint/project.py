"""A project: its documents, the links between them, and the training runs they define.

A run is defined by an entry document (a training script, an Axolotl or LLaMA-Factory YAML, a
launcher script) and the documents it links (``deepspeed="ds.json"``, ``--deepspeed zero3.json``,
``--config_file accelerate.yaml``). Linking works both ways: when only ``ds_config.json``
changed, the scripts that use it are found (by scanning the project for its file name and
confirming the reference) and checked again.

Parsed documents and their facts are cached by path and content, so the language server
re-parses only what changed.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from memlint.documents import LINTED_SUFFIXES, Document, document_from_text, read_document
from memlint.facts.extract import extract
from memlint.facts.plan import RunFacts, TrainingPlan, merge
from memlint.facts.resolve import ResolvedRun, RunContext, resolve
from memlint.parsed import ParsedDocument, parse_document
from memlint.settings import Settings
from memlint.walk import iter_files

MAX_LINK_DEPTH = 3
MAX_SCAN_BYTES = 4 * 1024 * 1024
# file names a document can link: ds_config.json, configs/zero3.yaml, train.py, launch.sh
_FILE_NAME = re.compile(r"[\w.\-/]+\.(?:json|ya?ml|py|sh)\b")
# ``python -m pkg.mod`` / ``deepspeed --module pkg.mod`` / ``accelerate launch -m pkg.mod``
_MODULE_FLAG = re.compile(r"(?<![\w-])(?:-m|--module)(?![\w-])")
_MODULE_WORD = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_WORDS_AFTER_MODULE_FLAG = 6  # launcher options may come between the flag and the module
ENTRY_KINDS = ("python", "axolotl", "llamafactory", "hf-args", "shell")


@dataclass
class _Cached:
    digest: str
    parsed: ParsedDocument
    facts: list[RunFacts]


def _digest(text: str, problem: str | None) -> str:
    return hashlib.blake2b((problem or "").encode() + text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


class Project:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.root = settings.root.resolve()
        self._cache: dict[str, _Cached] = {}
        self._overlays: dict[str, str] = {}  # unsaved editor buffers, by absolute path
        self._candidates: list[Path] | None = None
        self._mentions: dict[str, list[Path]] | None = None  # file name -> files naming it
        self._keys: dict[str, str] = {}

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

    def set_overlay(self, path: str | Path, text: str | None) -> None:
        """Lint ``path`` with this text (an editor buffer) instead of the file; None drops it."""
        key = self.key(path)
        if text is None:
            self._overlays.pop(key, None)
        else:
            self._overlays[key] = text
        if self._mentions is not None:  # re-index just this buffer's mentions
            target = Path(path)
            for paths in self._mentions.values():
                if target in paths:
                    paths.remove(target)
            source = text if text is not None else self._read_for_scan(target)
            for name in mentioned_names(source or ""):
                self._mentions.setdefault(name, []).append(target)

    def invalidate(self, path: str | Path | None = None) -> None:
        if path is None:
            self._cache.clear()
            self._keys.clear()
        else:
            self._cache.pop(self.key(path), None)
        self._candidates = None
        self._mentions = None

    def document(self, path: str | Path) -> Document:
        key = self.key(path)
        if key in self._overlays:
            return document_from_text(str(path), self._overlays[key])
        return read_document(path)

    def _entry(self, path: str | Path) -> _Cached:
        key = self.key(path)
        document = self.document(path)
        digest = _digest(document.text, document.problem)
        cached = self._cache.get(key)
        if cached is None or cached.digest != digest:
            parsed = parse_document(document, previous=cached.parsed if cached is not None else None)
            try:
                facts = extract(parsed)
            except (RecursionError, ValueError, TypeError, KeyError, AttributeError, IndexError):
                facts = []  # an extractor bug must never cost the user their diagnostics
            cached = _Cached(digest, parsed, facts)
            self._cache[key] = cached
        return cached

    def parsed(self, path: str | Path) -> ParsedDocument:
        return self._entry(path).parsed

    def facts(self, path: str | Path) -> list[RunFacts]:
        return self._entry(path).facts

    # ----------------------------------------------------------------- links

    def resolve_reference(self, reference: str, from_path: str | Path) -> Path | None:
        """A path as written in ``from_path`` -> the file, relative to the referencing file
        first, then to the project root. Files outside the project are allowed (a shared
        DeepSpeed config) but must exist."""
        written = Path(os.path.expanduser(reference))
        candidates = [written] if written.is_absolute() else [Path(from_path).parent / written, self.root / written]
        for candidate in candidates:
            try:
                if candidate.is_file():
                    return candidate
            except OSError:
                continue
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
                text = self._overlays.get(self.key(candidate)) or self._read_for_scan(candidate)
                for name in mentioned_names(text or ""):
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
        """Documents whose facts reference ``path`` (directly)."""
        target = self.key(path)
        found: list[Path] = []
        for candidate in self.mentions().get(Path(path).name, ()):
            if self.key(candidate) == target:
                continue
            for facts in self.facts(candidate):
                refs = [r.value for r in facts.references] + ([facts.launches.value] if facts.launches else [])
                if any(self._same(self.resolve_reference(str(r), candidate), target) for r in refs):
                    found.append(candidate)
                    break
        return found

    def _entries_through(self, referrer: Path) -> list[RunFacts]:
        """The entries of the runs a referencing document takes part in: its own, or — for a
        script that a launcher starts (``torchrun train.py`` naming ``ds_config.json`` in its
        argparse defaults) — the launcher's, whose options and GPU count apply to the config too."""
        own = [f for f in self.facts(referrer) if f.launches is not None or self.parsed(referrer).kind in ENTRY_KINDS]
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
        seen = {self.key(facts.path)}
        overrides = {}
        entry = facts
        linked: list[RunFacts] = []
        if facts.launches is not None:
            script = self.resolve_reference(str(facts.launches.value), facts.path)
            if script is not None:
                seen.add(self.key(script))
                for script_facts in self.facts(script):
                    overrides = apply_cli(script_facts, facts)
                    linked.append(script_facts)
                    linked.extend(self.linked(script_facts, seen))
            else:
                # a framework's entry point outside the project (installed with the framework, run
                # as a module): its options still state the run. A script in the project that
                # memlint read and found not to train (a preprocessing step) states nothing.
                from memlint.configs.command_line import options_as_config

                options = options_as_config(facts)
                if options is not None:
                    linked.append(options)
        linked.extend(self.linked(facts, seen))
        return merge(entry, linked, overrides)

    def runs_for(self, path: str | Path, context: RunContext) -> list[ResolvedRun]:
        """Every run ``path`` takes part in: as an entry, or linked from an entry."""
        key = self.key(path)
        entries: list[RunFacts] = []
        launched_by = []
        for referrer in self.referrers(path):
            launched_by.extend(self._entries_through(referrer))
        own = [f for f in self.facts(path) if self.parsed(path).kind in ENTRY_KINDS and is_entry(f)]
        launchers = [f for f in launched_by if f.launches is not None]
        if launchers and own:
            entries = launchers  # the script runs through its launcher(s): their options apply
        else:
            entries = own + [f for f in launched_by if is_entry(f)]
        runs = []
        seen_plans = set()
        for facts in entries:
            plan = self.plan_for(facts)
            marker = (plan.entry, plan.documents)
            if marker in seen_plans:
                continue
            seen_plans.add(marker)
            if key not in {self.key(d) for d in plan.documents}:
                continue
            runs.append(resolve(plan, context, Path(plan.entry).parent))
        return runs


def mentioned_names(text: str) -> set[str]:
    """The file names a text may link: ``ds_config.json``, ``configs/train.py`` (as ``train.py``),
    and the modules it runs (``deepspeed --module openrlhf.cli.train_sft`` names
    ``train_sft.py``). A prefilter only: a referrer is confirmed by its facts."""
    names = {name.rsplit("/", 1)[-1] for name in _FILE_NAME.findall(text)}
    for match in _MODULE_FLAG.finditer(text):
        line = text[match.end():match.end() + 400].replace("\\\n", " ").split("\n", 1)[0]
        for word in line.split()[:_WORDS_AFTER_MODULE_FLAG]:
            if _MODULE_WORD.fullmatch(word):
                names.add(word.rsplit(".", 1)[-1] + ".py")
    return names


def is_entry(facts: RunFacts) -> bool:
    """Does a document define a run of its own (a model, a trainer, or a launched script)?"""
    return facts.model is not None or facts.framework is not None or facts.launches is not None


def apply_cli(script: RunFacts, launcher: RunFacts) -> dict:
    """The facts a launcher's options set through the script's command-line bindings."""
    from memlint.facts.cli import facts_from_cli

    return facts_from_cli(script, launcher)
