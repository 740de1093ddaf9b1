"""bench/gpu_truth.py, prepared on the CPU: its case selection, its edge probe and its CPU path
(a fake-tensor measurement beside the estimate), so a GPU run spends no minute on a bug."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from memlint.trace.case import Case, load_cases

REPO = Path(__file__).resolve().parents[2]
_SPEC = importlib.util.spec_from_file_location("gpu_truth", REPO / "bench" / "gpu_truth.py")
gpu_truth = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = gpu_truth
_SPEC.loader.exec_module(gpu_truth)

H100_TOTAL = 85045477376


@pytest.fixture(scope="module")
def calibration() -> dict[str, Case]:
    return {c.id: c for c in load_cases(gpu_truth.CASES)}


def test_every_default_case_exists_and_runs_on_one_gpu_without_bitsandbytes(calibration):
    chosen, skipped = gpu_truth.select(calibration, list(gpu_truth.DEFAULT_IDS), None, gpu_truth.committed_fake())
    assert [c.id for c in chosen] == list(gpu_truth.DEFAULT_IDS)
    assert skipped == []


def test_selection_leaves_out_what_one_card_cannot_measure(calibration):
    ids = ["tinyllama-fsdp4-bf16-adamw-b8-s1024", "llama2-7b-qlora16-bf16-adamw-b4-s2048-gc",
           "falcon7b-ampbf16-adamw-b1-s2048-gc", "gpt2-fp32-adamw-b8-s1024", "no-such-case"]
    chosen, skipped = gpu_truth.select(calibration, ids, H100_TOTAL, gpu_truth.committed_fake())
    assert [c.id for c in chosen] == ["gpt2-fp32-adamw-b8-s1024"]
    why = {s["id"]: s["why"] for s in skipped}
    assert why["tinyllama-fsdp4-bf16-adamw-b8-s1024"] == "needs 4 GPUs"
    assert why["llama2-7b-qlora16-bf16-adamw-b4-s2048-gc"] == "needs bitsandbytes"
    assert "above the card's 79.2 GiB" in why["falcon7b-ampbf16-adamw-b1-s2048-gc"]  # 128.9 GiB measured
    assert "not in" in why["no-such-case"]


def test_the_edge_probe_lands_the_estimate_at_each_fraction_of_the_card(calibration):
    base = calibration[gpu_truth.EDGE_BASE]
    edges = gpu_truth.edge_cases(base, H100_TOTAL)
    assert len(edges) == len(gpu_truth.EDGE_FRACTIONS)
    seqs = [c.seq_len for c in edges]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    for case, fraction in zip(edges, gpu_truth.EDGE_FRACTIONS):
        share = gpu_truth.estimate(case, cuda_dropout=True)["peak_bytes"] / H100_TOTAL
        assert abs(share - fraction) < 0.01, (case.id, share)
        assert case.batch_size == base.batch_size and case.precision == base.precision


def test_the_cpu_path_measures_fake_tensors_beside_the_estimate(tmp_path):
    tiny = {"model_type": "llama", "hidden_size": 128, "intermediate_size": 344, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1024,
            "max_position_embeddings": 512, "tie_word_embeddings": False}
    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps({"models": {"tiny-llama": tiny}, "cases": [
        {"id": "tiny-bf16-adamw-b2-s64", "model": "tiny-llama", "batch_size": 2, "seq_len": 64, "precision": "bf16"},
    ]}))
    out = tmp_path / "result.json"
    assert gpu_truth.main(["--cases", str(cases), "--ids", "tiny-bf16-adamw-b2-s64", "--no-edge",
                           "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["n_cases"] == data["n_ok"] == 1
    row = data["results"][0]
    assert row["device"] is None and row["status"] == "ok"
    measured = row["fake"]["peak_bytes"]
    estimated = row["estimate_cpu_dropout"]["peak_bytes"]
    assert measured > 0
    assert abs(estimated - measured) / measured < 0.05
    assert row["versions"]["torch"].startswith("2.13")
