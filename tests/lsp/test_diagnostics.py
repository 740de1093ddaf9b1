"""Diagnostics end to end: a real client (pytest-lsp) runs `memlint lsp` as a subprocess.

Parametrized over the recorded capabilities of Neovim (0.11: pulls diagnostics, offers UTF-8
positions first) and VS Code (1.65: takes pushed diagnostics, UTF-16 positions only).
"""

from __future__ import annotations

import asyncio

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities

from lsp_helpers import (
    change_settings,
    codes,
    config,
    diagnostics,
    initialize_params,
    is_pull,
    open_document,
    replace_all,
)


@pytest_lsp.fixture(config=config(), params=["neovim", "visual-studio-code"])
async def client(lsp_client: LanguageClient, request, project):
    result = await lsp_client.initialize_session(initialize_params(client_capabilities(request.param), project))
    lsp_client.position_encoding = result.capabilities.position_encoding
    lsp_client.project = project
    yield
    await lsp_client.shutdown_session()


def column_in(encoding: str, text: str, code_points: int) -> int:
    """What a client counts for the first ``code_points`` characters of ``text``."""
    prefix = text[:code_points]
    if encoding == types.PositionEncodingKind.Utf8:
        return len(prefix.encode("utf-8"))
    if encoding == types.PositionEncodingKind.Utf32:
        return len(prefix)
    return len(prefix.encode("utf-16-le")) // 2


@pytest.mark.asyncio
async def test_diagnostics_follow_the_buffer_in_the_clients_mode(client: LanguageClient):
    args = client.project / "args.yaml"
    args_uri = open_document(client, args)

    found = await diagnostics(client, args_uri, lambda d: "MEM001" in codes(d))
    (mem001,) = [d for d in found if d.code == "MEM001"]
    assert mem001.severity == types.DiagnosticSeverity.Error
    assert mem001.source == "memlint"
    assert "A10G" in mem001.message
    # on per_device_train_batch_size (line 4), the largest lever of the peak: the whole
    # key-value pair, not the one character of its value (a squiggle one can see)
    assert mem001.range == types.Range(types.Position(3, 0), types.Position(3, 30))
    assert mem001.code_description.href.endswith("/rules/MEM001.md")
    assert any(s["change"] for s in mem001.data["suggestions"])

    # the unsaved buffer is what counts: a small model fits, the finding goes away
    small = args.read_text().replace("meta-llama/Llama-3.1-8B", "HuggingFaceTB/SmolLM2-135M-Instruct")
    replace_all(client, args_uri, small, version=2)
    await diagnostics(client, args_uri, lambda d: "MEM001" not in codes(d))
    # and comes back when the edit is undone, without a save
    replace_all(client, args_uri, args.read_text(), version=3)
    await diagnostics(client, args_uri, lambda d: "MEM001" in codes(d))

    if is_pull(client):
        assert client.diagnostics == {}, "a client that pulls must not also get pushed diagnostics"


@pytest.mark.asyncio
async def test_ranges_in_the_negotiated_position_encoding(client: LanguageClient):
    """A one-line JSON (``json.dump`` of the arguments) with an emoji and Chinese before the
    finding: the squiggle must cover ``"per_device_train_batch_size": 16`` (the setting, not
    only its two-character value) in every encoding."""
    path = client.project / "trainer_state_args.json"
    text = path.read_text("utf-8")
    document_uri = open_document(client, path)
    found = await diagnostics(client, document_uri, lambda d: "MEM001" in codes(d))
    (mem001,) = [d for d in found if d.code == "MEM001"]
    start = text.index('"per_device_train_batch_size": ') + len('"per_device_train_batch_size": ')
    assert text[start:start + 2] == "16"
    encoding = client.position_encoding or types.PositionEncodingKind.Utf16
    key = text.index('"per_device_train_batch_size": ')
    assert mem001.range.start == types.Position(0, column_in(encoding, text, key))
    assert mem001.range.end == types.Position(0, column_in(encoding, text, start + 2))
    # the encodings really differ on this line, so a wrong conversion cannot pass by luck
    assert len({column_in(e, text, start) for e in ("utf-8", "utf-16", "utf-32")}) == 3


@pytest.mark.asyncio
async def test_on_save_mode_waits_for_the_save(client: LanguageClient):
    await change_settings(client, {"run": "onSave"})
    args = client.project / "args.yaml"
    args_uri = open_document(client, args)
    await diagnostics(client, args_uri, lambda d: "MEM001" in codes(d))
    small = args.read_text().replace("meta-llama/Llama-3.1-8B", "HuggingFaceTB/SmolLM2-135M-Instruct")
    replace_all(client, args_uri, small, version=2)
    await asyncio.sleep(0.5)
    assert "MEM001" in codes(await diagnostics(client, args_uri)), "linted before the save"
    args.write_text(small)
    client.text_document_did_save(types.DidSaveTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=args_uri)))
    await diagnostics(client, args_uri, lambda d: "MEM001" not in codes(d))
