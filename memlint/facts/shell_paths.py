"""The script's own folder as shell scripts spell it, so that paths built on it can be found.

Launchers locate files from their own folder rather than the caller's working directory:
``SCRIPT_DIR=$(dirname "$0")``, ``ROOT="$( cd "$( dirname "${BASH_SOURCE[0]}" )/.." && pwd )"``
(VLM-R1's ``run_scripts/*.sh``), ``$(dirname "$(realpath "$0")")``, ``$(readlink -f "$0")``.
Such a value is written here as a path relative to the script's folder (``..`` for the folder
above it) and marked *anchored*: it does not depend on where the caller stands. Only these
idioms are evaluated; any other command substitution stays unknown.
"""

from __future__ import annotations

import posixpath
import re
from typing import Callable

# the script's own path: ``$0``, ``${0}``, ``${BASH_SOURCE[0]}``, ``$BASH_SOURCE``
_SELF = re.compile(r"\$(?:0|\{0\}|\{BASH_SOURCE(?:\[0\])?\}|BASH_SOURCE)")
_VARIABLE = re.compile(r"\$\{([A-Za-z_]\w*)\}|\$([A-Za-z_]\w*)")
# what a ``$( ... )`` may throw away without changing its value
_REDIRECTION = re.compile(r"\s*(?:&>>?|[12]?>>?)\s*/dev/null|\s*2>&1")
_OPTIONS = re.compile(r"^(?:-[A-Za-z]+\s+|--\s+)*")

#: a variable's anchored value: (the path relative to the script's folder, whether it names the
#: script file itself rather than a folder), or None when the variable holds no anchored path
Lookup = Callable[[str], "tuple[str, bool] | None"]


def anchored_path(text: str, script_name: str, lookup: Lookup) -> tuple[str, bool] | None:
    """The value of ``text`` (an assignment's value as written, quotes included) as a path
    relative to the script's folder, and whether it is the script file; None when ``text`` is
    not built on the script's own path."""
    value = _expression(text.strip(), script_name, lookup, 0)
    if value is None:
        return None
    path, is_file = value
    return (path if is_file else posixpath.normpath(path)), is_file


def _expression(text: str, script_name: str, lookup: Lookup, depth: int) -> tuple[str, bool] | None:
    """A word: a base (``$(...)``, ``$0``, an anchored variable), then a literal tail (``/..``)."""
    if depth > 6:
        return None
    text = _unquote(text)
    base: tuple[str, bool] | None
    if text.startswith("$(") and not text.startswith("$(("):
        end = _closing(text, 1)
        if end is None:
            return None
        base = _command(text[2:end], script_name, lookup, depth + 1)
        rest = text[end + 1:]
    elif text.startswith("`"):
        end = text.find("`", 1)
        if end < 0:
            return None
        base = _command(text[1:end], script_name, lookup, depth + 1)
        rest = text[end + 1:]
    else:
        self_match = _SELF.match(text)
        variable = None if self_match else _VARIABLE.match(text)
        if self_match:
            base, rest = (script_name, True), text[self_match.end():]
        elif variable:
            base, rest = lookup(variable.group(1) or variable.group(2)), text[variable.end():]
        else:
            return None
    if base is None:
        return None
    if not rest:
        return base
    if base[1] or not rest.startswith("/") or re.search(r"[$`'\s]", rest):
        return None  # ``$0/x`` names nothing; anything but a literal tail is not a path here
    return posixpath.normpath(base[0] + rest), False


def _command(command: str, script_name: str, lookup: Lookup, depth: int) -> tuple[str, bool] | None:
    """``dirname X``, ``realpath X``, ``readlink -f X``, ``cd X && pwd``: what each prints."""
    command = _REDIRECTION.sub("", command).strip()
    changed = re.fullmatch(r"cd\s+(.+?)\s*(?:&&|;)\s*pwd(?:\s+-[LP])?", command, re.S)
    if changed:
        argument = _OPTIONS.sub("", changed.group(1).strip())
        found = _expression(argument, script_name, lookup, depth)
        return None if found is None or found[1] else found
    name, _, argument = command.partition(" ")
    argument = _OPTIONS.sub("", argument.strip())
    if not argument:
        return None
    if name == "dirname":
        found = _expression(argument, script_name, lookup, depth)
        if found is None:
            return None
        path, is_file = found
        return ("." if is_file and "/" not in path else posixpath.dirname(path) if is_file
                else posixpath.normpath(path + "/..")), False
    if name == "realpath" or (name == "readlink" and re.match(r"-[a-z]*[fem]", command.partition(" ")[2].strip())):
        return _expression(argument, script_name, lookup, depth)
    return None


def _unquote(text: str) -> str:
    """``text`` without its double quotes (those outside any ``$( ... )``)."""
    out = []
    index = 0
    while index < len(text):
        if text.startswith("$(", index):
            end = _closing(text, index + 1)
            if end is None:
                return text
            out.append(text[index:end + 1])
            index = end + 1
            continue
        if text[index] != '"':
            out.append(text[index])
        index += 1
    return "".join(out).strip()


def _closing(text: str, opening: int) -> int | None:
    """The index of the parenthesis that closes the one at ``opening``."""
    depth = 0
    for index in range(opening, len(text)):
        if text[index] == "(":
            depth += 1
        elif text[index] == ")":
            depth -= 1
            if depth == 0:
                return index
    return None


# an assignment on a line of its own whose value may be one of the idioms above
_ASSIGNMENT = re.compile(r"^[ \t]*(?:(?:export|local|readonly|declare)[ \t]+)?([A-Za-z_]\w*)=(.*\S)[ \t]*$", re.M)


def anchored_assignments(text: str, script_name: str) -> dict[int, tuple[str, str, bool]]:
    """Offset of each assignment line's name -> (name, anchored path, is the script file), in the
    order the script sets them, each value read with the variables set before it."""
    known: dict[str, tuple[str, bool]] = {}
    out: dict[int, tuple[str, str, bool]] = {}
    for match in _ASSIGNMENT.finditer(text):
        value = match.group(2).split(" #", 1)[0].rstrip()
        if "$" not in value and "`" not in value:
            known.pop(match.group(1), None)
            continue
        found = anchored_path(value, script_name, known.get)
        if found is None:
            known.pop(match.group(1), None)
            continue
        known[match.group(1)] = found
        out[match.start(1)] = (match.group(1), found[0], found[1])
    return out
