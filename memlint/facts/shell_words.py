"""Shell scripts as simple commands of words, each word with its exact place in the file.

Words come from Python's ``shlex`` (POSIX rules: quotes, escapes, comments); this module only
maps each word back to its character range, joins ``\\``-continued lines, splits commands at
``;``, ``&&``, ``|``, drops redirections, skips here-documents, and expands variables the
script itself sets (``NGPU=8``, ``${BS:-4}``) -- never the environment, never ``$(...)``.
"""

from __future__ import annotations

import ast
import operator
import posixpath
import re
import shlex
from dataclasses import dataclass, field

from memlint.model.diagnostics import LINE_BREAK

_SEPARATORS = {";", ";;", "&", "&&", "|", "||", "|&"}
_REDIRECTIONS = {">", ">>", "<", "&>", "&>>", ">&", "<&", ">|", "<>", "<<<"}
_MAX_JOINED_LINES = 50  # a quoted string may span lines; give up after this many


@dataclass(frozen=True)
class Word:
    text: str  # after quote removal
    raw: str  # as written
    start: int  # offsets in the document text
    end: int


@dataclass
class Command:
    words: list[Word]
    depth: int  # how many if/for/while/case blocks enclose it
    heredoc: tuple[int, int] | None = None  # offsets of its here-document's body (``read VAR <<EOF``)


@dataclass(frozen=True)
class Value:
    """A word's value after variable expansion, and the span that wrote it."""

    text: str
    start: int
    end: int
    # a path relative to the script's own folder (``$(dirname "$0")/configs``,
    # ``memlint.facts.shell_paths``), which does not depend on where the caller stands
    anchored: bool = False


@dataclass
class Variables:
    """Shell variables the script sets, with where each value is written (None: unknown)."""

    known: dict[str, Value | None] = field(default_factory=dict)
    # variables whose value the caller decides, as a template of its arguments: ``{--model}``
    # for ``--model) MODEL="$2"`` in the script's option loop, ``recipes/{--model}/config.yaml``
    # for a value built from it, ``{1}`` for ``$1``
    templates: dict[str, str] = field(default_factory=dict)


def _lexer(text: str) -> shlex.shlex:
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|<>")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    return lexer


def _skip_blank(text: str, position: int, end: int) -> int:
    """Past whitespace and comments: where the next word starts."""
    while position < end:
        char = text[position]
        if char.isspace():
            position += 1
        elif char == "#":
            newline = text.find("\n", position, end)
            position = end if newline < 0 else newline + 1
        else:
            break
    return position


def _words(chunk: str, offset: int) -> list[Word]:
    """The words of one logical line, mapped back to document offsets. Raises ValueError on an
    unclosed quote (the caller joins the next line and retries)."""
    lexer = _lexer(chunk)
    words: list[Word] = []
    position = 0
    while True:
        token = lexer.get_token()
        if token is None or token == lexer.eof:
            break
        start = _skip_blank(chunk, position, len(chunk))
        # shlex keeps where it stopped only in its stream and its (private) pushed-back characters
        consumed = lexer.instream.tell() - len(lexer._pushback_chars)  # type: ignore[attr-defined]
        end = consumed
        if end > start and chunk[end - 1].isspace():
            end -= 1
        raw = chunk[start:end]
        if raw != token and _resplit(raw) != [token]:
            found = chunk.find(token, start)
            if found >= 0:
                start, end, raw = found, found + len(token), token
        words.append(Word(token, raw, offset + start, offset + end))
        position = max(end, consumed)
    return _join_substitutions(words, chunk, offset)


def _open_parentheses(raw: str) -> int:
    return raw.count("(") - raw.count(")")


def _join_substitutions(words: list[Word], chunk: str, offset: int) -> list[Word]:
    """One word for a ``$(...)`` or ``$((...))`` that spans spaces, which ``shlex`` splits:
    dart-math's ``--num_cpu_threads_per_process $(($(nproc) / 2 / n_gpus))`` is one option value,
    not five words of which ``/`` would read as the launched script. A substitution left open at
    the line's end keeps its words as they were."""
    out: list[Word] = []
    index = 0
    while index < len(words):
        word = words[index]
        depth = _open_parentheses(word.raw) if "$(" in word.raw else 0
        last = index
        while depth > 0 and last + 1 < len(words):
            last += 1
            depth += _open_parentheses(words[last].raw)
        if depth == 0 and last > index:
            end = words[last].end
            raw = chunk[word.start - offset:end - offset]
            text = word.text + chunk[word.end - offset:end - offset]
            out.append(Word(text, raw, word.start, end))
        else:
            out.append(word)
            last = index
        index = last + 1
    return out


def _resplit(raw: str) -> list[str] | None:
    try:
        return list(_lexer(raw))
    except ValueError:
        return None


def commands(text: str) -> list[Command]:
    """The simple commands of a shell script, in order."""
    clean = text.replace("\\\r\n", "   ").replace("\\\n", "  ")  # same length: offsets hold
    lines = clean.split("\n")
    starts = []
    offset = 0
    for line in lines:
        starts.append(offset)
        offset += len(line) + 1
    out: list[Command] = []
    depth = 0
    index = 0
    heredoc: str | None = None
    reader: Command | None = None  # the command the here-document is the input of
    body_start = 0
    while index < len(lines):
        if heredoc is not None:
            if lines[index].strip() == heredoc:
                if reader is not None:
                    reader.heredoc = (body_start, max(starts[index] - 1, body_start))
                heredoc = reader = None
            index += 1
            continue
        if lines[index].isspace() or not lines[index]:
            index += 1  # no words (most lines of a docstring blanked around its commands)
            continue
        words = None
        joined = 1
        while words is None and joined <= _MAX_JOINED_LINES and index + joined <= len(lines):
            chunk = "\n".join(lines[index:index + joined])
            try:
                words = _words(chunk, starts[index])
            except ValueError:
                joined += 1
        if words is None:
            index += 1
            continue
        index += joined
        for command in _split(words):
            depth, command_depth = _track_depth(command, depth)
            if command:
                out.append(Command(command, command_depth))
        heredoc = _heredoc_end(words)
        if heredoc is not None and out and index < len(lines):
            reader, body_start = out[-1], starts[index]
    return out


def body_words(text: str, start: int, end: int) -> list[Word]:
    """The words of a here-document's body (continuation lines joined), at their offsets."""
    clean = text[start:end].replace("\\\r\n", "   ").replace("\\\n", "  ")
    try:
        return _words(clean, start)
    except ValueError:
        return []


def body_commands(text: str, start: int, end: int) -> list[list[Word]]:
    """The commands of a string's body (``bash -c "unset X; ${CMD}"``), split where ``;``,
    ``&&`` or ``|`` separate them, redirections left out, each word at its offset."""
    return [command for command in _split(body_words(text, start, end)) if command]


def _split(words: list[Word]) -> list[list[Word]]:
    """At separators; without redirections (``> log 2>&1``, ``&> out.log``)."""
    out: list[list[Word]] = [[]]
    skip_next = False
    for i, word in enumerate(words):
        if skip_next:
            skip_next = False
            continue
        if word.raw in _SEPARATORS:
            out.append([])
            continue
        if word.raw in _REDIRECTIONS or word.raw == "<<":
            current = out[-1]
            if current and current[-1].text.isdigit() and current[-1].end == word.start:
                current.pop()  # the "2" of "2>&1"
            skip_next = True
            continue
        out[-1].append(word)
    return [c for c in out if c]


_OPENERS = {"if", "for", "while", "until", "case", "select"}
_CLOSERS = {"fi", "done", "esac"}
_PREFIXES = {"then", "do", "else", "elif", "{", "}", "!", "time", "exec", "nohup"}


def _track_depth(command: list[Word], depth: int) -> tuple[int, int]:
    """Remove block keywords from the front of a command; (depth after, depth of the command)."""
    while command and command[0].raw in _PREFIXES | _CLOSERS:
        if command[0].raw in _CLOSERS:
            depth = max(depth - 1, 0)
        command.pop(0)
    command_depth = depth
    if command and command[0].raw in _OPENERS:
        depth += 1
        command_depth = depth
        if command[0].raw in ("if", "while", "until"):
            command.clear()  # the condition: nothing to launch there
    if command and command[-1].raw in _CLOSERS:
        depth = max(depth - 1, 0)
    return depth, command_depth


def _heredoc_end(words: list[Word]) -> str | None:
    for i, word in enumerate(words):
        if word.raw == "<<" and i + 1 < len(words):
            return words[i + 1].text.lstrip("-").strip()
    return None


# ----------------------------------------------------------------- expansion

_REFERENCE = re.compile(
    r"\$\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*|[0-9]+)(?:(?P<op>:?[-=])(?P<default>[^}]*))?\}"
    r"|\$(?P<plain>[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!])"
)
_ARITHMETIC = re.compile(r"\$\(\((?P<expr>[^()]*)\)\)")
_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
              ast.Div: operator.floordiv, ast.Mod: operator.mod}


def _arithmetic(expression: str) -> int | None:
    """``$(( 8 * 2 ))`` after variable expansion: integers and + - * / % only."""
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        return None

    def walk(node: ast.AST) -> int | None:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            left, right = walk(node.left), walk(node.right)
            if left is None or right is None or (right == 0 and type(node.op) in (ast.FloorDiv, ast.Div, ast.Mod)):
                return None
            return _OPERATORS[type(node.op)](left, right)
        return None

    return walk(tree)


_BARE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _bare_names(expression: str, variables: Variables) -> str | None:
    """Arithmetic reads a variable without its ``$`` (``$((SLURM_NNODES * GPUS_PER_NODE))``): each
    name replaced by its value; None when one is unknown."""
    unknown = False

    def value(match: re.Match) -> str:
        nonlocal unknown
        known = variables.known.get(match.group(0))
        if known is None or not known.text.strip().isdigit():
            unknown = True
            return "0"
        return known.text.strip()

    replaced = _BARE_NAME.sub(value, expression)
    return None if unknown else replaced


def expand(word: Word, variables: Variables) -> Value | None:
    """The word's value, or None when it depends on something the script does not set.

    A word that is a single variable reference takes the span of the value that set it (the
    ``8`` of ``NGPU=8``, the ``4`` of ``${BS:-4}``); any other word is located at itself.
    """
    if word.raw.startswith("'") or "$" not in word.text:
        return None if "`" in word.text else Value(word.text, word.start, word.end)
    if "$(" in word.text.replace("$((", "") or "`" in word.text:
        return None
    text = word.text
    spans: list[Value] = []
    unknown = False
    anchored = False

    def substitute(match: re.Match) -> str:
        nonlocal unknown, anchored
        name = match.group("braced") or match.group("plain")
        value = variables.known.get(name)
        op = match.group("op")
        if value is not None and not (op and op.startswith(":") and value.text == ""):
            spans.append(value)
            anchored = anchored or (value.anchored and match.start() == 0)
            return value.text
        if op is not None and match.group("braced"):
            default = match.group("default")
            if not default:  # ``${1:-}``: the ``set -u`` idiom for "maybe unset", not a value
                unknown = True
                return ""
            position = word.raw.find(match.group(0))
            inner = position + match.start("default") - match.start(0) if position >= 0 and default else -1
            if inner >= 0 and word.raw[inner:inner + len(default)] == default:
                spans.append(Value(default, word.start + inner, word.start + inner + len(default)))
            if "$" in default:
                unknown = True
            return default
        unknown = True
        return ""

    expanded = _REFERENCE.sub(substitute, text)
    if unknown:
        return None
    if "$((" in expanded:
        match = _ARITHMETIC.fullmatch(expanded)
        inner = _bare_names(match.group("expr"), variables) if match else None
        result = _arithmetic(inner) if inner is not None else None
        if result is None:
            return None
        return Value(str(result), word.start, word.end)
    if "$" in expanded:
        return None
    if anchored:  # ``${REPO_HOME}/src/zero3.json``: a path from the script's own folder
        expanded = posixpath.normpath(expanded)
    whole = _REFERENCE.fullmatch(text.strip('"'))
    if whole is not None and len(spans) == 1:
        return Value(expanded, spans[0].start, spans[0].end, anchored)
    return Value(expanded, word.start, word.end, anchored)


def template(word: Word, variables: Variables) -> str | None:
    """The word's value as a template of the caller's arguments (``recipes/{--model}/{--task}/
    config_{--config}.yaml``), when every variable it reads is set by the script or by the
    caller; None when something else is unknown or nothing comes from the caller."""
    if word.raw.startswith("'") or "$" not in word.text or "`" in word.text:
        return None
    if "$(" in word.text:
        return None
    from_caller = False
    unknown = False

    def substitute(match: re.Match) -> str:
        nonlocal from_caller, unknown
        name = match.group("braced") or match.group("plain")
        value = variables.known.get(name)
        if name in variables.templates and match.group("op") is None:  # before its default
            from_caller = True
            return variables.templates[name]
        if value is not None and match.group("op") is None:
            return value.text
        if name.isdigit() and name != "0" and match.group("op") is None:
            from_caller = True
            return "{" + name + "}"
        unknown = True
        return ""

    text = _REFERENCE.sub(substitute, word.text)
    if unknown or not from_caller or "$" in text:
        return None
    return text


_PLACEHOLDER = re.compile(r"\{(--?[A-Za-z][\w-]*|[1-9])\}")


def instantiate(text: str, arguments: dict[str, str]) -> str | None:
    """A template filled in with a call's arguments (``{--model}`` -> the value the call passes
    with ``--model``, ``{1}`` -> its first positional argument); None when the call lacks one."""
    missing = False

    def fill(match: re.Match) -> str:
        nonlocal missing
        value = arguments.get(match.group(1))
        if value is None:
            missing = True
            return ""
        return value

    filled = _PLACEHOLDER.sub(fill, text)
    return None if missing else filled


def match_template(text: str, path: str) -> dict[str, str] | None:
    """The arguments a call would pass for the template ``text`` to name ``path``
    (``recipes/{--model}/sft/config_{--config}.yaml`` and ``recipes/A/sft/config_v1.yaml`` ->
    ``{--model: A, --config: v1}``); each placeholder takes part of one path segment."""
    parts = []
    names: list[str] = []
    position = 0
    for match in _PLACEHOLDER.finditer(text):
        parts.append(re.escape(text[position:match.start()]))
        if match.group(1) in names:
            parts.append(f"(?P=p{names.index(match.group(1))})")
        else:
            parts.append(f"(?P<p{len(names)}>[^/]+?)")
            names.append(match.group(1))
        position = match.end()
    parts.append(re.escape(text[position:]))
    found = re.fullmatch("".join(parts), path)
    if found is None:
        return None
    return {name: found.group(f"p{i}") for i, name in enumerate(names)}


def placeholders(text: str) -> list[str]:
    """The caller's arguments a template reads (``--model``, ``1``), in order."""
    return [m.group(1) for m in _PLACEHOLDER.finditer(text)]


_OPTION_ARM = re.compile(
    r"^[ \t]*(?P<options>-{1,2}[A-Za-z][\w-]*(?:[ \t]*\|[ \t]*-{1,2}[A-Za-z][\w-]*)*)[ \t]*\)"
    r"(?:[ \t]*\n)?[ \t]*(?:(?P<name>[A-Za-z_]\w*)=[\"']?\$\{?2\}?[\"']?"
    # the other spelling: ``-m | --model ) shift; MODEL=$1 ;;`` (Qwen's finetune scripts)
    r"|shift[ \t]*(?:;[ \t]*|\n[ \t]*)(?P<shifted>[A-Za-z_]\w*)=[\"']?\$\{?1\}?[\"']?)", re.M)


def option_variables(text: str) -> dict[str, str]:
    """The variables a script's own option loop sets from its caller's options: ``--model)
    MODEL="$2"; shift 2 ;;`` (or ``-m | --model ) shift; MODEL=$1 ;;``) in ``while [[ $# -gt 0
    ]]; do case $1 in ...`` -> {MODEL: --model} (the longest spelling of the arm's alternatives)."""
    found: dict[str, str] = {}
    for match in _OPTION_ARM.finditer(text):
        spellings = [s.strip() for s in match.group("options").split("|")]
        found.setdefault(match.group("name") or match.group("shifted"), max(spellings, key=len))
    return found


def assignment(word: Word) -> tuple[str, Word] | None:
    """``NAME=value`` (or ``NAME+=value``, :func:`is_append`) -> (NAME, the value as a word of its
    own, located after the ``=``)."""
    match = re.match(r"([A-Za-z_][A-Za-z0-9_]*)\+?=", word.raw)
    if match is None:
        return None
    name = match.group(1)
    raw_value = word.raw[match.end():]
    text = word.text[match.end() - match.start():]
    return name, Word(text, raw_value, word.start + match.end(), word.end)


def is_append(word: Word) -> bool:
    """``TRAIN_PARAMS+=" --bf16"``: the value is added to the variable's, not put in its place."""
    return re.match(r"[A-Za-z_][A-Za-z0-9_]*\+=", word.raw) is not None


def line_starts(text: str) -> list[int]:
    """Where each line starts, lines broken where positions break them (a lone \r too)."""
    return [0] + [match.end() for match in LINE_BREAK.finditer(text)]
