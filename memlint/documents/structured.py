"""One position-keeping loader for JSON and YAML configs.

Every key and value keeps its exact range, so a schema error or a finding points at the
offending ``"stage": 5`` and not at line 1. Defects of the file itself (bad syntax, duplicate
keys, tabs used as YAML indentation, several YAML documents in one file, tags that
``yaml.safe_load`` refuses) become :class:`Problem`\\ s at the place they occur.

YAML goes through PyYAML's parser as a stream of events (libyaml's when it is installed, the
pure-Python one otherwise); a small iterative composer turns the events into plain values.
Nothing is ever constructed from a tag, nothing recurses, and two budgets bound the work:
nesting depth, and the number of values after alias expansion — so an alias bomb ("billion
laughs") or a 10,000-level document is refused in milliseconds instead of exhausting memory
or the stack. Aliases share the anchored value instead of copying it. Newer libyaml releases
(the C scanner of PyYAML >= 6.0.3) refuse flow nesting past 1,000 levels themselves, before
any event reaches the composer; that refusal is read as the depth budget's, so a document
gets the same problem whichever PyYAML is installed.

Numbers no training tool can take — an integer that does not fit in 64 bits (one of over
4,300 digits even makes Python's ``json.load`` and ``yaml.safe_load`` raise), a literal like
``1e999`` that overflows a float — are ``out-of-range`` problems at the value, which keeps
the text as written instead of a number nothing downstream could compute with.

JSON values come from the ``json`` module (exact JSON semantics, exact error positions); their
ranges and duplicate keys from the same event composer, since a JSON document is a YAML flow
document (tabs, which are JSON whitespace, are read as spaces for that pass).
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass, field, replace
from typing import Any, Iterator, cast

import yaml

from memlint.model.diagnostics import LINE_BREAK, Position, Range, split_lines

MAX_NODES = 200_000  # values after alias expansion; a real config has hundreds
MAX_DEPTH = 64  # nesting levels; real configs use fewer than ten

Path_ = tuple[Any, ...]  # keys and indices from the root

# Problem kinds that mean the tools refuse the file (its value cannot be trusted)
FATAL_KINDS = ("syntax", "too-large", "multiple-documents", "unsupported-tag")

# The integers a training setting can hold: PyTorch, DeepSpeed and CUDA take 64-bit integers.
SANE_INTEGERS = range(-2**63, 2**64)

_Loader = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader
_YAML = "tag:yaml.org,2002:"
_SCALAR_TAGS = {f"{_YAML}{t}" for t in ("str", "int", "float", "bool", "null", "timestamp")}
# Tags ``yaml.safe_load`` understands; any other tag makes it raise.
_SAFE_TAGS = _SCALAR_TAGS | {f"{_YAML}{t}" for t in ("map", "seq", "set", "omap", "pairs", "binary", "merge", "value")}
# HyperPyYAML's tags (SpeechBrain, CosyVoice, WeNet: ``!new:torch.nn.Linear``, ``!ref <lr>``): the
# project reads such a file with ``load_hyperpyyaml``, which builds the objects; no training tool
# memlint reads takes it, so the tags are the project's business (kept as text, never constructed)
_HYPERPYYAML_TAGS = re.compile(r"^!(?:new|name|module|apply|applyref|include):|^!(?:ref|copy|tuple|placeholder)$")


@dataclass(frozen=True)
class Problem:
    """A defect of the file itself (not of its meaning)."""

    # "syntax", "duplicate-key", "too-large", "multiple-documents", "unsupported-tag", "out-of-range"
    kind: str
    message: str
    range: Range
    tag: str | None = None  # an "unsupported-tag" problem's tag


@dataclass(eq=False)  # compared by identity: rules cache per-document results on it
class Structured:
    """A JSON or YAML config as loaded: its value, the ranges of every key and value (for
    findings and fixes), and the problems the loader met."""

    value: Any = None
    problems: list[Problem] = field(default_factory=list)
    value_ranges: dict[Path_, Range] = field(default_factory=dict)
    key_ranges: dict[Path_, Range] = field(default_factory=dict)
    # top-level keys read before a syntax error stopped the loader (to tell what the file was)
    partial_keys: tuple[str, ...] = ()
    syntax: str = "yaml"
    text: str = field(default="", repr=False)

    @property
    def ok(self) -> bool:
        """Can the value be trusted (the tools would read the file)?"""
        return not any(p.kind in FATAL_KINDS for p in self.problems)

    def range_of(self, path: Path_, key: bool = False) -> Range:
        """The range of the value (or of the key) at ``path``; the nearest ancestor's key when
        the path does not exist (a missing key is reported on its parent, a missing top-level
        key on the first key of the file)."""
        path = tuple(path)
        requested = path
        while True:
            table = self.key_ranges if key else self.value_ranges
            if path in table:
                return table[path]
            if not path:
                return self.value_ranges.get((), Range.file_start()) if requested == () else self.first_key_range()
            if key and path in self.value_ranges:
                return self.value_ranges[path]
            path = path[:-1]
            key = True

    def has(self, path: Path_) -> bool:
        """Is there a value at ``path``?"""
        marker = object()
        return self.get(*path, default=marker) is not marker

    def get(self, *path: Any, default: Any = None) -> Any:
        value = self.value
        for part in path:
            if isinstance(value, dict) and part in value:
                value = value[part]
            elif isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value):
                value = value[part]
            else:
                return default
        return value

    def source(self, where: Range) -> str:
        """The text of the file inside ``where``."""
        lines = split_lines(self.text, keepends=True)
        if not lines or where.start.line < 1 or where.end.line > len(lines):
            return ""
        if where.start.line == where.end.line:
            return lines[where.start.line - 1][where.start.column:where.end.column]
        middle = "".join(lines[where.start.line:where.end.line - 1])
        return lines[where.start.line - 1][where.start.column:] + middle + lines[where.end.line - 1][:where.end.column]

    def first_key_range(self) -> Range:
        """The first top-level key (where findings about the whole file go)."""
        if isinstance(self.value, dict):
            for key in self.value:
                if (key,) in self.key_ranges:
                    return self.key_ranges[(key,)]
        return Range.file_start()

    def items(self) -> Iterator[tuple[Path_, Any]]:
        """Every (path, value) pair, depth first (no recursion)."""
        stack: list[tuple[Path_, Any]] = [((), self.value)]
        while stack:
            path, value = stack.pop()
            yield path, value
            if isinstance(value, dict):
                stack.extend((path + (k,), v) for k, v in reversed(list(value.items())))
            elif isinstance(value, list):
                stack.extend((path + (i,), v) for i, v in reversed(list(enumerate(value))))


def _position(mark: Any) -> Position:
    return Position(mark.line + 1, mark.column)


def _one_char(position: Position) -> Range:
    return Range(position, Position(position.line, position.column + 1))


# YAML also breaks lines at NEL, LS and PS (and so count PyYAML's and libyaml's marks); editors,
# libcst and the Language Server Protocol do not: positions are moved to editor lines at the end.
_YAML_BREAK = re.compile("\r\n|\r|\n|\x85|\u2028|\u2029")
_YAML_ONLY_BREAK = re.compile("[\x85\u2028\u2029]")


def _yaml_position_at(text: str, offset: int) -> Position:
    breaks = list(_YAML_BREAK.finditer(text[:offset]))
    return Position(len(breaks) + 1, offset - (breaks[-1].end() if breaks else 0))


class _EditorLines:
    """Moves a position from YAML's lines to the editor's, through its character offset."""

    def __init__(self, text: str) -> None:
        self.yaml_starts = [0] + [m.end() for m in _YAML_BREAK.finditer(text)]
        self.editor_starts = [0] + [m.end() for m in LINE_BREAK.finditer(text)]

    def position(self, position: Position) -> Position:
        if not 1 <= position.line <= len(self.yaml_starts):
            return position
        offset = self.yaml_starts[position.line - 1] + position.column
        line = bisect.bisect_right(self.editor_starts, offset) - 1
        return Position(line + 1, offset - self.editor_starts[line])

    def range(self, where: Range) -> Range:
        return Range(self.position(where.start), self.position(where.end))


def _to_editor_lines(result: Structured, text: str) -> None:
    if not _YAML_ONLY_BREAK.search(text):
        return
    lines = _EditorLines(text)
    result.value_ranges = {path: lines.range(where) for path, where in result.value_ranges.items()}
    result.key_ranges = {path: lines.range(where) for path, where in result.key_ranges.items()}
    result.problems = [replace(p, range=lines.range(p.range)) for p in result.problems]


class _Refused(Exception):
    """The document is refused: a budget ran out or the tools would reject it."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.message)
        self.problem = problem


@dataclass
class _Anchored:
    value: Any
    size: int  # values it stands for once expanded


@dataclass
class _Frame:
    """An open mapping or sequence."""

    is_map: bool
    path: Path_
    value: Any
    start: Position
    flow: bool
    anchor: str | None
    size: int = 1
    last_end: Position | None = None
    # mappings only: the key read and waiting for its value
    key: Any = None
    key_range: Range | None = None
    has_key: bool = False
    merges: list[tuple[Any, Range, Range]] = field(default_factory=list)
    first_seen: dict[str, Range] = field(default_factory=dict)

    def child_path(self) -> Path_:
        if self.is_map:
            return self.path + (self.key,)
        return self.path + (len(self.value),)


class _Composer:
    """Builds plain values from a YAML event stream, iteratively, within the budgets."""

    def __init__(self, text: str, result: Structured, keep_values: bool, key_text=None) -> None:
        self.text = text
        self.result = result
        self.keep_values = keep_values
        self.key_text = key_text or (lambda key: key)
        self.loader = _Loader(text)
        self.stack: list[_Frame] = []
        self.anchors: dict[str, _Anchored] = {}
        self.open_anchors: set[str] = set()
        self.count = 0
        self.documents = 0
        self.root: Any = None

    def run(self) -> None:
        try:
            while self.loader.check_event():
                event = self.loader.get_event()
                if self.handle(event):
                    break
        finally:
            self.loader.dispose()

    # ------------------------------------------------------------------ events

    def handle(self, event: yaml.Event) -> bool:
        """Process one event; True to stop reading."""
        if isinstance(event, yaml.DocumentStartEvent):
            self.documents += 1
            if self.documents > 1:
                start = _position(event.start_mark)
                self.result.problems.append(Problem(
                    "multiple-documents",
                    "this file holds more than one YAML document (`---`); the training tools read "
                    "it with yaml.safe_load, which refuses several documents: keep one per file",
                    Range(start, Position(start.line, start.column + 3)),
                ))
                return True
            return False
        if isinstance(event, yaml.ScalarEvent):
            self._check_tag(event.tag, event, scalar=True)
            value = self.scalar(event)
            self.done(value, Range(_position(event.start_mark), _position(event.end_mark)), event.anchor, 1, event)
        elif isinstance(event, yaml.AliasEvent):
            self.alias(event)
        elif isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            self.open(event)
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            self.close(event)
        return False

    def open(self, event: yaml.CollectionStartEvent) -> None:
        self._check_tag(event.tag, event, scalar=False)
        is_map = isinstance(event, yaml.MappingStartEvent)
        if len(self.stack) >= MAX_DEPTH:
            raise _Refused(_too_deep(_position(event.start_mark)))
        path = self._path_for_child()
        frame = _Frame(is_map, path if path is not None else (_KEY_PATH,), {} if is_map else [],
                       _position(event.start_mark), bool(event.flow_style), event.anchor)
        if event.anchor:
            self.open_anchors.add(event.anchor)
        self.stack.append(frame)
        self._count(1, event)

    def close(self, event: yaml.Event) -> None:
        frame = self.stack.pop()
        if frame.is_map:
            self._apply_merges(frame)
        end = _position(event.end_mark) if frame.flow or frame.last_end is None else frame.last_end
        if frame.anchor:
            self.open_anchors.discard(frame.anchor)
        self._attach(frame.value, Range(frame.start, end), frame.anchor, frame.size)

    def alias(self, event: yaml.AliasEvent) -> None:
        where = Range(_position(event.start_mark), _position(event.end_mark))
        name = cast(str, event.anchor)  # an alias always names its anchor
        if name in self.open_anchors:
            raise _Refused(Problem("syntax", f"invalid YAML: alias *{name} refers to the node that contains it", where))
        anchored = self.anchors.get(name)
        if anchored is None:
            raise _Refused(Problem("syntax", f"invalid YAML: alias *{name} has no anchor &{name} before it", where))
        self.done(anchored.value, where, None, anchored.size, event)

    def done(self, value: Any, where: Range, anchor: str | None, size: int, event: yaml.Event) -> None:
        self._count(size, event)
        self._attach(value, where, anchor, size)

    # ------------------------------------------------------------------ building

    def _path_for_child(self) -> Path_ | None:
        """The path of the node starting now, or None when it is a mapping key."""
        if not self.stack:
            return ()
        parent = self.stack[-1]
        if parent.is_map and not parent.has_key:
            return None
        return parent.child_path()

    def _attach(self, value: Any, where: Range, anchor: str | None, size: int) -> None:
        if anchor:
            self.anchors[anchor] = _Anchored(value, size)
        if not self.stack:
            self.root = value
            self.result.value_ranges[()] = where
            return
        parent = self.stack[-1]
        parent.size += size
        parent.last_end = where.end
        if not parent.is_map:
            self.result.value_ranges[parent.path + (len(parent.value),)] = where
            parent.value.append(value)
            return
        if not parent.has_key:
            parent.key, parent.key_range, parent.has_key = self._key(value, where), where, True
            return
        key, key_range = parent.key, parent.key_range
        assert key_range is not None  # set with the key
        parent.has_key = False
        if key is _MERGE:
            parent.merges.append((value, key_range, where))
            return
        path = parent.path + (key,)
        if key in parent.first_seen:
            first = parent.first_seen[key]
            self.result.problems.append(Problem(
                "duplicate-key",
                f"duplicate key {key!r} (first set on line {first.start.line}): the last value "
                "wins silently and the first is ignored",
                key_range,
            ))
        else:
            parent.first_seen[key] = key_range
        self.result.key_ranges[path] = key_range
        self.result.value_ranges[path] = where
        parent.value[key] = value

    def _key(self, value: Any, where: Range) -> Any:
        """Keys are strings: the scalar as written (``1:`` -> "1", ``yes:`` -> "yes")."""
        if isinstance(value, _KeyText):
            return _MERGE if value.merge else self.key_text(str(value))
        if isinstance(value, str):
            return value
        return self._slice(where)  # a collection or aliased value used as a key

    def _apply_merges(self, frame: _Frame) -> None:
        """``<<: *base`` (or a list of them): keys not set explicitly come from the bases,
        earlier bases first, as yaml.safe_load does."""
        for value, key_range, value_range in frame.merges:
            for source in value if isinstance(value, list) else [value]:
                if not isinstance(source, dict):
                    self.result.problems.append(Problem(
                        "syntax", "invalid YAML: `<<` merges only mappings (or a list of them)", value_range
                    ))
                    continue
                for k, v in source.items():
                    if k not in frame.value:
                        frame.value[k] = v
                        self.result.key_ranges[frame.path + (k,)] = key_range
                        self.result.value_ranges[frame.path + (k,)] = value_range

    def scalar(self, event: yaml.ScalarEvent) -> Any:
        """The value of a scalar as yaml.safe_load gives it; mapping keys stay text."""
        parent = self.stack[-1] if self.stack else None
        is_key = parent is not None and parent.is_map and not parent.has_key
        if event.tag in (None, "!"):
            tag = self.loader.resolve(yaml.ScalarNode, event.value, event.implicit)
        else:
            tag = event.tag
        if is_key:
            return _KeyText(event.value, merge=tag == f"{_YAML}merge" and not event.style)
        if not self.keep_values or tag not in _SCALAR_TAGS:
            return event.value
        # types-PyYAML types an event's marks as the pure or the C parser's, a node's as the pure one's
        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)  # type: ignore[arg-type]
        try:
            value = yaml.SafeLoader.yaml_constructors[tag](self.loader, node)
        except Exception:  # an explicit tag its constructor cannot read fails
            # any way (`!!float ""`: IndexError, `!!bool x`: KeyError, `!!timestamp x`:
            # AttributeError), and so does an integer of over 4,300 digits (ValueError)
            value = event.value
        if tag in (f"{_YAML}int", f"{_YAML}float"):
            message = _insane_number(event.value, value, tag == f"{_YAML}int")
            if message is not None:
                where = Range(_position(event.start_mark), _position(event.end_mark))
                self.result.problems.append(Problem("out-of-range", message, where))
                return event.value
        return value.isoformat() if hasattr(value, "isoformat") else value

    def _check_tag(self, tag: str | None, event: yaml.Event, scalar: bool) -> None:
        if tag in (None, "!") or tag in _SAFE_TAGS or _HYPERPYYAML_TAGS.match(tag):
            return
        where = Range(_position(event.start_mark), _position(event.end_mark if scalar else event.start_mark))
        if not scalar:
            where = _one_char(where.start)
        self.result.problems.append(Problem(
            "unsupported-tag",
            f"tag {tag!r} is not plain YAML: yaml.safe_load, which the training tools use, refuses "
            "it (and memlint never constructs objects from tags); write the value without the tag",
            where,
            tag,
        ))

    def _count(self, size: int, event: yaml.Event) -> None:
        self.count += size
        if self.count > MAX_NODES:
            raise _Refused(Problem(
                "too-large",
                f"the document expands to more than {MAX_NODES:,} values (an alias bomb or a "
                "generated file, not a config); not read",
                _one_char(_position(event.start_mark)),
            ))

    def _slice(self, where: Range) -> str:
        lines = split_lines(self.text)
        if where.start.line == where.end.line and 0 < where.start.line <= len(lines):
            return lines[where.start.line - 1][where.start.column:where.end.column]
        return f"<key at line {where.start.line}>"

    def top_level_keys(self) -> tuple[str, ...]:
        """Keys of the root mapping read so far (also after an error)."""
        if isinstance(self.root, dict):
            return tuple(k for k in self.root if isinstance(k, str))
        if self.stack and self.stack[0].is_map:
            keys = [k for k in self.stack[0].value if isinstance(k, str)]
            if self.stack[0].has_key and isinstance(self.stack[0].key, str):
                keys.append(self.stack[0].key)
            return tuple(keys)
        return ()


class _KeyText(str):
    """A mapping key as written; ``merge`` marks YAML's plain ``<<``."""

    merge: bool

    def __new__(cls, text: str, merge: bool = False) -> "_KeyText":
        self = super().__new__(cls, text)
        self.merge = merge
        return self


_MERGE = object()
_KEY_PATH = object()  # the path of a collection used as a mapping key (recorded nowhere useful)


# ---------------------------------------------------------------------------- errors


def _too_deep(position: Position) -> Problem:
    return Problem("too-large", f"nested more than {MAX_DEPTH} levels deep (runaway nesting); not read",
                   _one_char(position))


def _is_depth_refusal(error: yaml.YAMLError) -> bool:
    """libyaml's own nesting limit (PyYAML >= 6.0.3: "exceeded maximum nesting depth")."""
    problem = str(getattr(error, "problem", None) or error).lower()
    return "nesting" in problem and "depth" in problem


def _abbreviated(text: str) -> str:
    text = text.strip()
    return text if len(text) <= 24 else f"{text[:12]}…{text[-4:]}"


def _insane_number(text: str, value: Any, integer: bool) -> str | None:
    """Why a number as written is not one a training setting can hold (None: it is)."""
    if integer:
        if isinstance(value, int) and value in SANE_INTEGERS:
            return None
        digits = text.strip().lstrip("+-")
        length = f" ({len(digits):,} digits)" if digits.isdigit() else ""
        refused = ("; Python refuses to read integers of over 4,300 digits, so json.load and yaml.safe_load "
                   "fail on this file" if not isinstance(value, int) else "")
        return (f"`{_abbreviated(text)}`{length} is not a sane integer: it does not fit in 64 bits, "
                f"and PyTorch, DeepSpeed and CUDA take nothing larger{refused}")
    if isinstance(value, float) and value in (float("inf"), float("-inf")) and "inf" not in text.lower():
        return f"`{_abbreviated(text)}` is too large for a 64-bit float: the tools read it as infinity"
    return None


def _yaml_problem(error: yaml.YAMLError, text: str) -> Problem:
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    if mark is None and isinstance(error, yaml.reader.ReaderError):
        return Problem("syntax", f"invalid YAML: {error.reason} (character #x{error.character:04x})",
                       _one_char(_yaml_position_at(text, error.position)))
    if mark is None:
        return Problem("syntax", f"invalid YAML: {error}", Range.file_start())
    position = Position(mark.line + 1, mark.column)
    lines = _YAML_BREAK.split(text)
    line = lines[mark.line] if mark.line < len(lines) else ""
    indent = line[: len(line) - len(line.lstrip(" \t"))]
    if "\t" in indent or line[mark.column:mark.column + 1] == "\t":
        column = indent.index("\t") if "\t" in indent else mark.column
        return Problem("syntax", "invalid YAML: a tab character indents this line; YAML indents with spaces only",
                       _one_char(Position(position.line, column)))
    problem = getattr(error, "problem", None) or str(error)
    context = getattr(error, "context", None)
    message = f"invalid YAML: {problem}" + (f" ({context})" if context else "")
    return Problem("syntax", message, _one_char(position))


def _json_problem(error: json.JSONDecodeError, text: str) -> Problem:
    # json counts lines at \n only; a raw \r (inside a string, where JSON refuses it) breaks
    # the line for editors too
    position = Position.at_offset(text, error.pos)
    found = text[error.pos:error.pos + 2]
    message = f"invalid JSON: {error.msg.removesuffix(' at')}"  # "Invalid control character at"
    if found.startswith(("//", "/*")) or found[:1] == "#":
        message = "invalid JSON: comments are not JSON (the HF Trainer and Accelerate read configs with json.load)"
    elif found[:1] in "}]" and error.msg.startswith(("Expecting property name", "Expecting value")):
        comma = text[: error.pos].rstrip()
        if comma.endswith(","):
            position = Position.at_offset(text, len(comma) - 1)
            message = f"invalid JSON: trailing comma before `{found[:1]}`; remove it"
    return Problem("syntax", message, _one_char(position))


# ---------------------------------------------------------------------------- loading


def _compose(text: str, result: Structured, keep_values: bool, key_text=None) -> _Composer:
    composer = _Composer(text, result, keep_values, key_text)
    try:
        composer.run()
    except _Refused as refused:
        result.problems.append(refused.problem)
    except yaml.YAMLError as error:
        if _is_depth_refusal(error):
            result.problems.append(_depth_refusal(text, error, key_text))
        else:
            result.problems.append(_yaml_problem(error, text))
    return composer


def _depth_refusal(text: str, error: yaml.YAMLError, key_text) -> Problem:
    """The depth budget's problem for a document libyaml refused as too deeply nested: its
    scanner reads a line of ``[[[[…`` to the end before the first event, so the composer never
    saw the nesting. The text before the place libyaml stopped is nested no deeper than its
    limit (1,000): composed again, it meets the budget where any PyYAML would."""
    mark = getattr(error, "problem_mark", None)
    if mark is None:
        return _too_deep(Position(1, 0))
    starts = [0] + [m.end() for m in _YAML_BREAK.finditer(text)]
    offset = starts[min(mark.line, len(starts) - 1)] + mark.column
    prefix = Structured()
    try:
        _Composer(text[:offset], prefix, keep_values=False, key_text=key_text).run()
    except _Refused as refused:
        if refused.problem.kind == "too-large":
            return refused.problem
    except yaml.YAMLError:
        pass
    return _too_deep(Position(mark.line + 1, mark.column))


# refused by YAML's reader, or line breaks to YAML (NEL, LS, PS) but not to JSON
_YAML_REFUSES = [*range(0x7F, 0xA0), 0x2028, 0x2029, 0xFFFE, 0xFFFF]
# where each refused character stands while YAML reads the text: a private-use character, one the
# text itself does not hold (a key "\U000f007f" must not come back as DEL)
_STAND_IN_BASE = 0xF0000
_STAND_IN_STEP = 0x100


def _swaps(text: str) -> tuple[dict[int, int], dict[int, int]]:
    """The one-for-one swap of the characters YAML refuses, and its inverse, for ``text``."""
    if not text or max(text) < chr(_STAND_IN_BASE):  # the usual text: no private-use character at all
        return _DEFAULT_SWAPS
    held = {ord(c) for c in text if ord(c) >= _STAND_IN_BASE}
    to_yaml: dict[int, int] = {}
    for c in _YAML_REFUSES:
        stand_in = _STAND_IN_BASE + c
        while stand_in in held or stand_in in to_yaml.values():
            stand_in += _STAND_IN_STEP  # private use up to U+10FFFD: far more room than any text takes
        to_yaml[c] = stand_in
    return to_yaml, {v: k for k, v in to_yaml.items()}


_DEFAULT_SWAPS = ({c: _STAND_IN_BASE + c for c in _YAML_REFUSES}, {_STAND_IN_BASE + c: c for c in _YAML_REFUSES})


def _json_key(key: str, back: dict[int, int]) -> str:
    key = key.translate(back)
    try:
        return key.encode("utf-16", "surrogatepass").decode("utf-16")
    except UnicodeError:
        return key


class _Insane(str):
    """A JSON number no training setting can hold, kept as written (with why)."""

    message: str


def _json_number(integer: bool, insane: list[_Insane]):
    def parse(text: str) -> Any:
        try:
            value = int(text) if integer else float(text)
        except ValueError:  # an integer of over 4,300 digits
            value = None
        message = _insane_number(text, value, integer)
        if message is None:
            return value
        kept = _Insane(text)
        kept.message = message
        insane.append(kept)
        return kept
    return parse


def _out_of_range(result: Structured) -> None:
    """Problems for the numbers the JSON reader kept as text, at their values."""
    for path, value in result.items():
        if isinstance(value, _Insane):
            result.problems.append(Problem("out-of-range", value.message, result.range_of(path)))
            parent = result.get(*path[:-1])
            parent[path[-1]] = str(value)
    if isinstance(result.value, _Insane):
        result.value = str(result.value)


def _load_json(text: str) -> Structured:
    result = Structured(syntax="json", text=text)
    deep = False
    insane: list[_Insane] = []
    try:
        value = json.loads(text, parse_int=_json_number(True, insane), parse_float=_json_number(False, insane))
    except json.JSONDecodeError as error:
        result.problems.append(_json_problem(error, text))
        value = None
    except RecursionError:  # the composer below finds where the nesting runs away
        value, deep = None, True
    # Ranges and duplicate keys: the same text read as YAML flow. Tabs are JSON whitespace;
    # characters JSON allows raw in strings but YAML refuses or breaks lines at are swapped one for one (columns
    # stay), and keys are mapped back, with YAML's \u-escaped surrogate pairs joined as json does.
    ranges = Structured(syntax="json")
    to_yaml, from_yaml = _swaps(text)
    composer = _compose(text.replace("\t", " ").translate(to_yaml), ranges, keep_values=False,
                        key_text=lambda key: _json_key(key, from_yaml))
    result.value_ranges, result.key_ranges = ranges.value_ranges, ranges.key_ranges
    result.partial_keys = composer.top_level_keys()
    too_large = [p for p in ranges.problems if p.kind == "too-large"]
    if not too_large and deep:  # deeper than json's recursion limit, yet not past the budget
        too_large = [_too_deep(Position(1, 0))]
    if too_large:
        result.problems += too_large
        return result
    if value is None and result.problems:
        return result
    result.value = value
    result.problems += [p for p in ranges.problems if p.kind == "duplicate-key"]
    if insane:
        _out_of_range(result)
    return result


def _load_yaml(text: str) -> Structured:
    result = Structured(syntax="yaml", text=text)
    composer = _compose(text, result, keep_values=True)
    _to_editor_lines(result, text)
    result.partial_keys = composer.top_level_keys()
    fatal = [p for p in result.problems if p.kind in ("syntax", "too-large")]
    if not fatal:
        result.value = composer.root
    return result


def load(text: str, syntax: str) -> Structured:
    """Load a JSON (``syntax="json"``) or YAML document, keeping positions. Never raises on
    bad input: defects are ``problems``."""
    try:
        result = _load_json(text) if syntax == "json" else _load_yaml(text)
    except (RecursionError, MemoryError):  # pragma: no cover - budgets stop these first
        return Structured(problems=[Problem("too-large", "document too large or deep to read", Range.file_start())],
                          syntax=syntax)
    # a one-character range at the very end of the file would end past it
    result.problems = [replace(p, range=p.range.within(text)) for p in result.problems]
    return result
