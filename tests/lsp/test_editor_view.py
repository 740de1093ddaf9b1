"""What a user sees in the editor on the bundled examples (issue 19): the run's verdict in
every open document of the run, MEM001's fixes that edit, no flicker while typing.

Each test opens a copy of an example as an editor would and asserts the diagnostics, code
actions and code lenses the client receives.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from lsp_helpers import (
    ROOT,
    apply_text_edits,
    capabilities_for,
    codes,
    config,
    diagnostics,
    edits_by_uri,
    initialize_params,
    open_document,
    replace_all,
    uri,
)

EXAMPLES = ROOT / "examples"


@pytest.fixture
def sft(tmp_path: Path) -> Path:
    """examples/sft-llama3-h100: run.sh launches train.py with a micro-batch of 8 (MEM001)."""
    target = tmp_path / "sft-llama3-h100"
    shutil.copytree(EXAMPLES / "sft-llama3-h100", target)
    return target


@pytest_lsp.fixture(config=config(), params=["vscode-pull", "visual-studio-code"])
async def client(lsp_client: LanguageClient, request, sft):
    await lsp_client.initialize_session(initialize_params(capabilities_for(request.param), sft))
    lsp_client.project = sft
    lsp_client.editor = request.param
    yield
    await lsp_client.shutdown_session()


def only(items, code: str) -> types.Diagnostic:
    matching = [d for d in items if d.code == code]
    assert len(matching) == 1, items
    return matching[0]


@pytest.mark.asyncio
async def test_the_runs_verdict_shows_in_the_script_the_launcher_runs(client: LanguageClient):
    project = client.project
    train_uri = open_document(client, project / "train.py")
    in_train = only(await diagnostics(client, train_uri, lambda d: "MEM001" in codes(d)), "MEM001")
    # train.py states the model (weights, gradients, optimizer states): the verdict sits on it
    train_lines = (project / "train.py").read_text().splitlines()
    assert '"meta-llama/Llama-3.1-8B"' in train_lines[in_train.range.start.line]
    assert "exceeds" in in_train.message and "run decided at run.sh:7" in in_train.message
    related = in_train.related_information or []
    assert [(r.location.uri, r.location.range.start.line) for r in related] == [(uri(project / "run.sh"), 6)]

    # the launcher has it on the micro-batch, as `memlint check` reports it
    run_uri = open_document(client, project / "run.sh")
    in_run = only(await diagnostics(client, run_uri, lambda d: "MEM001" in codes(d)), "MEM001")
    assert in_run.range.start.line == 6 and "run decided at" not in in_run.message

    # and the code lens with the estimate is in train.py too, on the verdict's line
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=train_uri)))
    assert [lens.range.start.line for lens in lenses] == [in_train.range.start.line]
    assert "does not fit" in lenses[0].command.title


def test_the_extension_starts_for_every_kind_memlint_reads():
    import json

    manifest = json.loads((ROOT / "editors" / "vscode" / "package.json").read_text())
    assert {"onLanguage:shellscript", "onLanguage:toml"} <= set(manifest["activationEvents"])
    source = (ROOT / "editors" / "vscode" / "src" / "extension.ts").read_text()
    assert 'language: "shellscript"' in source
