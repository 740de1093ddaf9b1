"""End to end: the packaged extension in code-server (VS Code 1.100 in the browser), driven in
headless Chromium by puppeteer-core, on a copy of examples/sft-llama3-h100 — what a user sees
(``vscode_in_browser.mjs`` says what is checked).

It needs code-server, puppeteer-core, Chromium and a built ``memlint.vsix``, which
``.ci/editor-e2e`` installs and builds; without them (``MEMLINT_E2E_TOOLS`` unset) it is skipped.
Screenshots go to ``MEMLINT_E2E_SHOTS`` when set (``docs/editor/`` in CI), else a temporary folder.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOLS = os.environ.get("MEMLINT_E2E_TOOLS")
VSIX = ROOT / "editors" / "vscode" / "memlint.vsix"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = pytest.mark.skipif(
    not (TOOLS and CHROMIUM and VSIX.is_file()),
    reason="needs .ci/editor-e2e's tools (code-server, puppeteer-core, Chromium) and a built memlint.vsix")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_extension_in_vscode_shows_the_verdict_the_budget_and_a_fix_that_edits(tmp_path: Path):
    tools = Path(TOOLS)
    code_server = tools / "node_modules" / ".bin" / "code-server"
    workspace = tmp_path / "sft-llama3-h100"
    shutil.copytree(ROOT / "examples" / "sft-llama3-h100", workspace)
    original_run_sh = (workspace / "run.sh").read_text()
    user = tmp_path / "user"
    (user / "User").mkdir(parents=True)
    (user / "User" / "settings.json").write_text(json.dumps({
        "security.workspace.trust.enabled": False,
        "workbench.startupEditor": "none",
        "telemetry.telemetryLevel": "off",
        "extensions.ignoreRecommendations": True,
        "memlint.interpreter": [sys.executable],
    }))
    extensions = tmp_path / "extensions"
    common = ["--user-data-dir", str(user), "--extensions-dir", str(extensions)]
    installed = subprocess.run([str(code_server), *common, "--install-extension", str(VSIX)],
                               capture_output=True, text=True, timeout=300,
                               env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config")})
    assert installed.returncode == 0, installed.stdout + installed.stderr

    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "XDG_DATA_HOME": str(tmp_path / "data")}
    server = subprocess.Popen([str(code_server), *common, "--auth", "none", "--bind-addr", f"127.0.0.1:{port}",
                               "--disable-telemetry", "--disable-update-check", "--disable-workspace-trust"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    shots = Path(os.environ.get("MEMLINT_E2E_SHOTS") or tmp_path / "shots")
    shots.mkdir(parents=True, exist_ok=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except OSError:
                assert time.monotonic() < deadline, "code-server did not start"
                time.sleep(0.5)
        driven = subprocess.run(
            ["node", str(Path(__file__).with_name("vscode_in_browser.mjs"))],
            env={**os.environ, "CODE_URL": f"http://127.0.0.1:{port}", "WORKSPACE": str(workspace),
                 "CHROMIUM": CHROMIUM, "SHOTS": str(shots),
                 "PUPPETEER": str(tools / "node_modules" / "puppeteer-core")},
            capture_output=True, text=True, timeout=900)
        assert driven.returncode == 0, driven.stdout[-4000:] + driven.stderr[-4000:]
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
    fixed = (workspace / "run.sh").read_text()
    assert fixed != original_run_sh and "--per_device_train_batch_size 2" in fixed
    assert {"squiggle-and-problems.png", "hover-verdict.png", "budget-view.png", "after-fix.png"} <= {
        p.name for p in shots.iterdir()}
