"""Finding the files to lint: directories walked once, .gitignore and excludes respected.

Symlinked directories are followed at most once (a loop of links ends there); files that are
not regular files are still yielded so that the engine can say why it skipped them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Iterable, Iterator

import pathspec

from memlint.documents.reading import is_linted
from memlint.project.settings import Settings

MAX_FILES = 200_000


def _gitignore(directory: Path) -> pathspec.PathSpec | None:
    path = directory / ".gitignore"
    try:
        if path.is_file():
            return gitignore_spec(path.read_text("utf-8", errors="ignore").splitlines())
    except OSError:
        return None
    return None


def gitignore_spec(lines: list[str]) -> pathspec.PathSpec:
    """The patterns of a .gitignore; a line git cannot use either (``tmp\\``, a trailing
    backslash from a Windows habit) matches nothing there, and is left out here rather than
    ending the run."""
    try:
        return pathspec.PathSpec.from_lines("gitwildmatch", lines)
    except ValueError:
        return pathspec.PathSpec.from_lines("gitwildmatch", [line for line in lines if _usable(line)])


def _usable(line: str) -> bool:
    try:
        pathspec.PathSpec.from_lines("gitwildmatch", [line])
    except ValueError:
        return False
    return True


def ignored_by_git(path: Path, root: Path) -> bool:
    """Does a .gitignore of ``root`` or of a folder between it and ``path`` ignore ``path``? Such
    a file is made by a run (``tmp/``, ``outputs/``), so a checkout not having it says nothing."""
    try:
        relative = Path(os.path.abspath(path)).relative_to(os.path.abspath(root))
    except ValueError:
        return False
    folder = Path(os.path.abspath(root))
    for depth, part in enumerate((None,) + relative.parts[:-1]):
        if part is not None:
            folder = folder / part
        spec = _gitignore(folder)
        if spec is not None and spec.match_file(Path(*relative.parts[depth:]).as_posix()):
            return True
    return False


def in_absent_submodule(path: Path, root: Path) -> bool:
    """Does ``path`` lie in a git submodule of ``root`` (``.gitmodules``) that this checkout has
    not fetched (its folder missing or empty: a clone without ``--recursive``)? The file comes
    with the submodule, so its absence here says nothing (verl's ``recipe/`` submodule)."""
    try:
        relative = Path(os.path.abspath(path)).relative_to(os.path.abspath(root)).as_posix()
        text = (root / ".gitmodules").read_text("utf-8", errors="ignore")
    except (ValueError, OSError):
        return False
    for line in text.splitlines():
        key, _, value = line.partition("=")
        folder = value.strip().strip("/")
        if key.strip() != "path" or not folder or not relative.startswith(folder + "/"):
            continue
        try:
            return not any(os.scandir(root / folder))
        except OSError:  # missing, or not a folder
            return True
    return False


def iter_files(paths: Iterable[Path], settings: Settings, explicit_too: bool = True) -> Iterator[Path]:
    """Lintable files under ``paths``. Files named explicitly are yielded whatever their suffix
    (and even when excluded, unless ``explicit_too`` is False: pre-commit's force-exclude)."""
    for path, _entry in walk(paths, settings, explicit_too):
        yield path


def walk(
    paths: Iterable[Path], settings: Settings, explicit_too: bool = True,
    on_symlink: Callable[[Path], None] | None = None,
) -> Iterator[tuple[Path, os.DirEntry | None]]:
    """:func:`iter_files`, with the directory entry each file was found as (None for a file
    named explicitly), whose ``stat()`` the result cache uses; ``on_symlink`` hears of every
    symbolic link the walk goes through (a path through one is not its file's real name)."""
    seen_dirs: set[tuple[int, int]] = set()
    count = 0
    for start in paths:
        start = Path(start)
        try:
            is_dir = start.is_dir()
        except OSError:
            is_dir = False
        if not is_dir:
            if explicit_too or not settings.is_excluded(start):
                yield start, None
            continue
        stack: list[tuple[Path, list[tuple[Path, pathspec.PathSpec]]]] = [(start, [])]
        while stack:
            directory, specs = stack.pop()
            try:
                info = directory.stat()
            except OSError:
                continue
            ident = (info.st_dev, info.st_ino)
            if ident in seen_dirs:
                continue  # a symlink loop, or a directory reached twice
            seen_dirs.add(ident)
            if settings.respect_gitignore:
                spec = _gitignore(directory)
                if spec is not None:
                    specs = specs + [(directory, spec)]
            try:
                entries = sorted(os.scandir(directory), key=lambda e: e.name)
            except OSError:
                continue
            subdirs = []
            saved_model = is_saved_model_folder({entry.name for entry in entries})
            for entry in entries:
                try:
                    is_file = not entry.is_dir()
                except OSError:
                    continue
                if is_file and not is_linted(entry.name):
                    continue  # never linted: no need to ask the ignore files (most of a walk's matching)
                if is_file and saved_model and entry.name.endswith(_STRUCTURED_SUFFIXES):
                    continue  # what save_pretrained wrote, and the records saved beside it
                path = Path(entry.path)
                if settings.is_excluded(path) or _ignored(path, specs, entry):
                    continue
                if on_symlink is not None and entry.is_symlink():
                    on_symlink(path)
                try:
                    if entry.is_dir():
                        subdirs.append(path)
                        continue
                except OSError:
                    continue
                if is_linted(path):
                    count += 1
                    if count > MAX_FILES:
                        return
                    yield path, entry
            stack.extend((d, specs) for d in reversed(subdirs))


# the files ``save_pretrained`` writes: a folder that holds them is a saved model, adapter or
# tokenizer, and its JSON/YAML files are records of a run (the training script's
# ``lora_config.json`` saved beside the adapter: veen-systems/llm-distillery), never configs
_SAVED_BY_PEFT = "adapter_config.json"
_SAVED_TOKENIZER = frozenset({"tokenizer_config.json", "special_tokens_map.json"})
_SAVED_MODEL = frozenset({"config.json", "generation_config.json"})
_STRUCTURED_SUFFIXES = (".json", ".yaml", ".yml")


def is_saved_model_folder(names: set[str]) -> bool:
    """Do these file names make a folder that ``save_pretrained`` wrote (an adapter, a tokenizer,
    a model with its generation config)?"""
    return _SAVED_BY_PEFT in names or _SAVED_TOKENIZER <= names or _SAVED_MODEL <= names


def _ignored(path: Path, specs: list[tuple[Path, pathspec.PathSpec]], entry: os.DirEntry) -> bool:
    for base, spec in specs:
        try:
            relative = path.relative_to(base).as_posix()
        except ValueError:
            continue
        try:
            is_dir = entry.is_dir()
        except OSError:
            is_dir = False
        if spec.match_file(relative + ("/" if is_dir else "")):
            return True
    return False
