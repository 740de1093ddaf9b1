"""A model's ``config.json`` read as data: from a file, a model folder or the Hub's download."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MAX_CONFIG_BYTES = 4 * 1024 * 1024  # a config.json is kilobytes; refuse anything absurd


class UnknownModel(LookupError):
    """memlint cannot tell which architecture a name or path stands for."""


def read_config(path: Path) -> dict[str, Any]:
    """Read a ``config.json`` file, or the one inside a directory."""
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise UnknownModel(f"{path}: no config.json here")
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise UnknownModel(f"{path}: too large to be a model config ({path.stat().st_size} bytes)")
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UnknownModel(f"{path}: not a readable config.json ({error})") from None
    if not isinstance(data, dict):
        raise UnknownModel(f"{path}: config.json must hold a JSON object")
    return data
