"""Tests of ``memlint.trace.deepspeed_step`` (a real DeepSpeed ZeRO-1/2 step measured on the CPU).

The case tests need nothing but memlint. The measuring tests need torch and transformers (and
deepspeed for the last ones) and are skipped cleanly without them. They check the two things the
DeepSpeed measurements of the calibration suite rest on:

1. registering every tensor alive before the step (``tracker.track_live_tensors``) gives the same
   peak as the suite's own instrument (``memlint.trace.measure_case``) on a plain training step;
2. the forward of a committed DeepSpeed measurement (real CPU kernels, CUDA's SDPA kernel choice)
   allocates what the fake-tensor trace of the same model and batch allocates;
3. in a real DeepSpeed step the tracker sees DeepSpeed's own buffers: the flat half-precision
   parameters and the fp32 master partition before the step, Adam's fp32 states after it, and
   the reduce bucket of ``reduce_bucket_size`` elements in backward.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap

import pytest

from memlint.trace.deepspeed_step import DeepSpeedCase, deepspeed_config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY_LLAMA = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 4096,
              "max_position_embeddings": 512, "tie_word_embeddings": False}


def _run(args: list[str], stdin: str = "") -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1", TRANSFORMERS_VERBOSITY="error")
    return subprocess.run([sys.executable, *args], input=stdin, capture_output=True, text=True, env=env,
                          timeout=600)


# --------------------------------------------------------------------------- cases (no torch)
def test_case_records_what_the_estimator_reads() -> None:
    case = DeepSpeedCase(id="t", model=TINY_LLAMA, model_name="tiny", batch_size=2, seq_len=64,
                         precision="mixed-fp16", zero_stage=2, grad_ckpt=True)
    d = case.to_dict()
    assert d["sharding"] == "zero2" and d["world_size"] == 1 and d["optimizer"] == "adamw-fused"
    config = d["deepspeed_config"]
    assert config["fp16"]["enabled"] is True and config["zero_optimization"] == {"stage": 2}
    assert config["optimizer"]["type"] == "AdamW"  # FusedAdam, DeepSpeed's default on CUDA and CPU
    assert "torch_adam" not in config["optimizer"]["params"]
    assert deepspeed_config(DeepSpeedCase(**{**case.__dict__, "precision": "mixed-bf16"}))["bf16"] == {"enabled": True}


def test_reduce_bucket_reaches_the_config_and_the_estimate() -> None:
    """A case's ``reduce_bucket_size`` is the DeepSpeed config's, and the estimate of the recorded
    case prices the same bucket (``reduce_bucket_elements``); unset, both keep DeepSpeed's default."""
    from memlint.estimate.oracle_cases import trace_case_inputs
    from memlint.estimate.training import estimate_training

    base = dict(id="t", model=TINY_LLAMA, model_name="tiny", batch_size=2, seq_len=64, precision="mixed-bf16",
                zero_stage=2)
    small = DeepSpeedCase(**base, reduce_bucket_size=5_000_000).to_dict()
    assert small["deepspeed_config"]["zero_optimization"] == {"stage": 2, "reduce_bucket_size": 5_000_000}
    arch, setup = trace_case_inputs({"case": small})
    assert setup.reduce_bucket_elements == 5e6
    _, default_setup = trace_case_inputs({"case": DeepSpeedCase(**base).to_dict()})
    assert default_setup.reduce_bucket_elements is None
    backward = {p.name: p for p in estimate_training(arch, setup).phases}["backward"]
    bucket = next(c for c in backward.components if c.key == "reduce_bucket")
    assert bucket.bytes == 5_000_000 * 2  # bf16 elements
    with pytest.raises(ValueError, match="reduce_bucket_size"):
        DeepSpeedCase(**base, reduce_bucket_size=0)


def test_cases_outside_the_measured_paths_are_refused() -> None:
    with pytest.raises(ValueError, match="precision"):
        DeepSpeedCase(id="t", model=TINY_LLAMA, model_name="tiny", batch_size=1, seq_len=8, precision="bf16",
                      zero_stage=1)
    with pytest.raises(ValueError, match="zero_stage must be 1 or 2"):
        DeepSpeedCase(id="t", model=TINY_LLAMA, model_name="tiny", batch_size=1, seq_len=8,
                      precision="mixed-bf16", zero_stage=3)


# --------------------------------------------------------------------------- measuring (torch)
_PLAIN_STEP_WITH_LIVE_REGISTRATION = textwrap.dedent("""
    import json, sys, torch
    from memlint.trace import build
    from memlint.trace.case import Case
    from memlint.trace.tracker import PeakMemTracker, set_storage_rounding, track_live_tensors
    from memlint.trace.emulation import cuda_sdpa_kernel_choice

    case = Case.from_dict(json.loads(sys.stdin.read()))
    set_storage_rounding(case.round_bytes)
    model, info = build.build_model(case, torch.device("cpu"), None)
    opt = build.build_optimizer(case, [p for p in model.parameters() if p.requires_grad])
    ids = torch.randint(0, info["vocab_size"], (case.batch_size, case.seq_len))
    labels = ids.clone()
    tracker = PeakMemTracker()
    with tracker, cuda_sdpa_kernel_choice():
        track_live_tensors(tracker, model, opt)  # no track_external(ids, labels): the walk finds them
        for step in range(case.steps):
            model(input_ids=ids, labels=labels).loss.backward()
            tracker.reset_mod_stats()
            opt.step()
            opt.zero_grad(set_to_none=True)
    print(json.dumps({"peak_bytes": tracker.peak()["cpu"]["Total"]}))
""")


@pytest.mark.parametrize("precision,optimizer,grad_ckpt", [("bf16", "adamw", False), ("fp32", "adamw-fused", True)])
def test_live_tensor_registration_gives_the_suites_peak(precision: str, optimizer: str, grad_ckpt: bool) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from memlint.trace.case import Case
    from memlint.trace.measure import measure_case

    data = {"id": "reg", "model": TINY_LLAMA, "batch_size": 2, "seq_len": 128, "precision": precision,
            "optimizer": optimizer, "grad_ckpt": grad_ckpt, "round_bytes": 1}
    reference = measure_case(Case.from_dict(data), fake=False)
    proc = _run(["-c", _PLAIN_STEP_WITH_LIVE_REGISTRATION], json.dumps(data))
    assert proc.returncode == 0, proc.stderr[-3000:]
    measured = json.loads(proc.stdout.strip().splitlines()[-1])["peak_bytes"]
    # the walk also finds the interpreter's few stray CPU tensors (torch/transformers constants)
    assert 0 <= measured - reference["peak_bytes"] <= 64 * 1024, (measured, reference["peak_bytes"])


def test_fast_half_matmul_changes_no_measured_byte() -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from memlint.trace import build
    from memlint.trace.case import Case
    from memlint.trace.emulation import FastCpuHalfMatmul
    from memlint.trace.tracker import PeakMemTracker, set_storage_rounding, track_live_tensors

    set_storage_rounding(1)
    case = Case.from_dict({"id": "fp16", "model": {**TINY_LLAMA, "num_hidden_layers": 1}, "batch_size": 1,
                           "seq_len": 32, "precision": "fp16", "attn": "eager"})
    model, info = build.build_model(case, torch.device("cpu"), None)
    ids = torch.randint(0, info["vocab_size"], (1, 32))

    def peak(fast: bool) -> tuple[int, int]:
        model.zero_grad(set_to_none=True)
        tracker = PeakMemTracker()
        with FastCpuHalfMatmul() if fast else contextlib.nullcontext(), tracker:
            track_live_tensors(tracker, model)
            model(input_ids=ids, labels=ids).loss.backward()
            grads = tracker.current_total()
        return tracker.peak()["cpu"]["Total"], grads

    # once each first: a lazily built cache (one KiB, seen when other tests ran in the same
    # process before) would otherwise count in whichever run comes first
    peak(False), peak(True)
    slow = peak(False)
    assert peak(True) == slow


FORWARD_CHECKED = ["smollm2-135m-zero1-mixedbf16-fusedadam-b2-s512", "gpt2-zero2-mixedbf16-fusedadam-b4-s256-gc",
                   "pythia-160m-zero2-mixedfp16-fusedadam-b1-s1024-gc"]


@pytest.mark.parametrize("case_id", FORWARD_CHECKED)
def test_deepspeed_forward_allocates_what_the_fake_trace_allocates(case_id: str) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from memlint.trace.case import Case
    from memlint.trace.measure import measure_case

    with open(os.path.join(ROOT, "tests", "calibration", "deepspeed_results.json"), encoding="utf-8") as f:
        result = next(r for r in json.load(f)["results"] if r["id"] == case_id)
    c = result["case"]
    trace_case = Case.from_dict({"id": case_id, "model": c["model"], "batch_size": c["batch_size"],
                                 "seq_len": c["seq_len"], "precision": c["precision"].removeprefix("mixed-"),
                                 "grad_ckpt": c["grad_ckpt"], "optimizer": "adamw-fused"})
    fake = {p["phase"]: p for p in measure_case(trace_case)["phases"]}
    real = {p["phase"]: p for p in result["phases"]}
    # what the second forward adds on top of the persistent state, to the byte
    assert (real["forward2"]["peak_bytes"] - real["optimizer1"]["end_bytes"]
            == fake["forward2"]["peak_bytes"] - fake["zero_grad1"]["end_bytes"])


@pytest.fixture(scope="module")
def deepspeed_result() -> dict:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("deepspeed", reason="the DeepSpeed measurement needs deepspeed")
    case = DeepSpeedCase(id="tiny-zero2", model=TINY_LLAMA, model_name="tiny", batch_size=2, seq_len=64,
                         precision="mixed-bf16", zero_stage=2, round_bytes=1)
    proc = _run(["-m", "memlint.trace.deepspeed_step"], json.dumps(case.__dict__))
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["status"] == "ok", result.get("detail", result)
    return result


def test_deepspeed_runs_its_cuda_optimizer_on_the_cpu(deepspeed_result: dict) -> None:
    assert deepspeed_result["deepspeed"]["optimizer_wrapper"] == "DeepSpeedZeroOptimizer"
    assert deepspeed_result["deepspeed"]["inner_optimizer"] == "FusedAdam"


def test_tracker_sees_deepspeeds_buffers(deepspeed_result: dict) -> None:
    n = deepspeed_result["params"]["total"]
    # before the step: the flat bf16 parameter group (2 B/param) and the fp32 master partition
    # (4 B/param), plus a few hundred bytes of rotary buffers and stray constants
    assert 6 * n <= deepspeed_result["baseline_bytes"] <= 6 * n + 64 * 1024
    ends = {p["phase"]: p for p in deepspeed_result["phases"]}
    # after a step: + Adam's two fp32 states (8 B/param), nothing else kept
    assert ends["optimizer2"]["end_bytes"] - deepspeed_result["baseline_bytes"] == pytest.approx(8 * n, abs=64 * 1024)
    # backward holds the reduce bucket: 5e8 bf16 elements, far larger than this model
    assert deepspeed_result["peak_phase"].startswith("backward")
    assert deepspeed_result["peak_bytes"] >= deepspeed_result["baseline_bytes"] + 8 * n + 2 * 500_000_000
