"""Running a rule's own VALID / INVALID examples (used by the test suite and ``memlint rule``)."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from memlint.lint.engine import Linter, expand
from memlint.model.diagnostics import Diagnostic
from memlint.project.settings import Settings, parse
from memlint.rules.base import Example, Rule


@dataclass
class Outcome:
    diagnostics: list[Diagnostic]
    fixed: str | None  # the main file after applying every fix of these diagnostics


def run_example(rule: type[Rule], example: Example) -> Outcome:
    """Lint ``example`` in a fresh temporary project with only ``rule`` enabled."""
    with tempfile.TemporaryDirectory(prefix="memlint-example-") as tmp:
        root = Path(tmp)
        files = {example.path: example.source, **example.files}
        for name, text in files.items():
            target = root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(text, bytes):
                target.write_bytes(text)
            else:
                target.write_text(text, encoding="utf-8")
        table = {k.replace("_", "-"): v for k, v in example.settings.items()}
        settings = parse(table, root / "memlint.toml") if table else Settings(root=root)
        settings = settings.with_overrides(select=(rule.code,), cache=False)
        linter = Linter(settings)
        main = root / example.path
        for path in expand([main], settings, linter.project):
            if linter.project.key(path) == linter.project.key(main):
                diagnostics = linter.lint_path(path)
                break
        else:  # pragma: no cover
            diagnostics = []
        fixed = None
        if any(d.fix for d in diagnostics):
            from memlint.lint.apply_fixes import apply_edits

            edits = [e for d in diagnostics if d.fix for e in d.fix.edits if Path(e.path).resolve() == main.resolve()]
            fixed = apply_edits(example.source, edits) if isinstance(example.source, str) else None
        if linter.internal_errors:
            raise AssertionError("; ".join(linter.internal_errors))
        return Outcome([d for d in diagnostics if d.code == rule.code], fixed)
