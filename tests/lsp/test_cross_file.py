"""Cross-file: a script's or TrainingArguments file's findings depend on the DeepSpeed config it
links, so editing ``ds_config.json`` must update them without touching the file itself."""

from __future__ import annotations

import json

import pytest
import pytest_lsp
from pytest_lsp import LanguageClient

from lsp_helpers import (
    capabilities_for,
    codes,
    config,
    diagnostics,
    initialize_params,
    is_pull,
    open_document,
    replace_all,
    until,
)


def deepspeed_is_extracted() -> bool:
    """DeepSpeed facts (ZeRO stage, offload) come from ``memlint.configs.deepspeed`` once that
    extractor is in the tree; until then a config's edit reaches its referrers but changes
    no estimate."""
    from memlint.facts.extract import EXTRACTORS, load_extractors

    load_extractors()
    return "deepspeed" in EXTRACTORS


@pytest_lsp.fixture(config=config(), params=["visual-studio-code", "vscode-pull"])
async def client(lsp_client: LanguageClient, request, project):
    await lsp_client.initialize_session(initialize_params(capabilities_for(request.param), project))
    lsp_client.project = project
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio
async def test_editing_the_deepspeed_config_updates_the_run_that_uses_it(client: LanguageClient):
    project = client.project
    args_uri = open_document(client, project / "args.yaml")
    before = await diagnostics(client, args_uri)
    ds_path = project / "ds_config.json"
    ds_uri = open_document(client, ds_path)
    ds_before = await diagnostics(client, ds_uri)  # linted: its facts are known from here on
    # the run does not fit on the A10G; the finding sits where the biggest lever is
    assert "MEM001" in codes(list(before) + list(ds_before))

    published = sum(1 for p in client.published if p.uri == args_uri)
    refreshes = client.diagnostic_refresh_count
    config_text = json.loads(ds_path.read_text())
    config_text["zero_optimization"].update(
        {"stage": 3, "offload_optimizer": {"device": "cpu"}, "offload_param": {"device": "cpu"}}
    )
    # an unsaved edit of the config, not of args.yaml
    replace_all(client, ds_uri, json.dumps(config_text, indent=2) + "\n", version=2)

    if is_pull(client):
        await diagnostics(client, ds_uri)  # the editor pulls the document it just changed
        await until(lambda: client.diagnostic_refresh_count > refreshes, "workspace/diagnostic/refresh")
        assert client.diagnostics == {}, "pull mode must not push"
    else:
        await until(lambda: sum(1 for p in client.published if p.uri == args_uri) > published,
                       "args.yaml's diagnostics to be published again")
    after = await diagnostics(client, args_uri)
    if deepspeed_is_extracted():
        # ZeRO-3 with both offloads moves the states off the GPU: the estimate drops, and
        # the finding moves to (or changes on) the line that now dominates, in args.yaml
        assert [d.message for d in after] != [d.message for d in before]
        assert "MEM001" in codes(after)
    else:
        assert [d.message for d in after] == [d.message for d in before]

    # typing in a comment-free place that changes nothing the run reads triggers nothing
    published = sum(1 for p in client.published if p.uri == args_uri)
    text = (project / "args.yaml").read_text()
    replace_all(client, args_uri, text.replace("learning_rate: 2.0e-5", "learning_rate:   2.0e-5"), version=2)
    await diagnostics(client, args_uri)
    if not is_pull(client):
        ds_published = [p for p in client.published if p.uri == ds_uri]
        await until(lambda: sum(1 for p in client.published if p.uri == args_uri) > published, "args.yaml lint")
        assert [p for p in client.published if p.uri == ds_uri] == ds_published, \
            "a change that leaves args.yaml's facts alone must not re-lint the config it links"
