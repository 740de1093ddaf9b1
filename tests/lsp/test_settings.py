"""Settings: the editor's (workspace/configuration, section ``memlint``) layered over the
settings file that ``memlint.project.settings.discover`` finds, both re-read when they change."""

from __future__ import annotations

import pytest
import pytest_lsp
from lsp_helpers import change_settings, codes, config, diagnostics, initialize_params, open_document, until, uri
from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities


@pytest_lsp.fixture(config=config())
async def client(lsp_client: LanguageClient, project):
    lsp_client.set_configuration({"memlint": {"gpu": "h200"}})
    await lsp_client.initialize_session(
        initialize_params(client_capabilities("visual-studio-code"), project))
    lsp_client.project = project
    yield
    await lsp_client.shutdown_session()


def has_oom(items) -> bool:
    return "MEM001" in codes(items)


@pytest.mark.asyncio
async def test_editor_settings_over_the_settings_file(client: LanguageClient):
    project = client.project
    args_uri = open_document(client, project / "args.yaml")
    json_uri = open_document(client, project / "trainer_state_args.json")
    # the editor's GPU (an H200) wins over the file's (an A10G): the 8B run fits
    assert not has_oom(await diagnostics(client, args_uri))
    assert has_oom(await diagnostics(client, json_uri, has_oom))
    watched = [r for r in client.registrations if r.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES]
    assert watched and {"globPattern": "**/pyproject.toml"} in watched[0].register_options["watchers"]

    await change_settings(client, {"gpu": None, "select": None, "ignore": None})  # unset: the file's A10G
    await diagnostics(client, args_uri, has_oom)

    await change_settings(client, {"ignore": ["MEM"]})
    await diagnostics(client, args_uri, lambda d: not has_oom(d))
    await diagnostics(client, json_uri, lambda d: not has_oom(d))

    await change_settings(client, {"select": ["MEM001"], "gpu": "h100"})
    await diagnostics(client, args_uri, has_oom)

    await change_settings(client, {"enable": False})
    await diagnostics(client, args_uri, lambda d: len(d) == 0)
    await diagnostics(client, json_uri, lambda d: len(d) == 0)

    client.messages.clear()
    await change_settings(client, {"gpu": "h100-xxl"})  # a typo: said once, the file's GPU applies
    await diagnostics(client, args_uri, has_oom)
    assert any("memlint.gpu" in m.message and "h100-xxl" in m.message for m in client.messages)


@pytest.mark.asyncio
async def test_settings_file_changes_are_picked_up(client: LanguageClient):
    project = client.project
    await change_settings(client, {})
    args_uri = open_document(client, project / "args.yaml")
    await diagnostics(client, args_uri, has_oom)  # memlint.toml: A10G

    settings = project / "memlint.toml"
    settings.write_text(settings.read_text().replace('gpu = "a10g"', 'gpu = "h200"'))
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(
        changes=[types.FileEvent(uri=uri(settings), type=types.FileChangeType.Changed)]))
    await diagnostics(client, args_uri, lambda d: not has_oom(d))

    # a broken settings file is reported (once), and linting goes on with the defaults
    client.messages.clear()
    settings.write_text('gpu = "a10g"\nseq_len = 4096\n')
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(
        changes=[types.FileEvent(uri=uri(settings), type=types.FileChangeType.Changed)]))
    await until(lambda: any("seq_len" in m.message and "seq-len" in m.message and m.type == types.MessageType.Error
                            for m in client.messages), "the settings error to be shown")
    await diagnostics(client, args_uri, lambda d: not has_oom(d))  # no GPU known: no verdict

    # a pyproject.toml appearing nearer than memlint.toml? discovery decides, as in the CLI
    settings.write_text('gpu = "a10g"\n')
    (project / "pyproject.toml").write_text('[project]\nname = "sft"\n\n[tool.memlint]\ngpu = "h200"\n')
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(changes=[
        types.FileEvent(uri=uri(settings), type=types.FileChangeType.Changed),
        types.FileEvent(uri=uri(project / "pyproject.toml"), type=types.FileChangeType.Created),
    ]))
    # memlint.toml comes first in the same directory (SETTINGS_FILES order): A10G
    await diagnostics(client, args_uri, has_oom)
