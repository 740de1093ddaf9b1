"""The estimate against memlint's own calibration suite (tests/calibration), and the published
accuracy page (docs/accuracy.md) being the current estimator's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memlint.estimate import estimate_training
from memlint.estimate.accuracy import CALIBRATION, ORACLE, all_scores, load, render
from memlint.estimate.oracle_cases import trace_case_inputs

RESULTS = [r for r in json.loads(CALIBRATION.read_text())["results"] if r["status"] == "ok"]
DOC = Path(__file__).parents[2] / "docs" / "accuracy.md"


def test_suite_breadth():
    assert len(RESULTS) >= 60
    families = {trace_case_inputs(r)[0].model_type for r in RESULTS}
    assert len(families) >= 8, families
    precisions = {r["case"]["precision"] for r in RESULTS}
    assert {"fp32", "bf16", "fp16", "amp-bf16", "amp-fp16"} <= precisions
    assert any(r["case"].get("qlora") for r in RESULTS) and any(r["case"].get("lora") for r in RESULTS)
    assert {r["case"]["world_size"] for r in RESULTS} >= {1, 2, 4, 8}


@pytest.mark.parametrize("result", RESULTS, ids=[r["id"] for r in RESULTS])
def test_estimate_within_ten_percent(result):
    arch, setup = trace_case_inputs(result)
    estimate = estimate_training(arch, setup).peak_bytes
    error = (estimate - result["peak_bytes"]) / result["peak_bytes"]
    assert abs(error) <= 0.10, f"{result['id']}: {error:+.1%}"


def test_accuracy_page_is_current():
    failed = [r["id"] for r in load(ORACLE) + load(CALIBRATION) if r.get("status") != "ok"]
    expected = render(all_scores(), failed)
    assert DOC.read_text() == expected, "docs/accuracy.md is stale: python -m memlint.estimate.accuracy > docs/accuracy.md"
