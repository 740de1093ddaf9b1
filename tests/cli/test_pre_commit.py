"""The hook in ``.pre-commit-hooks.yaml``, run by pre-commit itself (``pre-commit try-repo``)
on a temporary repository: pre-commit installs memlint from this checkout into its own
environment and passes the staged files, as it does for users."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cli_project import DS_CONFIG, FILES
from cli_testing import REPO, write

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="pre-commit needs git")


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"})


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory) -> Path:
    """One pre-commit cache for the module: the hook's environment is built once."""
    return tmp_path_factory.mktemp("pre-commit-home")


def try_repo(repo: Path, home: Path, *files: str) -> subprocess.CompletedProcess:
    if not (REPO / ".git").exists():
        pytest.skip("pre-commit try-repo needs memlint's git checkout")
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(REPO), "memlint", "--verbose",
         *(["--files", *files] if files else ["--all-files"])],
        cwd=repo, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PRE_COMMIT_HOME": str(home), "PYTHONPATH": ""},
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    pytest.importorskip("pre_commit")
    write(tmp_path, {name: text for name, text in FILES.items() if name != "loop.py"})
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "a run that fits")
    return tmp_path


def test_the_hook_passes_a_run_that_fits_and_fails_one_that_does_not(repo, pre_commit_home):
    clean = try_repo(repo, pre_commit_home)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "memlint" in clean.stdout and "Passed" in clean.stdout

    # the change: only ds_config.json, which drops ZeRO sharding -- the launched run no longer fits
    write(repo, {"ds_config.json": DS_CONFIG.replace('"stage": 2', '"stage": 0')})
    _git(repo, "add", "ds_config.json")
    failed = try_repo(repo, pre_commit_home, "ds_config.json")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "Failed" in failed.stdout
    assert "ds_config.json:5:" in failed.stdout and "MEM001" in failed.stdout
