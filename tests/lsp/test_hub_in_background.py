"""The language server never waits for the Hub: an uncatalogued model id answers at once with
"being fetched", the download runs in the background (here from a local server that speaks the
Hub's file API and takes 2 s to answer), and the diagnostics are published again once the
config.json is in the cache."""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
import time

import pytest
import pytest_lsp
from fake_hub import Answers, FakeHubServer
from lsp_helpers import SERVER, codes, diagnostics, initialize_params, make_client, open_document, server_env
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from memlint.catalog.models import find_entry

MODEL = "acme-labs/private-8b"
SCRIPT = f'''\
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

model = AutoModelForCausalLM.from_pretrained("{MODEL}")
args = TrainingArguments(output_dir="out", per_device_train_batch_size=16, bf16=True)
Trainer(model=model, args=args).train()
'''

HUB = FakeHubServer(Answers({MODEL: ("slow", 2, json.dumps(find_entry("meta-llama/Llama-3.1-8B").config).encode())}))
CACHE = tempfile.mkdtemp(prefix="memlint-lsp-hub-")  # at import: the server's environment names it
atexit.register(shutil.rmtree, CACHE, True)  # every process that imports this module made one


def _env() -> dict[str, str]:
    env = {k: v for k, v in server_env().items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(HF_ENDPOINT=HUB.endpoint, HF_HUB_CACHE=CACHE, HF_HOME=CACHE)
    return env


@pytest.fixture(scope="module", autouse=True)
def hub():
    with HUB:
        yield


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, server_env=_env(), client_factory=make_client))
async def client(lsp_client: LanguageClient, tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.memlint]\ngpu = "h100"\n')
    await lsp_client.initialize_session(initialize_params(client_capabilities("visual-studio-code"), tmp_path))
    lsp_client.project = tmp_path
    yield
    await lsp_client.shutdown_session()


@pytest.mark.asyncio
async def test_an_uncatalogued_model_is_fetched_in_the_background_and_relinted(client: LanguageClient):
    path = client.project / "train.py"
    path.write_text(SCRIPT)
    started = time.monotonic()
    document = open_document(client, path, SCRIPT)
    first = await diagnostics(client, document, lambda d: "MEM003" in codes(d))
    assert time.monotonic() - started < 2  # answered before the Hub did
    assert any("being fetched from the Hub" in d.message for d in first)
    fetched = await diagnostics(client, document, lambda d: "MEM001" in codes(d))
    assert "MEM003" not in codes(fetched)
    assert os.listdir(CACHE)  # the config.json is in the standard cache for the next run
