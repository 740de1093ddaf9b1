"""Every output format of ``memlint check``, read the way its consumer reads it: text for
people (location, snippet, caret), JSON with ruff's field names, SARIF 2.1.0 validated against
the official OASIS schema, and GitHub workflow annotations."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
from cli_project import FILES
from cli_testing import REPO, memlint, write

from memlint.model.diagnostics import Diagnostic, Position, Range, Severity
from memlint.output import FormatContext, formatter

SARIF_SCHEMA = json.loads((REPO / "tests/data/sarif/sarif-schema-2.1.0.json").read_text(encoding="utf-8"))
RUFF_FIELDS = {"code", "message", "filename", "location", "end_location", "severity", "fix", "url"}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write(tmp_path, FILES)


def test_text_names_the_place_shows_the_line_and_points_at_it(project):
    result = memlint(project, "check", "--color", "never")
    assert result.code == 1
    loop = (project / "loop.py").read_text().splitlines()
    headers = re.findall(r"^(loop\.py):(\d+):(\d+): (\w+\d+) \[(\w+)\] (.+)$", result.out, re.M)
    assert {(code, severity) for *_, code, severity, _ in headers} == {("ACC001", "warning"), ("AMP001", "warning")}
    blocks = result.out.strip().split("\n\n")
    for (path, line, column, code, _, _), block in zip(headers, blocks):
        lines = block.splitlines()
        number, source = re.match(r"^\s*(\d+) \| (.*)$", lines[1]).groups()
        assert int(number) == int(line) and source == loop[int(line) - 1]
        caret = lines[2]
        gutter = lines[1].index("|") + 2
        assert caret.index("^") - gutter == int(column) - 1  # the caret sits under the reported column
        assert source[int(column) - 1:].startswith("loss.backward()")


def test_concise_is_one_line_a_finding(project):
    result = memlint(project, "check", "--output-format", "concise")
    lines = result.out.splitlines()
    assert len(lines) == 2 and all(re.match(r"^loop\.py:15:9: (ACC001|AMP001) \[warning\] ", line) for line in lines)


def test_json_uses_ruffs_field_names(project):
    result = memlint(project, "check", "--output-format", "json")
    findings = result.json()
    assert result.code == 1 and len(findings) == 2
    for finding in findings:
        assert RUFF_FIELDS <= set(finding)
        assert finding["filename"] == "loop.py"
        assert finding["location"] == {"row": 15, "column": 9}
        assert finding["end_location"] == {"row": 15, "column": 24}
        assert finding["url"].endswith(f"rules/{finding['code']}.md")
    accumulation = next(f for f in findings if f["code"] == "ACC001")
    fix = accumulation["fix"]
    assert fix["applicability"] == "safe" and fix["message"]
    (edit,) = fix["edits"]
    assert {"content", "location", "end_location"} <= set(edit)
    assert next(f for f in findings if f["code"] == "AMP001")["fix"] is None


def _sarif(project: Path, *args: str) -> dict:
    result = memlint(project, "check", "--output-format", "sarif", *args)
    log = json.loads(result.out)
    jsonschema.Draft4Validator(SARIF_SCHEMA).validate(log)
    return log


def test_sarif_is_valid_against_the_official_schema(project):
    log = _sarif(project)
    (run,) = log["runs"]
    assert log["version"] == "2.1.0"
    assert run["tool"]["driver"]["name"] == "memlint"
    rules = {rule["id"]: rule for rule in run["tool"]["driver"]["rules"]}
    results = run["results"]
    assert {r["ruleId"] for r in results} == {"ACC001", "AMP001"}
    for result in results:
        assert result["level"] == "warning"
        assert rules[result["ruleId"]]["helpUri"].endswith(f"{result['ruleId']}.md")
        region = result["locations"][0]["physicalLocation"]["region"]
        assert (region["startLine"], region["startColumn"]) == (15, 9)
        assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "loop.py"


def test_sarif_of_every_example_is_valid():
    """The examples between them trigger every rule: related locations, fixes, file-level
    findings on unreadable files -- every shape a SARIF result of memlint's can take."""
    log = _sarif(REPO / "examples", "--exit-zero")
    codes = {r["ruleId"] for r in log["runs"][0]["results"]}
    assert len(codes) >= 30


def test_sarif_of_a_clean_project_is_an_empty_valid_run(tmp_path):
    write(tmp_path, {"memlint.toml": 'gpu = "h100"\n', "README.md": "# nothing to train\n"})
    log = _sarif(tmp_path)
    assert log["runs"][0]["results"] == []


GITHUB = re.compile(
    r"^::(error|warning|notice) title=memlint \((\w+\d+)\),file=([^,]+),line=(\d+),col=(\d+),"
    r"endLine=(\d+),endColumn=(\d+)::(.+)$"
)


def test_github_annotations_follow_the_workflow_command_grammar(project):
    result = memlint(project, "check", "--output-format", "github")
    lines = result.out.splitlines()
    assert len(lines) == 2
    for line in lines:
        level, code, path, row, column, *_ , message = GITHUB.match(line).groups()
        assert (level, path, row, column) == ("warning", "loop.py", "15", "9")
        assert message.startswith(f"{code} ")


def test_github_escapes_what_would_end_a_property_or_a_line(tmp_path):
    finding = Diagnostic(
        path=str(tmp_path / "runs,v2" / "train.py"), range=Range(Position(3, 0), Position(3, 4)), code="MEM001",
        message="100% of the GPU:\nline two", severity=Severity.ERROR,
    )
    (line,) = formatter("github")([finding], FormatContext(tmp_path, lambda path: None)).splitlines()
    assert "file=runs%2Cv2/train.py," in line
    assert line.endswith("::MEM001 100%25 of the GPU:%0Aline two")


def test_output_file_gets_the_report_and_stdout_stays_empty(project):
    result = memlint(project, "check", "--output-format", "json", "--output-file", "memlint.json")
    assert result.code == 1 and result.out == ""
    assert len(json.loads((project / "memlint.json").read_text())) == 2


def _gitlab(project: Path) -> list[dict]:
    return json.loads(memlint(project, "check", "--output-format", "gitlab").out)


def test_gitlab_code_quality_report_with_fingerprints_that_survive_moved_lines(project):
    report = _gitlab(project)
    assert len(report) == 2
    for issue in report:
        assert {"description", "check_name", "fingerprint", "severity", "location"} <= set(issue)
        assert issue["severity"] == "major"  # warnings
        assert issue["location"]["path"] == "loop.py"
        assert issue["location"]["positions"]["begin"] == {"line": 15, "column": 9}
        assert issue["description"].startswith(issue["check_name"] + " ")
    assert len({issue["fingerprint"] for issue in report}) == 2
    loop = project / "loop.py"
    loop.write_text('"""Training loop."""\n\n' + loop.read_text())  # two lines added above the findings
    moved = _gitlab(project)
    assert [i["location"]["positions"]["begin"]["line"] for i in moved] == [17, 17]
    assert [i["fingerprint"] for i in moved] == [i["fingerprint"] for i in report]
