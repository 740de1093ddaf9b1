"""The entries a script reads from a config file of its own (``memlint.python.file_entries``),
as a launch passes options: ``cfg = yaml.safe_load(open("config/config.yaml"))`` then
``from_pretrained(cfg["model"]["id"])`` states the model that file writes, located there.

The file is the one the script writes, or the one the launch names with the option the script
reads it from (``--config``), else that option's default; it is found as any path a run writes
(``DocumentStore.resolve_reference``). A file not found, one that does not parse, or a key it
lacks states nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from memlint.documents import reads
from memlint.model.provenance import Location, Sourced
from memlint.python import file_entries

if TYPE_CHECKING:
    from memlint.facts.plan import RunFacts
    from memlint.project.documents import DocumentStore


def as_option_text(value: Any) -> str | None:
    """A config value as a launch would write it on the command line; None for a mapping."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return str(value)
    if isinstance(value, list) and all(isinstance(v, (int, float, str)) and not isinstance(v, bool) for v in value):
        return " ".join(str(v) for v in value)
    return None


def entries_read(documents: "DocumentStore", script: "RunFacts", launcher: "RunFacts | None") -> dict[str, Sourced[str]]:
    """Each config-file entry ``script`` binds (by its option name), as the file writes it."""
    out: dict[str, Sourced[str]] = {}
    for option in script.cli_bindings:
        read = file_entries.entry(option)
        if read is None or not read.keys:
            continue
        config = _file_of(documents, read, script, launcher)
        if config is None:
            continue
        structured = documents.parsed(config).structured
        if structured is None or not structured.ok:
            continue
        reads.document(documents.key(config), documents.digest(config))
        found, path = _walk(structured.value, read.keys)
        dotted = ".".join(read.keys)
        if path is None and read.fallback is not None:
            parent = _walk(structured.value, read.keys[:-1])[1]
            if parent is not None:  # the file lacks the entry: the script's fallback, said at the mapping
                out[option] = Sourced(read.fallback, Location(str(config), structured.range_of(parent, key=True)),
                                      f"{dotted} not in {config.name}: the script's fallback")
            continue
        text = as_option_text(found) if path is not None else None
        if text is not None and path is not None:
            out[option] = Sourced(text, Location(str(config), structured.range_of(path)), f"{dotted} in {config.name}")
    return out


def _file_of(documents: "DocumentStore", read: file_entries.FileEntry, script: "RunFacts",
             launcher: "RunFacts | None") -> Path | None:
    written, from_path = read.path, script.path
    if read.option is not None and launcher is not None:
        passed = launcher.cli_args.get(read.option)
        if passed is not None:
            written, from_path = str(passed.value), launcher.path
        elif read.option in launcher.cli_unknown:
            return None  # a file the launch names in a way memlint cannot read
    return documents.resolve_reference(written, from_path) if written else None


def _walk(value: Any, keys: tuple[str, ...]) -> tuple[Any, tuple | None]:
    """The value down ``keys`` and its path in the document (None where a key is missing)."""
    path: list[Any] = []
    for key in keys:
        if isinstance(value, dict) and key in value:
            value = value[key]
            path.append(key)
        elif isinstance(value, list) and key.lstrip("-").isdigit() and -len(value) <= int(key) < len(value):
            index = int(key) % len(value)
            value = value[index]
            path.append(index)
        else:
            return None, None
    return value, tuple(path)
