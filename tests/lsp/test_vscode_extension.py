"""The VS Code extension (editors/vscode): its settings are the server's, and it builds,
type-checks and packages with the pinned toolchain.

The build needs the npm packages of ``package-lock.json``: those installed in
``editors/vscode/node_modules`` (after ``npm ci`` there), else npm's local cache
(``npm ci --offline``), else the registry (``npm ci``, the pinned versions of the lock file).
The test is skipped only where node is missing or none of the three has them.

Once the packages are there, type-checking (tsc), bundling (esbuild: one file, no
node_modules in the .vsix) and ``vsce package`` run offline (the test cuts the network off).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from memlint.lsp.settings import EditorSettings

EXTENSION = Path(__file__).resolve().parents[2] / "editors" / "vscode"
OFFLINE = {"npm_config_offline": "true", "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9",
           "https_proxy": "http://127.0.0.1:9", "http_proxy": "http://127.0.0.1:9"}


def test_contributed_settings_are_the_servers():
    manifest = json.loads((EXTENSION / "package.json").read_text())
    contributed = {k.split(".", 1)[1] for k in manifest["contributes"]["configuration"]["properties"]}
    server_keys = {f.name for f in dataclasses.fields(EditorSettings) if f.name != "problems"}
    client_keys = {"path", "interpreter", "trace.server"}  # read by the extension itself
    assert contributed == server_keys | client_keys
    properties = manifest["contributes"]["configuration"]["properties"]
    for key in ("gpu", "gpus", "select", "ignore"):
        # unset by default, so the settings file's value applies (see memlint.lsp.settings)
        assert properties[f"memlint.{key}"]["default"] is None
    assert properties["memlint.run"]["enum"] == ["onType", "onSave"]
    assert {"onLanguage:python", "onLanguage:json", "onLanguage:yaml"} <= set(manifest["activationEvents"])


def _run(command: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: int = 600):
    return subprocess.run(command, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.skipif(shutil.which("node") is None or shutil.which("npm") is None, reason="node and npm are not installed")
def test_extension_builds_type_checks_and_packages(tmp_path: Path):
    work = tmp_path / "vscode"
    shutil.copytree(EXTENSION, work, ignore=shutil.ignore_patterns("node_modules", "out", "dist", "*.vsix"))
    if (EXTENSION / "node_modules" / ".package-lock.json").is_file():
        (work / "node_modules").symlink_to(EXTENSION / "node_modules", target_is_directory=True)
        install = subprocess.CompletedProcess([], 0)
    else:
        install = _run(["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts"], work, OFFLINE)
    if install.returncode != 0:  # not in npm's cache: fetch them from the registry
        install = _run(["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts"], work)
        if install.returncode != 0:
            pytest.skip("the extension's npm packages are neither in npm's cache nor reachable on the registry: "
                        + install.stderr.strip()[-300:])

    # tsc in strict mode: compiling is type-checking (a type error fails the build)
    compile_ = _run(["npm", "run", "compile"], work, OFFLINE)
    assert compile_.returncode == 0, compile_.stdout[-3000:]
    bundle = (work / "dist" / "extension.js").read_text()
    assert "memlint.interpreter" in bundle and "memlint.openBudgetView" in bundle
    assert 'require("vscode-languageclient' not in bundle  # bundled in, not loaded from node_modules

    package = _run(["npm", "run", "package"], work, OFFLINE)  # vsce, offline
    assert package.returncode == 0, package.stdout[-3000:] + package.stderr[-2000:]
    # one bundled file (esbuild), with its LICENSE: vsce has nothing to warn about
    assert "WARNING" not in package.stdout + package.stderr, package.stdout[-3000:]
    with zipfile.ZipFile(work / "memlint.vsix") as vsix:
        names = set(vsix.namelist())
        manifest = json.loads(vsix.read("extension/package.json"))
    assert {"extension/dist/extension.js", "extension/readme.md", "extension/LICENSE.txt"} <= names
    assert sum(name.endswith(".js") for name in names) == 1
    assert not any(name.startswith(("extension/src/", "extension/node_modules/")) for name in names)
    assert manifest["main"] == "./dist/extension.js"
