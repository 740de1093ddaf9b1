"""memlint's verdict on 22 training runs reported in public GitHub threads (tests/real_runs/).

Each run is checked as ``memlint check <entry> --gpu <gpu> --gpus <gpus>`` checks it; the verdict
(OOM iff MEM001) must equal the outcome the thread reports. Runs memlint cannot decide correctly
are xfail(strict=True) with the reason (``summarize.UNDECIDED``): when memlint starts getting one
right, the strict xfail fails and the reason must go.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parent / "real_runs" / "summarize.py"
_SPEC = importlib.util.spec_from_file_location("real_runs_summarize", _PATH)
summarize = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = summarize
_SPEC.loader.exec_module(summarize)

CASES = summarize.cases()


def _param(case):
    marks = []
    if case.slug in summarize.UNDECIDED:
        marks.append(pytest.mark.xfail(strict=True, reason=f"{case.source}: {summarize.UNDECIDED[case.slug]}"))
    return pytest.param(case, id=f"{case.slug} ({case.source})", marks=marks)


def test_every_case_folder_is_complete():
    assert len(CASES) == 22
    for case in CASES:
        assert case.entry.is_file(), case.entry
        assert case.outcome in ("oom", "fits"), case.slug
        assert case.source.startswith("https://github.com/"), case.slug
    assert set(summarize.UNDECIDED) <= {case.slug for case in CASES}


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_memlint_verdict_matches_the_thread(case):
    verdict = summarize.check(case)
    estimate = f"{verdict.peak_gib:.1f} GiB" if verdict.peak_gib is not None else f"no estimate ({verdict.problem})"
    assert verdict.verdict == case.outcome, (
        f"{case.source} reports {case.outcome}; memlint says {verdict.verdict} "
        f"(estimate {estimate} of {verdict.usable_gib:.1f} GiB usable on {case.gpu} x{case.gpus}; "
        f"findings {', '.join(verdict.codes) or 'none'})"
    )


def test_summary_right_and_missed_ooms():
    """The figure: right on every run but the undecided ones, which are all wrong; the OOMs missed
    (the dangerous direction) are exactly the undecided OOM runs."""
    found = summarize.verdicts()
    figures = summarize.summary(found)
    undecided = [v for v in found if v.case.slug in summarize.UNDECIDED]
    assert figures["runs"] == 22
    assert figures["right"] == 22 - len(undecided)
    assert figures["missed_oom"] == sum(v.case.outcome == "oom" for v in undecided)
    print(f"\nmemlint is right on {figures['right']} of {figures['runs']} real runs; "
          f"missed OOMs {figures['missed_oom']} of {figures['oom_runs']}; false OOMs {figures['false_oom']}")


def test_readme_table_is_current():
    readme = summarize.README.read_text(encoding="utf-8")
    expected = summarize.readme_with_table(readme, summarize.table(summarize.verdicts()))
    assert readme == expected, "tests/real_runs/README.md is stale: run python tests/real_runs/summarize.py --write"
