"""The estimate against measured peaks of real Hugging Face models (tests/data/oracle)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memlint.estimate import estimate_training
from memlint.estimate.oracle_cases import case_inputs

RESULTS = json.loads((Path(__file__).parents[1] / "data" / "oracle" / "results.json").read_text())["results"]
CASES = [r for r in RESULTS if r["status"] == "ok"]
TOLERANCE = 0.10  # the bar; the estimator is far inside it


def test_every_measured_case_is_used():
    assert len(CASES) == len(RESULTS) == 43


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_estimate_within_tolerance_of_measured_peak(case):
    arch, setup = case_inputs(case)
    budget = estimate_training(arch, setup)
    error = (budget.peak_bytes - case["peak_bytes"]) / case["peak_bytes"]
    assert abs(error) <= TOLERANCE, f"{case['id']}: estimate {budget.peak_bytes} vs measured {case['peak_bytes']} ({error:+.1%})"


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_peak_phase_matches_measurement(case):
    """The estimator must know *when* the step peaks, not only how high."""
    arch, setup = case_inputs(case)
    phase = estimate_training(arch, setup).peak_phase.name
    measured = case["peak_phase"].rstrip("0123456789")
    expected = {"forward": "forward", "backward": "backward", "optimizer": "optimizer_step"}[measured]
    assert phase == expected


def test_parameter_counts_match_the_models_built():
    for case in CASES:
        arch, setup = case_inputs(case)
        assert arch.n_params == case["model_stats"]["n_params_base"], case["id"]
