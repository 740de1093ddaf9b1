"""The engine side of the language server: one ``Linter`` per settings root, the editor's unsaved
buffers as overlays, and which other open documents an edit affects.

Every method runs on the server's one lint thread, so nothing here needs a lock: the event
loop hands work over through an executor and never touches a ``Session`` itself. The engine's
caches (parsed documents by content, the project's file list) live as long as the settings do.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path

from memlint.facts.resolve import ResolvedRun
from memlint.lint.context import RuleContext
from memlint.lint.engine import Linter, capacity_of, expand, run_context
from memlint.lsp.last_good import LastGood
from memlint.lsp.settings import EditorSettings, layer
from memlint.model.diagnostics import Diagnostic
from memlint.project.settings import SETTINGS_FILES, Settings, SettingsError, discover

logger = logging.getLogger(__name__)


@dataclass
class Scope:
    """What applies to one document: its linter, the layered settings, the editor's switches."""

    linter: Linter
    settings: Settings
    editor: EditorSettings
    settings_error: str | None = None  # the settings file is invalid: defaults apply


@dataclass
class LintOutcome:
    diagnostics: list[Diagnostic]
    scope: Scope
    # open documents whose diagnostics may have changed because this one's facts did
    dependents: list[str] = field(default_factory=list)
    internal_errors: list[str] = field(default_factory=list)


@dataclass
class RunEstimate:
    run: ResolvedRun
    context: RuleContext

    @property
    def budget(self):
        return self.context.budget(self.run)

    @property
    def suggestions(self):
        return self.context.suggestions(self.run)


def is_settings_file(path: str | Path) -> bool:
    return Path(path).name in SETTINGS_FILES


def _undecodable_on_disk(path: str, text: str) -> bool:
    """Is ``text`` an editor's UTF-8 reading (U+FFFD for each bad byte) of a file memlint
    reads in no encoding (a Latin-1 YAML)? Its buffer would lint clean where ``memlint check``
    reports SYN002."""
    if "\ufffd" not in text:
        return False
    from memlint.documents.reading import decode

    try:
        data = Path(path).read_bytes()
    except OSError:
        return False
    if data.decode("utf-8", errors="replace") != text:
        return False  # edited since: the buffer is what the user means
    return decode(data, path)[1] is not None


class Session:
    """What the language server knows between requests: workspace folders and their settings,
    one Linter per settings (with its Project of parsed documents), the open buffers, and the
    last good result of each document. Pure engine calls; no LSP types."""

    def __init__(self, folders: list[Path] | None = None) -> None:
        self.folders: list[Path] = [f.resolve() for f in folders or []]
        self.editor_settings: dict[str, EditorSettings] = {}  # folder path ("" = global) -> settings
        self._file_settings: dict[Path, tuple[Settings, str | None]] = {}  # directory -> discovered
        self._linters: dict[tuple, Linter] = {}
        self._texts: dict[str, str] = {}  # open documents: resolved path -> buffer text
        self._signatures: dict[str, tuple] = {}  # resolved path -> what its facts said last time
        self.last_good = LastGood()  # carried over a transient syntax error

    # ----------------------------------------------------------------- settings

    def folder_of(self, path: str | Path) -> Path | None:
        resolved = Path(path).resolve()
        inside = [f for f in self.folders if f == resolved or f in resolved.parents]
        return max(inside, key=lambda f: len(f.parts)) if inside else None

    def editor_for(self, path: str | Path) -> EditorSettings:
        folder = self.folder_of(path)
        if folder is not None and str(folder) in self.editor_settings:
            return self.editor_settings[str(folder)]
        return self.editor_settings.get("", EditorSettings())

    def file_settings_for(self, path: str | Path) -> tuple[Settings, str | None]:
        """``discover`` as the CLI calls it; without a settings file or a ``.git`` above, the
        workspace folder is the project root (the editor's analog of the CLI's cwd)."""
        directory = Path(path).resolve().parent
        cached = self._file_settings.get(directory)
        if cached is not None:
            return cached
        error = None
        try:
            settings = discover(directory)
        except SettingsError as problem:
            error = str(problem)
            settings = Settings(root=self.folder_of(path) or directory)
        if settings.path is None and not any((d / ".git").exists() for d in (settings.root, *settings.root.parents)):
            folder = self.folder_of(path)
            if folder is not None:
                settings = dataclasses.replace(settings, root=folder)
        self._file_settings[directory] = (settings, error)
        return settings, error

    def scope_for(self, path: str | Path) -> Scope:
        file_settings, error = self.file_settings_for(path)
        editor = self.editor_for(path)
        key = (file_settings.path, file_settings.root, editor)
        linter = self._linters.get(key)
        merged = layer(file_settings, editor)
        if linter is None:
            linter = Linter(merged)
            linter.editor_view = True  # verdicts in every open document of a run, fixes that edit
            for open_path, text in self._texts.items():
                linter.project.set_overlay(open_path, text)
            self._linters[key] = linter
        return Scope(linter, merged, editor, error)

    def reload_settings(self) -> list[str]:
        """Forget discovered settings and the linters built on them; return the open documents."""
        self._file_settings.clear()
        self._linters.clear()
        return list(self._texts)

    # ----------------------------------------------------------------- documents

    def set_text(self, path: str | Path, text: str | None) -> None:
        """An open document's buffer (None: closed, the file on disk counts again)."""
        key = str(Path(path).resolve())
        if text is not None and _undecodable_on_disk(key, text):
            text = None  # the editor shows the file mis-decoded: lint the file, as the CLI does (SYN002)
        if text is None:
            self._texts.pop(key, None)
            self.last_good.forget(key)
        else:
            self._texts[key] = text
        for linter in self._linters.values():
            linter.project.set_overlay(key, text)

    def sync(self, texts: dict[str, str]) -> None:
        """Make the overlays the open buffers (resolved path -> text) as the event loop saw
        them when it handed this job over; documents missing from ``texts`` were closed."""
        for key in [k for k in self._texts if k not in texts]:
            self.set_text(key, None)
        for key, text in texts.items():
            if self._texts.get(key) is not text:
                self.set_text(key, text)

    def files_changed(self, paths: list[str]) -> None:
        """Files changed on disk (created, saved elsewhere, deleted, a branch checked out):
        their cached parses go, and the project's file list is found again."""
        for path in paths:
            for linter in self._linters.values():
                linter.project.invalidate(path)

    def close(self, path: str | Path, texts: dict[str, str]) -> list[str]:
        """The buffer is closed (the file on disk counts again); return the open documents
        affected when the buffer said something else than the file."""
        self.sync(texts)
        try:
            if not Path(path).is_file():
                return []
            return self._changed_dependents(self.scope_for(path), path)
        except OSError:
            return []

    def set_editor_settings(self, editor: dict[str, EditorSettings]) -> None:
        """New editor settings (by workspace folder, "" for the global ones); the dict is
        replaced, never mutated, so the event loop may read it."""
        self.editor_settings = dict(editor)
        self._linters.clear()

    def set_folders(self, folders: list[Path]) -> None:
        self.folders = list(folders)
        self._file_settings.clear()
        self._linters.clear()

    # ----------------------------------------------------------------- linting

    def lint(self, path: str | Path, text: str | None = None) -> LintOutcome:
        if text is not None:
            self.set_text(path, text)
        scope = self.scope_for(path)
        if not scope.editor.enable:
            return LintOutcome([], scope)
        linter = scope.linter
        diagnostics = linter.lint_path(path)
        if str(Path(path).resolve()) in self._texts:  # an open buffer: keep findings over a syntax error
            diagnostics = self.last_good.diagnostics(str(Path(path).resolve()), linter.project.parsed(path), diagnostics)
        errors = list(linter.internal_errors)
        linter.internal_errors.clear()
        return LintOutcome(diagnostics, scope, self._changed_dependents(scope, path), errors)

    def _signature(self, scope: Scope, path: str | Path) -> tuple:
        """What a document says about runs, without positions: typing in a comment or moving a
        line leaves it alone, changing ``"stage": 2`` to ``3`` does not. A document memlint
        reads no facts from (a kind without an extractor, a file that does not parse) is judged
        by its text: any change may matter to the documents that link it."""
        project = scope.linter.project
        all_facts = project.facts(path)
        if not all_facts:
            text = project.parsed(path).text
            return (("text", hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()),)
        out = []
        for facts in all_facts:
            stated = tuple(sorted((name, repr(fact.value)) for name, fact in facts.stated().items()))
            out.append((
                facts.kind,
                stated,
                tuple(repr(r.value) for r in facts.references),
                repr(facts.launches.value) if facts.launches else None,
                tuple(sorted((k, repr(v.value)) for k, v in facts.passed().items())),
                tuple(sorted((k, repr(v.value)) for k, v in facts.overrides.items())),
                tuple(sorted(facts.cli_bindings.items())),
            ))
        return tuple(out)

    def _changed_dependents(self, scope: Scope, path: str | Path) -> list[str]:
        key = str(Path(path).resolve())
        try:
            signature = self._signature(scope, path)
        except Exception:  # the lint reported any failure on the document; its links wait
            logger.exception("the facts of %s", path)
            return []
        previous = self._signatures.get(key)
        self._signatures[key] = signature
        if previous is None or previous == signature:
            return []
        return self.dependents(scope, path)

    def dependents(self, scope: Scope, path: str | Path) -> list[str]:
        """Open documents linked with ``path`` either way (the scripts that use a DeepSpeed
        config, the configs a script uses): their findings depend on it."""
        key = str(Path(path).resolve())
        others = [o for o in self._texts if o != key]
        if not others:
            return []
        try:
            linked = expand([Path(path)], scope.settings, scope.linter.project)
        except Exception:
            logger.exception("the documents linked with %s", path)
            return []
        keys = {str(p.resolve()) for p in linked}
        return [o for o in others if o in keys]

    # ----------------------------------------------------------------- runs (hover, hints)

    def estimates(self, path: str | Path, text: str | None = None) -> tuple[Scope, list[RunEstimate]]:
        """The training runs ``path`` takes part in, each with the context that estimates it."""
        if text is not None:
            self.set_text(path, text)
        scope = self.scope_for(path)
        if not scope.editor.enable:
            return scope, []
        project = scope.linter.project
        parsed = project.parsed(path)
        try:
            runs = project.runs_for(path, run_context(scope.settings))
        except Exception:  # the lint reports it on the document (SYN002); no hover, no hints
            logger.exception("the runs of %s", path)
            runs = []
        context = RuleContext(parsed=parsed, settings=scope.settings, capacity=capacity_of(scope.settings), runs=runs,
                              project=project)
        return scope, [RunEstimate(run, context) for run in runs]
