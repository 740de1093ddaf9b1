"""Adding ``"path" = ["CODE"]`` to ``per-file-ignores`` in a settings file, as an edit that keeps
everything else the user wrote (comments, order, formatting) byte for byte.

JSON has no comments, so a finding in ``ds_config.json`` is silenced in the settings:
``[tool.memlint.per-file-ignores]`` in ``pyproject.toml`` or ``[per-file-ignores]`` in
``memlint.toml``. The table is created when missing; an existing entry for the file gets the
code added. The result is parsed back with ``tomllib``: when the file's layout defeats a
textual edit (an inline ``per-file-ignores = {...}`` table, dotted keys), no edit is offered
rather than a file that no longer loads.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

_HEADER = re.compile(r"^[ \t]*\[[ \t]*([^\[\]]+?)[ \t]*\][ \t]*(#.*)?$", re.MULTILINE)
_ARRAY = re.compile(r"\[(?P<body>[^\]]*)\]", re.DOTALL)


@dataclass(frozen=True)
class SettingsEdit:
    """The settings file's new text (``created``: the file does not exist yet)."""

    path: Path
    old_text: str
    new_text: str
    created: bool = False


def table_name(settings_file: Path) -> str:
    return "tool.memlint.per-file-ignores" if settings_file.name == "pyproject.toml" else "per-file-ignores"


def _normalize_header(name: str) -> str:
    return ".".join(part.strip().strip("\"'") for part in name.split("."))


def _key_pattern(pattern: str) -> re.Pattern[str]:
    quoted = "|".join(re.escape(q) for q in (json.dumps(pattern), f"'{pattern}'"))
    bare = re.escape(pattern) if re.fullmatch(r"[A-Za-z0-9_-]+", pattern) else None
    alternatives = quoted + (f"|{bare}" if bare else "")
    return re.compile(rf"^[ \t]*(?:{alternatives})[ \t]*=[ \t]*", re.MULTILINE)


def _codes_in(table: object, pattern: str) -> list[str]:
    if not isinstance(table, dict):
        return []
    codes = table.get(pattern)
    return [str(c).upper() for c in codes] if isinstance(codes, list) else []


def _lookup(data: object, dotted: str) -> object:
    for part in dotted.split("."):
        if not isinstance(data, dict):
            return None
        data = data.get(part)
    return data


def _last_value_end(body: str) -> int | None:
    """Offset just past the last value (or trailing comma) of an array body, skipping
    comments and whitespace; None for an empty array. Codes hold no ``#``."""
    offset, last = 0, None
    for line in body.splitlines(keepends=True):
        content = line.split("#", 1)[0].rstrip()
        if content.strip():
            last = offset + len(content)
        offset += len(line)
    return last


def add_ignore(text: str, settings_file: Path, pattern: str, code: str) -> str | None:
    """``text`` with ``code`` ignored in files matching ``pattern``; None when it already is
    or when no safe textual edit exists."""
    try:
        before = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None
    table = table_name(settings_file)
    if code in _codes_in(_lookup(before, table), pattern):
        return None
    entry = f"{json.dumps(pattern)} = [{json.dumps(code)}]\n"
    headers = list(_HEADER.finditer(text))
    new_text = None
    for index, header in enumerate(headers):
        if _normalize_header(header.group(1)) != table:
            continue
        start = header.end()
        end = headers[index + 1].start() if index + 1 < len(headers) else len(text)
        body = text[start:end]
        key = _key_pattern(pattern).search(body)
        if key is not None:
            array = _ARRAY.match(body, key.end())
            if array is None:
                return None
            body_start = start + array.start("body")
            last = _last_value_end(array.group("body"))
            if last is None:  # an empty array
                insert_at, addition = body_start, json.dumps(code)
            else:
                insert_at = body_start + last
                ends_with_comma = text[insert_at - 1] == ","
                addition = f" {json.dumps(code)}," if ends_with_comma else f", {json.dumps(code)}"
            new_text = text[:insert_at] + addition + text[insert_at:]
        else:
            # after the table's last non-blank line, so blank lines before the next table stay
            content_end = start + len(body.rstrip())
            line_end = text.find("\n", content_end)
            if line_end == -1:
                new_text = text + "\n" + entry
            else:
                new_text = text[: line_end + 1] + entry + text[line_end + 1:]
        break
    if new_text is None:
        if not text or text.endswith("\n\n"):
            separator = ""
        else:
            separator = "\n" if text.endswith("\n") else "\n\n"
        new_text = f"{text}{separator}[{table}]\n{entry}"
    try:
        after = tomllib.loads(new_text)
    except tomllib.TOMLDecodeError:
        return None
    if code not in _codes_in(_lookup(after, table), pattern):
        return None
    return new_text


def ignore_in_settings(settings_path: Path | None, root: Path, target: Path, code: str,
                       read_text) -> SettingsEdit | None:
    """The edit that ignores ``code`` in ``target``: in the settings file in force, else in the
    project's ``pyproject.toml``, else in a new ``memlint.toml`` at the project root.
    ``read_text(path)`` returns an open editor buffer's text, or None to read the disk."""
    if settings_path is not None:
        candidate, created = settings_path, False
    elif (root / "pyproject.toml").is_file():
        candidate, created = root / "pyproject.toml", False
    else:
        candidate, created = root / "memlint.toml", not (root / "memlint.toml").exists()
    try:
        pattern = target.resolve().relative_to(candidate.parent.resolve()).as_posix()
    except ValueError:
        return None  # a file outside the project: a per-file ignore cannot name it
    if created:
        old = ""
    else:
        old = read_text(candidate)
        if old is None:
            try:
                old = candidate.read_text("utf-8")
            except (OSError, UnicodeDecodeError):
                return None
    new = add_ignore(old, candidate, pattern, code)
    if new is None:
        return None
    return SettingsEdit(candidate, old, new, created)
