"""What moved between two precision runs (``bench/precision.py check --json``), finding by finding.

A finding is keyed by where it is (repository, code, file, row); at one key the findings of
the two runs are paired by identical severity and message first, then in file order, so a
reworded message is one change, not a finding gone and another new. The mission codes are
listed one by one (they are what the precision table judges); every code gets its counts.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

Key = tuple[str, str, str, int]


@dataclass(frozen=True)
class Change:
    kind: str  # "new", "gone" or "changed"
    key: Key
    before: dict | None
    after: dict | None


def load(path: Path) -> list[dict]:
    """The findings a ``check --json`` run wrote."""
    findings = json.loads(path.read_text())
    if not isinstance(findings, list):
        raise ValueError(f"{path}: not a list of findings")
    return findings


def key(finding: dict) -> Key:
    return (finding.get("repository", ""), finding["code"], finding["filename"], finding["location"]["row"])


def _by_key(findings: Iterable[dict]) -> dict[Key, list[dict]]:
    grouped: dict[Key, list[dict]] = {}
    for finding in findings:
        grouped.setdefault(key(finding), []).append(finding)
    return grouped


def _said(finding: dict) -> tuple[str, str]:
    return (finding["severity"], finding["message"])


def changes(before: list[dict], after: list[dict]) -> list[Change]:
    """Every finding that appeared, disappeared, or changed severity or message, in key order."""
    old, new = _by_key(before), _by_key(after)
    found: list[Change] = []
    for where in sorted(old.keys() | new.keys()):
        left, right = list(old.get(where, [])), list(new.get(where, []))
        for finding in list(left):  # the same words on both sides: unchanged
            match = next((other for other in right if _said(other) == _said(finding)), None)
            if match is not None:
                left.remove(finding)
                right.remove(match)
        for was, now in zip(left, right):
            found.append(Change("changed", where, was, now))
        found += [Change("gone", where, was, None) for was in left[len(right):]]
        found += [Change("new", where, None, now) for now in right[len(left):]]
    return found


def _line(finding: dict) -> str:
    return f"{finding['severity']:<7} {finding['message']}"


def report(before: list[dict], after: list[dict], codes: Iterable[str]) -> str:
    """The text ``compare`` prints: the moved findings of ``codes``, then counts for every code."""
    listed = set(codes)
    moved = [change for change in changes(before, after) if change.key[1] in listed]
    lines = []
    for change in moved:
        repository, code, filename, row = change.key
        lines.append(f"{change.kind:<7} {repository} {code} {filename}:{row}")
        if change.before is not None:
            lines.append(f"   was  {_line(change.before)}")
        if change.after is not None:
            lines.append(f"   now  {_line(change.after)}")
    tally = Counter(change.kind for change in moved)
    lines.append(
        f"mission codes: {tally['new']} new, {tally['gone']} gone, {tally['changed']} changed "
        f"({sum(key(f)[1] in listed for f in before)} -> {sum(key(f)[1] in listed for f in after)} findings)"
    )
    counted_before = Counter(f["code"] for f in before)
    counted_after = Counter(f["code"] for f in after)
    lines.append("per code (before -> after):")
    for code in sorted(counted_before.keys() | counted_after.keys()):
        mark = "*" if code in listed else " "
        shift = counted_after[code] - counted_before[code]
        delta = f" ({shift:+d})" if shift else ""
        lines.append(f"{mark} {code} {counted_before[code]} -> {counted_after[code]}{delta}")
    lines.append(f"  all {len(before)} -> {len(after)}")
    return "\n".join(lines)
