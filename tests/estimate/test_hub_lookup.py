"""An uncatalogued Hub id answered through the Hub's file API (`HF_ENDPOINT`), served by a local
HTTP server on 127.0.0.1: a public model, a gated one (401), a missing one (404), one that does
not answer in time, and a malformed config.json. Offline switches keep the Hub out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest
from fake_hub import GATED, Answers, FakeHubServer

pytest.importorskip("huggingface_hub")

from huggingface_hub import constants  # noqa: E402

from memlint.catalog import hub  # noqa: E402
from memlint.catalog.models import UnknownModel, find_entry, resolve  # noqa: E402

SMOLLM3 = {  # a custom-code-style config: auto_map is data, never run
    **find_entry("meta-llama/Llama-3.2-1B-Instruct").config,
    "auto_map": {"AutoModelForCausalLM": "modeling_evil.EvilForCausalLM"},
}


ANSWERS = Answers({
    "acme/public-1b": json.dumps(SMOLLM3).encode(),
    "acme/broken": b'{"model_type": "llama", "hidden_size": 20',
    "acme/gated": GATED,
    "acme/slow": ("slow", 3, b"{}"),
    "acme-legacy-1b": json.dumps(SMOLLM3).encode(),  # an early model without an org, like gpt2
})


@pytest.fixture
def fake_hub(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(hub, "ETAG_TIMEOUT_S", 0.5)
    monkeypatch.setattr(hub, "DOWNLOAD_TIMEOUT_S", 1)
    monkeypatch.setattr(hub, "_failures", {})
    monkeypatch.setattr(hub, "_unreachable", None)
    with FakeHubServer(ANSWERS) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        yield endpoint


def test_an_uncatalogued_id_is_answered_from_the_hub_and_cached(fake_hub, monkeypatch):
    found = resolve("acme/public-1b")
    assert found.arch.n_params == 1_235_814_400 and "Hugging Face Hub" in found.note
    # the file is in the standard cache: the next run answers offline
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert resolve("acme/public-1b").arch.n_params == 1_235_814_400


def test_a_bare_id_is_asked_of_the_hub_too(fake_hub):
    """The Hub serves ``gpt2`` and ``bert-base-uncased`` without an org (it redirects them):
    an uncatalogued bare name is asked for as well."""
    found = resolve("acme-legacy-1b")
    assert found.arch.n_params == 1_235_814_400 and "Hugging Face Hub" in found.note


@pytest.mark.parametrize(("repo", "said"), [
    ("acme/gated", "gated repository: accept its licence on the Hub and set HF_TOKEN"),
    ("acme/missing", "no such repository on the Hub"),
    ("acme/slow", "did not answer in time"),
    ("acme/broken", "config.json is unreadable"),
])
def test_hub_failures_are_clear_messages(fake_hub, repo, said):
    started = time.monotonic()
    with pytest.raises(UnknownModel, match=said):
        resolve(repo)
    assert time.monotonic() - started < 15


@pytest.mark.parametrize("how", ["flag", "env"])
def test_offline_keeps_the_hub_out(fake_hub, monkeypatch, how):
    if how == "env":
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UnknownModel, match="the Hub was not asked"):
        resolve("acme/public-1b", offline=True if how == "flag" else None)


def test_memlint_estimate_end_to_end_through_the_fake_hub(fake_hub, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    env.update(HF_ENDPOINT=fake_hub, HF_HOME=str(tmp_path / "home"), HF_HUB_CACHE=str(tmp_path / "home-hub"))
    command = [sys.executable, "-m", "memlint", "estimate", "--model", "acme/public-1b", "--format", "json"]
    out = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["parameters"] == 1_235_814_400
    out = subprocess.run(command + ["--offline"], capture_output=True, text=True, env=env, timeout=120)
    assert json.loads(out.stdout)["parameters"] == 1_235_814_400  # from the cache the first run filled
    out = subprocess.run([*command[:5], "acme/gated", "--offline"], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode != 0 and "the Hub was not asked: offline" in out.stderr


def test_in_the_background_a_lookup_never_waits_and_reports_when_the_file_is_cached(fake_hub):
    """The language server's mode: the first lint answers at once, the next one has the model."""
    fetched = threading.Event()
    hub.in_background(lambda model: fetched.set())
    try:
        started = time.monotonic()
        with pytest.raises(UnknownModel, match="being fetched from the Hub"):
            resolve("acme/public-1b")
        assert time.monotonic() - started < 1
        assert fetched.wait(15)
        assert resolve("acme/public-1b").arch.n_params == 1_235_814_400
    finally:
        hub.in_background(None)


def test_an_unreachable_hub_is_asked_once_per_process(fake_hub, monkeypatch):
    """A host name that does not resolve fails at once (not after huggingface_hub's retries),
    and the ids looked up after it are not asked: each says why."""
    monkeypatch.setenv("HF_ENDPOINT", "http://hub.memlint-test.invalid")
    asked: list[str] = []
    download = hub._download
    monkeypatch.setattr(hub, "_download", lambda model_id: asked.append(model_id) or download(model_id))
    started = time.monotonic()
    for repo in ("acme/public-1b", "acme/other-7b", "acme/third-3b"):
        with pytest.raises(UnknownModel, match="could not be reached"):
            resolve(repo)
    assert asked == [] and time.monotonic() - started < 10
    assert hub.last_failure("acme/third-3b") == hub.last_failure("acme/public-1b")
