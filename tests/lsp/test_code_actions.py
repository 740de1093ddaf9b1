"""Code actions end to end: every kind memlint offers, applied the way an editor applies them.

The server runs with one extra, test-only rule that carries a fix (``checkpointing_rule``),
since the fixable rules are written elsewhere; MEM001 (no fix, suggestions) is real.
"""

from __future__ import annotations

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities

from lsp_helpers import (
    SERVER_WITH_FIXABLE_RULE,
    apply_text_edits,
    codes,
    config,
    diagnostics,
    edits_by_uri,
    initialize_params,
    open_document,
    replace_all,
    uri,
)


@pytest_lsp.fixture(config=config(SERVER_WITH_FIXABLE_RULE), params=["visual-studio-code", "neovim"])
async def client(lsp_client: LanguageClient, request, project):
    await lsp_client.initialize_session(initialize_params(client_capabilities(request.param), project))
    lsp_client.project = project
    lsp_client.editor = request.param
    yield
    await lsp_client.shutdown_session()


async def actions_for(client, document_uri: str, diagnostic: types.Diagnostic, only=None) -> list[types.CodeAction]:
    result = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=document_uri),
        range=diagnostic.range,
        context=types.CodeActionContext(diagnostics=[diagnostic], only=only),
    ))
    return list(result or [])


def by_title(actions: list[types.CodeAction], start: str) -> types.CodeAction:
    matching = [a for a in actions if a.title.startswith(start)]
    assert len(matching) == 1, [a.title for a in actions]
    return matching[0]


@pytest.mark.asyncio
async def test_fix_and_ignore_line_and_suggestions(client: LanguageClient):
    path = client.project / "args.yaml"
    text = path.read_text()
    args_uri = open_document(client, path)
    found = await diagnostics(client, args_uri, lambda d: {"MEM001", "TST901"} <= set(codes(d)))
    checkpointing = next(d for d in found if d.code == "TST901")
    oom = next(d for d in found if d.code == "MEM001")

    # the rule's fix: a preferred quick fix (safe), edits carried in the diagnostic's data
    actions = await actions_for(client, args_uri, checkpointing)
    fix = by_title(actions, "TST901: enable gradient checkpointing")
    assert fix.kind == types.CodeActionKind.QuickFix and fix.is_preferred
    edits, _ = edits_by_uri(fix.edit)
    if client.editor == "visual-studio-code":
        assert fix.edit.document_changes, "VS Code takes versioned edits"
        assert fix.edit.document_changes[0].text_document.version == 1
    fixed = apply_text_edits(text, edits[args_uri])
    assert "gradient_checkpointing: true\n" in fixed and fixed.count("\n") == text.count("\n")
    replace_all(client, args_uri, fixed, version=2)
    found = await diagnostics(client, args_uri, lambda d: "TST901" not in codes(d) and "MEM001" in codes(d))
    oom = next(d for d in found if d.code == "MEM001")

    # MEM001 has no edit: its cheapest changes come as actions that explain them
    suggestions = await actions_for(client, args_uri, oom, only=["quickfix.memlint.suggestion"])
    assert suggestions and all(a.kind == "quickfix.memlint.suggestion" for a in suggestions)
    assert all(a.title.startswith("MEM001: ") and "GiB →" in a.title for a in suggestions)
    command = suggestions[0].command
    await client.workspace_execute_command_async(types.ExecuteCommandParams(command=command.command,
                                                                           arguments=command.arguments))
    assert any(m.message.startswith("memlint MEM001: ") for m in client.messages)

    # "Ignore MEM001 on this line": a suppression comment the engine honours
    actions = await actions_for(client, args_uri, oom)
    ignore = by_title(actions, "Ignore MEM001 on this line")
    assert ignore.kind == types.CodeActionKind.QuickFix
    edits, _ = edits_by_uri(ignore.edit)
    ignored = apply_text_edits(fixed, edits[args_uri])
    line = fixed.split("\n")[oom.range.start.line]
    assert ignored.split("\n")[oom.range.start.line] == f"{line}  # memlint: ignore[MEM001]"
    assert ignored.replace("  # memlint: ignore[MEM001]", "") == fixed
    replace_all(client, args_uri, ignored, version=3)
    await diagnostics(client, args_uri, lambda d: "MEM001" not in codes(d))


@pytest.mark.asyncio
async def test_ignore_in_file_for_json_goes_to_the_settings_file(client: LanguageClient):
    project = client.project
    settings = project / "memlint.toml"
    before = settings.read_text()
    json_uri = open_document(client, project / "trainer_state_args.json")
    (oom,) = await diagnostics(client, json_uri, lambda d: "MEM001" in codes(d))
    actions = await actions_for(client, json_uri, oom)
    titles = [a.title for a in actions]
    assert not any("on this line" in t for t in titles), "JSON has no comments"
    ignore = by_title(actions, "Ignore MEM001 in this file")
    assert "memlint.toml" in ignore.title
    edits, created = edits_by_uri(ignore.edit)
    assert not created and list(edits) == [uri(settings)]
    after = apply_text_edits(before, edits[uri(settings)])
    assert after.startswith(before), "the user's settings are kept as written"
    assert after.endswith('\n[per-file-ignores]\n"trainer_state_args.json" = ["MEM001"]\n')

    # the editor applies the edit and saves the file: the watcher tells the server
    settings.write_text(after)
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(
        changes=[types.FileEvent(uri=uri(settings), type=types.FileChangeType.Changed)]))
    await diagnostics(client, json_uri, lambda d: "MEM001" not in codes(d))
