"""Values a script takes from a config file of its own: ``cfg = yaml.safe_load(open("config.yaml"))``
then ``AutoModelForCausalLM.from_pretrained(cfg["model"]["id"])``.

The script alone cannot know them (the file is another document), but it knows where they are:
the file (a path it writes, or the option that names it with that option's default) and the keys
down to the entry. :mod:`memlint.python.values` states such a value as an option whose name says
both, the way it states ``args.model_name``; the project reads the file and passes each entry as a
launch passes an option (``memlint.project.runs``), located where the file writes it. A file no
one can find, or a key it lacks, leaves the value unknown, as before.
"""

from __future__ import annotations

import json
from typing import Any
from dataclasses import dataclass

PREFIX = "&file:"  # no command-line option starts so (``@`` marks an imported constant: ``options.CONSTANT_PREFIX``)

# the calls that read a config file into a mapping, and whether they take an open file (PyYAML,
# json) or either a file or a path (OmegaConf)
LOADERS: dict[str, bool] = {
    "yaml.safe_load": True,
    "yaml.load": True,
    "yaml.full_load": True,
    "yaml.unsafe_load": True,
    "json.load": True,
    "json.loads": True,  # over ``path.read_text()`` only: a file's text
    "toml.load": False,
    "tomllib.load": True,
    "tomli.load": True,
    "omegaconf.OmegaConf.load": False,
}


@dataclass(frozen=True)
class FileEntry:
    """An entry of a config file a script reads: ``keys`` down from the file's top mapping (none:
    the whole file). ``path`` is the file as the script writes it (or the default of ``option``,
    the command-line option that names it, which a launch may set)."""

    path: str | None
    option: str | None
    keys: tuple[str, ...] = ()
    # ``cfg["training"].get("batch_size", 1)``: what the script takes when the file lacks the entry,
    # as command-line text (only where the file is read: a file memlint cannot find decides nothing)
    fallback: str | None = None

    @property
    def name(self) -> str:
        """The entry as an option name (``memlint.python.value_types.Found.options``)."""
        written = [self.path, self.option, list(self.keys)] + ([self.fallback] if self.fallback is not None else [])
        return PREFIX + json.dumps(written, separators=(",", ":"))

    def child(self, key: str, fallback: object = None) -> "FileEntry":
        return FileEntry(self.path, self.option, (*self.keys, key), _as_text(fallback))

    @property
    def where(self) -> str:
        """How a message names the entry: ``model.id in config/config.yaml``."""
        keys = ".".join(self.keys) or "the whole file"
        return f"{keys} in {self.path or '--' + str(self.option)}"


def entry(option: str) -> FileEntry | None:
    """The entry an option name stands for; None for a real command-line option."""
    if not option.startswith(PREFIX):
        return None
    try:
        path, named_by, keys, *fallback = json.loads(option[len(PREFIX):])
    except (ValueError, TypeError):
        return None
    if not all(isinstance(k, str) for k in keys):
        return None
    return FileEntry(path, named_by, tuple(keys), fallback[0] if fallback else None)


def _as_text(value: object) -> str | None:
    """A fallback as a launch would write it; None for no fallback (or ``None`` itself)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if isinstance(value, (int, float, str)) else None


def is_entry(option: str) -> bool:
    return option.startswith(PREFIX)


def entry_of(found: Any) -> FileEntry | None:
    """The config-file entry a value stands for (``cfg``, ``cfg["model"]``: unknown here, named by
    its one option), else None."""
    if found is None or found.known or len(found.options) != 1:
        return None
    return entry(found.options[0])
