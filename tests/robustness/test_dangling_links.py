"""A symbolic link whose target the repository dropped (detectron2's copies keep
``docs/tutorials/getting_started.md -> ../../GETTING_STARTED.md``) cannot be linted; the message
says what the link points at rather than a bare "No such file or directory"."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memlint.documents.reading import read_document


@pytest.mark.skipif(os.name != "posix", reason="symlinks")
def test_a_link_to_a_file_the_repository_no_longer_has_says_so(tmp_path: Path):
    docs = tmp_path / "docs" / "tutorials"
    docs.mkdir(parents=True)
    (docs / "getting_started.md").symlink_to("../../GETTING_STARTED.md")
    document = read_document(docs / "getting_started.md")
    assert document.problem == "cannot read: a symbolic link to `../../GETTING_STARTED.md`, which does not exist"
    (tmp_path / "GETTING_STARTED.md").write_text("# Getting started\n")
    assert read_document(docs / "getting_started.md").problem is None
