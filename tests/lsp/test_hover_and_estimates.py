"""Hovers (the budget sheet of a run, a rule's page) and the per-GPU estimate at the line that
defines a run: a code lens for clients that show lenses (VS Code), an inlay hint otherwise
(Emacs 29's eglot has inlay hints and no lenses)."""

from __future__ import annotations

import re

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities

from lsp_helpers import config, diagnostics, initialize_params, open_document, uri

LABEL = re.compile(r"^≈ \d+\.\d GiB/GPU on A10G · does not fit \(\d+\.\d GiB short\)$")


@pytest_lsp.fixture(config=config(), params=["visual-studio-code", "emacs"])
async def client(lsp_client: LanguageClient, request, project):
    await lsp_client.initialize_session(initialize_params(client_capabilities(request.param), project))
    lsp_client.project = project
    lsp_client.editor = request.param
    yield
    await lsp_client.shutdown_session()


async def hover(client, document_uri: str, line: int, character: int) -> types.Hover | None:
    return await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=document_uri), position=types.Position(line, character)))


@pytest.mark.asyncio
async def test_hovers(client: LanguageClient):
    project = client.project
    args_uri = open_document(client, project / "args.yaml")
    await diagnostics(client, args_uri)

    # on a TrainingArguments key: the run's budget sheet against the target GPU
    found = await hover(client, args_uri, 3, 5)  # per_device_train_batch_size
    assert found is not None
    sheet = found.contents.value
    assert found.contents.kind == types.MarkupKind.Markdown
    assert "Llama-3.1-8B" in sheet
    assert "| component | GiB |" in sheet and "| **peak** |" in sheet
    assert "usable on NVIDIA A10G" in sheet and "Does not fit" in sheet
    assert "Cheapest changes" in sheet or "Changes" in sheet
    assert "`args.yaml`" in sheet
    assert found.range == types.Range(types.Position(3, 0), types.Position(3, len("per_device_train_batch_size")))
    # on its value, too; not on the comment line above the keys
    assert (await hover(client, args_uri, 3, 30)) is not None
    assert (await hover(client, args_uri, 0, 4)) is None

    # on a rule code in a suppression comment: the rule's page
    script = project / "train.py"
    script_uri = open_document(client, script)
    lines = script.read_text().splitlines()
    (number,) = [i for i, line in enumerate(lines) if "ignore[MEM001]" in line]
    column = lines[number].index("MEM001")
    page = await hover(client, script_uri, number, column + 2)
    assert page is not None
    text = page.contents.value
    assert text.startswith("**MEM001** · `out-of-memory` · error")
    assert "**Why it matters**" in text and "out of memory" in text
    assert "(https://github.com/memlint/memlint/blob/main/rules/MEM001.md)" in text
    assert page.range.start.character == column and page.range.end.character == column + len("MEM001")
    # the model's call in the script: the sheet of the run the script defines (its model comes
    # from load_model's call site, its arguments from the YAML it parses at run time)
    call = await hover(client, script_uri, number, lines[number].index("from_pretrained"))
    assert call is not None and "Llama-3.1-8B" in call.contents.value


@pytest.mark.asyncio
async def test_estimate_at_the_line_that_defines_the_run(client: LanguageClient):
    args_uri = open_document(client, client.project / "args.yaml")
    await diagnostics(client, args_uri)
    identifier = types.TextDocumentIdentifier(uri=args_uri)
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(text_document=identifier))
    whole = types.Range(types.Position(0, 0), types.Position(100, 0))
    hints = await client.text_document_inlay_hint_async(types.InlayHintParams(text_document=identifier, range=whole))
    first_key = "model_name_or_path: meta-llama/Llama-3.1-8B"
    if client.editor == "visual-studio-code":
        assert not hints, "a client with code lenses gets the estimate once, as a lens"
        (lens,) = lenses
        assert lens.range.start.line == 1
        assert LABEL.match(lens.command.title), lens.command.title
        await client.workspace_execute_command_async(types.ExecuteCommandParams(
            command=lens.command.command, arguments=lens.command.arguments))
        assert any("GiB/GPU on A10G" in m.message for m in client.messages)
    else:
        assert not lenses
        (hint,) = hints
        assert hint.position == types.Position(1, len(first_key))  # end of the line
        assert LABEL.match(hint.label), hint.label
        assert "| component | GiB |" in hint.tooltip.value
        # a range that does not include the line gets nothing
        elsewhere = types.Range(types.Position(5, 0), types.Position(9, 0))
        assert not await client.text_document_inlay_hint_async(
            types.InlayHintParams(text_document=identifier, range=elsewhere))
    # a document that was never opened: an answer, not an error
    stray = types.TextDocumentIdentifier(uri=uri(client.project / "missing.yaml"))
    assert not await client.text_document_code_lens_async(types.CodeLensParams(text_document=stray))
