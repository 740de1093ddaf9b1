"""Record which keys a config reader reads from a dict, and with which defaults.

DeepSpeed reads its top-level keys by hand (``param_dict.get(NAME, DEFAULT)``, ``NAME in
param_dict``) across many modules. Rather than re-typing that list, the generator hands
DeepSpeed's own reader a ``RecordingDict`` and writes down every key it asks for: the reader is
the source of truth, including keys added in a new release.
"""

from __future__ import annotations

from collections.abc import Callable, KeysView
from dataclasses import dataclass, field
from typing import Any

Path = tuple[str, ...]


@dataclass
class Read:
    """Everything one key path was asked for."""

    path: Path
    defaults: list[Any] = field(default_factory=list)  # defaults passed to .get(), in order
    iterated: bool = False  # the reader walked all items: any key is accepted there


class Log:
    """The reads of one run, in first-read order."""

    def __init__(self) -> None:
        self.reads: dict[Path, Read] = {}

    def touch(self, path: Path) -> Read:
        return self.reads.setdefault(path, Read(path))

    def children(self, path: Path) -> list[str]:
        """Keys read directly under ``path``, in first-read order."""
        return [p[len(path)] for p in self.reads if len(p) == len(path) + 1 and p[: len(path)] == path]


class _Keys(KeysView):
    def __init__(self, owner: RecordingDict) -> None:
        super().__init__(owner)
        self._owner = owner

    def __contains__(self, key: object) -> bool:
        return self._owner.__contains__(key)


class RecordingDict(dict):
    """A dict that logs ``get``/``[]``/``in``/iteration on itself and on sub-dicts it hands out.

    A missing key read with an empty-dict default (``d.get("checkpoint", {})``) returns a new
    recording dict, so the reads inside that section are logged under its path too.
    """

    def __init__(self, data: dict | None = None, *, log: Log, path: Path = ()) -> None:
        super().__init__(data or {})
        self.log = log
        self.path = path

    def _child(self, key: str) -> Path:
        return self.path + (key,)

    def get(self, key: Any, default: Any = None) -> Any:
        if not isinstance(key, str):
            return dict.get(self, key, default)
        self.log.touch(self._child(key)).defaults.append(default)
        if not dict.__contains__(self, key) and isinstance(default, dict) and not default:
            return RecordingDict(log=self.log, path=self._child(key))
        return dict.get(self, key, default)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            self.log.touch(self._child(key))
        return dict.__getitem__(self, key)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.log.touch(self._child(key))
        return dict.__contains__(self, key)

    def keys(self):  # type: ignore[override]
        return _Keys(self)

    def _walked(self) -> None:
        self.log.touch(self.path).iterated = True

    def items(self):  # type: ignore[override]
        self._walked()
        return dict.items(self)

    def values(self):  # type: ignore[override]
        self._walked()
        return dict.values(self)

    def __iter__(self):
        self._walked()
        return dict.__iter__(self)

    def __copy__(self) -> RecordingDict:
        return RecordingDict(dict(self), log=self.log, path=self.path)


def _wrap(data: dict, log: Log, path: Path) -> RecordingDict:
    """Nested plain dicts become recording dicts at their own paths."""
    wrapped = {k: _wrap(v, log, path + (k,)) if isinstance(v, dict) else v for k, v in data.items()}
    return RecordingDict(wrapped, log=log, path=path)


def record(reader: Callable[[RecordingDict], Any], data: dict | None = None) -> tuple[Log, BaseException | None]:
    """Run ``reader`` on a recording dict holding ``data``; return the log and what it raised.

    The reader may raise (a probe value is not what it expects); the reads before that still count.
    """
    log = Log()
    try:
        reader(_wrap(data or {}, log, ()))
    except Exception as exc:  # noqa: BLE001 - any failure of the tool's reader is data here
        return log, exc
    return log, None
