"""Reading the files memlint lints, safely, and telling what kind of document each is.

memlint never executes what it reads. A file it cannot read as text (binary, invalid UTF-8,
larger than the limit, a FIFO or device, unreadable) becomes a document with a ``problem``,
which the engine reports as a diagnostic; the rest of the run goes on.
"""

from __future__ import annotations

import io
import os
import stat
import tokenize
from dataclasses import dataclass

from memlint.documents import reads

MAX_FILE_BYTES = 4 * 1024 * 1024  # training scripts and configs are far smaller

PYTHON_SUFFIXES = (".py", ".pyi")
JSON_SUFFIXES = (".json",)
YAML_SUFFIXES = (".yaml", ".yml")
SHELL_SUFFIXES = (".sh", ".bash", ".slurm", ".sbatch")
MARKDOWN_SUFFIXES = (".md", ".markdown")  # read for the launch commands in their code blocks
MAKEFILE_SUFFIXES = (".mk",)  # and the names below: read for the launch commands in their recipes
MAKEFILE_NAMES = ("makefile", "gnumakefile")
LINTED_SUFFIXES = PYTHON_SUFFIXES + JSON_SUFFIXES + YAML_SUFFIXES + SHELL_SUFFIXES + MARKDOWN_SUFFIXES + MAKEFILE_SUFFIXES


def is_linted(path: str | os.PathLike) -> bool:
    """Does memlint read this file (by its suffix, or a Makefile by its name)?"""
    name = os.path.basename(os.fspath(path)).lower()
    return name.endswith(LINTED_SUFFIXES) or name in MAKEFILE_NAMES


@dataclass(frozen=True)
class Document:
    path: str  # as given (relative to the working directory) or absolute
    text: str
    syntax: str  # "python", "json", "yaml", "shell", "markdown", "makefile", "other"
    problem: str | None = None  # why the text could not be read (text is then "")


def syntax_of(path: str) -> str:
    lower = path.lower()
    if lower.endswith(PYTHON_SUFFIXES):
        return "python"
    if lower.endswith(JSON_SUFFIXES):
        return "json"
    if lower.endswith(YAML_SUFFIXES):
        return "yaml"
    if lower.endswith(SHELL_SUFFIXES):
        return "shell"
    if lower.endswith(MARKDOWN_SUFFIXES):
        return "markdown"
    if lower.endswith(MAKEFILE_SUFFIXES) or os.path.basename(lower) in MAKEFILE_NAMES:
        return "makefile"
    return "other"


def decode(data: bytes, path: str) -> tuple[str, str | None]:
    """Text of a file's bytes, or the reason it is not a text file memlint can lint.

    Configs and scripts are UTF-8, except Python that declares another encoding in a PEP 263
    ``# -*- coding: latin-1 -*-`` line, which Python reads in that encoding (and so does memlint).
    A file that opens with a UTF-16 byte-order mark (what Windows PowerShell's ``>`` and
    ``Out-File`` write) is text: a README's commands are read; any other file is named as UTF-16,
    which Python, bash and the training tools do not read, rather than as binary."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        if syntax_of(path) == "markdown":
            try:
                return data.decode("utf-16"), None
            except UnicodeDecodeError as error:
                return "", f"not valid UTF-16 (byte {error.start})"
        return "", "UTF-16 text (it opens with a UTF-16 byte-order mark, as Windows PowerShell writes files): " \
                   "Python, bash and the training tools read UTF-8; save it as UTF-8"
    if b"\x00" in data[:8192]:
        return "", "binary file (contains NUL bytes)"
    encoding = "utf-8-sig"
    if syntax_of(path) == "python" and b"coding" in b"\n".join(data.split(b"\n", 2)[:2]):
        try:
            declared, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        except SyntaxError as error:  # an unknown codec, or a cookie that contradicts a BOM
            return "", f"cannot decode: {error.msg if hasattr(error, 'msg') else error}"
        if declared not in ("utf-8", "utf-8-sig"):
            encoding = declared
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as error:
        name = "UTF-8" if encoding == "utf-8-sig" else encoding
        return "", f"not valid {name} (byte {error.start}: {data[error.start:error.start + 1]!r})"
    return text, None


def read_document(path: str | os.PathLike, max_bytes: int = MAX_FILE_BYTES) -> Document:
    """Read a file without following it into devices, FIFOs or unbounded data. While a lint
    result is being recorded (``memlint.documents.reads``), the read counts as one of its inputs."""
    document = _read(str(path), max_bytes)
    if reads.active():
        reads.document(os.path.abspath(document.path), reads.digest(document.text, document.problem))
    return document


def _dangling(name: str) -> str | None:
    """What a symbolic link whose target is gone points at (EVA's ``docs/tutorials/
    getting_started.md -> ../../GETTING_STARTED.md``, a file the repository no longer has)."""
    try:
        if not os.path.islink(name) or os.path.exists(name):
            return None
        return f"a symbolic link to `{os.readlink(name)}`, which does not exist"
    except OSError:
        return None


def _read(name: str, max_bytes: int) -> Document:
    syntax = syntax_of(name)
    try:
        info = os.stat(name)  # follows a symlink once; loops raise OSError (ELOOP)
    except OSError as error:
        return Document(name, "", syntax, f"cannot read: {_dangling(name) or error.strerror or error}")
    if not stat.S_ISREG(info.st_mode):
        return Document(name, "", syntax, "not a regular file (FIFO, device or directory)")
    if info.st_size > max_bytes:
        return Document(name, "", syntax, f"too large to lint ({info.st_size:,} bytes; limit {max_bytes:,})")
    try:
        with open(name, "rb") as handle:
            data = handle.read(max_bytes + 1)
    except OSError as error:
        return Document(name, "", syntax, f"cannot read: {error.strerror or error}")
    if len(data) > max_bytes:
        return Document(name, "", syntax, f"too large to lint (more than {max_bytes:,} bytes)")
    text, problem = decode(data, name)
    return Document(name, text, syntax, problem)


def document_from_text(path: str, text: str) -> Document:
    """An editor buffer (unsaved text) as a document."""
    return Document(path, text, syntax_of(path))
