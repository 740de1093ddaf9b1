"""Run one case: build it on fake tensors and measure ``steps`` full training steps.

The loop is what HF Trainer does per step: for each micro-batch
``loss = model(input_ids, labels=labels).loss`` (only the loss survives the forward) and
``loss.backward()`` (gradients accumulate in ``.grad``), then ``optimizer.step()``,
``optimizer.zero_grad(set_to_none=True)``; with ``amp-fp16`` through a ``GradScaler``. Two
steps by default, because Adam-style states are created at the first ``step()`` and the second
step is the steady state. With gradient accumulation the last step runs ``grad_accum``
micro-batches (from the second on, each runs with the accumulated gradients alive); the steps
before it run one, as all they do is create the optimizer's states.
"""

from __future__ import annotations

import contextlib
import platform
import time
from typing import Any

from memlint.trace.case import Case

#: phases of one step, in order; the numbered names (forward1, backward1, optimizer1,
#: zero_grad1, forward2, ...) are what ``peak_phase`` and ``phases`` report. With gradient
#: accumulation the micro-batches of a step are numbered too: forward1.1, backward1.1,
#: forward1.2, backward1.2, optimizer1, ...
PHASES = ("forward", "backward", "optimizer", "zero_grad")


def phase_kind(name: str) -> str:
    """``forward2.1`` -> ``forward``: the phase a numbered phase name belongs to."""
    return name.rstrip("0123456789.")

_KERNEL_WORDS = ("attention", "softmax", "flash", "efficient", "dropout", "cross_entropy", "nll_loss",
                 "gemm_4bit", "optimizer_update", "_fused_adam", "grouped_mm")


def versions() -> dict[str, str]:
    """Versions of everything that decides what a step allocates (read from the installed
    distributions' metadata, so an optional package is not imported just to report it)."""
    from importlib import metadata

    out = {"python": platform.python_version()}
    for name in ("torch", "transformers", "peft", "accelerate", "bitsandbytes"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def measure_case(case: Case, *, fake: bool = True, device: str = "cpu") -> dict[str, Any]:
    """Measure one case and return its result dict (see ``docs/trace.md`` for the format).

    ``fake=False`` runs the same loop on real tensors (tiny models only: it allocates and
    computes everything for real); the tests use it to check the fake run.
    """
    t_start = time.perf_counter()
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    from memlint.trace import build, emulation, vision_inputs
    from memlint.trace.tracker import PeakFSDPMemTracker, PeakMemTracker, set_storage_rounding

    timing: dict[str, float] = {"import_s": round(time.perf_counter() - t_start, 2)}
    set_storage_rounding(case.round_bytes)
    dev = torch.device(device)
    fsdp = case.sharding == "fsdp-full"
    uses_bnb = case.qlora is not None or case.optimizer == "adamw-8bit"

    if fsdp:
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh
        from torch.testing._internal.distributed.fake_pg import FakeStore

        emulation.fix_dtensor_sharding_propagation()
        if dist.is_initialized():
            dist.destroy_process_group()
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=case.world_size)
        mesh = init_device_mesh(dev.type, (case.world_size,))

    mode = None
    if fake:
        emulation.force_unpacked_sequences()
        mode = FakeTensorMode()
    outer = mode if mode is not None else contextlib.nullcontext()
    bnb_ctx = build.bitsandbytes_constants_outside_fake_mode(mode) if uses_bnb else contextlib.nullcontext()

    try:
        t0 = time.perf_counter()
        with bnb_ctx:
            model, info = build.build_model(case, dev, mode)
            with outer:
                if fsdp:
                    build.shard_fsdp2(model, case, mesh)
                params = [p for p in model.parameters() if p.requires_grad]
                n_trainable = sum(p.numel() for p in params)
                n_with_adapters = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
                opt = build.build_optimizer(case, params)
                scaler = build.build_scaler(case, dev)
                if vision_inputs.is_vision_language(case):
                    batch = {}
                else:
                    ids = torch.randint(0, info["vocab_size"], (case.batch_size, case.seq_len), device=dev)
                    labels = (torch.randint(0, 2, (case.batch_size,), device=dev) if build.is_classifier(case)
                              else torch.randint(0, info["vocab_size"], (case.batch_size, case.target_len), device=dev)
                              if case.target_len else ids.clone())
                    batch = {"input_ids": ids, "labels": labels}
            constants = contextlib.nullcontext()
            if vision_inputs.is_vision_language(case):
                # built outside the fake mode: the index tensors are computed for real first
                batch, info["images"] = vision_inputs.build_batch(case, model, mode, dev)
                constants = vision_inputs.constant_index_tensors(info["images"]["constant_limit"])
            timing["build_s"] = round(time.perf_counter() - t0, 2)

            with outer, constants:
                inputs = tuple(batch.values())
                if fsdp:
                    tracker: Any = PeakFSDPMemTracker(model, opt)
                    tracker.track_inputs(inputs)
                else:
                    tracker = PeakMemTracker()
                    tracker.track_external(model, opt, *inputs)
                t0 = time.perf_counter()
                phases, loss_head = _run_steps(case, model, opt, scaler, batch, tracker, dev)
                timing["steps_s"] = round(time.perf_counter() - t0, 2)
    finally:
        if fsdp:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()

    peak_all = tracker.peak()
    dkey = str(dev) if str(dev) in peak_all else (max(peak_all, key=lambda d: peak_all[d]["Total"]) if peak_all else "")
    at_peak = peak_all.get(dkey, {})
    peak_bytes = int(at_peak.get("Total", 0))
    peak_phase = next((ph for d, ph in tracker.peak_phase.items() if str(d) == dkey), None)
    timing["total_s"] = round(time.perf_counter() - t_start, 2)
    return {
        "id": case.id,
        "status": "ok",
        "peak_bytes": peak_bytes,
        "peak_gib": round(peak_bytes / 2**30, 3),
        "peak_phase": peak_phase,
        "breakdown": {k: v for k, v in at_peak.items() if k != "Total"},
        "phases": phases,
        "params": {
            "total": int(info["n_params"]),
            "trainable": int(n_trainable),
            "total_with_adapters": int(n_with_adapters),
            "dtype": str(build.param_dtype(case)).replace("torch.", ""),
            "quantized_linear_layers": info.get("quantized_linear_layers", 0),
        },
        "tokens": {"batch_size": case.batch_size, "seq_len": case.seq_len, "vocab_size": info["vocab_size"],
                   "logits_numel": case.batch_size * case.seq_len * info["vocab_size"]},
        "loss_head": loss_head,
        "kernels": sorted(o for o in tracker.ops_seen if any(w in o for w in _KERNEL_WORDS)),
        "measurement": {
            "tensors": "fake (FakeTensorMode)" if fake else "real",
            "device": str(dev),
            "tracker": "FSDPMemTracker" if fsdp else "MemTracker",
            "rounding_bytes": case.round_bytes,
            "emulate_cuda_sdpa": case.emulate_cuda_sdpa,
            "emulate_cuda_autocast": case.emulate_cuda_autocast,
            "per_rank": "rank 0 of a fake process group" if fsdp else "single process",
        },
        "notes": info.get("notes", []),
        **({"images": {k: v for k, v in info["images"].items() if k != "constant_limit"}} if "images" in info else {}),
        "timing_s": timing,
        "versions": versions(),
        "case": case.to_dict(),
    }


def _run_steps(case: Case, model: Any, opt: Any, scaler: Any, batch: dict[str, Any], tracker: Any,
               dev: Any) -> tuple[list[dict[str, Any]], dict[str, int]]:
    import torch

    from memlint.trace import build, emulation

    phases: list[dict[str, Any]] = []
    loss_head: dict[str, int] = {}

    def end_of(phase: str) -> None:
        cur = tracker.current().get(str(dev), {})
        phases.append({
            "phase": phase,
            "peak_bytes": int(tracker.phase_peaks.get(phase, cur.get("Total", 0))),
            "running_peak_bytes": int(max(tracker._peak_mem.values(), default=0)),
            "end_bytes": int(cur.get("Total", 0)),
            "end_breakdown": {k: v for k, v in cur.items() if k != "Total"},
        })

    # bytes live right before the output head runs and at the end of the model's forward
    # (step 1): their difference is what the logits and the loss keep alive
    def before_head(_mod: Any, _args: Any) -> None:
        loss_head.setdefault("bytes_before_lm_head", tracker.current_total())

    def after_model(_mod: Any, _args: Any, _out: Any) -> None:
        if "bytes_before_lm_head" in loss_head and "bytes_at_end_of_forward" not in loss_head:
            loss_head["bytes_at_end_of_forward"] = tracker.current_total()
            loss_head["logits_and_loss_bytes"] = loss_head["bytes_at_end_of_forward"] - loss_head["bytes_before_lm_head"]

    head = model.get_output_embeddings()
    hooks = [model.register_forward_hook(after_model)]
    if head is not None:
        hooks.append(head.register_forward_pre_hook(before_head))

    amp = build.autocast_dtype(case)
    fsdp_mp = case.sharding == "fsdp-full" and case.precision == "amp-bf16"

    def autocast() -> Any:
        if amp is None or fsdp_mp:
            return contextlib.nullcontext()
        return torch.autocast(device_type=dev.type, dtype=amp)

    emulate = dev.type != "cuda"
    rules = (emulation.cuda_autocast_op_lists(dev.type)
             if emulate and case.emulate_cuda_autocast and amp is not None and not fsdp_mp
             else contextlib.nullcontext())
    sdpa = (emulation.cuda_sdpa_kernel_choice() if emulate and case.emulate_cuda_sdpa and case.attn == "sdpa"
            else contextlib.nullcontext())
    try:
        # the autocast rules stay on for the whole loop: checkpoint recomputation in backward
        # re-enters autocast and must see the dtypes of the original forward
        with tracker, sdpa, rules:
            for step in range(1, case.steps + 1):
                # the steps before the last only create the optimizer's states: one micro-batch
                # each is enough (a later micro-batch of theirs allocates no more than the last
                # step's, which runs with those states alive)
                micro_batches = case.grad_accum if step == case.steps else 1
                for micro in range(1, micro_batches + 1):
                    tag = f"{step}.{micro}" if case.grad_accum > 1 else str(step)
                    tracker.phase = f"forward{tag}"
                    with autocast():
                        out = model(**batch)
                    loss = out.loss
                    if not case.keep_outputs:
                        del out
                    end_of(f"forward{tag}")
                    tracker.phase = f"backward{tag}"
                    (scaler.scale(loss) if scaler is not None else loss).backward()
                    del loss
                    if case.keep_outputs:
                        del out
                    end_of(f"backward{tag}")
                    # the stock tracker refuses a second forward of the root module unless the
                    # per-module statistics of the previous iteration are cleared
                    tracker.reset_mod_stats()
                tracker.phase = f"optimizer{step}"
                if scaler is not None:
                    scaler.step(opt)
                    scaler.update()
                else:
                    opt.step()
                end_of(f"optimizer{step}")
                tracker.phase = f"zero_grad{step}"
                opt.zero_grad(set_to_none=True)
                end_of(f"zero_grad{step}")
    finally:
        for h in hooks:
            h.remove()
    return phases, loss_head
