"""memlint's settings: ``[tool.memlint]`` in ``pyproject.toml``, or ``memlint.toml``.

One function, :func:`discover`, finds the settings for a path; the command line and the
language server both call it, so the editor and CI never disagree. The nearest settings file
wins (a ``pyproject.toml`` without ``[tool.memlint]`` is skipped), as in ruff.
"""

from __future__ import annotations

import fnmatch
import functools
import logging
import os
import re
import sys
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable

from memlint.model.diagnostics import Severity

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

SETTINGS_FILES = ("memlint.toml", ".memlint.toml", "pyproject.toml")

logger = logging.getLogger(__name__)

# A ``[tool.memlint]`` (or ``[tool.memlint.…]``) header, found in a pyproject.toml that does not parse
_MEMLINT_TABLE = re.compile(r"^\s*\[\s*tool\s*\.\s*[\"']?memlint\b", re.MULTILINE)
_warned_unreadable: set[Path] = set()

DEFAULT_EXCLUDE = (
    ".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", "__pycache__", "node_modules",
    ".mypy_cache", ".pytest_cache", ".ruff_cache", "build", "dist", "site-packages", "wandb",
    ".memlint_cache",
    # Jupyter's autosaved copies of notebooks and of every file its editor opened
    # (``.ipynb_checkpoints/train-checkpoint.sh``): stale duplicates, which ruff excludes too
    ".ipynb_checkpoints",
    # the TRL trainers Unsloth rewrites into the working folder when it is imported
    # (``unsloth_compiled_cache/UnslothGRPOTrainer.py``), committed by accident: generated code
    "unsloth_compiled_cache",
    # a cookiecutter/copier template's folders and files (``{{cookiecutter.modelname}}``): Jinja
    # that renders to Python, not Python (transformers' ``templates/``)
    "*{{*}}*",
    # what a run writes, not what anyone launches: a Trainer's checkpoints (``checkpoint-500``:
    # the model's config.json, trainer_state.json) and ms-swift's run folders
    # (``v0-20260425-024237``: the ``args.json`` dump of every argument, ``logging.jsonl``)
    "checkpoint-[0-9]*",
    "v[0-9]*-[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]-[0-9][0-9][0-9][0-9][0-9][0-9]",
)


class SettingsError(ValueError):
    """The settings file is invalid: memlint exits with code 2 and says where and why."""


@dataclass(frozen=True)
class Settings:
    """Everything ``[tool.memlint]`` can set; field names are the keys in snake_case."""

    gpu: str | None = None  # target GPU ("a100-80gb", "NVIDIA H100 80GB HBM3", ...)
    gpus: int | None = None  # data-parallel world size when no launcher says
    seq_len: int = 2048  # sequence length when the code does not set one
    micro_batch: int | None = None  # micro-batch when the code does not set one
    model: str | None = None  # model for scripts that load it from a variable
    # glob -> config.json: the architecture of the runs whose entry file matches (a private or
    # uncatalogued model); a plain string in the file means every file ("**")
    model_config: dict[str, str] = field(default_factory=dict)
    offline: bool = False  # never ask the Hugging Face Hub for a model's config.json
    select: tuple[str, ...] = ()  # rule codes or prefixes; empty = all
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    per_file_ignores: dict[str, tuple[str, ...]] = field(default_factory=dict)
    severity: dict[str, Severity] = field(default_factory=dict)  # per-rule overrides
    fail_on: Severity = Severity.WARNING  # exit 1 when a finding is at least this severe
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    extend_exclude: tuple[str, ...] = ()
    respect_gitignore: bool = True
    cuda_context_gib: float = 1.0
    headroom: float = 0.05
    fragmentation: float = 0.035
    cache: bool = True
    # where the settings came from (not a key)
    path: Path | None = None
    root: Path = field(default_factory=Path.cwd)

    # ----------------------------------------------------------------- rule selection

    def enabled(self, code: str) -> bool:
        """Is a rule on? ``select`` (default: all; "ALL" also means all) plus ``extend-select``,
        minus ``ignore``; entries are codes or prefixes ("MEM", "AMP001")."""
        if self.select and "ALL" not in self.select:
            chosen = any(code.startswith(p) for p in self.select)
        else:
            chosen = True
        chosen = chosen or any(code.startswith(p) for p in self.extend_select)
        return chosen and not any(code.startswith(p) for p in self.ignore)

    def ignored_in_file(self, code: str, path: Path) -> bool:
        relative = _relative(path, self.root)
        for pattern, codes in self.per_file_ignores.items():
            if _glob_match(relative, pattern) and any(code.startswith(c) for c in codes):
                return True
        return False

    def severity_of(self, code: str, default: Severity) -> Severity:
        return self.severity.get(code, default)

    def is_excluded(self, path: Path) -> bool:
        """Does an exclude pattern match the path (relative to the settings' root) or any
        of its parts? Called for every directory entry a walk meets, so it avoids resolving
        symlinks and compiles its patterns once."""
        relative = _relative(path, self.root)
        patterns = tuple(self.exclude) + tuple(self.extend_exclude)
        if not patterns:
            return False
        if _matcher(patterns)(relative) is not None:
            return True
        return any(_excluded_part(patterns, part) for part in relative.split("/"))

    def model_config_for(self, path: Path | str) -> Path | None:
        """The ``model-config`` whose pattern matches ``path`` (the last one listed wins)."""
        relative = _relative(Path(path), self.root)
        found = None
        for pattern, config in self.model_config.items():
            if pattern == "**" or _glob_match(relative, pattern):
                found = Path(config)
        return found

    def with_overrides(self, **changes: Any) -> "Settings":
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


@functools.lru_cache(maxsize=64)
def _matcher(patterns: tuple[str, ...]):
    """One regular expression for all the exclude patterns (a walk asks for every entry)."""
    import re

    return re.compile("|".join(f"(?:{fnmatch.translate(p.rstrip('/'))})" for p in patterns)).fullmatch


@functools.lru_cache(maxsize=65536)
def _excluded_part(patterns: tuple[str, ...], text: str) -> bool:
    """Does a pattern match ``text``, one part of a relative path? Directory names repeat in
    every path below them, so the answers are remembered."""
    return _matcher(patterns)(text) is not None


def _relative(path: Path, root: Path) -> str:
    absolute = os.path.abspath(path)
    base = os.path.abspath(root)
    if absolute == base:
        return "."
    if absolute.startswith(base + os.sep):
        return absolute[len(base) + 1 :].replace(os.sep, "/")
    return absolute.replace(os.sep, "/")


def _glob_match(relative: str, pattern: str) -> bool:
    pattern = pattern.rstrip("/")
    if fnmatch.fnmatch(relative, pattern):
        return True
    if pattern.startswith("**/") and fnmatch.fnmatch(relative, pattern[3:]):
        return True
    return "/" not in pattern and fnmatch.fnmatch(relative.rsplit("/", 1)[-1], pattern)


# ----------------------------------------------------------------- parsing

_KEYS = {f.name.replace("_", "-"): f for f in fields(Settings) if f.name not in ("path", "root")}


def _fail(source: Path, key: str, message: str) -> SettingsError:
    return SettingsError(f"{source}: [tool.memlint] {key}: {message}")


def _codes(source: Path, key: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fail(source, key, "expected a list of rule codes or prefixes, e.g. [\"MEM\", \"AMP001\"]")
    return tuple(v.strip().upper() for v in value)


def parse(table: dict[str, Any], source: Path) -> Settings:
    """Settings from a ``[tool.memlint]`` table; unknown keys and bad values raise."""
    import difflib

    values: dict[str, Any] = {}
    for key, value in table.items():
        spec = _KEYS.get(key)
        if spec is None:
            hint = difflib.get_close_matches(key, list(_KEYS), n=1)
            more = f"; did you mean {hint[0]!r}?" if hint else ""
            raise _fail(source, key, f"unknown key{more}")
        name = spec.name
        if name in ("select", "ignore", "extend_select"):
            values[name] = _codes(source, key, value)
        elif name in ("exclude", "extend_exclude"):
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise _fail(source, key, "expected a list of glob patterns")
            values[name] = tuple(value)
        elif name == "per_file_ignores":
            if not isinstance(value, dict):
                raise _fail(source, key, 'expected a table of glob = ["CODE", ...]')
            values[name] = {str(k): _codes(source, f"{key}.{k}", v) for k, v in value.items()}
        elif name == "severity":
            if not isinstance(value, dict):
                raise _fail(source, key, 'expected a table of CODE = "error" | "warning" | "info"')
            try:
                values[name] = {str(k).upper(): Severity.parse(str(v)) for k, v in value.items()}
            except ValueError as error:
                raise _fail(source, key, str(error)) from None
        elif name == "fail_on":
            try:
                values[name] = Severity.parse(str(value))
            except ValueError as error:
                raise _fail(source, key, str(error)) from None
        elif name in ("gpus", "seq_len", "micro_batch"):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise _fail(source, key, "expected a positive integer")
            values[name] = value
        elif name in ("cuda_context_gib", "headroom", "fragmentation"):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
                raise _fail(source, key, "expected a non-negative number")
            if name in ("headroom", "fragmentation") and value >= 1:
                raise _fail(source, key, "expected a fraction below 1 (e.g. 0.05)")
            values[name] = float(value)
        elif name == "model_config":
            table = {"**": value} if isinstance(value, str) else value
            if not isinstance(table, dict) or not all(isinstance(v, str) and v.strip() for v in table.values()):
                raise _fail(source, key, 'expected a config.json path, or a table of glob = "path/to/config.json"')
            values[name] = {str(k): str((source.parent / Path(v.strip()).expanduser())) for k, v in table.items()}
        elif name in ("respect_gitignore", "cache", "offline"):
            if not isinstance(value, bool):
                raise _fail(source, key, "expected true or false")
            values[name] = value
        else:  # gpu, model
            if not isinstance(value, str) or not value.strip():
                raise _fail(source, key, "expected a non-empty string")
            values[name] = value.strip()
    if "gpu" in values:
        from memlint.catalog.gpus import UnknownGpu, lookup_gpu

        try:
            lookup_gpu(values["gpu"])
        except UnknownGpu as error:
            raise _fail(source, "gpu", str(error)) from None
    return Settings(**values, path=source, root=source.parent)


def load_file(path: Path) -> Settings | None:
    """The settings in one file, or None when a pyproject.toml has no [tool.memlint]."""
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        if path.name == "pyproject.toml":
            _not_memlints(path, f"cannot read ({error})")
            return None
        raise SettingsError(f"{path}: cannot read ({error})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        if path.name == "pyproject.toml" and not _MEMLINT_TABLE.search(text):
            _not_memlints(path, f"invalid TOML ({error})")
            return None
        raise SettingsError(f"{path}: invalid TOML ({error})") from None
    if path.name == "pyproject.toml":
        table = data.get("tool", {}).get("memlint")
        if table is None:
            return None
    else:
        table = data
    if not isinstance(table, dict):
        raise SettingsError(f"{path}: [tool.memlint] must be a table")
    return parse(table, path)


def _not_memlints(path: Path, problem: str) -> None:
    """A pyproject.toml memlint cannot read and that shows no ``[tool.memlint]`` (a merge conflict left
    in a course's packaging file) is the project's packaging, not memlint's settings: say so once and
    go on as if it had no ``[tool.memlint]``. One that shows the table stays an error: those settings
    would be silently lost."""
    if path not in _warned_unreadable:
        _warned_unreadable.add(path)
        logger.warning("memlint: warning: %s: %s; memlint reads no [tool.memlint] table from it and "
                       "lints with the settings it would use without one", path, problem)


def discover(start: Path) -> Settings:
    """The settings that apply to ``start`` (a file or directory): the nearest settings file
    above it, else defaults rooted at the nearest ``.git`` directory, else at the nearest folder with a
    project file (``pyproject.toml``, ``setup.cfg``), else at the working directory when ``start`` is in
    it, else at ``start`` itself."""
    start = start.resolve()
    folder = start if start.is_dir() else start.parent
    for directory in (folder, *folder.parents):
        for name in SETTINGS_FILES:
            candidate = directory / name
            if candidate.is_file():
                settings = load_file(candidate)
                if settings is not None:
                    return settings
    for directory in (folder, *folder.parents):
        if (directory / ".git").exists():
            return Settings(root=directory)
    return Settings(root=_root_without_git(folder, _nearest_above(folder, {}, _project_marker)))


# Files that mark a project's root when there is no .git (a downloaded checkout, an unpacked archive)
PROJECT_MARKERS = ("pyproject.toml", "setup.cfg", "setup.py", "memlint.toml", ".memlint.toml")


def _project_marker(directory: Path) -> Path | None:
    return directory if any((directory / name).is_file() for name in PROJECT_MARKERS) else None


def _root_without_git(folder: Path, marked: Path | None) -> Path:
    """The root of a project that has no .git: the nearest folder with a project file, else the
    working directory when ``folder`` is inside it (the place a relative path in a launcher is
    resolved from when people run it), else ``folder`` itself."""
    if marked is not None:
        return marked
    try:
        cwd = Path.cwd().resolve()
    except OSError:
        return folder
    if cwd == folder or cwd in folder.parents:
        return cwd
    return folder


class Discovery:
    """:func:`discover` for the many directories of one walk: each directory is looked at and
    each settings file read once (a monorepo has thousands of directories under one
    ``pyproject.toml``). The answers are those of :func:`discover`."""

    def __init__(self) -> None:
        self._nearest: dict[Path, Settings | None] = {}  # directory -> settings found at or above it
        self._git: dict[Path, Path | None] = {}  # directory -> nearest directory with .git
        self._marked: dict[Path, Path | None] = {}  # directory -> nearest directory with a project file
        self._answers: dict[Path, Settings] = {}

    def __call__(self, start: Path) -> Settings:
        found = self._answers.get(start)
        if found is None:
            folder = start.resolve()
            folder = folder if folder.is_dir() else folder.parent
            found = self._nearest_settings(folder)
            if found is None:
                root = self._nearest_git(folder)
                if root is None:
                    root = _root_without_git(folder, _nearest_above(folder, self._marked, _project_marker))
                found = Settings(root=root)
            self._answers[start] = found
        return found

    def _nearest_settings(self, folder: Path) -> Settings | None:
        return _nearest_above(folder, self._nearest, self._settings_in)

    @staticmethod
    def _settings_in(directory: Path) -> Settings | None:
        for name in SETTINGS_FILES:
            candidate = directory / name
            if candidate.is_file():
                settings = load_file(candidate)
                if settings is not None:
                    return settings
        return None

    def _nearest_git(self, folder: Path) -> Path | None:
        return _nearest_above(folder, self._git, lambda d: d if (d / ".git").exists() else None)


def _nearest_above(folder: Path, memo: dict, probe: Callable[[Path], Any]) -> Any:
    """The first non-None ``probe(directory)`` from ``folder`` up to the root (None if none),
    remembered in ``memo`` for every directory walked: everything below an answer shares it."""
    chain: list[Path] = []
    found = None
    directory = folder
    while True:
        if directory in memo:
            found = memo[directory]
            break
        chain.append(directory)
        found = probe(directory)
        if found is not None or directory.parent == directory:
            break
        directory = directory.parent
    for visited in chain:
        memo[visited] = found
    return found


def json_schema() -> dict[str, Any]:
    """The JSON Schema of ``[tool.memlint]`` (written to ``schemas/memlint.schema.json``)."""
    strings = {"type": "array", "items": {"type": "string"}}
    severity = {"enum": ["error", "warning", "info"]}
    props: dict[str, Any] = {
        "gpu": {"type": "string", "description": "Target GPU (see `memlint gpus`)."},
        "gpus": {"type": "integer", "minimum": 1, "description": "GPUs per run when no launcher says."},
        "seq-len": {"type": "integer", "minimum": 1, "default": 2048,
                    "description": "Sequence length when the code does not set one."},
        "micro-batch": {"type": "integer", "minimum": 1,
                        "description": "Micro-batch when the code does not set one."},
        "model": {"type": "string", "description": "Model for scripts that load it from a variable."},
        "model-config": {"oneOf": [{"type": "string"}, {"type": "object", "additionalProperties": {"type": "string"}}],
                         "description": "A config.json (relative to this file) for an uncatalogued or private "
                                        "model: one path for every file, or a table of glob = path."},
        "offline": {"type": "boolean", "default": False,
                    "description": "Never ask the Hugging Face Hub for an uncatalogued model's config.json."},
        "select": {**strings, "description": "Rule codes or prefixes to enable (default: all)."},
        "extend-select": {**strings, "description": "Rule codes or prefixes to add to the selection."},
        "ignore": {**strings, "description": "Rule codes or prefixes to disable."},
        "per-file-ignores": {"type": "object", "additionalProperties": strings,
                             "description": "Glob -> rule codes ignored in matching files."},
        "severity": {"type": "object", "additionalProperties": severity,
                     "description": "Per-rule severity overrides."},
        "fail-on": {**severity, "default": "warning",
                    "description": "Exit 1 when a finding is at least this severe."},
        "exclude": {**strings, "description": "Glob patterns of paths not to lint (replaces the defaults)."},
        "extend-exclude": {**strings, "description": "Glob patterns to exclude on top of the defaults."},
        "respect-gitignore": {"type": "boolean", "default": True},
        "cuda-context-gib": {"type": "number", "minimum": 0, "default": 1.0,
                             "description": "GiB reserved per GPU for the CUDA context and kernels."},
        "headroom": {"type": "number", "minimum": 0, "exclusiveMaximum": 1, "default": 0.05,
                     "description": "Warn (MEM002) when the peak is within this fraction of the usable memory."},
        "fragmentation": {"type": "number", "minimum": 0, "exclusiveMaximum": 1, "default": 0.035,
                          "description": "Fraction of the memory left after the CUDA context that the caching "
                                         "allocator cannot hand out (measured: 3.5 %; lower it for "
                                         "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)."},
        "cache": {"type": "boolean", "default": True, "description": "Reuse results of unchanged files."},
    }
    assert set(props) == set(_KEYS), "json_schema() and Settings must list the same keys"
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://memlint.dev/schemas/memlint.schema.json",
        "title": "memlint settings ([tool.memlint] in pyproject.toml, or memlint.toml)",
        "type": "object",
        "additionalProperties": False,
        "properties": props,
    }
