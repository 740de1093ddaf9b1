"""Paths a script builds from its own location, as text relative to the script's folder.

A script often finds its config next to itself rather than in the working directory:
``os.path.join(os.path.dirname(__file__), "../../configs/config.yml")``,
``Path(__file__).resolve().parent / "config.yaml"``. Evaluated here, ``__file__`` is the script
(:data:`SCRIPT_FILE`) and its folder is ``"."``, so those paths come out as
``"../../configs/config.yml"`` and ``"config.yaml"``: what ``DocumentStore.resolve_reference``
looks up from the referencing file's folder first. A ``pathlib.Path`` is a :class:`PathValue`
(it has ``.parent`` and ``/``; text has neither); ``str(path)`` and ``open(path)`` take its text.
Absolute and user paths (``os.path.expanduser``) are left as written: not the script's."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any

# the value of ``__file__``: a name no real path has, whose folder is the script's (``"."``)
SCRIPT_FILE = "<this script>"


@dataclass(frozen=True)
class PathValue:
    """A ``pathlib.Path`` the script builds, as its text."""

    text: str

    def __str__(self) -> str:
        return self.text


def text_of(value: Any) -> str | None:
    """The text of a path given as a string or a :class:`PathValue`; None for anything else."""
    if isinstance(value, PathValue):
        return value.text
    return value if isinstance(value, str) else None


def _folder(text: str) -> str:
    if text == SCRIPT_FILE:
        return "."
    normal = posixpath.normpath(text)
    if normal == ".":
        return ".."
    if posixpath.basename(normal) == "..":
        return normal + "/.."
    return posixpath.dirname(normal) or "."


def _joined(parts: list[str]) -> str:
    # a folder of "." adds nothing: ``join(".", "x.yaml")`` is the script folder's ``x.yaml``
    kept = [p for i, p in enumerate(parts) if not (p == "." and i < len(parts) - 1)]
    return posixpath.normpath(posixpath.join(*kept)) if kept else "."


# the ``os.path`` functions over text, and ``pathlib``'s path classes
FUNCTIONS = frozenset({"os.path.join", "os.path.dirname", "os.path.abspath", "os.path.realpath", "os.path.normpath",
                       "pathlib.Path", "pathlib.PurePath", "pathlib.PosixPath"})


def call(name: str, arguments: list[Any]) -> Any:
    """The path ``name(*arguments)`` builds, or None when an argument is not a known path."""
    texts = [text_of(a) for a in arguments]
    if not texts or any(t is None for t in texts):
        return None
    known: list[str] = [t for t in texts if t is not None]
    if name == "os.path.join":
        return _joined(known)
    if len(known) != 1:
        return PathValue(_joined(known)) if name.startswith("pathlib.") else None
    text = known[0]
    if name == "os.path.dirname":
        return _folder(text)
    if name in ("os.path.abspath", "os.path.realpath"):
        return text  # relative to the script's folder still: the run's folder is not known here
    if name == "os.path.normpath":
        return text if text == SCRIPT_FILE else posixpath.normpath(text)
    return PathValue(text)  # pathlib.Path(text)


def attribute(value: Any, attr: str) -> Any:
    """``path.parent``; None for anything else."""
    if isinstance(value, PathValue) and attr == "parent":
        return PathValue(_folder(value.text))
    return None


METHODS = frozenset({"resolve", "absolute", "expanduser", "joinpath", "with_name"})


def method(value: Any, name: str, arguments: list[Any]) -> Any:
    """``path.resolve()``, ``path.absolute()``, ``path.joinpath("a", "b")``, ``path.with_name(...)``."""
    if not isinstance(value, PathValue):
        return None
    if name in ("resolve", "absolute", "expanduser") and not arguments:
        return value
    texts = [text_of(a) for a in arguments]
    if name == "joinpath" and texts and all(t is not None for t in texts):
        return PathValue(_joined([value.text, *[t for t in texts if t is not None]]))
    if name == "with_name" and len(texts) == 1 and texts[0] is not None:
        return PathValue(_joined([_folder(value.text), texts[0]]))
    return None


def divide(left: Any, right: Any) -> Any:
    """``path / "configs" / "x.yaml"``; None unless the left side is a path and the right text."""
    if isinstance(left, PathValue) and text_of(right) is not None:
        return PathValue(_joined([left.text, text_of(right) or ""]))
    return None
