"""CI runs what the README tells a new user to run, on a fresh environment, and says which
releases it got: the README's test command is ``.ci/run``'s install line and test line."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _readme_test_command() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    match = re.search(r"Run the whole test suite:\s*```bash\n(.+?)\n```", readme, re.S)
    assert match, "the README's test command"
    return match.group(1).strip()


def test_ci_runs_the_readme_test_command_on_a_fresh_uncached_environment():
    script = (REPO / ".ci/run").read_text(encoding="utf-8").splitlines()
    install = next(line for line in script if line.startswith("python3 -m venv .venv"))
    test = next(line for line in script if line.startswith(".venv/bin/python -m pytest"))
    assert f"{install} && {test}" == _readme_test_command()
    steps = [line for line in script if line and not line.startswith("#")]
    fresh = steps.index("rm -rf .venv")
    no_cache = next(i for i, line in enumerate(steps) if "PIP_NO_CACHE_DIR=1" in line)
    versions = steps.index(".venv/bin/pip list --format=freeze")
    assert fresh < no_cache < steps.index(install) < versions < steps.index(test)
