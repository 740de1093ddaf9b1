"""The committed rule pages match what the rules generate; ``memlint rule`` prints them."""

from __future__ import annotations

import shutil

from memlint.cli.main import main as cli_main
from memlint.rules import all_rules
from memlint.output import rule_pages as docs
from memlint.rules.base import Example, Rule


def test_committed_pages_are_up_to_date():
    stale = docs.stale_pages()
    assert stale == [], f"stale rule pages {stale}: run `python -m memlint.output.rule_pages`"


def test_check_mode_reports_a_changed_missing_or_orphan_page(tmp_path, capsys):
    assert docs.main(["--dir", str(tmp_path)]) == 0
    assert docs.main(["--check", "--dir", str(tmp_path)]) == 0

    page = tmp_path / "AMP001.md"
    page.write_text(page.read_text(encoding="utf-8").replace("float16", "fp16"), encoding="utf-8")
    (tmp_path / "TRN001.md").unlink()
    (tmp_path / "XYZ001.md").write_text("# a rule that no longer exists\n", encoding="utf-8")
    assert docs.stale_pages(tmp_path) == ["AMP001.md", "TRN001.md", "XYZ001.md"]
    assert docs.main(["--check", "--dir", str(tmp_path)]) == 1
    assert "stale:" in capsys.readouterr().err

    docs.write_pages(tmp_path)
    assert docs.stale_pages(tmp_path) == []
    assert not (tmp_path / "XYZ001.md").exists()


def test_page_layout_follows_the_rule():
    rule = all_rules()["ACC001"]
    page = docs.render_rule(rule)
    assert page.startswith("# ACC001: accumulation-without-loss-division\n\nSeverity: warning · Fix: safe")
    headings = [line for line in page.splitlines() if line.startswith("## ")]
    assert headings == ["## What it does", "## Why it matters", "## Fix", "## Example", "## Use instead"]
    example = page.split("## Example")[1].split("## Use instead")[0]
    assert rule.INVALID[0].title in example
    assert "`train.py`:\n\n```python\n" + rule.INVALID[0].source in example
    assert rule.VALID[0].source in page.split("## Use instead")[1]


def test_settings_and_other_files_of_an_example_are_shown_with_their_languages():
    example = Example(
        '{\n  "zero_optimization": {"stage": 3}\n}\n',
        path="ds_config.json",
        files={"accelerate.yaml": "distributed_type: DEEPSPEED\n", "launch.sh": "accelerate launch train.py\n"},
        settings={"gpu": "a100", "gpus": 8},
        title="ZeRO-3 on eight A100s",
    )
    text = docs.render_example(example)
    assert text.startswith("ZeRO-3 on eight A100s\n")
    assert '```toml\n[tool.memlint]\ngpu = "a100"\ngpus = 8\n```' in text
    assert "`ds_config.json`:\n\n```json\n" in text
    assert "`accelerate.yaml`:\n\n```yaml\n" in text
    assert "`launch.sh`:\n\n```bash\n" in text


def test_a_rule_without_examples_or_fix_still_renders():
    class Unregistered(Rule):
        """## What it does
        Something.

        ## Why it matters
        Because.
        """

    Unregistered.code, Unregistered.name = "XYZ999", "something"
    page = docs.render_rule(Unregistered)
    assert "Fix: none" in page and "## Example" not in page and "XYZ999.md" not in docs.expected_pages()


def test_index_lists_every_rule_with_its_summary():
    index = docs.render_index(all_rules())
    for code, rule in all_rules().items():
        assert f"| [{code}]({code}.md) | {rule.name} | {rule.severity} |" in index
    assert "| [AMP001](AMP001.md) | fp16-without-loss-scaling | warning | Finds training in float16" in index


def test_memlint_rule_prints_the_page(capsys):
    assert cli_main(["rule", "amp001"]) == 0
    assert capsys.readouterr().out == docs.render_rule(all_rules()["AMP001"])
    assert cli_main(["rule", "missing-zero-grad"]) == 0
    assert capsys.readouterr().out.startswith("# TRN001: missing-zero-grad")


def test_memlint_rule_all_lists_every_code(capsys):
    assert cli_main(["rule", "--all"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out] == list(all_rules())


def test_unknown_rule_exits_2_with_a_suggestion(capsys):
    assert cli_main(["rule", "AMP01"]) == 2
    err = capsys.readouterr().err
    assert "unknown rule 'AMP01'" in err and "did you mean" in err and "AMP001" in err
    assert cli_main(["rule"]) == 2


def test_generator_leaves_other_files_alone(tmp_path):
    shutil.copy(docs.RULES_DIR / "README.md", tmp_path / "README.md")
    (tmp_path / "notes.txt").write_text("kept\n", encoding="utf-8")
    docs.write_pages(tmp_path)
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "kept\n"
