"""Command line of ``memlint.trace``.

    python -m memlint.trace cases.json --jobs 2 --out results.json
    python -m memlint.trace cases.json --ids case-a,case-b
    python -m memlint.trace --model-config path/to/config.json --batch 4 --seq 2048 \\
        --precision bf16 --optimizer adamw --grad-ckpt
    python -m memlint.trace /work/shared/oracle/cases.json --oracle --ids gpt2-fp32-adamw-b8-s1024
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from typing import Any

from memlint.trace.case import (
    ATTN_IMPLS,
    OPTIMIZERS,
    PRECISIONS,
    SHARDINGS,
    Case,
    CaseError,
    load_cases,
    load_model_config,
)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m memlint.trace",
        description="Measure the per-GPU peak memory of training steps on fake tensors (no GPU, no weights).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__,
    )
    ap.add_argument("cases", nargs="*", help="case files (JSON): one case, a list, or {\"models\", \"cases\"}")
    ap.add_argument("--ids", help="comma-separated case ids to run (default: all)")
    ap.add_argument("--oracle", action="store_true",
                    help="the case files use the ground-truth oracle's spelling (shared/oracle/cases.json)")
    ap.add_argument("--out", help="write the results JSON here (default: stdout)")
    ap.add_argument("--update", metavar="RESULTS",
                    help="an earlier results file: the cases run now replace theirs, the others are kept "
                         "(ordered as in the case files); written to --out, default RESULTS itself")
    ap.add_argument("--jobs", type=int, default=1, help="worker subprocesses at once (default 1)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per case (default 900)")
    ap.add_argument("--inline", action="store_true", help="measure in this process, no subprocess (debugging)")
    one = ap.add_argument_group("one case from the command line")
    one.add_argument("--model-config", help="a config.json, a directory holding one, or a memlint catalogue entry")
    one.add_argument("--batch", type=int, help="micro-batch size per GPU")
    one.add_argument("--seq", type=int, help="sequence length")
    one.add_argument("--precision", choices=PRECISIONS, default="bf16")
    one.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw")
    one.add_argument("--attn", choices=ATTN_IMPLS, default="sdpa")
    one.add_argument("--grad-ckpt", action="store_true")
    one.add_argument("--lora", metavar="R[:ALPHA[:MODULES]]",
                     help="LoRA rank, alpha and comma-separated target modules (default all-linear)")
    one.add_argument("--qlora", metavar="R[:ALPHA[:MODULES]]", help="QLoRA (bitsandbytes NF4) like --lora")
    one.add_argument("--world-size", type=int, default=1)
    one.add_argument("--sharding", choices=SHARDINGS, default=None,
                     help="default: fsdp-full when --world-size > 1, else none")
    one.add_argument("--steps", type=int, default=2)
    one.add_argument("--grad-accum", type=int, default=1, help="micro-batches of the last step (default 1)")
    one.add_argument("--round-bytes", type=int, default=512, help="allocator rounding (1 = exact bytes)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return ap


def _adapter(spec: str | None) -> dict[str, Any] | None:
    if not spec:
        return None
    parts = spec.split(":")
    out: dict[str, Any] = {"r": int(parts[0]), "alpha": float(parts[1]) if len(parts) > 1 else 2.0 * int(parts[0]),
                           "dropout": 0.05, "target_modules": "all-linear"}
    if len(parts) > 2 and parts[2]:
        out["target_modules"] = parts[2].split(",")
    return out


def _model_name(path: str, config: dict[str, Any]) -> str:
    """The Hub id of a catalogue entry (its "id"), the config's ``_name_or_path``, or the
    name of the directory holding the config.json."""
    p = os.path.join(path, "config.json") if os.path.isdir(path) else path
    try:
        with open(p, encoding="utf-8") as f:
            entry = json.load(f)
        if isinstance(entry, dict) and isinstance(entry.get("id"), str) and "config" in entry:
            return entry["id"]
    except (OSError, ValueError):
        pass
    return str(config.get("_name_or_path") or os.path.basename(os.path.dirname(os.path.abspath(p))))


def _case_from_args(args: argparse.Namespace) -> Case:
    if args.batch is None or args.seq is None:
        raise CaseError("--model-config needs --batch and --seq")
    config = load_model_config(args.model_config)
    name = _model_name(args.model_config, config)
    d: dict[str, Any] = {
        "model": config, "model_name": str(name), "batch_size": args.batch, "seq_len": args.seq,
        "precision": args.precision, "optimizer": args.optimizer, "attn": args.attn, "grad_ckpt": args.grad_ckpt,
        "lora": _adapter(args.lora), "qlora": _adapter(args.qlora), "world_size": args.world_size,
        "sharding": args.sharding or ("fsdp-full" if args.world_size > 1 else "none"),
        "steps": args.steps, "grad_accum": args.grad_accum, "round_bytes": args.round_bytes,
    }
    return Case.from_dict(d)


def _merge(path: str, new: list[dict[str, Any]], order: list[Case]) -> list[dict[str, Any]]:
    """Results of ``path`` with those of ``new`` replacing the same ids, ordered like ``order``
    (the case files' order); earlier results whose case is no longer in the files are dropped."""
    with open(path, encoding="utf-8") as f:
        old = {r["id"]: r for r in json.load(f)["results"]}
    old.update({r["id"]: r for r in new})
    ids = [c.id for c in order]
    return [old[i] for i in ids if i in old]


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.worker:
        from memlint.trace.batch import worker_main

        return worker_main()
    try:
        if args.model_config:
            cases = [_case_from_args(args)]
        elif args.cases:
            cases = [c for path in args.cases for c in load_cases(path, oracle=args.oracle)]
        else:
            _parser().error("give a case file or --model-config")
        all_cases = cases
        if args.ids:
            want = [i for i in args.ids.split(",") if i]
            missing = sorted(set(want) - {c.id for c in cases})
            if missing:
                raise CaseError(f"unknown case ids: {', '.join(missing)}")
            cases = [c for c in cases if c.id in want]
    except (CaseError, OSError) as e:
        print(f"memlint trace: {e}", file=sys.stderr)
        return 2

    from memlint.trace.batch import error_result, run_cases, summary_line

    def progress(done: int, total: int, res: dict[str, Any]) -> None:
        print(f"[{done:3d}/{total}] {res['id']:<52s} {summary_line(res)}  ({res.get('wall_s', 0):.1f}s)",
              file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    if args.inline:
        import traceback

        from memlint.trace.measure import measure_case

        results = []
        for i, c in enumerate(cases, 1):
            t1 = time.perf_counter()
            try:
                r = measure_case(c)
            except Exception as e:  # noqa: BLE001
                r = error_result(c, "error", f"{type(e).__name__}: {e}", traceback.format_exc()[-4000:])
            r["wall_s"] = round(time.perf_counter() - t1, 2)
            progress(i, len(cases), r)
            results.append(r)
    else:
        results = run_cases(cases, jobs=args.jobs, timeout=args.timeout, progress=progress)
    earlier_runs: list[dict[str, Any]] = []
    if args.update:
        with open(args.update, encoding="utf-8") as f:
            old_doc = json.load(f)
        earlier_runs = old_doc.get("earlier_runs", []) + [
            {k: old_doc.get(k) for k in ("argv", "jobs", "wall_clock_s", "n_cases", "n_ok", "updated_ids")}]
        results = _merge(args.update, results, all_cases)
        args.out = args.out or args.update
    doc = {
        "generated_by": "python -m memlint.trace",
        "argv": sys.argv[1:] if argv is None else argv,
        "updated_ids": [c.id for c in cases] if args.update else None,
        "host": {"machine": platform.machine(), "cpus": os.cpu_count(), "python": platform.python_version()},
        "jobs": 1 if args.inline else args.jobs,
        "wall_clock_s": round(time.perf_counter() - t0, 1),
        "n_cases": len(results),
        "n_ok": sum(r.get("status") == "ok" for r in results),
        "results": results,
    }
    if earlier_runs:
        doc["earlier_runs"] = earlier_runs
    text = json.dumps(doc, indent=1)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
        print(f"wrote {args.out}: {doc['n_ok']}/{doc['n_cases']} ok in {doc['wall_clock_s']} s", file=sys.stderr)
    else:
        print(text)
    return 0 if doc["n_ok"] == doc["n_cases"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
