"""``memlint estimate --format html``: the budget as a page for CI artifacts and pull-request
comments, self-contained (no script, no outside resource) and saying what the text sheet says."""

from __future__ import annotations

import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def estimate(*arguments: str) -> str:
    done = subprocess.run([sys.executable, "-m", "memlint", "estimate", *arguments], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_html_budget_of_a_launched_script_says_what_the_text_sheet_says():
    path = "examples/sft-llama3-h100/train.py"
    page = Page()
    page.feed(estimate(path, "--format", "html"))
    text = " ".join(page.text)
    sheet = estimate(path)
    verdict = next(line for line in sheet.splitlines() if line.startswith("✗ Does not fit"))
    assert verdict in text
    # bars per component, the three phases of a step, the changes that make it fit (✓ in text)
    components = [a["data-component"] for t, a in page.tags if "data-component" in a]
    assert "logits" in " ".join(components) and len(components) >= 5
    assert [a["data-phase"] for t, a in page.tags if "data-phase" in a] == ["forward", "backward", "optimizer_step"]
    fitting = [a for t, a in page.tags if a.get("data-fits") == "true"]
    assert len(fitting) == sheet.count(" ✓ ") and fitting
    # self-contained: no script, nothing fetched from elsewhere
    assert not any(t == "script" or "src" in a or (t == "link" and "href" in a) for t, a in page.tags)


def test_a_model_on_the_command_line_without_a_gpu_has_no_capacity_line():
    page = Page()
    page.feed(estimate("--model", "gpt2", "--batch", "4", "--format", "html"))
    text = " ".join(page.text)
    assert "no target GPU given" in text
    assert not any("cap" == a.get("class") for t, a in page.tags)
