"""Running ``memlint check`` on a tree under a hard time limit, and checking what it printed:
each output format against its grammar, each range against the document it points into.

A plain module (not conftest.py) so the property tests import it by name.
"""

from __future__ import annotations

import contextlib
import faulthandler
import io
import json
import os
import re
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator
from unittest import mock
from urllib.parse import quote, unquote

from memlint.cli import check as check_cli
from memlint.cli.main import main
from memlint.documents.reading import read_document
from memlint.model.diagnostics import Diagnostic, Position, Range
from memlint.output import FORMATS

# No file may take longer than this to lint. Real scripts take well under a second; the bound
# only has to tell a hang or a blow-up from slowness on a busy machine.
PER_FILE_SECONDS = 10

_LINE_BREAK = re.compile(r"\r\n|\r|\n")  # what libcst and the Language Server Protocol count
CODE = re.compile(r"^[A-Z]{3}\d{3}$")


class TookTooLong(BaseException):
    """Raised by the alarm: a BaseException, so no ``except Exception`` in memlint swallows it."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Fail (not block) when the body runs longer than ``seconds``. A signal interrupts
    Python code; should native code (libcst's parser, libyaml) hang, faulthandler dumps the
    stacks and ends the process a little later, which fails the run too."""

    def on_alarm(signum, frame):
        raise TookTooLong(f"still running after {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    faulthandler.dump_traceback_later(seconds * 2 + 30, exit=True, file=sys.__stderr__)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        faulthandler.cancel_dump_traceback_later()


@contextlib.contextmanager
def working_directory(path: Path) -> Iterator[None]:
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def write_tree(root: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_bytes(content.encode("utf-8", "surrogatepass"))


@dataclass
class Outcome:
    """What one ``memlint check`` printed, in every format, for the same diagnostics."""

    exit_code: int
    stdout: str
    stderr: str
    cwd: Path
    output_format: str = "json"
    diagnostics: list[Diagnostic] = field(default_factory=list)
    reports: dict[str, str] = field(default_factory=dict)


def check_tree(tree: Path, *flags: str, files: int = 1, output_format: str = "json") -> Outcome:
    """``memlint check [flags] .`` inside ``tree``, through ``memlint.cli.main.main``. The formatter
    the command picks is wrapped so that the same diagnostics are also rendered in every
    other format (one lint, five reports). Fails when the run takes more than
    ``PER_FILE_SECONDS`` per file."""
    real_formatter = check_cli.formatter
    seen: dict = {}

    def every_format(name: str):
        def render(diagnostics, ctx):
            seen["diagnostics"] = list(diagnostics)
            seen["reports"] = {fmt: real_formatter(fmt)(diagnostics, ctx) for fmt in FORMATS}
            return seen["reports"][name]

        return render

    stdout, stderr = io.StringIO(), io.StringIO()
    argv = ["check", "--no-cache", "--output-format", output_format, *flags, "."]
    seconds = PER_FILE_SECONDS * max(files, 1)
    try:
        with (
            working_directory(tree),
            mock.patch.object(check_cli, "formatter", every_format),
            contextlib.redirect_stdout(stdout),
            contextlib.redirect_stderr(stderr),
            time_limit(seconds),
        ):
            exit_code = main(argv)
    except TookTooLong:
        raise AssertionError(f"memlint check took more than {seconds} s on {files} file(s)") from None
    assert "reports" in seen, "memlint check no longer formats through check_cli.formatter: update this helper"
    return Outcome(exit_code, stdout.getvalue(), stderr.getvalue(), tree, output_format, seen["diagnostics"],
                   seen["reports"])


# ---------------------------------------------------------------------------- documents and ranges


def document_lines(path: str | Path) -> list[str]:
    """The lines of a file as memlint read it (BOM dropped), split where editors split them."""
    return _LINE_BREAK.split(read_document(str(path)).text)


def _inside(lines: list[str], position: Position) -> bool:
    return 1 <= position.line <= len(lines) and 0 <= position.column <= len(lines[position.line - 1])


def assert_range_inside(path: str, where: Range, what: str, cwd: Path) -> None:
    lines = document_lines(cwd / path)
    assert where.start <= where.end, f"{what}: range ends before it starts: {where}"
    for position in (where.start, where.end):
        assert _inside(lines, position), (
            f"{what}: {path}:{position.line}:{position.column} lies outside the document "
            f"({len(lines)} lines; that line has {len(lines[position.line - 1]) if 0 < position.line <= len(lines) else '-'} columns)"
        )


def assert_ranges_inside(outcome: Outcome) -> None:
    """Every diagnostic, related location and fix edit points into its document."""
    for d in outcome.diagnostics:
        assert_range_inside(d.path, d.range, f"{d.code} {d.message!r}", outcome.cwd)
        for related in d.related:
            assert_range_inside(related.path, related.range, f"{d.code} related {related.message!r}", outcome.cwd)
        if d.fix is not None:
            assert d.fix.applicability in ("safe", "unsafe"), d.fix
            for edit in d.fix.edits:
                assert_range_inside(edit.path, edit.range, f"{d.code} fix edit", outcome.cwd)


def _assert_location(filename: str, line: int, column: int, cwd: Path, what: str) -> None:
    """A 1-based line and column as the formats print them."""
    path = cwd / filename
    assert path.is_file() or path.is_symlink(), f"{what}: {filename} is not a file"
    lines = document_lines(path)
    assert 1 <= line <= len(lines), f"{what}: line {line} of {filename}, which has {len(lines)} lines"
    assert 1 <= column <= len(lines[line - 1]) + 1, (
        f"{what}: column {column} of {filename}:{line}, which has {len(lines[line - 1])} characters"
    )


# ---------------------------------------------------------------------------- the formats

RUFF_FIELDS = {"code", "message", "filename", "location", "end_location", "fix", "url"}


def assert_json_report(text: str, outcome: Outcome) -> None:
    rows = json.loads(text)
    assert isinstance(rows, list) and len(rows) == len(outcome.diagnostics)
    for row in rows:
        assert RUFF_FIELDS <= row.keys(), f"missing ruff fields: {RUFF_FIELDS - row.keys()}"
        assert CODE.match(row["code"]) and isinstance(row["message"], str) and row["message"]
        assert row["severity"] in ("error", "warning", "info")
        start, end = row["location"], row["end_location"]
        assert (start["row"], start["column"]) <= (end["row"], end["column"]), row
        for where in (start, end):
            _assert_location(row["filename"], where["row"], where["column"], outcome.cwd, f"json {row['code']}")
        fix = row["fix"]
        if fix is not None:
            assert fix["applicability"] in ("safe", "unsafe") and isinstance(fix["message"], str)
            for edit in fix["edits"]:
                assert isinstance(edit["content"], str)
                assert {"row", "column"} <= edit["location"].keys() and {"row", "column"} <= edit["end_location"].keys()


_URI_SAFE = "/:@!$&'()*+,;=-._~"


def assert_sarif_report(text: str, outcome: Outcome) -> None:
    document = json.loads(text)
    assert document["version"] == "2.1.0" and "sarif" in document["$schema"]
    (run,) = document["runs"]
    rules = run["tool"]["driver"]["rules"]
    assert len(run["results"]) == len(outcome.diagnostics)
    for result in run["results"]:
        assert CODE.match(result["ruleId"]) and result["level"] in ("error", "warning", "note")
        assert isinstance(result["message"]["text"], str) and result["message"]["text"]
        if "ruleIndex" in result:
            assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        (location,) = result["locations"]
        uri = location["physicalLocation"]["artifactLocation"]["uri"]
        assert uri == quote(unquote(uri), safe=_URI_SAFE), f"not a URI reference: {uri!r}"
        region = location["physicalLocation"]["region"]
        assert (region["startLine"], region["startColumn"]) <= (region["endLine"], region["endColumn"]), region
        _assert_location(unquote(uri), region["startLine"], region["startColumn"], outcome.cwd, "sarif")
        _assert_location(unquote(uri), region["endLine"], region["endColumn"], outcome.cwd, "sarif")


# ::error file=…,line=…::message — property values escape % \r \n : , and messages % \r \n
_PROPERTY = r"(?:[^%\r\n:,]|%25|%0D|%0A|%3A|%2C)*"
_GITHUB_LINE = re.compile(
    rf"^::(?P<level>error|warning|notice) title=(?P<title>{_PROPERTY}),file=(?P<file>{_PROPERTY}),"
    rf"line=(?P<line>\d+),col=(?P<col>\d+),endLine=(?P<end_line>\d+),endColumn=(?P<end_col>\d+)"
    rf"::(?P<message>(?:[^%\r\n]|%25|%0D|%0A)*)$"
)


def _unescape(text: str) -> str:
    return (text.replace("%2C", ",").replace("%3A", ":").replace("%0A", "\n").replace("%0D", "\r")
            .replace("%25", "%"))


def assert_github_report(text: str, outcome: Outcome) -> None:
    lines = text.split("\n")
    assert lines[-1] == "", "the report ends with a newline"
    assert len(lines) - 1 == len(outcome.diagnostics)
    for line in lines[:-1]:
        match = _GITHUB_LINE.match(line)
        assert match, f"not a workflow command: {line!r}"
        filename = _unescape(match["file"])
        _assert_location(filename, int(match["line"]), int(match["col"]), outcome.cwd, "github")
        _assert_location(filename, int(match["end_line"]), int(match["end_col"]), outcome.cwd, "github")


_HEADER = re.compile(r"^(?P<path>.+?):(?P<line>\d+):(?P<col>\d+): (?P<code>[A-Z]{3}\d{3}) \[(error|warning|info)\] \S")
_TEXT_EXTRA = (
    re.compile(r"^ *\d+ \| "),  # the source line
    re.compile(r"^ +\^+$"),  # the caret under the range
    re.compile(r"^      = fix \((safe|unsafe)\): "),
    re.compile(r"^$"),
    re.compile(r"^Found \d+ findings? \(\d+ errors?, \d+ warnings?, \d+ info\)\.$"),
)


def _assert_header(line: str, outcome: Outcome) -> None:
    match = _HEADER.match(line)
    assert match, f"not a `path:line:col: CODE [severity] message` line: {line!r}"
    _assert_location(match["path"], int(match["line"]), int(match["col"]), outcome.cwd, "text")


def assert_concise_report(text: str, outcome: Outcome) -> None:
    lines = text.split("\n")
    assert lines[-1] == "" and len(lines) - 1 == len(outcome.diagnostics), "one line per finding"
    for line in lines[:-1]:
        _assert_header(line, outcome)


def assert_text_report(text: str, outcome: Outcome) -> None:
    headers = 0
    for line in text.split("\n")[:-1]:
        if _HEADER.match(line):
            _assert_header(line, outcome)
            headers += 1
        else:
            assert any(p.match(line) for p in _TEXT_EXTRA), f"unexpected line in the text report: {line!r}"
    assert headers == len(outcome.diagnostics)


_GITLAB_SEVERITIES = ("info", "minor", "major", "critical", "blocker")


def assert_gitlab_report(text: str, outcome: Outcome) -> None:
    issues = json.loads(text)
    assert isinstance(issues, list) and len(issues) == len(outcome.diagnostics)
    fingerprints = [issue["fingerprint"] for issue in issues]
    assert len(set(fingerprints)) == len(fingerprints), "GitLab drops issues that share a fingerprint"
    for issue in issues:
        assert CODE.match(issue["check_name"]) and issue["description"].startswith(issue["check_name"])
        assert issue["severity"] in _GITLAB_SEVERITIES
        location = issue["location"]
        begin, end = location["positions"]["begin"], location["positions"]["end"]
        assert (begin["line"], begin["column"]) <= (end["line"], end["column"]), location
        for where in (begin, end):
            _assert_location(location["path"], where["line"], where["column"], outcome.cwd, "gitlab")


VALIDATORS = {
    "json": assert_json_report,
    "gitlab": assert_gitlab_report,
    "sarif": assert_sarif_report,
    "github": assert_github_report,
    "concise": assert_concise_report,
    "text": assert_text_report,
}
assert set(VALIDATORS) == set(FORMATS), "a new output format needs a validator here"


def assert_sound(outcome: Outcome) -> None:
    """The run ended normally, reported no internal error, and every format is valid."""
    assert outcome.exit_code in (0, 1), f"exit {outcome.exit_code}: {outcome.stderr}"
    assert "Traceback" not in outcome.stderr and "internal error" not in outcome.stderr, outcome.stderr
    assert outcome.stdout == outcome.reports[outcome.output_format]
    assert_ranges_inside(outcome)
    for name, validate in VALIDATORS.items():
        validate(outcome.reports[name], outcome)
