"""Shared by the language-server tests: server commands, a client that answers what editors
answer, and helpers that wait for diagnostics whichever way (push or pull) they arrive.
(A plain module, not conftest.py, so ``from lsp_helpers import ...`` cannot pick up another
directory's conftest.)"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Callable, Sequence, Union

from lsprotocol import types
from pygls.protocol import default_converter
from pygls.uris import from_fs_path
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 30.0  # seconds; generous for a loaded 2-core machine, never reached when all is well

SERVER = [sys.executable, "-m", "memlint", "lsp", "--debounce-ms", "20"]
SERVER_WITH_FIXABLE_RULE = [sys.executable, str(Path(__file__).parent / "serve_with_checkpointing_rule.py"),
                            "--debounce-ms", "20"]


def server_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def make_client() -> LanguageClient:
    """pytest-lsp's client, plus the requests an editor answers that it does not: dynamic
    registration (the server asks to watch settings files) and applying workspace edits."""
    client = LanguageClient(converter_factory=default_converter)
    converter = client.protocol._converter

    # lsprotocol reads any code action with a "command" key as a bare Command; a CodeAction's
    # command is an object, a Command's a string (how VS Code tells them apart)
    def code_action_or_command(value, _type):
        is_command = isinstance(value.get("command"), str)
        return converter.structure(value, types.Command if is_command else types.CodeAction)

    converter.register_structure_hook(Union[types.Command, types.CodeAction], code_action_or_command)
    client.registrations = []
    client.refreshes = []
    client.published = []  # every publishDiagnostics, in order (pytest-lsp keeps the last per URI)

    def publish(params: types.PublishDiagnosticsParams) -> None:
        client.published.append(params)
        client.diagnostics[params.uri] = params.diagnostics

    register_lsp_features(client, {**DEFAULT_CLIENT_FEATURES, types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: publish})

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register(params: types.RegistrationParams) -> None:
        client.registrations.extend(params.registrations)

    @client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def code_lens_refresh(params: None) -> None:
        client.refreshes.append(types.WORKSPACE_CODE_LENS_REFRESH)

    @client.feature(types.WORKSPACE_INLAY_HINT_REFRESH)
    def inlay_hint_refresh(params: None) -> None:
        client.refreshes.append(types.WORKSPACE_INLAY_HINT_REFRESH)

    return client


def config(command: list[str] = SERVER) -> ClientServerConfig:
    return ClientServerConfig(server_command=command, server_env=server_env(), client_factory=make_client)



def uri(path: Path) -> str:
    return from_fs_path(str(path))


def initialize_params(capabilities: types.ClientCapabilities, root: Path, options=None) -> types.InitializeParams:
    return types.InitializeParams(
        capabilities=capabilities,
        root_uri=uri(root),
        workspace_folders=[types.WorkspaceFolder(uri=uri(root), name=root.name)],
        initialization_options=options,
    )


def is_pull(client) -> bool:
    return client.capabilities.text_document is not None and client.capabilities.text_document.diagnostic is not None


def open_document(client, path: Path, text: str | None = None, version: int = 1) -> str:
    document_uri = uri(path)
    language = {".py": "python", ".json": "json", ".yaml": "yaml", ".yml": "yaml"}.get(path.suffix, "plaintext")
    client.text_document_did_open(types.DidOpenTextDocumentParams(
        text_document=types.TextDocumentItem(
            uri=document_uri, language_id=language, version=version,
            text=path.read_text("utf-8") if text is None else text,
        )
    ))
    return document_uri


def replace_all(client, document_uri: str, text: str, version: int) -> None:
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=document_uri, version=version),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
    ))


async def pulled(client, document_uri: str) -> list[types.Diagnostic]:
    """Pull a document's diagnostics as an editor does, asking again when the server says the
    buffer changed under the lint (ServerCancelled with retriggerRequest)."""
    from pygls.exceptions import JsonRpcException

    for _ in range(20):
        try:
            report = await client.text_document_diagnostic_async(
                types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=document_uri))
            )
        except JsonRpcException as error:
            if error.code == types.LSPErrorCodes.ServerCancelled and (error.data or {}).get("retriggerRequest"):
                continue
            raise
        return list(report.items)
    raise AssertionError("the server cancelled every pull")


async def diagnostics(client, document_uri: str, until: Callable[[Sequence[types.Diagnostic]], bool] = lambda d: True,
                      timeout: float = TIMEOUT) -> list[types.Diagnostic]:
    """The document's diagnostics once ``until`` holds for them (pushed or pulled, as the
    client's capabilities decide); fails after ``timeout`` with what was last seen."""
    deadline = time.monotonic() + timeout
    seen: Sequence[types.Diagnostic] | None = None
    while time.monotonic() < deadline:
        if is_pull(client):
            seen = await pulled(client, document_uri)
        else:
            seen = client.diagnostics.get(document_uri)
        if seen is not None and until(seen):
            return list(seen)
        await asyncio.sleep(0.05)
    raise AssertionError(f"diagnostics of {document_uri} never matched; last seen: {seen!r}")


async def until(condition: Callable[[], bool], what: str, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def logged(client, text: str, timeout: float = TIMEOUT) -> None:
    """Wait until the server logs (window/logMessage) a message containing ``text``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(text in m.message for m in client.log_messages):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the server never logged {text!r}: {[m.message for m in client.log_messages]}")


async def change_settings(client, settings: dict) -> None:
    """Answer workspace/configuration with ``settings`` from now on, tell the server, and wait
    until it has applied them."""
    client.log_messages.clear()
    client.set_configuration({"memlint": settings})
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    await logged(client, "editor settings changed")


def pull_client_with_refresh() -> types.ClientCapabilities:
    """VS Code as it is today: it pulls diagnostics and honours workspace/diagnostic/refresh
    (the recorded 1.65 capabilities predate both)."""
    from pytest_lsp import client_capabilities

    capabilities = client_capabilities("visual-studio-code")
    capabilities.text_document.diagnostic = types.DiagnosticClientCapabilities(related_document_support=True)
    capabilities.workspace.diagnostics = types.DiagnosticWorkspaceClientCapabilities(refresh_support=True)
    return capabilities


def capabilities_for(name: str) -> types.ClientCapabilities:
    from pytest_lsp import client_capabilities

    return pull_client_with_refresh() if name == "vscode-pull" else client_capabilities(name)


def codes(items: Sequence[types.Diagnostic]) -> list[str]:
    return sorted(str(d.code) for d in items)


def edits_by_uri(edit: types.WorkspaceEdit) -> tuple[dict[str, list[types.TextEdit]], list[str]]:
    """A workspace edit's text edits by URI (either form), and the files it creates."""
    out: dict[str, list[types.TextEdit]] = {}
    created: list[str] = []
    for document_uri, text_edits in (edit.changes or {}).items():
        out.setdefault(document_uri, []).extend(text_edits)
    for change in edit.document_changes or []:
        if isinstance(change, types.CreateFile):
            created.append(change.uri)
        elif isinstance(change, types.TextDocumentEdit):
            out.setdefault(change.text_document.uri, []).extend(change.edits)
    return out, created


def apply_text_edits(text: str, edits: list[types.TextEdit]) -> str:
    """Apply edits the way an editor does (ASCII lines here, so UTF-16 units are characters)."""
    lines = text.split("\n")

    def offset(position: types.Position) -> int:
        return sum(len(line) + 1 for line in lines[: position.line]) + position.character

    for edit in sorted(edits, key=lambda e: offset(e.range.start), reverse=True):
        start, end = offset(edit.range.start), offset(edit.range.end)
        text = text[:start] + edit.new_text + text[end:]
    return text
