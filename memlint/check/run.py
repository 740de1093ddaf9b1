"""``memlint check`` over many files: the walk, the result cache, the work on every core.

1. Walk the paths, keeping each file's ``stat``, and find each file's settings root.
2. A file whose content the cache knows (same ``mtime_ns`` and size → its digest → its record:
   kind, the files it names, the file names its text mentions) is not read. The others are
   analysed by the workers: read, classified, parsed, their facts extracted
   (:mod:`memlint.check.workers`). Python that imports no ML library is read and classified, no more.
3. The links between documents come from the records alone: the documents linked with the
   given files join them (pre-commit passes ``ds_config.json``: its scripts are checked too).
4. A file's cached result is reused when nothing it read has changed (:mod:`memlint.check.cache`).
5. The rest are linted by the workers, each file by the worker that parsed it, but for the
   last batches of one that a worker with nothing left to do takes over (parsing them again).
6. Diagnostics come out in file order, each file's sorted; the cache is written.

Below :data:`PARALLEL_MIN_FILES` files to analyse or lint, everything runs in this process.
"""

from __future__ import annotations

import math
import os
import stat as stat_module
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import AbstractSet, Callable, Iterable

from memlint.check import cache as result_cache
from memlint.check.workers import Batch, Lanes, Outcome, Setup, Task, cpu_count
from memlint.documents.reading import read_document
from memlint.documents.reads import digest as content_digest
from memlint.model.diagnostics import Diagnostic
from memlint.project.documents import DocumentRecord, mentioned_names
from memlint.project.project import Project
from memlint.project.settings import Discovery, Settings
from memlint.project.walk import walk

PARALLEL_MIN_FILES = 32  # fewer files than this are not worth starting worker processes for
BATCHES_PER_LANE = 8  # batches are small enough that the lanes finish together
MAX_BATCH = 64


@dataclass
class Statistics:
    """Where a check's time went (``memlint check --statistics``)."""

    files: int = 0  # walked, and linked with them
    from_cache: int = 0  # whose record (kind, links, mentions) the cache knew: not read
    parsed: int = 0  # read and parsed (Python training code, configs, launchers)
    set_aside: int = 0  # Python read and set aside by the prefilters: no ML import, or nothing needs it; never parsed by libcst
    reused: int = 0  # results taken from the cache
    linted: int = 0
    workers: int = 1
    seconds: dict[str, float] = field(default_factory=dict)  # stage -> wall seconds
    busy: dict[str, list[float]] = field(default_factory=dict)  # stage -> each worker's seconds at work in it

    def line(self) -> str:
        stages = ", ".join(f"{stage} {seconds:.2f} s" for stage, seconds in self.seconds.items())
        # the time a worker waited while another still worked: what more cores could not win back
        busy = "".join(f"; {stage} busy {' + '.join(f'{s:.2f}' for s in lanes)} s" for stage, lanes in self.busy.items()
                       if len(lanes) > 1)
        return (f"memlint: {self.files} files: {self.parsed} parsed, {self.set_aside} Python set aside by the "
                f"prefilter, {self.from_cache} known from the cache; {self.linted} linted, {self.reused} results "
                f"reused; {self.workers} worker{'s' if self.workers != 1 else ''}; {stages}{busy}")


@dataclass
class LintResult:
    diagnostics: list[Diagnostic] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    internal_errors: list[str] = field(default_factory=list)
    statistics: Statistics = field(default_factory=Statistics)


class Check:
    """One ``memlint check`` run: walk, settings per root, cache look-ups, analysis and linting
    on the workers, diagnostics in file order (the numbered steps in this module's docstring)."""

    def __init__(self, paths: list[Path], settings: Settings, force_exclude: bool,
                 overrides: Callable[[Settings], Settings] | None, jobs: int | None,
                 cache_dir: Path | None = None) -> None:
        self.paths = paths
        self.settings = settings
        self.force_exclude = force_exclude
        self.overrides = overrides
        self.jobs = jobs if jobs is not None and jobs > 0 else cpu_count()
        self.roots: list[Settings] = []
        self._root_index: dict[Path, int] = {}
        self._directory_settings: dict[Path, Settings] = {}
        self._discover = Discovery()
        self._overridden: dict[int, Settings] = {}
        self._keep: list[Settings] = []  # what the ids above name stays alive
        self.stats: dict[str, tuple[int, int] | None] = {}  # walked file -> (mtime_ns, size); None: not regular
        self.names: dict[str, str] = {}  # walked file -> path as walked
        self.symlinks = False
        self.digests: dict[str, str] = {}  # absolute path -> content digest, as of this run
        self.records: dict[str, DocumentRecord] = {}  # absolute path -> record (no facts)
        self.analysed: dict[str, DocumentRecord] = {}  # absolute path -> record with its facts
        self.parsed_by: dict[str, int] = {}  # absolute path -> the lane that holds its tree
        self.light: set[str] = set()  # absolute paths the prefilter set aside: read, never parsed by libcst
        self.costs: dict[str, float] = {}  # absolute path -> CPU seconds its analysis took this run
        self.candidates: dict[int, list[Path]] = {}
        self.projects: dict[int, Project] = {}
        self.lanes: Lanes | None = None
        self._busy: dict[str, list[float]] = {}  # the first lanes' when others replaced them (``_lint``)
        anchor = Path(paths[0]) if paths else Path.cwd()
        first = self.settings_for(anchor, is_directory=anchor.is_dir())  # a directory's own settings
        self.first = self.root_of_settings(first)
        self.cache = result_cache.ResultCache.load(first.root, cache_dir) if first.cache else None

    # ----------------------------------------------------------------- settings

    def settings_for(self, path: Path, is_directory: bool = False) -> Settings:
        """The settings of a file: discovered for its directory, the command line's on top."""
        if self.overrides is None:
            return self.settings
        directory = path if is_directory else path.parent
        found = self._directory_settings.get(directory)
        if found is None:
            discovered = self._discover(directory)
            found = self._overridden.get(id(discovered))
            if found is None:  # the flags are applied once per settings file, not per directory
                found = self._overridden[id(discovered)] = self.overrides(discovered)
                self._keep.append(discovered)
            self._directory_settings[directory] = found
        return found

    def root_of_settings(self, settings: Settings) -> int:
        index = self._root_index.get(settings.root)
        if index is None:  # the first settings seen for a root are that root's (as the engine's linters)
            index = self._root_index[settings.root] = len(self.roots)
            self.roots.append(settings)
        return index

    def root_of(self, path: Path) -> int:
        return self.root_of_settings(self.settings_for(path))

    # ----------------------------------------------------------------- the walk

    def _walk(self, paths: list[Path], settings: Settings, explicit_too: bool) -> list[Path]:
        found: dict[Path, None] = {}

        def symlink(_path: Path) -> None:
            self.symlinks = True

        for path in paths:
            if os.path.realpath(path) != os.path.abspath(path):
                self.symlinks = True
        for path, entry in walk(paths, settings, explicit_too, on_symlink=symlink):
            if path in found:
                continue
            found[path] = None
            absolute = os.path.abspath(path)
            if absolute in self.stats:
                continue
            try:
                info = entry.stat() if entry is not None else os.stat(path)
                regular = stat_module.S_ISREG(info.st_mode)
            except OSError:
                regular = False
            if entry is None and os.path.islink(path):
                self.symlinks = True
            self.stats[absolute] = (info.st_mtime_ns, info.st_size) if regular else None
            if regular:
                self.names.setdefault(absolute, str(path))
        return list(found)

    def _candidates_of(self, root: int, walked: list[Path]) -> list[Path]:
        """The files of a root's project (what its referrer index scans): the walk already
        made when it was of exactly that root, else a walk of the root."""
        settings = self.roots[root]
        top = settings.root.resolve()
        if (len(self.paths) == 1 and self.roots[self.first] is settings and not self.symlinks
                and os.path.abspath(self.paths[0]) == str(top)):
            return [Path(os.path.abspath(p)) for p in walked]
        return self._walk([top], settings, explicit_too=True)

    # ----------------------------------------------------------------- contents

    def digest_of(self, absolute: str) -> str:
        """The content digest of a file now: known this run, from the cache by stat, or read."""
        known = self.digests.get(absolute)
        if known is not None:
            return known
        stat = self.stats.get(absolute) if absolute in self.stats else _stat(absolute)
        known = self.cache.digest_for(absolute, stat) if self.cache is not None else None
        if known is None:
            document = read_document(self.names.get(absolute, absolute))
            known = content_digest(document.text, document.problem)
            if self.cache is not None:
                self.cache.remember_digest(absolute, stat, known)
        self.digests[absolute] = known
        return known

    def _cached_record(self, absolute: str, need_links: bool) -> DocumentRecord | None:
        if self.cache is None:
            return None
        digest = self.cache.digest_for(absolute, self.stats.get(absolute))
        if digest is None:
            return None
        content = self.cache.content(digest)
        if content is None:
            return None
        kind, links, mentions = content.get("kind"), content.get("links"), content.get("mentions")
        if not isinstance(mentions, list) or (need_links and (not isinstance(kind, str) or not isinstance(links, list))):
            return None
        self.digests[absolute] = digest
        return DocumentRecord(
            digest=digest,
            kind=kind if isinstance(kind, str) else None,
            links=tuple(str(x) for x in links) if isinstance(links, list) else None,
            mentions=tuple(str(x) for x in mentions),
        )

    def _remember(self, absolute: str, record: DocumentRecord) -> None:
        self.digests[absolute] = record.digest
        self.records[absolute] = replace(record, facts=None)
        if self.cache is not None:
            self.cache.remember_digest(absolute, self.stats.get(absolute), record.digest)
            self.cache.remember_content(record.digest, record.kind, record.links, record.mentions)

    def _scan(self, path: Path) -> None:
        """A project file that is not linked: its digest and the names it mentions suffice."""
        absolute = os.path.abspath(path)
        if absolute in self.records:
            return
        record = self._cached_record(absolute, need_links=False)
        if record is None:
            document = read_document(self.names.get(absolute, str(path)))
            record = DocumentRecord(content_digest(document.text, document.problem),
                                    mentions=mentioned_names(str(path), document.text))
            self._remember(absolute, record)
        self.records[absolute] = record

    # ----------------------------------------------------------------- lanes

    def _start_lanes(self, work: int) -> Lanes:
        parallel = self.jobs > 1 and work >= PARALLEL_MIN_FILES
        setup = Setup(self.roots, None if self.symlinks else self.names, self.candidates)
        return Lanes(setup, self.jobs if parallel else 1)

    def _batches(self, tasks: list[Task], light: AbstractSet[str] = frozenset()) -> list[Batch]:
        """The tasks in batches, the heaviest first, each about an equal share of the work, so
        that the lanes finish together: a 4,000-line trainer module met last would keep one
        lane busy for seconds after the other ran out of work. A file analysed this run weighs
        what its analysis cost (:attr:`costs`: a module the prefilter set aside costs next to
        nothing, a trainer module seconds); another, its size (libcst's parse and what follows
        grow with it), nothing if in ``light`` (set aside by the prefilter, never parsed by
        libcst). The heaviest files go alone; the lightest come last, at most ``MAX_BATCH``
        together. Each batch carries its files' analysis cost (:class:`Batch`)."""
        lanes = len(self.lanes) if self.lanes is not None else 1
        measured = [os.path.abspath(task[0]) in self.costs for task in tasks]

        def weight(task: Task) -> float:
            absolute = os.path.abspath(task[0])
            cost = self.costs.get(absolute)
            if cost is not None:
                return cost
            if absolute in light:
                return 0
            stat = self.stats.get(absolute)
            return stat[1] if stat is not None else 0

        if any(measured) and not all(measured):  # seconds and bytes are not added up together
            return (self._batches([t for t, m in zip(tasks, measured) if m], light)
                    + self._batches([t for t, m in zip(tasks, measured) if not m], light))
        weighed = sorted(((weight(task), index, task) for index, task in enumerate(tasks)),
                         key=lambda entry: (-entry[0], entry[1]))
        share = sum(w for w, _, _ in weighed) / (lanes * BATCHES_PER_LANE) or math.inf  # weightless: by count
        count = max(1, min(MAX_BATCH, math.ceil(len(tasks) / (lanes * BATCHES_PER_LANE))))
        batches: list[Batch] = []
        batch: list[Task] = []
        held = 0.0
        cost = 0.0
        for w, _, task in weighed:
            batch.append(task)
            held += w
            cost += self.costs.get(os.path.abspath(task[0]), 0.0)
            if held >= share or len(batch) >= count:
                batches.append(Batch(batch, cost))
                batch, held, cost = [], 0.0, 0.0
        if batch:
            batches.append(Batch(batch, cost))
        return batches

    def _project(self, root: int) -> Project:
        """The project a root's links are computed in: the local worker's own when the work
        runs in this process (what it parses serves both), else one of this process."""
        if self.lanes is not None and self.lanes.local is not None:
            return self.lanes.local.project(root)
        project = self.projects.get(root)
        if project is None:
            project = self.projects[root] = Project(self.roots[root], snapshot=True)
            if not self.symlinks:
                project.seed_files(self.names, self.candidates.get(root))
            for absolute, record in self.records.items():
                project.seed(absolute, record)
        return project

    def _seed(self, roots: list[int]) -> None:
        """Every worker learns every record; facts only where one worker parsed the file."""
        assert self.lanes is not None
        self.lanes.set_roots(self.roots, self.candidates)
        records = [(absolute, self.analysed.get(absolute, record)) for absolute, record in self.records.items()]
        for root in roots:
            self.lanes.seed(root, records)

    # ----------------------------------------------------------------- the check

    def run(self) -> LintResult:
        started = clock = time.perf_counter()
        stats = Statistics()

        def stage(name: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            stats.seconds[name] = stats.seconds.get(name, 0.0) + now - clock
            clock = now

        first = self.roots[self.first]
        files = self._walk(self.paths, first, explicit_too=not self.force_exclude)
        walked = dict(self.stats)
        file_roots = [self.root_of(f) for f in files]
        for root in sorted(set(file_roots) | {self.first}):
            self.candidates[root] = self._candidates_of(root, files)

        # analyse what the cache does not know
        todo: list[Task] = []
        for path, root in zip(files, file_roots):
            absolute = os.path.abspath(path)
            record = self._cached_record(absolute, need_links=True) if absolute in walked else None
            if record is None:
                todo.append((str(path), root))
            else:
                self.records[absolute] = record
        stats.from_cache = len(files) - len(todo)
        stage("walk")
        self.lanes = self._start_lanes(len(todo))
        try:
            for lane, answers in self.lanes.run("analyse", self._batches(todo)):
                for path, _root, record, seconds in answers:
                    self.costs[os.path.abspath(path)] = seconds
                    if record is not None:
                        absolute = os.path.abspath(path)
                        self._remember(absolute, record)
                        self.parsed_by[absolute] = lane
                        if record.kind == "python-other" or record.set_aside:
                            stats.set_aside += 1
                            self.light.add(absolute)
                        else:
                            stats.parsed += 1
                        if record.facts:
                            self.analysed[absolute] = record
            stage("analyse")
            for root_files in self.candidates.values():
                for candidate in root_files:
                    self._scan(candidate)
            if self.lanes.local is not None:
                self._seed(sorted(self.candidates))

            # the documents linked with the given files
            project = self._project(self.first)
            extra = project.linked_with(files, first)
            targets: list[tuple[Path, int]] = []
            for path in files + extra:
                root = self.root_of(path)
                if self.force_exclude and self.roots[root].is_excluded(path):
                    continue
                targets.append((path, root))
            stage("link")

            # reuse what is still valid, lint the rest
            result = LintResult()
            found: dict[str, list[Diagnostic]] = {}
            misses: list[Task] = []
            tree = _Tree(self)
            fingerprints: dict[int, str] = {}
            for path, root in targets:
                result.files.append(str(path))
                settings = self.roots[root]
                if self.cache is None or not settings.cache:
                    misses.append((str(path), root))
                    continue
                fingerprint = fingerprints.get(root)
                if fingerprint is None:
                    fingerprint = fingerprints[root] = result_cache.settings_fingerprint(settings)
                reused = self.cache.reusable(result_cache.result_key(str(path)), self.digest_of(os.path.abspath(path)),
                                             fingerprint, str(settings.root), tree)
                if reused is None:
                    misses.append((str(path), root))
                else:
                    found[str(path)] = reused
            stage("cache look-up")
            stats.reused, stats.linted = len(found), len(misses)
            for outcome in self._lint(misses):
                found[outcome.path] = outcome.diagnostics
                result.internal_errors.extend(outcome.errors)
                settings = self.roots[outcome.root]
                if self.cache is not None and settings.cache and not outcome.errors and outcome.digest:
                    self.cache.remember_result(result_cache.result_key(outcome.path), outcome.digest,
                                               result_cache.settings_fingerprint(settings), str(settings.root),
                                               outcome.diagnostics, outcome.reads)
            stage("lint")
        finally:
            if self.lanes is not None:
                stats.workers = len(self.lanes)
                stats.busy = {**self._busy, **self.lanes.busy}
                self.lanes.close(wait=False)
        for path, _root in targets:
            result.diagnostics.extend(found.get(str(path), ()))
        if self.cache is not None:
            directories = [os.path.abspath(p) for p in self.paths if os.path.isdir(p)]
            self.cache.forget_missing(set(walked), directories)
            self.cache.save()
            stage("cache write")
        stats.files = len(targets)
        stats.seconds["total"] = time.perf_counter() - started
        result.statistics = stats
        return result

    def _lint(self, misses: list[Task]) -> list[Outcome]:
        if not misses:
            return []
        assert self.lanes is not None
        if self.lanes.local is not None and self.jobs > 1 and len(misses) >= PARALLEL_MIN_FILES:
            self._busy = self.lanes.busy
            self.lanes.close()  # much to lint but little was analysed here: use every core
            self.lanes = self._start_lanes(len(misses))
            self.parsed_by.clear()
        if self.lanes.local is None:
            self._seed(sorted(self.candidates))
        own: dict[int, list[Task]] = {}
        shared: list[Task] = []
        for task in misses:
            lane = self.parsed_by.get(os.path.abspath(task[0]))
            if lane is None:
                shared.append(task)
            else:
                own.setdefault(lane, []).append(task)
        outcomes: list[Outcome] = []
        batches = {lane: self._batches(tasks, self.light) for lane, tasks in own.items()}
        for _lane, answers in self.lanes.run("lint", self._batches(shared, self.light), batches):
            outcomes.extend(answers)
        return outcomes


class _Tree:
    """The files as they are now, for deciding whether a cached result still holds."""

    def __init__(self, check: Check) -> None:
        self.check = check
        self._roots = {str(settings.root): index for index, settings in enumerate(check.roots)}
        self._referrers: dict[tuple[str, str], tuple[str, ...]] = {}

    def digest(self, path: str) -> str | None:
        return self.check.digest_of(path)

    def is_file(self, path: str) -> bool:
        if path in self.check.stats:
            return self.check.stats[path] is not None
        return os.path.isfile(path)

    def referrers(self, root: str, path: str) -> tuple[str, ...]:
        found = self._referrers.get((root, path))
        if found is None:
            index = self._roots.get(root)
            if index is None:
                return ("?",)  # a root this run does not have: never equal
            project = self.check._project(index)
            found = self._referrers[(root, path)] = tuple(str(c) for c in project.referrers(path))
        return found


def _stat(path: str) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_mtime_ns, info.st_size) if stat_module.S_ISREG(info.st_mode) else None


def lint(
    paths: Iterable[Path],
    settings: Settings,
    force_exclude: bool = False,
    overrides: Callable[[Settings], Settings] | None = None,
    jobs: int | None = None,
    cache_dir: Path | None = None,
) -> LintResult:
    """Lint files and directories.

    With ``overrides`` (the command line's flags), every file is linted with the settings
    discovered for its own directory — the nearest ``memlint.toml`` / ``[tool.memlint]`` wins,
    as in ruff — with the overrides applied on top; without it, ``settings`` applies to all.
    Results of unchanged files come from the result cache unless the settings turn it off
    (``cache = false``, ``--no-cache``; ``cache_dir`` instead of ``.memlint_cache`` in the
    project root); the rest is linted on ``jobs`` processes (default:
    every core this process may use; small inputs are linted in this process).
    """
    return Check(list(paths), settings, force_exclude, overrides, jobs, cache_dir).run()
