"""One position-keeping loader for JSON and YAML configs.

Every key and value keeps its exact range, so a schema error or a finding points at the
offending ``"stage": 5`` and not at line 1. YAML is composed with PyYAML's safe composer (no
Python objects are ever constructed) and converted by a walk with a node budget, which stops
alias bombs ("billion laughs") and absurd nesting. JSON values come from the ``json`` module
(exact JSON semantics, exact error positions); their ranges from the same composer, since a
JSON document is a YAML flow document.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterator

import yaml

from memlint.diagnostics import Position, Range

MAX_NODES = 200_000  # values after alias expansion; a real config has hundreds
MAX_DEPTH = 200

Path_ = tuple[Any, ...]  # keys and indices from the root


@dataclass(frozen=True)
class Problem:
    """A defect of the file itself (not of its meaning)."""

    kind: str  # "syntax", "duplicate-key", "too-large", "not-a-mapping"
    message: str
    range: Range


@dataclass
class Structured:
    value: Any = None
    problems: list[Problem] = field(default_factory=list)
    value_ranges: dict[Path_, Range] = field(default_factory=dict)
    key_ranges: dict[Path_, Range] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(p.kind in ("syntax", "too-large") for p in self.problems)

    def range_of(self, path: Path_, key: bool = False) -> Range:
        """The range of the value (or of the key) at ``path``; the nearest ancestor's when the
        path does not exist (a missing key is reported on its parent)."""
        path = tuple(path)
        while True:
            table = self.key_ranges if key else self.value_ranges
            if path in table:
                return table[path]
            if key and path in self.value_ranges:
                return self.value_ranges[path]
            if not path:
                return Range.file_start()
            path = path[:-1]
            key = True

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

    def items(self) -> Iterator[tuple[Path_, Any]]:
        """Every (path, value) pair, depth first."""
        yield from _walk((), self.value)


def _walk(path: Path_, value: Any) -> Iterator[tuple[Path_, Any]]:
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(path + (k,), v)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _walk(path + (i,), v)


def _mark_range(start: yaml.Mark, end: yaml.Mark) -> Range:
    return Range(Position(start.line + 1, start.column), Position(end.line + 1, end.column))


class _TooLarge(Exception):
    pass


class _Converter:
    """Turns composed nodes into plain values, recording ranges, duplicates and budgets."""

    def __init__(self, constructor: yaml.SafeLoader, result: Structured) -> None:
        self.constructor = constructor
        self.result = result
        self.count = 0

    def convert(self, node: yaml.Node, path: Path_, depth: int = 0) -> Any:
        self.count += 1
        if self.count > MAX_NODES or depth > MAX_DEPTH:
            raise _TooLarge()
        self.result.value_ranges.setdefault(path, _mark_range(node.start_mark, node.end_mark))
        if isinstance(node, yaml.MappingNode):
            out: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":  # "<<: *base"
                    merged = self.convert(value_node, path, depth + 1)
                    for source in merged if isinstance(merged, list) else [merged]:
                        if isinstance(source, dict):
                            for k, v in source.items():
                                out.setdefault(k, v)
                    continue
                key = self.scalar(key_node) if isinstance(key_node, yaml.ScalarNode) else str(key_node.value)
                if not isinstance(key, (str, int, float, bool)) or key is None:
                    key = str(key)
                key_range = _mark_range(key_node.start_mark, key_node.end_mark)
                if key in out:
                    self.result.problems.append(
                        Problem("duplicate-key", f"duplicate key {key!r}: the last value wins silently", key_range)
                    )
                self.result.key_ranges[path + (key,)] = key_range
                out[key] = self.convert(value_node, path + (key,), depth + 1)
            return out
        if isinstance(node, yaml.SequenceNode):
            return [self.convert(item, path + (i,), depth + 1) for i, item in enumerate(node.value)]
        return self.scalar(node)

    def scalar(self, node: yaml.ScalarNode) -> Any:
        # SafeLoader's resolvers give the plain YAML types (str, int, float, bool, None,
        # dates); unknown tags stay strings: nothing is ever constructed from a tag.
        tag = node.tag
        if tag.startswith("tag:yaml.org,2002:") and tag.rsplit(":", 1)[-1] in (
            "str", "int", "float", "bool", "null", "timestamp",
        ):
            try:
                value = self.constructor.construct_object(node)
            except (yaml.YAMLError, ValueError, OverflowError):
                return node.value
            return value.isoformat() if hasattr(value, "isoformat") else value
        return node.value


def _compose(text: str) -> tuple[yaml.Node | None, yaml.SafeLoader]:
    loader = yaml.SafeLoader(text)
    try:
        return loader.get_single_node(), loader
    finally:
        loader.dispose()


def _yaml_problem(error: yaml.YAMLError) -> Problem:
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    message = getattr(error, "problem", None) or str(error)
    if mark is None:
        return Problem("syntax", f"invalid YAML: {message}", Range.file_start())
    position = Position(mark.line + 1, mark.column)
    if "\t" in message or "'\\t'" in str(error):
        message = "a tab character cannot indent YAML; use spaces"
    return Problem("syntax", f"invalid YAML: {message}", Range(position, Position(position.line, position.column + 1)))


def load(text: str, syntax: str) -> Structured:
    """Load a JSON (``syntax="json"``) or YAML document, keeping positions."""
    result = Structured()
    try:
        if syntax == "json":
            try:
                result.value = json.loads(text)
            except json.JSONDecodeError as error:
                position = Position(error.lineno, max(error.colno - 1, 0))
                result.problems.append(
                    Problem("syntax", f"invalid JSON: {error.msg}", Range(position, Position(position.line, position.column + 1)))
                )
                return result
            except RecursionError:
                result.problems.append(Problem("too-large", "JSON nested too deeply to read", Range.file_start()))
                return result
            ranges = Structured()
            try:
                node, loader = _compose(text)
                if node is not None:
                    _Converter(loader, ranges).convert(node, ())
            except (yaml.YAMLError, _TooLarge, RecursionError):
                pass  # values are right; ranges fall back to the file start
            result.value_ranges, result.key_ranges = ranges.value_ranges, ranges.key_ranges
            result.problems += [p for p in ranges.problems if p.kind == "duplicate-key"]
            return result
        node, loader = _compose(text)
        if node is None:
            return result
        result.value = _Converter(loader, result).convert(node, ())
    except yaml.YAMLError as error:
        result.problems.append(_yaml_problem(error))
    except (_TooLarge, RecursionError):
        result.value = None
        result.problems.append(
            Problem("too-large", f"document expands to more than {MAX_NODES:,} values or {MAX_DEPTH} "
                    "levels (alias bomb or runaway nesting); not read", Range.file_start())
        )
    return result
