"""The files a shell script writes itself, before a given place in it.

Launchers often write the config they launch a moment before (Online-RLHF's ``run_loop.sh``:
``cat <<EOT > dpo_config.yaml`` with the iteration's settings, then ``accelerate launch ...
run_dpo.py dpo_config.yaml``). Such a file is not committed, and it is not missing: the run makes
it. What counts as a write: an output redirection (``>``, ``>>``, ``>|``, ``&>``, also in front of
a here-document), ``tee``, and the destination of ``cp``/``mv``/``ln``. Only paths written as
plain words are matched; a path built from a variable the script sets is matched as the script
spells it (``$OUT/ds.json`` against ``$OUT/ds.json``).

A file the script copies into place (SPPO's ``pipeline.sh``: ``cp recipes/config_full.yaml
"$new_config_file"`` then ``accelerate launch run_sppo.py "$new_config_file"``) holds its
source's content when the launch reads it: ``copied_from`` names that source.
"""

from __future__ import annotations

import functools
import posixpath
import re
import shlex
from typing import Iterator

_REDIRECT = re.compile(r"(?:^|[^<>&0-9])(?:[12]?>>?|>\||&>>?)\s*(?P<target>\"[^\"\n]+\"|'[^'\n]+'|[^\s;|&<>()]+)")
_COPY = frozenset({"cp", "mv", "ln", "install"})
_COPY_COMMAND = re.compile(r"(?:^|[\s;&|])(?:cp|install)\s")  # a line worth splitting into commands


def _normal(path: str) -> str:
    path = path.strip("\"'")
    return posixpath.normpath(path[2:] if path.startswith("./") else path)


def _commands(line: str) -> Iterator[list[str]]:
    """The words of each command on one line (split at pipes, ``&&``, ``||`` and ``;``)."""
    for part in re.split(r"\s*(?:\|\|?|&&|;)\s*", line):
        try:
            words = shlex.split(part, comments=True)
        except ValueError:
            continue
        if words:
            yield words


def _operands(words: list[str]) -> list[str]:
    return [w for w in words[1:] if not w.startswith("-")]


def _command_targets(line: str) -> list[str]:
    """``tee`` and ``cp``/``mv``/``ln`` destinations of the commands on one line."""
    out: list[str] = []
    for words in _commands(line):
        operands = _operands(words)
        if words[0] == "tee":
            out += operands
        elif words[0] in _COPY and len(operands) >= 2:
            out.append(operands[-1])
    return out


# ``config_json="./ds_config.json"``: a variable the script sets to a literal path
_LITERAL_ASSIGNMENT = re.compile(r"""^(?:export\s+|local\s+|readonly\s+)?(?P<name>[A-Za-z_]\w*)="""
                                 r"""(?P<value>"[^"$`\n]*"|'[^'\n]*'|[^\s;$`'"&|<>()]+)\s*(?:#.*)?$""")
_VARIABLE = re.compile(r"\$\{?([A-Za-z_]\w*)\}?")


def written_before(text: str, line: int) -> set[str]:
    """The normalised paths the script writes in the lines before ``line`` (1-based), as it
    spells them and, where a variable the script set to a literal names the file
    (Megatron-DeepSpeed's ``config_json="./ds_config.json"; cat <<EOT > $config_json``), with its
    value put in."""
    out: set[str] = set()
    literals: dict[str, str] = {}
    for written in text.splitlines()[:max(line - 1, 0)]:
        stripped = written.strip()
        if not stripped or stripped.startswith("#"):
            continue
        assigned = _LITERAL_ASSIGNMENT.match(stripped)
        if assigned is not None:
            literals[assigned.group("name")] = assigned.group("value").strip("\"'")
        targets = [m.group("target") for m in _REDIRECT.finditer(stripped)] + _command_targets(stripped)
        for target in targets:
            out.add(_normal(target))
            if "$" in target:
                out.add(_normal(_VARIABLE.sub(lambda m: literals.get(m.group(1), m.group(0)), target.strip("\"'"))))
    out.discard("/dev/null")
    return out


def writes(text: str, line: int, path: str) -> bool:
    """Does the script write ``path``, as it spells it, in the lines before ``line``?"""
    return _normal(path) in written_before(text, line)


def copied_from(text: str, line: int, path: str) -> str | None:
    """The source of the last ``cp``/``install`` before ``line`` (1-based) whose destination is
    ``path`` as the script spells it; None when none is, or the source is itself a variable."""
    target = _normal(path)
    source = None
    for at, destination, copied in _copies(text):
        if at >= line:
            break
        if destination == target:
            source = copied
    return source


@functools.lru_cache(maxsize=16)
def _copies(text: str) -> tuple[tuple[int, str, str | None], ...]:
    """Each two-operand ``cp``/``install`` of a script, once: (line, destination, source or None
    when the source is a variable). A launcher asks once per positional word of each launch."""
    out = []
    for number, written in enumerate(text.splitlines(), start=1):
        stripped = written.strip()
        if stripped.startswith("#") or not _COPY_COMMAND.search(stripped):
            continue
        for words in _commands(stripped):
            operands = _operands(words)
            if words[0] in ("cp", "install") and len(operands) == 2:
                out.append((number, _normal(operands[1]), None if "$" in operands[0] else _normal(operands[0])))
    return tuple(out)
