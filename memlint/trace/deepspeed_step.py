"""Measure a real DeepSpeed ZeRO-1/2 training step (``mixed-bf16`` / ``mixed-fp16``) on the CPU.

memlint's ``mixed-*`` policies are DeepSpeed's: half-precision weights and gradients plus an fp32
master partition and fp32 Adam states kept by ``DeepSpeedZeroOptimizer``
(``deepspeed/runtime/zero/stage_1_and_2.py``). An emulation of that optimizer would only measure
memlint's own assumptions, so this module runs DeepSpeed itself: ``deepspeed.initialize`` on a
Hugging Face model built from its published ``config.json`` (random init, real tensors), and two
full steps of ``loss = engine(...).loss; engine.backward(loss); engine.step()``. A process is one
rank: world size 1 by default; for more, start one process per rank with ``RANK``,
``LOCAL_RANK``, ``WORLD_SIZE`` and ``MASTER_PORT`` set, as the ``deepspeed`` launcher does (the
CPU's process group is gloo; NCCL's and gloo's internal buffers are not tensors and not counted).

Why the CPU run executes what a CUDA run executes (DeepSpeed 0.19.8):

* The optimizer wrapper is chosen by ``DeepSpeedEngine._do_optimizer_sanity_check`` from the
  config alone, not from the accelerator: with ZeRO stage 1 or 2 and the default
  ``grad_accum_dtype`` (the model's dtype) it is ``DeepSpeedZeroOptimizer`` for bf16 and fp16.
  (Stage 1 with bf16 *and* ``data_types.grad_accum_dtype: fp32`` picks ``BF16_Optimizer``; not
  measured here.)
* The inner optimizer for ``"optimizer": {"type": "AdamW"}`` is ``deepspeed.ops.adam.FusedAdam``
  on both: the same Python class, whose states are ``torch.zeros_like`` of the fp32 partition;
  only the kernel differs (``multi_tensor_adam`` in CUDA, ``csrc/cpu/adam/fused_adam.cpp`` on the
  CPU accelerator, JIT-built), and both update in place without temporaries.
* ``contiguous_gradients`` (True), ``overlap_comm`` (False below stage 3), ``reduce_bucket_size``
  and ``allgather_bucket_size`` (5e8) are config defaults, identical on both. A case may set a
  smaller ``reduce_bucket_size`` so that its gradients span many buckets (reduced and moved into
  the partition during backward) instead of one reduced in the backward epilogue.

What differs on the CPU, and is therefore not in these measurements: with ``overlap_comm`` off
nothing differs in the tensors; ``reduction_stream`` is ``None`` on the CPU (a synchronized
device) where CUDA makes a side stream (no memory of its own); pinned host buffers exist only
with offload (not measured). At world size 1 DeepSpeed skips every collective; above it the
collectives write into DeepSpeed's own tensors on both devices.

The peak is the peak of live tensor storage bytes, as ``torch.cuda.max_memory_allocated()``
reports on CUDA, measured with memlint's ``PeakMemTracker`` (PyTorch's ``MemTracker``) after
registering every tensor alive before the step (weights, DeepSpeed's flat buffers, the fp32
partition), each storage rounded up to the CUDA allocator's 512 bytes. Attention is SDPA with the
CUDA kernel choice (:func:`memlint.trace.emulation.cuda_sdpa_kernel_choice`), as in the rest of the
calibration suite.

Run one case:  ``python -m memlint.trace.deepspeed_step < case.json`` (prints one JSON line).
Needs torch, transformers and deepspeed; importing this module imports none of them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Any

#: memlint precision policy -> the DeepSpeed config section that enables it
DS_PRECISIONS = {"mixed-bf16": "bf16", "mixed-fp16": "fp16"}
ZERO_STAGES = (1, 2)


@dataclass
class DeepSpeedCase:
    """One DeepSpeed training step to measure, as seen by one rank."""

    id: str
    model: dict[str, Any]  # the model's published config.json
    model_name: str
    batch_size: int
    seq_len: int
    precision: str  # "mixed-bf16" or "mixed-fp16"
    zero_stage: int  # 1 or 2
    grad_ckpt: bool = False
    world_size: int = 1  # >1: one process per rank, each started with RANK / WORLD_SIZE set
    # zero_optimization.reduce_bucket_size in elements; None: DeepSpeed's default (5e8), larger
    # than all gradients of the models measured here. Smaller: gradients span many buckets.
    reduce_bucket_size: int | None = None
    attn: str = "sdpa"
    steps: int = 2
    round_bytes: int = 512

    def __post_init__(self) -> None:
        if self.precision not in DS_PRECISIONS:
            raise ValueError(f"{self.id}: precision must be one of {sorted(DS_PRECISIONS)}")
        if self.zero_stage not in ZERO_STAGES:
            raise ValueError(f"{self.id}: zero_stage must be 1 or 2 (stage 0 and 3 run other optimizers)")

        if self.reduce_bucket_size is not None and self.reduce_bucket_size < 1:
            raise ValueError(f"{self.id}: reduce_bucket_size must be a positive number of elements")

    def to_dict(self) -> dict[str, Any]:
        """The case as the calibration suite records it: the fields ``trace_case_inputs`` reads
        (``sharding`` ``zero1``/``zero2``, ``optimizer`` ``adamw-fused``: FusedAdam keeps two fp32
        states and allocates nothing in its step) plus the DeepSpeed config that ran."""
        out = dataclasses.asdict(self)
        out.update(sharding=f"zero{self.zero_stage}", optimizer="adamw-fused",
                   deepspeed_config=deepspeed_config(self))
        return out


def deepspeed_config(case: DeepSpeedCase) -> dict[str, Any]:
    """The DeepSpeed JSON config of a case: a plain ZeRO-1/2 config with the memory defaults left
    alone, but for ``reduce_bucket_size`` where the case sets it. fp16 starts its dynamic loss scale at 2**10 instead of 2**16 so that the steps of a
    randomly initialised model are not skipped as overflows (a skipped first step would create no
    Adam states); the scale changes no buffer."""
    half = DS_PRECISIONS[case.precision]
    zero: dict[str, Any] = {"stage": case.zero_stage}
    if case.reduce_bucket_size is not None:
        zero["reduce_bucket_size"] = int(case.reduce_bucket_size)
    return {
        "train_micro_batch_size_per_gpu": case.batch_size,
        "gradient_accumulation_steps": 1,
        half: {"enabled": True, **({"initial_scale_power": 10} if half == "fp16" else {})},
        "zero_optimization": zero,
        "optimizer": {"type": "AdamW", "params": {"lr": 1e-5, "weight_decay": 0.0}},
        "steps_per_print": 10**9,
    }


def _init_process_group_env(case: DeepSpeedCase) -> None:
    """Rank and world size through the environment, as the ``deepspeed`` launcher sets them (a
    multi-rank case is started once per rank with RANK, LOCAL_RANK and MASTER_PORT set)."""
    for key, value in (("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", str(29500 + os.getpid() % 1000)),
                       ("RANK", "0"), ("WORLD_SIZE", str(case.world_size)), ("LOCAL_RANK", "0")):
        os.environ.setdefault(key, value)


def allow_fp16_on_cpu() -> bool:
    """Let ``deepspeed.initialize`` accept ``fp16`` on a CPU without oneDNN fp16 instructions.

    Why: ``DeepSpeedEngine`` refuses fp16 when ``get_accelerator().is_fp16_supported()`` is false,
    and the CPU accelerator answers with ``torch.ops.mkldnn._is_mkldnn_fp16_supported()``, i.e.
    whether the CPU has AVX512-FP16/AMX-FP16 (fast fp16 kernels). PyTorch runs every op of these
    models in fp16 on any CPU; the answer only gates speed. In the ZeRO-1/2 path the flag is read
    by that check alone (stage 3 and Muon read it too; neither runs here). Returns whether it
    patched.
    """
    from deepspeed.accelerator import get_accelerator

    accelerator = get_accelerator()
    if accelerator.is_fp16_supported():
        return False
    accelerator.is_fp16_supported = lambda: True
    return True


def build_model(case: DeepSpeedCase) -> tuple[Any, int]:
    """The Hugging Face model, built in the half dtype DeepSpeed casts it to, with checkpointing
    as HF Trainer enables it (memlint.trace.build, shared with the rest of the suite)."""
    import torch

    from memlint.trace import build
    from memlint.trace.case import Case

    half = DS_PRECISIONS[case.precision]
    trace_case = Case(id=case.id, model=case.model, model_name=case.model_name, batch_size=case.batch_size,
                      seq_len=case.seq_len, precision=half, grad_ckpt=case.grad_ckpt, attn=case.attn)
    model, info = build.build_model(trace_case, torch.device("cpu"), None)
    return model, int(info["vocab_size"])


def measure(case: DeepSpeedCase) -> dict[str, Any]:
    """Run ``case.steps`` DeepSpeed training steps under the tracker; the result dict has the
    calibration suite's format (``peak_bytes``, ``peak_phase``, ``breakdown``, ``phases``, ``case``)."""
    t_start = time.perf_counter()
    _init_process_group_env(case)
    import deepspeed
    import torch

    from memlint.trace import emulation
    from memlint.trace.measure import versions
    from memlint.trace.tracker import PeakMemTracker, set_storage_rounding, track_live_tensors

    set_storage_rounding(case.round_bytes)
    notes = []
    fp16 = DS_PRECISIONS[case.precision] == "fp16"
    if fp16 and allow_fp16_on_cpu():
        notes.append("fp16 allowed on a CPU without oneDNN fp16 instructions (allow_fp16_on_cpu)")
    torch.manual_seed(0)
    model, vocab = build_model(case)
    n_params = sum(p.numel() for p in model.parameters())
    engine, optimizer, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(),
                                                   config=deepspeed_config(case))
    wrapper, inner = type(optimizer).__name__, type(getattr(optimizer, "optimizer", None)).__name__
    ids = torch.randint(0, vocab, (case.batch_size, case.seq_len))
    labels = ids.clone()
    timing = {"setup_s": round(time.perf_counter() - t_start, 2)}

    tracker = PeakMemTracker()
    phases: list[dict[str, Any]] = []

    def end_of(phase: str) -> None:
        phases.append({"phase": phase, "peak_bytes": int(tracker.phase_peaks.get(phase, tracker.current_total())),
                       "end_bytes": tracker.current_total(),
                       "end_breakdown": {k: v for k, v in tracker.current().get("cpu", {}).items() if k != "Total"}})

    t0 = time.perf_counter()
    if fp16:
        notes.append("fp16 matrix products computed through fp32 kernels below the tracker "
                     "(emulation.FastCpuHalfMatmul: speed only)")
    # entered before (outside) the tracker, so its fp32 copies are not counted
    fast_half = emulation.FastCpuHalfMatmul() if fp16 else contextlib.nullcontext()
    with fast_half, tracker, emulation.cuda_sdpa_kernel_choice():
        baseline = track_live_tensors(tracker, engine.module, optimizer.optimizer)
        for step in range(1, case.steps + 1):
            tracker.phase = f"forward{step}"
            loss = engine(input_ids=ids, labels=labels).loss
            end_of(f"forward{step}")
            tracker.phase = f"backward{step}"
            engine.backward(loss)
            del loss
            end_of(f"backward{step}")
            tracker.reset_mod_stats()
            tracker.phase = f"optimizer{step}"
            engine.step()  # DeepSpeed's step: optimizer step, then zero_grad of the partitions
            end_of(f"optimizer{step}")
            if getattr(optimizer, "overflow", False):
                raise RuntimeError(f"step {step} overflowed and was skipped: not a steady-state step")
    timing["steps_s"] = round(time.perf_counter() - t0, 2)

    peak = tracker.peak().get("cpu", {})
    peak_bytes = int(peak.get("Total", 0))
    return {
        "id": case.id,
        "status": "ok",
        "peak_bytes": peak_bytes,
        "peak_gib": round(peak_bytes / 2**30, 3),
        "peak_phase": tracker.peak_phase.get(torch.device("cpu")) or next(iter(tracker.peak_phase.values()), None),
        "breakdown": {k: v for k, v in peak.items() if k != "Total"},
        "baseline_bytes": baseline,
        "phases": phases,
        "params": {"total": int(n_params), "trainable": int(n_params), "dtype": DS_PRECISIONS[case.precision]},
        "tokens": {"batch_size": case.batch_size, "seq_len": case.seq_len, "vocab_size": vocab},
        "deepspeed": {"optimizer_wrapper": wrapper, "inner_optimizer": inner,
                      "zero_stage": case.zero_stage, "world_size": torch.distributed.get_world_size(),
                      "rank": torch.distributed.get_rank()},
        "measurement": {
            "tensors": "real",
            "device": "cpu (DeepSpeed CPU accelerator)",
            "tracker": "MemTracker, with every tensor alive before the step registered",
            "rounding_bytes": case.round_bytes,
            "emulate_cuda_sdpa": case.attn == "sdpa",
            "per_rank": f"rank {os.environ['RANK']} of {case.world_size} processes",
        },
        "notes": notes,
        "timing_s": {**timing, "total_s": round(time.perf_counter() - t_start, 2)},
        "versions": {**versions(), "deepspeed": deepspeed.__version__},
        "case": case.to_dict(),
    }


def main() -> int:
    """Read one case (JSON) from stdin, print its result as one JSON line on stdout."""
    data = json.loads(sys.stdin.read())
    case = DeepSpeedCase(**data)
    try:
        with contextlib.redirect_stdout(sys.stderr):  # DeepSpeed prints to stdout
            result = measure(case)
    except Exception as e:  # noqa: BLE001 - reported as the case's result
        result = {"id": case.id, "status": "error", "error": f"{type(e).__name__}: {e}",
                  "detail": traceback.format_exc()[-4000:], "case": case.to_dict()}
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
