"""Forgiving name matching shared by the model and GPU catalogues."""

from __future__ import annotations

import difflib
import re

_DROP = re.compile(r"[\s\-_./]+")


def normalize(name: str) -> str:
    """``NVIDIA A100-SXM4-80GB`` and ``nvidia a100 sxm4 80gb`` normalise alike."""
    return _DROP.sub("", name.strip().lower())


def suggestions(name: str, candidates: list[str], limit: int = 3) -> list[str]:
    """Close matches for a "did you mean" message."""
    by_key = {normalize(c): c for c in candidates}
    close = difflib.get_close_matches(normalize(name), list(by_key), n=limit, cutoff=0.6)
    return [by_key[c] for c in close]
