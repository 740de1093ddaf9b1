"""The project root of a checkout without .git (a downloaded archive): the nearest folder with a
project file, else the working directory `memlint check` runs from, else the file's folder. A
launcher's relative config path is looked up from there, as the launcher resolves it."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlint.project.settings import Discovery, discover

from .helpers import write_files

LAUNCHER = """\
#!/bin/bash
# run from the repository root: bash scripts/train.sh
deepspeed --num_gpus 8 train.py \\
    --deepspeed configs/ds_zero3.json \\
    --model_name_or_path meta-llama/Llama-3.1-8B \\
    --per_device_train_batch_size 2 \\
    --bf16
"""
DS = '{"zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": "auto", "bf16": {"enabled": "auto"}}\n'


@pytest.mark.parametrize("marker", ["pyproject.toml", "setup.cfg"])
def test_the_nearest_project_file_is_the_root(tmp_path: Path, marker: str):
    write_files(tmp_path, {marker: "[project]\nname = 'x'\n" if marker == "pyproject.toml" else "[metadata]\n",
                           "scripts/train.sh": LAUNCHER, "configs/ds_zero3.json": DS})
    for finder in (discover, Discovery()):
        assert finder(tmp_path / "scripts" / "train.sh").root == tmp_path


def test_the_working_directory_is_the_root_when_no_file_marks_one(tmp_path: Path, monkeypatch):
    write_files(tmp_path, {"scripts/train.sh": LAUNCHER, "configs/ds_zero3.json": DS})
    monkeypatch.chdir(tmp_path)
    for finder in (discover, Discovery()):
        assert finder(tmp_path / "scripts" / "train.sh").root == tmp_path.resolve()


def test_the_files_folder_is_the_root_outside_the_working_directory(tmp_path: Path, monkeypatch):
    write_files(tmp_path, {"project/scripts/train.sh": LAUNCHER, "elsewhere/x.txt": ""})
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert discover(tmp_path / "project" / "scripts" / "train.sh").root == tmp_path / "project" / "scripts"


def test_a_relative_config_path_in_a_launcher_is_found_from_the_root(tmp_path: Path, monkeypatch):
    import json
    import subprocess
    import sys

    write_files(tmp_path, {"scripts/train.sh": LAUNCHER, "configs/ds_zero3.json": DS})
    completed = subprocess.run(
        [sys.executable, "-m", "memlint", "check", "scripts/train.sh", "--select", "CFG015",
         "--output-format", "json", "--no-cache"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert json.loads(completed.stdout) == [], completed.stderr
    (tmp_path / "configs" / "ds_zero3.json").unlink()
    completed = subprocess.run(
        [sys.executable, "-m", "memlint", "check", "scripts/train.sh", "--select", "CFG015",
         "--output-format", "json", "--no-cache"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert [d["code"] for d in json.loads(completed.stdout)] == ["CFG015"]
