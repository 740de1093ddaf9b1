"""``memlint lsp``: the language server, wired from pygls 2 features to the engine.

The event loop only routes messages. Lint work (parsing, estimating) runs on one lint thread
that owns the engine state (``session.Session``); every job carries a snapshot of the open
buffers, so it sees the text the user sees. Results are kept per document version: a result
for a version the user has already typed past is dropped, never published.

Diagnostics are pushed (``textDocument/publishDiagnostics``) or pulled
(``textDocument/diagnostic``) as the client prefers, never both (ruff's rule: a client that
can pull gets no pushes, else VS Code shows each finding twice).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol

from memlint import __version__
from memlint.documents.reading import is_linted
from memlint.lint.collector import IdleCollection, collector_paused
from memlint.lsp import actions
from memlint.lsp import budget_view as budget_views
from memlint.lsp import hover as hovers
from memlint.lsp import lens as lenses
from memlint.lsp.convert import (
    path_of,
    placed_edits,
    same_file,
    split_lines,
    to_lsp_diagnostic,
    to_lsp_range,
    to_memlint_position,
    uri_of,
)
from memlint.lsp.debounce import Debouncer
from memlint.lsp.last_good import is_broken
from memlint.lsp.per_file_ignores import ignore_in_settings
from memlint.lsp.quiet_collection import QuietCollection
from memlint.lsp.session import Session, is_settings_file
from memlint.lsp.text_sync import EditorWorkspace
from memlint.lsp.settings import RUN_ON_SAVE, EditorSettings, parse_editor_settings

logger = logging.getLogger("memlint.lsp")

DEFAULT_DEBOUNCE_SECONDS = 0.05
CONFIGURATION_TIMEOUT_SECONDS = 5.0
# buffers this long are linted on open and save only: each lint of them holds the GIL for seconds
LARGE_DOCUMENT_LINES = 20_000
SHOW_BUDGET_COMMAND = "memlint.showBudget"
BUDGET_VIEW_COMMAND = "memlint.budgetView"  # the budget page of a document's runs (VS Code's webview)
WATCHED_GLOBS = (
    "**/pyproject.toml", "**/memlint.toml", "**/.memlint.toml",
    "**/*.json", "**/*.yaml", "**/*.yml", "**/*.py", "**/*.sh",
)


class MemlintProtocol(LanguageServerProtocol):
    """Answers a request whose params do not fit the protocol with an error instead of
    leaving the client waiting (pygls logs it and drops it); cancellations and superseded
    versions, normal while typing, are logged at debug."""

    # a request the client cancelled or the server gave up on (the buffer changed under it)
    CANCELLED = (types.LSPErrorCodes.ServerCancelled, types.LSPErrorCodes.RequestCancelled)

    def _handle_cancel_notification(self, msg_id):
        """A cancel for a request already answered: normal while typing, not a warning."""
        if msg_id not in self._request_futures:
            logger.debug("cancel of %s: answered already", msg_id)
            return
        super()._handle_cancel_notification(msg_id)

    def _send_handler_result(self, future, *, msg_id):
        """A request superseded by a newer version is answered with its error, logged at debug
        (pygls logs any JsonRpcException with a traceback)."""
        error = None if future.cancelled() else future.exception()
        if isinstance(error, JsonRpcException) and error.code in self.CANCELLED:
            self._request_futures.pop(msg_id, None)
            logger.debug("request %s: %s", msg_id, error.message)
            self._send_response(msg_id, error=error.to_response_error())
            return
        super()._send_handler_result(future, msg_id=msg_id)

    def structure_message(self, data: dict[str, Any]):
        try:
            return super().structure_message(data)
        except JsonRpcException as error:
            if isinstance(data, dict) and "id" in data and "method" in data:
                self._send_response(data["id"], None, error.to_response_error())
            raise


@dataclass
class OpenDocument:
    uri: str
    path: str  # resolved file path
    version: int | None
    text: str


@dataclass
class DocumentResult:
    version: int | None
    diagnostics: list[types.Diagnostic]
    result_id: str


class MemlintServer(LanguageServer):
    """The language server: LSP requests in, the engine's diagnostics, hovers, code actions and
    lenses out. It keeps open buffers and last results; the analysis itself is the Session's."""

    def __init__(self, debounce: float = DEFAULT_DEBOUNCE_SECONDS) -> None:
        super().__init__("memlint", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
                         protocol_cls=MemlintProtocol)
        self.session = Session()
        self.lint_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memlint-lint")
        self.debouncer = Debouncer(debounce)
        self.documents: dict[str, OpenDocument] = {}  # by URI
        self.results: dict[str, DocumentResult] = {}  # by URI
        self.pull = False
        self.use_code_lens = False
        self.use_inlay_hints = False
        self.refresh_diagnostics = False
        self.refresh_inlay_hints = False
        self.refresh_code_lens = False
        self.configuration_support = False
        self.related_support = True
        self.edit_support = actions.EditSupport()
        self.configured: asyncio.Event | None = None
        self._reported: set[str] = set()
        self._large_logged: set[str] = set()
        # the cycle collector runs when the editor is quiet, never between an edit and its result
        self.collection = IdleCollection()
        self._lints_in_flight = 0
        self.quiet_collection = QuietCollection(self.collection, self.lint_thread, self.linting)

    # ----------------------------------------------------------------- plumbing

    async def on_lint_thread(self, function: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.lint_thread, partial(function, *args))

    def linting(self) -> bool:
        """Is a lint running, or waiting for its debounce?"""
        return self._lints_in_flight > 0 or self.debouncer.busy()

    async def lint_on_thread(self, texts: dict[str, str], path: str, text: str | None):
        self._lints_in_flight += 1
        try:
            outcome, converted, due = await self.on_lint_thread(self._lint_job, texts, path, text)
        finally:
            self._lints_in_flight -= 1
        self.quiet_collection.linted(due)
        return outcome, converted

    def snapshot(self) -> dict[str, str]:
        return {doc.path: doc.text for doc in self.documents.values()}

    def log(self, message: str, level: types.MessageType = types.MessageType.Info) -> None:
        logger.log({types.MessageType.Error: logging.ERROR, types.MessageType.Warning: logging.WARNING}.get(level, logging.INFO), message)
        try:
            self.window_log_message(types.LogMessageParams(type=level, message=message))
        except Exception:  # no client attached (tests of the wiring): stderr has it
            pass

    def report_once(self, message: str, level: types.MessageType = types.MessageType.Warning) -> None:
        """Tell the user once (a settings problem), not on every keystroke."""
        if message in self._reported:
            return
        self._reported.add(message)
        self.log(message, level)
        self.window_show_message(types.ShowMessageParams(type=level, message=message))

    def report_server_error(self, error: Exception, source) -> None:
        # a malformed message or a failing handler: logged for the user, not popped up
        cancelled = (types.LSPErrorCodes.ServerCancelled, types.LSPErrorCodes.RequestCancelled)
        if isinstance(error, JsonRpcException) and error.code in cancelled:
            return  # answered already; the client asks again
        self.log(f"memlint: {type(error).__name__}: {error}", types.MessageType.Error)

    @property
    def codec(self):
        return self.workspace.position_codec

    def editor_settings_for(self, path: str) -> EditorSettings:
        return self.session.editor_for(path)  # read-only: the dict is replaced, never mutated

    async def until_configured(self) -> None:
        if self.configured is not None and not self.configured.is_set():
            try:
                await asyncio.wait_for(self.configured.wait(), CONFIGURATION_TIMEOUT_SECONDS)
            except asyncio.TimeoutError:
                self.log("memlint: no answer to workspace/configuration; using the settings files only",
                         types.MessageType.Warning)
                self.configured.set()

    # ----------------------------------------------------------------- lint jobs (lint thread)
    # These run on the lint thread: they read the snapshot of the open buffers they were given,
    # never ``self.documents``, which the event loop changes meanwhile.

    @staticmethod
    def _lines_of(texts: dict[str, str], path: str) -> list[str] | None:
        for open_path, text in texts.items():
            if same_file(open_path, path):
                return split_lines(text)
        try:
            if Path(path).stat().st_size > 4 * 1024 * 1024:
                return None
            return split_lines(Path(path).read_text("utf-8"))
        except (OSError, UnicodeDecodeError):
            return None

    def _lint_job(self, texts: dict[str, str], path: str, text: str | None):
        with collector_paused():
            self.session.sync(texts)
            outcome = self.session.lint(path)
            lines = (self._lines_of(texts, path) or [""]) if text is None else split_lines(text)
            lines_of = partial(self._lines_of, texts)
            converted = [
                to_lsp_diagnostic(d, lines, self.codec, lines_of, self.related_support) for d in outcome.diagnostics
            ]
            due = self.collection.linted()
        return outcome, converted, due

    def _estimates_job(self, texts: dict[str, str], path: str):
        self.session.sync(texts)
        return self.session.estimates(path)

    def _hover_job(self, texts: dict[str, str], path: str, position):
        scope, estimates = self._estimates_job(texts, path)
        if not estimates:
            return None
        parsed = scope.linter.project.parsed(path)
        target = hovers.target_at(parsed, position)
        if target is None:
            return None
        chosen = hovers.runs_at(estimates, path, target, same_file)
        markdown = hovers.budget_markdown(chosen)
        return (markdown, target.range) if markdown else None

    def _labels_job(self, texts: dict[str, str], path: str):
        scope, estimates = self._estimates_job(texts, path)
        labels = lenses.run_labels(estimates, path, same_file)
        return self.session.last_good.labels(path, scope.linter.project.parsed(path), labels)

    def _budget_view_job(self, texts: dict[str, str], path: str):
        scope, estimates = self._estimates_job(texts, path)
        project = scope.linter.project
        lines = self._lines_of(texts, path) or [""]

        def read(other: str) -> str | None:
            try:
                return project.parsed(other).text
            except (OSError, ValueError):
                return None

        def place(edits: list) -> list | None:
            return placed_edits(edits, path, lines, self.codec, partial(self._lines_of, texts))

        return budget_views.budget_view(estimates, path, read, place, stale=is_broken(project.parsed(path)))

    def _settings_edit_job(self, texts: dict[str, str], path: str, code: str):
        self.session.sync(texts)
        scope = self.session.scope_for(path)
        settings = scope.settings

        def read_open(candidate: Path) -> str | None:
            for open_path, text in texts.items():
                if same_file(open_path, str(candidate)):
                    return text
            return None

        return ignore_in_settings(settings.path, settings.root, Path(path), code, read_open)

    # ----------------------------------------------------------------- diagnostics

    def _result_id(self, version: int | None, diagnostics: list[types.Diagnostic]) -> str:
        payload = json.dumps(self.protocol._converter.unstructure(diagnostics), sort_keys=True, default=str)
        return f"{version}-{hashlib.blake2b(payload.encode(), digest_size=8).hexdigest()}"

    async def lint_document(self, uri: str) -> DocumentResult | None:
        """Lint an open document's current version; None when it changed meanwhile."""
        doc = self.documents.get(uri)
        if doc is None:
            return None
        await self.until_configured()
        version = doc.version
        try:
            outcome, diagnostics = await self.lint_on_thread(self.snapshot(), doc.path, doc.text)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # an engine bug: keep the previous diagnostics, say so, stay up
            logger.exception("lint of %s failed", uri)
            self.log(f"memlint: linting {doc.path} failed: {type(error).__name__}: {error}", types.MessageType.Error)
            return None
        for message in outcome.internal_errors:
            self.log(f"memlint: internal error: {message} (please report it)", types.MessageType.Error)
        if outcome.scope.settings_error:
            self.report_once(f"memlint: {outcome.scope.settings_error} (defaults apply until it is fixed)",
                             types.MessageType.Error)
        for problem in outcome.scope.editor.problems:
            self.report_once(problem)
        current = self.documents.get(uri)
        if current is None or current.version != version:
            return None  # stale: a newer version is on its way
        result = DocumentResult(version, diagnostics, self._result_id(version, diagnostics))
        self.results[uri] = result
        self.dependents_changed(outcome.dependents)
        return result

    async def lint_and_publish(self, uri: str) -> None:
        result = await self.lint_document(uri)
        if result is not None and uri in self.documents and not self.pull:
            self.text_document_publish_diagnostics(
                types.PublishDiagnosticsParams(uri=uri, diagnostics=result.diagnostics, version=result.version)
            )

    def schedule_lint(self, uri: str, delay: float | None = None) -> None:
        if self.pull:
            return
        self.debouncer.schedule(uri, lambda: self.lint_and_publish(uri), delay)

    def dependents_changed(self, paths: list[str]) -> None:
        """Other open documents whose findings depend on one that changed (cross-file)."""
        uris = [doc.uri for doc in self.documents.values() if any(same_file(doc.path, p) for p in paths)]
        if not uris:
            return
        for uri in uris:
            self.results.pop(uri, None)
        if self.pull:
            self.request_diagnostic_refresh()
        else:
            for uri in uris:
                self.schedule_lint(uri, delay=0)
        self.request_hint_refresh()  # their estimates changed too

    def ask_client(self, request: Callable[[None], Any], name: str) -> None:
        """Send a refresh request without waiting; a client that fails it is only logged."""

        async def send() -> None:
            try:
                await request(None)
            except Exception as error:
                self.log(f"memlint: {name} failed ({type(error).__name__}: {error})", types.MessageType.Warning)

        asyncio.ensure_future(send())

    def request_diagnostic_refresh(self) -> None:
        if self.pull and self.refresh_diagnostics:
            self.ask_client(self.workspace_diagnostic_refresh_async, "workspace/diagnostic/refresh")

    def request_hint_refresh(self) -> None:
        if self.use_code_lens and self.refresh_code_lens:
            self.ask_client(self.workspace_code_lens_refresh_async, "workspace/codeLens/refresh")
        elif self.use_inlay_hints and self.refresh_inlay_hints:
            self.ask_client(self.workspace_inlay_hint_refresh_async, "workspace/inlayHint/refresh")

    def relint_everything(self) -> None:
        """Settings changed: every open document's findings may differ."""
        self.results.clear()
        if self.pull:
            self.request_diagnostic_refresh()
        else:
            for uri in list(self.documents):
                self.schedule_lint(uri, delay=0)
        self.request_hint_refresh()

    # ----------------------------------------------------------------- settings

    async def fetch_configuration(self) -> None:
        folders = list(self.session.folders)
        editor: dict[str, EditorSettings] = dict(self.session.editor_settings)
        if self.configuration_support:
            items = [types.ConfigurationItem(scope_uri=uri_of(str(f)), section="memlint") for f in folders]
            items.append(types.ConfigurationItem(section="memlint"))
            try:
                values = await asyncio.wait_for(
                    self.workspace_configuration_async(types.ConfigurationParams(items=items)),
                    CONFIGURATION_TIMEOUT_SECONDS,
                )
            except Exception as error:
                self.log(f"memlint: workspace/configuration failed ({type(error).__name__}: {error})",
                         types.MessageType.Warning)
                values = None
            logger.debug("workspace/configuration for %s: %r", [i.scope_uri for i in items], values)
            if isinstance(values, (list, tuple)) and len(values) == len(items):
                editor = {str(f): parse_editor_settings(v) for f, v in zip(folders, values)}
                editor[""] = parse_editor_settings(values[-1])
        for settings in editor.values():
            for problem in settings.problems:
                self.report_once(problem)
        await self.on_lint_thread(self.session.set_editor_settings, editor)
        if self.configured is not None:
            self.configured.set()

    async def register(self, params: types.RegistrationParams) -> None:
        try:
            await self.client_register_capability_async(params)
        except Exception as error:  # the client refused: settings changes need a save instead
            self.log(f"memlint: could not watch files ({type(error).__name__}: {error})", types.MessageType.Warning)

    async def settings_files_changed(self) -> None:
        await self.on_lint_thread(self.session.reload_settings)
        self._reported.clear()
        self.log("memlint: settings changed; linting the open documents again")
        self.relint_everything()


def _supports(capabilities: types.ClientCapabilities, *path: str) -> Any:
    value: Any = capabilities
    for name in path:
        value = getattr(value, name, None)
        if value is None:
            return None
    return value


def create_server(debounce: float = DEFAULT_DEBOUNCE_SECONDS) -> MemlintServer:
    server = MemlintServer(debounce)

    @server.feature(types.INITIALIZE)
    def initialize(ls: MemlintServer, params: types.InitializeParams) -> None:
        # buffers kept with the LSP's line breaks (memlint.lsp.text_sync); no document is open yet
        ls.protocol._workspace = EditorWorkspace.like(ls.workspace, types.TextDocumentSyncKind.Incremental)
        caps = params.capabilities
        ls.pull = _supports(caps, "text_document", "diagnostic") is not None
        ls.refresh_diagnostics = bool(_supports(caps, "workspace", "diagnostics", "refresh_support"))
        ls.use_code_lens = _supports(caps, "text_document", "code_lens") is not None
        ls.use_inlay_hints = not ls.use_code_lens and _supports(caps, "text_document", "inlay_hint") is not None
        ls.refresh_code_lens = bool(_supports(caps, "workspace", "code_lens", "refresh_support"))
        ls.refresh_inlay_hints = bool(_supports(caps, "workspace", "inlay_hint", "refresh_support"))
        ls.configuration_support = bool(_supports(caps, "workspace", "configuration"))
        related = _supports(caps, "text_document", "publish_diagnostics", "related_information")
        ls.related_support = ls.pull or bool(related)
        ls.edit_support = actions.EditSupport.of(caps)
        folders = [path_of(f.uri) for f in params.workspace_folders or []]
        if not folders:
            root = params.root_uri and path_of(params.root_uri) or params.root_path
            folders = [root] if root else []
        ls.session.folders = [Path(f).resolve() for f in folders if f]
        # settings at startup, before workspace/configuration answers: VS Code's extension sends
        # {"settings": {...}}, Helix its `config` table ({"memlint": {...}})
        options = params.initialization_options
        if isinstance(options, dict):
            initial = options.get("settings", options)
            if isinstance(initial, dict) and initial:
                ls.session.editor_settings = {"": parse_editor_settings(initial)}
        ls.configured = asyncio.Event()
        ls.log(f"memlint {__version__} language server: diagnostics by {'pull' if ls.pull else 'push'}, "
               f"estimates as {'code lenses' if ls.use_code_lens else 'inlay hints' if ls.use_inlay_hints else 'hovers only'}, "
               f"positions in {ls.workspace.position_encoding}")

    @server.feature(types.INITIALIZED)
    def initialized(ls: MemlintServer, params: types.InitializedParams) -> None:
        from memlint.catalog import hub

        loop = asyncio.get_running_loop()
        # an uncatalogued model's config.json is fetched off the lint thread; lint again when it lands
        def relint(_model: str) -> None:
            loop.call_soon_threadsafe(ls.relint_everything)

        hub.in_background(relint)
        asyncio.ensure_future(ls.fetch_configuration())
        if _supports(ls.client_capabilities, "workspace", "did_change_watched_files", "dynamic_registration"):
            watchers = [types.FileSystemWatcher(glob_pattern=g) for g in WATCHED_GLOBS]
            registration = types.Registration(
                id="memlint-watched-files",
                method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                register_options=types.DidChangeWatchedFilesRegistrationOptions(watchers=watchers),
            )
            asyncio.ensure_future(ls.register(types.RegistrationParams([registration])))

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: MemlintServer, params: None) -> None:
        ls.debouncer.cancel_all()
        ls.quiet_collection.cancel()
        ls.lint_thread.shutdown(wait=False, cancel_futures=True)

    # ---------------------------------------------------------------- document sync

    def remember(ls: MemlintServer, uri: str) -> OpenDocument | None:
        path = path_of(uri)
        if path is None or not is_linted(path) and not is_settings_file(path):
            return None
        doc = ls.workspace.get_text_document(uri)
        known = ls.documents.get(uri)
        resolved = known.path if known is not None else str(Path(path).resolve())
        entry = OpenDocument(uri, resolved, doc.version, doc.source)
        if is_settings_file(path):
            return entry  # not linted, not an overlay
        ls.documents[uri] = entry
        return entry

    def large(ls: MemlintServer, doc: OpenDocument) -> bool:
        if doc.text.count("\n") < LARGE_DOCUMENT_LINES:
            return False
        if doc.uri not in ls._large_logged:
            ls._large_logged.add(doc.uri)
            ls.log(f"memlint: {doc.path} has more than {LARGE_DOCUMENT_LINES:,} lines; it is linted on open and save only")
        return True

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: MemlintServer, params: types.DidOpenTextDocumentParams) -> None:
        doc = remember(ls, params.text_document.uri)
        if doc is None:
            if path_of(params.text_document.uri) is None:
                ls.log(f"memlint: {params.text_document.uri} is not a file; not linted")
            return
        if not is_settings_file(doc.path):
            ls.schedule_lint(doc.uri, delay=0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: MemlintServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.quiet_collection.edited()  # the user is typing: no collector pass before this edit's result
        doc = remember(ls, params.text_document.uri)
        if doc is None or is_settings_file(doc.path):
            return
        if ls.editor_settings_for(doc.path).run == RUN_ON_SAVE or large(ls, doc):
            return  # the last result stands until the document is saved
        ls.schedule_lint(doc.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(ls: MemlintServer, params: types.DidSaveTextDocumentParams) -> None:
        uri = params.text_document.uri
        path = path_of(uri)
        if path is not None and is_settings_file(path):
            await ls.settings_files_changed()
            return
        doc = remember(ls, uri)
        if doc is None:
            return
        ls.results.pop(uri, None)
        if ls.pull:
            ls.request_diagnostic_refresh()
        else:
            ls.schedule_lint(uri, delay=0)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    async def did_close(ls: MemlintServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        doc = ls.documents.pop(uri, None)
        ls.debouncer.forget(uri)
        ls.results.pop(uri, None)
        ls._large_logged.discard(uri)
        if doc is None:
            return
        if not ls.pull:
            ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
        try:
            dependents = await ls.on_lint_thread(ls.session.close, doc.path, ls.snapshot())
        except Exception as error:
            ls.log(f"memlint: closing {doc.path}: {type(error).__name__}: {error}", types.MessageType.Error)
            return
        ls.dependents_changed(dependents)

    # ---------------------------------------------------------------- pull diagnostics

    @server.feature(
        types.TEXT_DOCUMENT_DIAGNOSTIC,
        types.DiagnosticOptions(identifier="memlint", inter_file_dependencies=True, workspace_diagnostics=False),
    )
    async def diagnostic(ls: MemlintServer, params: types.DocumentDiagnosticParams):
        uri = params.text_document.uri
        doc = ls.documents.get(uri)
        if doc is None:
            return await unopened_report(ls, uri)
        result = ls.results.get(uri)
        on_save = ls.editor_settings_for(doc.path).run == RUN_ON_SAVE or large(ls, doc)
        if result is None or (result.version != doc.version and not on_save):
            version = doc.version
            result = await ls.lint_document(uri)
            current = ls.documents.get(uri)
            if result is None and (current is None or current.version != version):
                # the buffer changed while it was linted: the client asks again (LSP 3.17)
                raise JsonRpcException(message="document changed while it was linted",
                                       code=types.LSPErrorCodes.ServerCancelled, data={"retriggerRequest": True})
            if result is None:  # the lint failed (logged): the last result stands
                result = ls.results.get(uri) or DocumentResult(version, [], f"{version}-none")
        if params.previous_result_id is not None and params.previous_result_id == result.result_id:
            return types.UnchangedDocumentDiagnosticReport(result_id=result.result_id)
        return types.RelatedFullDocumentDiagnosticReport(items=result.diagnostics, result_id=result.result_id)

    async def unopened_report(ls: MemlintServer, uri: str):
        """A pull for a document the client never opened: lint the file on disk if there is one."""
        path = path_of(uri)
        items: list[types.Diagnostic] = []
        if path is not None and is_linted(path) and Path(path).is_file():
            try:
                _, items = await ls.lint_on_thread(ls.snapshot(), str(Path(path).resolve()), None)
            except Exception as error:
                ls.log(f"memlint: linting {path} failed: {type(error).__name__}: {error}", types.MessageType.Error)
        return types.RelatedFullDocumentDiagnosticReport(items=items, result_id=ls._result_id(None, items))

    # ---------------------------------------------------------------- settings and files

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: MemlintServer, params: types.DidChangeConfigurationParams) -> None:
        if not ls.configuration_support and isinstance(params.settings, dict) and "memlint" in params.settings:
            ls.session.editor_settings = {"": parse_editor_settings(params.settings["memlint"])}
        ls._reported.clear()
        await ls.fetch_configuration()
        await ls.on_lint_thread(ls.session.reload_settings)
        ls.log("memlint: editor settings changed; linting the open documents again")
        ls.relint_everything()

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    async def did_change_watched_files(ls: MemlintServer, params: types.DidChangeWatchedFilesParams) -> None:
        paths = [p for p in (path_of(change.uri) for change in params.changes) if p]
        if any(is_settings_file(p) for p in paths):
            await ls.settings_files_changed()
            return
        changed = [p for p in paths if not any(same_file(doc.path, p) for doc in ls.documents.values())]
        if not changed:
            return  # the editor's own saves: the buffers were linted already
        await ls.on_lint_thread(ls.session.files_changed, changed)
        ls.relint_everything()

    @server.feature(types.WORKSPACE_DID_CHANGE_WORKSPACE_FOLDERS)
    async def did_change_folders(ls: MemlintServer, params: types.DidChangeWorkspaceFoldersParams) -> None:
        folders = [Path(p).resolve() for p in (path_of(f.uri) for f in ls.workspace.folders.values()) if p]
        await ls.on_lint_thread(ls.session.set_folders, folders)
        await ls.fetch_configuration()
        ls.relint_everything()

    # ---------------------------------------------------------------- hover

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def hover(ls: MemlintServer, params: types.HoverParams) -> types.Hover | None:
        doc = ls.documents.get(params.text_document.uri)
        if doc is None or not ls.editor_settings_for(doc.path).enable:
            return None
        lines = split_lines(doc.text)
        position = to_memlint_position(ls.codec, lines, params.position)
        line = lines[position.line - 1] if position.line - 1 < len(lines) else ""
        if doc.path.lower().endswith((".py", ".pyi", ".yaml", ".yml", ".sh")):
            found = hovers.rule_code_at(line, position.column)
            if found is not None:
                page = hovers.rule_page(found[0])
                if page is not None:
                    start, end = found[1], found[2]
                    rng = types.Range(
                        types.Position(params.position.line, ls.codec.client_num_units(line[:start])),
                        types.Position(params.position.line, ls.codec.client_num_units(line[:end])),
                    )
                    return types.Hover(types.MarkupContent(types.MarkupKind.Markdown, page), rng)
        await ls.until_configured()
        try:
            found = await ls.on_lint_thread(ls._hover_job, ls.snapshot(), doc.path, position)
        except Exception as error:
            ls.log(f"memlint: hover in {doc.path} failed: {type(error).__name__}: {error}", types.MessageType.Error)
            return None
        if found is None:
            return None
        markdown, target = found
        return types.Hover(types.MarkupContent(types.MarkupKind.Markdown, markdown), to_lsp_range(ls.codec, lines, target))

    # ---------------------------------------------------------------- estimates at the run's line

    async def labels_for(ls: MemlintServer, uri: str):
        doc = ls.documents.get(uri)
        if doc is None:
            return None, []
        await ls.until_configured()
        try:
            return doc, await ls.on_lint_thread(ls._labels_job, ls.snapshot(), doc.path)
        except Exception as error:
            ls.log(f"memlint: estimates for {doc.path} failed: {type(error).__name__}: {error}", types.MessageType.Error)
            return doc, []

    @server.feature(types.TEXT_DOCUMENT_INLAY_HINT, types.InlayHintOptions(resolve_provider=False))
    async def inlay_hint(ls: MemlintServer, params: types.InlayHintParams) -> list[types.InlayHint]:
        if not ls.use_inlay_hints:
            return []
        doc, labels = await labels_for(ls, params.text_document.uri)
        if doc is None:
            return []
        lines = split_lines(doc.text)
        hints = []
        for label in labels:
            index = label.line - 1
            if index >= len(lines) or not (params.range.start.line <= index <= params.range.end.line):
                continue
            hints.append(types.InlayHint(
                position=types.Position(index, ls.codec.client_num_units(lines[index])),
                label=label.label,
                padding_left=True,
                tooltip=types.MarkupContent(types.MarkupKind.Markdown, label.tooltip) if label.tooltip else None,
            ))
        return hints

    @server.feature(types.TEXT_DOCUMENT_CODE_LENS, types.CodeLensOptions(resolve_provider=False))
    async def code_lens(ls: MemlintServer, params: types.CodeLensParams) -> list[types.CodeLens]:
        if not ls.use_code_lens:
            return []
        doc, labels = await labels_for(ls, params.text_document.uri)
        if doc is None:
            return []
        lines = split_lines(doc.text)
        out = []
        for label in labels:
            index = min(label.line - 1, max(len(lines) - 1, 0))
            rng = types.Range(types.Position(index, 0), types.Position(index, ls.codec.client_num_units(lines[index])))
            out.append(types.CodeLens(range=rng, command=types.Command(
                title=label.label, command=SHOW_BUDGET_COMMAND, arguments=[label.label, label.tooltip])))
        return out

    @server.command(SHOW_BUDGET_COMMAND)
    def show_budget(ls: MemlintServer, *arguments: Any) -> None:
        label = str(arguments[0]) if arguments else "memlint"
        sheet = str(arguments[1]) if len(arguments) > 1 else ""
        if sheet:
            ls.log(sheet)
        ls.window_show_message(types.ShowMessageParams(type=types.MessageType.Info, message=f"memlint: {label}"))

    @server.command(BUDGET_VIEW_COMMAND)
    async def budget_view(ls: MemlintServer, *arguments: Any) -> dict | None:
        document_uri = arguments[0] if arguments and isinstance(arguments[0], str) else None
        doc = ls.documents.get(document_uri) if document_uri else None
        if doc is None:
            return None
        await ls.until_configured()
        try:
            return await ls.on_lint_thread(ls._budget_view_job, ls.snapshot(), doc.path)
        except Exception as error:
            ls.log(f"memlint: budget view of {doc.path} failed: {type(error).__name__}: {error}", types.MessageType.Error)
            return None

    # ---------------------------------------------------------------- code actions

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, actions.SUGGESTION_KIND],
                                resolve_provider=False),
    )
    async def code_action(ls: MemlintServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        uri = params.text_document.uri
        doc = ls.documents.get(uri)
        if doc is None:
            return []
        only = params.context.only
        versions = {d.uri: d.version for d in ls.documents.values()}
        out: list[types.CodeAction] = []
        ignores: list[types.CodeAction] = []  # after every fix: never the first choice
        for diagnostic in params.context.diagnostics:
            if not actions.is_ours(diagnostic):
                continue
            if actions.wanted(types.CodeActionKind.QuickFix, only):
                fix = actions.fix_action(diagnostic, versions, ls.edit_support)
                if fix is not None:
                    out.append(fix)
            if actions.wanted(actions.SUGGESTION_KIND, only):
                out.extend(actions.suggestion_actions(diagnostic, versions, ls.edit_support))
            if actions.wanted(types.CodeActionKind.QuickFix, only):
                syntax = diagnostic.data.get("syntax") if isinstance(diagnostic.data, dict) else None
                if syntax == "json":
                    action = await ignore_in_file(ls, doc, diagnostic)
                else:
                    action = actions.ignore_line_action(diagnostic, uri, doc.text, doc.version, ls.codec, ls.edit_support)
                if action is not None:
                    ignores.append(action)
        return out + ignores

    async def ignore_in_file(ls: MemlintServer, doc: OpenDocument, diagnostic: types.Diagnostic):
        try:
            edit = await ls.on_lint_thread(ls._settings_edit_job, ls.snapshot(), doc.path, str(diagnostic.code))
        except Exception as error:
            ls.log(f"memlint: per-file ignore for {doc.path} failed: {type(error).__name__}: {error}",
                   types.MessageType.Error)
            return None
        if edit is None:
            return None
        settings_uri = uri_of(str(edit.path))
        version = ls.documents[settings_uri].version if settings_uri in ls.documents else None
        return actions.ignore_file_action(diagnostic, edit, settings_uri, version, ls.codec, ls.edit_support)

    @server.command(actions.EXPLAIN_COMMAND)
    def explain(ls: MemlintServer, *arguments: Any) -> None:
        message = actions.explanation(arguments[0] if arguments else None)
        ls.window_show_message(types.ShowMessageParams(type=types.MessageType.Info, message=message))

    return server


def serve(debounce: float = DEFAULT_DEBOUNCE_SECONDS, log_level: str = "WARNING") -> int:
    """Run the server on stdin/stdout until the client says exit."""
    logging.basicConfig(stream=sys.stderr, level=getattr(logging, log_level.upper(), logging.WARNING),
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print() must never corrupt the protocol stream
    server = create_server(debounce)
    server.start_io(stdin, stdout)
    return 0
