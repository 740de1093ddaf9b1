"""Fixtures of the language-server tests (helpers live in lsp_helpers.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the fixture project (tests edit its files)."""
    target = tmp_path / "project"
    shutil.copytree(FIXTURES / "project", target)
    return target
