"""The versions of the training tools a project pins, read from its dependency files.

A config key is right or wrong for the release the project runs, not for the release memlint's
schemas describe: ``evaluation_strategy`` is the spelling in ``transformers==4.34``. The files
that say which release a project runs, at its root (and under ``requirements/``), and in the
folders of its sub-packages: a dependency file in a folder governs the files beneath it (R1-V's
``src/r1-v/setup.py`` pins ``trl==0.14.0`` for ``src/r1-v/configs/``), the nearest folder above
a config first, then the folders above it up to the root:

- lock files: ``uv.lock``, ``poetry.lock``, ``pdm.lock`` (``[[package]]`` name and version),
  ``Pipfile.lock``; they name the exact release and win over everything else;
- ``requirements*.txt`` and files named for what they install (``dev-requirements.txt``,
  ``deepspeed_reqs.txt``): ``name==1.2``, ``name>=1.2,<1.3``, extras and markers;
- ``pyproject.toml`` (``[project]`` dependencies and optional dependencies, dependency groups,
  Poetry's ``[tool.poetry.dependencies]`` with ``^``/``~`` constraints);
- ``setup.py`` (read with ``ast``, never run: every string that reads as a requirement of a
  known tool, since ``install_requires`` is often a list built in a variable) and
  ``setup.cfg`` (``install_requires``, ``extras_require``);
- ``environment.yml`` (conda's ``name=1.2`` and the ``pip:`` list);
- last, the ``pip install`` commands of the folder's README (``pip install --upgrade
  "transformers==4.40.0" "trl==0.8.6"``: a blog-post repository's only statement of what it runs);
  only a requirement that names a release counts there.

A requirement is kept as its specifier: which release it selects is the key history's question
(the newest release it admits, as pip would install). A direct reference to a commit
(``transformers @ git+https://...@336dc69``) names no release: it is kept as a pin with no
specifier and ``url`` set, and the key history says it cannot date it rather than judging the
key against the newest release.

A project that contains a tool's own source (LIMO vendors LLaMA-Factory: ``train/setup.py``
says ``name="llamafactory"``) runs that copy's release: its ``setup.py``/``pyproject.toml``
name and version (or the ``VERSION``/``__version__`` string of the package's source, where
``setup.py`` computes it) pin the tool for the files beneath that folder.
"""

from __future__ import annotations

import ast
import configparser
import json
import os
import re
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from memlint.documents import reads
from memlint.documents.reading import read_document

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

import yaml

MAX_BYTES = 1024 * 1024
_LOCKS = ("uv.lock", "poetry.lock", "pdm.lock", "Pipfile.lock")
_OTHERS = ("pyproject.toml", "setup.cfg", "setup.py", "environment.yml", "environment.yaml")
_READMES = ("README.md", "readme.md", "Readme.md", "README.MD", "README.markdown", "README.rst", "README")


@dataclass(frozen=True)
class Pin:
    """What one dependency file says about one package."""

    package: str  # canonical name
    specifier: SpecifierSet
    path: str  # the file, relative to the project root
    line: int  # 1-based line of the requirement (0 when the file gives none)
    url: bool = False  # a direct reference (``name @ git+...``): no release can be read
    source_tree: bool = False  # the project contains the package's own source (its setup.py)

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}" if self.line else self.path

    @property
    def exact(self) -> str | None:
        """The release when the specifier names exactly one (``==4.34.0``)."""
        for spec in self.specifier:
            if spec.operator in ("==", "===") and "*" not in spec.version:
                return spec.version
        return None

    def only_before(self, release: str | Version) -> bool:
        """Whether every release the pin admits predates ``release``: an upper bound below it
        (``==4.31.0``, ``<4.34``, ``<=4.35.2``, ``~=4.33.0``, ``==4.31.*``); a pin with none
        admits the newest release, which pip installs, and a commit or the project's own copy
        names no release."""
        threshold = Version(str(release))
        if self.url or self.source_tree:
            return False
        for spec in self.specifier:
            try:
                bound = Version(spec.version.rstrip(".*"))
            except InvalidVersion:
                continue
            if spec.operator in ("==", "===") and not spec.version.endswith("*"):
                if bound < threshold:
                    return True
            elif spec.operator == "==" and _ceiling(bound.release) <= threshold:  # ==4.31.* admits 4.31.x
                return True
            elif spec.operator == "<" and bound <= threshold:
                return True
            elif spec.operator == "<=" and bound < threshold:
                return True
            elif spec.operator == "~=" and _ceiling(bound.release[:-1] or bound.release) <= threshold:
                return True  # ~=4.33.0 admits < 4.34; ~=4.33 admits < 5
        return False


def _ceiling(release: tuple[int, ...]) -> Version:
    """The first release after every release that starts with ``release`` (4.33 -> 4.34)."""
    return Version(".".join(map(str, release[:-1] + (release[-1] + 1,))))


_KEPT: dict[tuple, tuple[dict[str, Pin], dict[str, str]]] = {}  # stamp -> (pins, path -> content digest)


def pins(root: Path, near: str | Path | None = None) -> dict[str, Pin]:
    """Canonical package name -> the pin that decides its release for a file at ``near`` (or
    for the project as a whole): the nearest folder from ``near`` up to ``root`` that pins a
    package decides it; within a folder lock files first, then ``requirements.txt``, then the
    packaging metadata and conda environments, then the requirement files of one purpose
    (``_files``); a pin that names no release gives way to a later one that does."""
    root = Path(root)
    found: dict[str, Pin] = {}
    for folder in _folders(root, near):
        for package, pin in _folder_pins(root, folder).items():
            found.setdefault(package, pin)
    return found


def _folders(root: Path, near: str | Path | None) -> list[Path]:
    """The folders from ``near``'s own up to ``root`` (``root`` alone without ``near`` or when
    ``near`` lies outside it)."""
    if near is None:
        return [root]
    try:
        relative = Path(os.path.abspath(near)).relative_to(os.path.abspath(root))
    except ValueError:
        return [root]
    parts = relative.parts[:-1] if not Path(os.path.abspath(near)).is_dir() else relative.parts
    return [root.joinpath(*parts[:depth]) for depth in range(len(parts), -1, -1)]


def _folder_pins(root: Path, folder: Path) -> dict[str, Pin]:
    files = _files(folder)
    for name in (*_LOCKS, *_OTHERS, "requirements.txt", *_READMES):  # a new one there changes the answer (the result cache)
        reads.probe(os.path.abspath(folder / name), (folder / name).is_file())
    stamp = tuple((str(p), *_stat(p)) for p in files)
    kept = _KEPT.get(stamp)
    if kept is None:
        found: dict[str, Pin] = {}
        digests: dict[str, str] = {}
        for path in files:
            document = read_document(path, MAX_BYTES)  # read as memlint reads every file (no FIFOs, bounded)
            digests[os.path.abspath(path)] = reads.digest(document.text, document.problem)
            if document.problem is None:
                relative = path.relative_to(root).as_posix()
                for pin in _read(path.name, document.text, relative):
                    earlier = found.get(pin.package)
                    if earlier is None or (_says_no_release(earlier) and not _says_no_release(pin)):
                        # a bare ``transformers`` in the packaging metadata names no release: a
                        # file read later that pins one says which the project runs
                        found[pin.package] = pin
                if path.name in ("setup.py", "pyproject.toml"):
                    own = _own_release if path.name == "setup.py" else _own_project_release
                    for pin in own(path, document.text, relative):
                        found[pin.package] = pin  # the tool's own source: the copy it contains
        kept = _KEPT[stamp] = (found, digests)
    for read_path, digest in kept[1].items():  # the lint result depends on them (the result cache)
        reads.document(read_path, digest)
    return kept[0]


def _stat(path: Path) -> tuple[int, int]:
    try:
        info = path.stat()
        return info.st_mtime_ns, info.st_size
    except OSError:
        return 0, 0


# a requirements file by its name: ``requirements-dev.txt``, ``dev_requirements.txt``, AgentTuning's
# ``deepspeed_reqs.txt`` beside the launcher it installs for
_REQUIREMENTS_NAME = re.compile(r"^(?:.*[_-])?(?:requirements?|reqs?)(?:[_.-].*)?\.(?:txt|in)$")


def _says_no_release(pin: Pin) -> bool:
    return not pin.specifier and not pin.url and not pin.source_tree


def _files(root: Path) -> list[Path]:
    """The dependency files of a project, in the order their word counts: lock files; the
    ``requirements.txt`` (or ``.in``) the project installs from; its packaging metadata; then
    the requirement files of one purpose (``requirements-dev.txt``, ``deepspeed_reqs.txt``) and
    those of ``requirements/``, which LLaMA-Factory keeps one per optional feature
    (``requirements/sglang.txt`` pins ``transformers==4.51.1`` for that backend alone, while
    ``pyproject.toml`` installs ``transformers>=4.51.0,<=5.0.0``)."""
    locks = [root / n for n in _LOCKS if (root / n).is_file()]
    main: list[Path] = []
    purposed: list[Path] = []
    for folder in (root, root / "requirements"):
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            if re.fullmatch(r"requirements.*\.(txt|in)|.*\.txt", name) and (
                    folder != root or _REQUIREMENTS_NAME.search(name)) and (folder / name).is_file():
                is_main = folder == root and name in ("requirements.txt", "requirements.in")
                (main if is_main else purposed).append(folder / name)
    others = [root / n for n in _OTHERS if (root / n).is_file()]
    readmes = [root / n for n in dict.fromkeys(_READMES) if (root / n).is_file()][:1]
    return locks + main + others + purposed + readmes


def _read(name: str, text: str, relative: str) -> list[Pin]:
    try:
        if name in ("uv.lock", "poetry.lock", "pdm.lock"):
            return _toml_lock(text, relative)
        if name == "Pipfile.lock":
            return _pipfile_lock(text, relative)
        if name == "pyproject.toml":
            return _pyproject(text, relative)
        if name == "setup.py":
            return _setup_py(text, relative)
        if name == "setup.cfg":
            return _setup_cfg(text, relative)
        if name.startswith("environment."):
            return _environment(text, relative)
        if name in _READMES:
            return _installed_by_readme(text, relative)
        return _requirement_lines(text, relative)
    except (SyntaxError, ValueError, TypeError, AttributeError, RecursionError, MemoryError, yaml.YAMLError,
            configparser.Error):
        return []  # a broken dependency file pins nothing


def _pin(text: str, relative: str, line: int) -> Pin | None:
    text = text.split("#", 1)[0].strip()
    if not text or text.startswith(("-", "git+", "http:", "https:", "file:")):
        return None
    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        return None
    return Pin(canonicalize_name(requirement.name), requirement.specifier, relative, line, url=bool(requirement.url))


def _line_of(text: str, name: str) -> int:
    pattern = re.compile(rf"^[\s\"'-]*{re.escape(name)}\b", re.I | re.M)
    match = pattern.search(text) or re.search(rf"[\"']{re.escape(name)}", text)  # or inside a one-line list
    return text.count("\n", 0, match.start()) + 1 if match else 0


def _requirement_lines(text: str, relative: str) -> list[Pin]:
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        pin = _pin(line, relative, number)
        if pin is not None:
            out.append(pin)
    return out


# ``pip install ...``, ``pip3 install``, ``python -m pip install``, ``uv pip install``: the rest of
# the command, up to the end of the line, a backquote or the next command
_PIP_INSTALL = re.compile(r"\bpip3?\s+install\b(?P<rest>[^`\n;&|]*)")


def _installed_by_readme(text: str, relative: str) -> list[Pin]:
    """The releases a README's ``pip install`` commands name (``"transformers==4.40.0"``); a
    bare name, an option or a path names none."""
    out = []
    for match in _PIP_INSTALL.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        for word in match["rest"].replace("\\", " ").split():
            word = word.strip("\"'")
            if word.startswith("-") or "/" in word or not any(op in word for op in "=<>~!"):
                continue
            pin = _pin(word, relative, line)
            if pin is not None and pin.specifier:
                out.append(pin)
    return out


def _toml_lock(text: str, relative: str) -> list[Pin]:
    data = tomllib.loads(text)
    out = []
    for package in data.get("package", []):
        name, version = package.get("name"), package.get("version")
        if isinstance(name, str) and isinstance(version, str):
            line = _lock_line(text, name)
            out.append(Pin(canonicalize_name(name), SpecifierSet(f"=={version}"), relative, line))
    return out


def _lock_line(text: str, name: str) -> int:
    match = re.search(rf'^name = "{re.escape(name)}"', text, re.M)
    return text.count("\n", 0, match.start()) + 1 if match else 0


def _pipfile_lock(text: str, relative: str) -> list[Pin]:
    data = json.loads(text)
    out = []
    for section in ("default", "develop"):
        for name, entry in (data.get(section) or {}).items():
            version = entry.get("version") if isinstance(entry, dict) else None
            if isinstance(version, str):
                try:
                    out.append(Pin(canonicalize_name(name), SpecifierSet(version), relative, _line_of(text, f'"{name}')))
                except InvalidSpecifier:
                    continue
    return out


def _pyproject(text: str, relative: str) -> list[Pin]:
    data = tomllib.loads(text)
    project = data.get("project") or {}
    listed = list(project.get("dependencies") or [])
    for group in (project.get("optional-dependencies") or {}).values():
        listed += list(group or [])
    for group in (data.get("dependency-groups") or {}).values():
        listed += [item for item in group or [] if isinstance(item, str)]
    out = [p for item in listed if isinstance(item, str)
           for p in [_pin(item, relative, _line_of(text, item.split(";")[0].strip()[:40]))] if p]
    poetry = ((data.get("tool") or {}).get("poetry") or {})
    tables = [poetry.get("dependencies") or {}] + [g.get("dependencies") or {}
                                                   for g in (poetry.get("group") or {}).values() if isinstance(g, dict)]
    for table in tables:
        for name, constraint in table.items():
            constraint = constraint.get("version") if isinstance(constraint, dict) else constraint
            specifier = _poetry(constraint) if isinstance(constraint, str) else None
            if specifier is not None:
                out.append(Pin(canonicalize_name(name), specifier, relative, _line_of(text, name)))
    return out


def _poetry(constraint: str) -> SpecifierSet | None:
    """Poetry's ``^4.34``/``~4.34``/``4.34.0``/``*`` as a PEP 440 specifier."""
    constraint = constraint.strip()
    match = re.fullmatch(r"([\^~])\s*(\d+)(?:\.(\d+))?(?:\.(\d+))?", constraint)
    try:
        if match:
            caret, major, minor, patch = match.group(1), int(match.group(2)), match.group(3), match.group(4)
            low = ".".join(p for p in (str(major), minor, patch) if p is not None)
            if caret == "^":
                high = f"{major + 1}.0" if major else f"0.{int(minor or 0) + 1}"
            else:
                high = f"{major}.{int(minor or 0) + 1}" if minor is not None else f"{major + 1}.0"
            return SpecifierSet(f">={low},<{high}")
        if re.fullmatch(r"\d+(\.\d+)*", constraint):
            return SpecifierSet(f"=={constraint}")
        return SpecifierSet(constraint.replace(" ", "")) if constraint not in ("*", "") else SpecifierSet()
    except InvalidSpecifier:
        return None


def _setup_py(text: str, relative: str) -> list[Pin]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = ast.parse(text)
    out = []
    for node in ast.walk(module):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.match(
                r"^\s*[A-Za-z0-9][\w.\-]*\s*(\[[^\]]*\])?\s*(==|>=|<=|~=|<|>|!=|@\s*(git\+|https?://))",
                node.value):
            pin = _pin(node.value, relative, node.lineno)
            if pin is not None:
                out.append(pin)
    return out


_VERSION = re.compile(r"^(?:__version__|VERSION)\s*(?::\s*str\s*)?=\s*[\"']([0-9][^\"']*)[\"']", re.M)
_VERSION_FILES = ("__init__.py", "version.py", "_version.py", "__version__.py", "env.py")


def _own_release(path: Path, text: str, relative: str) -> list[Pin]:
    """A ``setup.py`` of the tool itself (``setup(name="llamafactory", version=get_version())``):
    the release of the copy the project contains, from a literal ``version=`` or, when
    ``setup.py`` computes it, from the package source's ``VERSION``/``__version__`` string."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            module = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []  # a broken setup.py names no release
    for node in ast.walk(module):
        if not (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "setup"):
            continue
        given = {k.arg: k.value for k in node.keywords if k.arg}
        name = _constant(module, given.get("name"))
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
            return []
        version = given.get("version")
        release: str | None
        if isinstance(version, ast.Constant) and isinstance(version.value, str):
            release, line = version.value, version.lineno
        else:
            release, line = _source_version(path.parent, name.value), node.lineno
        try:
            return [Pin(canonicalize_name(name.value), SpecifierSet(f"=={release}"), relative, line,
                        source_tree=True)] if release else []
        except InvalidSpecifier:
            return []
    return []


def _own_project_release(path: Path, text: str, relative: str) -> list[Pin]:
    """A ``pyproject.toml`` of the tool itself (LLaMA-Factory since 0.9.4: ``[project] name =
    "llamafactory"``, ``dynamic = ["version"]``, built with hatchling): the release of the copy,
    from its literal ``version`` or the package source's ``VERSION``/``__version__`` string."""
    try:
        project = tomllib.loads(text).get("project")
    except (tomllib.TOMLDecodeError, ValueError):
        return []
    if not isinstance(project, dict) or not isinstance(project.get("name"), str):
        return []
    name = project["name"]
    version = project.get("version")
    release = version if isinstance(version, str) else _source_version(path.parent, name)
    line = next((i for i, row in enumerate(text.splitlines(), 1) if re.match(r"\s*name\s*=", row)), 0)
    try:
        return [Pin(canonicalize_name(name), SpecifierSet(f"=={release}"), relative, line,
                    source_tree=True)] if release else []
    except InvalidSpecifier:
        return []


def _constant(module: ast.Module, value: ast.expr | None) -> ast.expr | None:
    """``value``, or the string a module-level name holds (llm-foundry's ``_PACKAGE_NAME =
    'llm-foundry'`` then ``setup(name=_PACKAGE_NAME)``)."""
    if not isinstance(value, ast.Name):
        return value
    for node in module.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == value.id for t in node.targets) \
                and isinstance(node.value, ast.Constant):
            return node.value
    return value


def _source_version(folder: Path, name: str) -> str | None:
    """The ``VERSION``/``__version__`` string in the package's own source (``src/<name>`` or
    ``<name>`` beside ``setup.py``), looked for in the files that usually hold it, two levels deep."""
    packages = dict.fromkeys((name.replace("-", "_").lower(), name.replace("-", "").lower()))  # llmfoundry
    for base in (folder / sub / package for package in packages for sub in ("src", "")):
        candidates = [base / f for f in _VERSION_FILES] + [
            sub / f for sub in sorted(base.glob("*")) if sub.is_dir() for f in _VERSION_FILES]
        for candidate in candidates:
            if candidate.is_file():
                document = read_document(candidate, MAX_BYTES)
                match = _VERSION.search(document.text) if document.problem is None else None
                if match:
                    return match.group(1)
    return None


def _setup_cfg(text: str, relative: str) -> list[Pin]:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string(text)
    blocks = []
    if parser.has_option("options", "install_requires"):
        blocks.append(parser.get("options", "install_requires"))
    if parser.has_section("options.extras_require"):
        blocks += [value for _, value in parser.items("options.extras_require")]
    return [p for block in blocks for line in block.splitlines()
            for p in [_pin(line, relative, _line_of(text, line.strip()[:40]) if line.strip() else 0)] if p]


def _environment(text: str, relative: str) -> list[Pin]:
    data = yaml.safe_load(text)
    items = (data or {}).get("dependencies") if isinstance(data, dict) else None
    out = []
    for item in items or []:
        if isinstance(item, dict):
            for sub in item.get("pip") or []:
                pin = _pin(str(sub), relative, _line_of(text, str(sub).strip()[:40]))
                if pin:
                    out.append(pin)
        elif isinstance(item, str):
            name = item.split("::")[-1]  # channel::package
            conda = re.fullmatch(r"([A-Za-z0-9][\w.\-]*)\s*=\s*(\d[\w.]*?)(=.*)?", name)
            if conda:  # conda's single '=' is a prefix match: transformers=4.34 is 4.34.*
                version = conda.group(2)
                name = f"{conda.group(1)}=={version}" + (".*" if version.count(".") < 2 else "")
            pin = _pin(name, relative, _line_of(text, item.strip()[:40]))
            if pin:
                out.append(pin)
    return out
