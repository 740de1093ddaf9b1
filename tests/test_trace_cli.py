"""``memlint trace``: a run (flags, a script or config, a directory) measured on fake tensors and
printed beside the static estimate of the same setup.

The converter and the comparison are tested without torch (the comparison on the calibration
suite's real measurements); the command itself runs in a subprocess, with torch when the
``memlint[trace]`` extra is installed, and with torch blocked to check the message without it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from argparse import Namespace
from pathlib import Path

import pytest

from memlint.catalog.models import resolve_model
from memlint.cli.trace import EXTRA_MESSAGE
from memlint.estimate import Attention, Lora, Optimizer, Precision, Sharding, TrainingSetup, estimate_training
from memlint.estimate.oracle_cases import trace_case_inputs
from memlint.trace.compare import ROWS, compare, describe_phase, persistent_optimizer_bytes
from memlint.trace.setup_case import NotMeasurable, trace_plan

ROOT = Path(__file__).resolve().parents[1]
TOLERANCE = 0.10  # the estimate must be within 10 % of the measured peak
CALIBRATION = json.loads((ROOT / "tests" / "calibration" / "results.json").read_text())["results"]
MEASURED = [r for r in CALIBRATION if r["status"] == "ok"]

# What a user's run_clm.py-style script looks like: HfArgumentParser dataclasses, a helper that
# groups texts, the HF Trainer with fp16 on an fp32-loaded model and gradient accumulation.
RUN_CLM = '''\
"""Causal language modelling on WikiText-2 with the HF Trainer (distilgpt2, one GPU)."""

from dataclasses import dataclass, field

from datasets import load_dataset
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    HfArgumentParser,
    Trainer,
    TrainingArguments,
    default_data_collator,
)


@dataclass
class ModelArguments:
    model_name_or_path: str = field(default="distilbert/distilgpt2")


def group_texts(examples, block_size=512):
    concatenated = {k: sum(examples[k], []) for k in examples}
    total = (len(concatenated["input_ids"]) // block_size) * block_size
    result = {k: [t[i : i + block_size] for i in range(0, total, block_size)] for k, t in concatenated.items()}
    result["labels"] = result["input_ids"].copy()
    return result


def main():
    (model_args,) = HfArgumentParser(ModelArguments).parse_args_into_dataclasses()
    tokenizer = AutoTokenizer.from_pretrained(model_args.model_name_or_path)
    model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path)
    raw = load_dataset("wikitext", "wikitext-2-raw-v1")
    tokenized = raw.map(lambda b: tokenizer(b["text"]), batched=True, remove_columns=["text"])
    training_args = TrainingArguments(
        output_dir="out/distilgpt2-wikitext",
        per_device_train_batch_size=8,
        gradient_accumulation_steps=4,
        fp16=True,
        learning_rate=5e-5,
        num_train_epochs=3,
    )
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=tokenized.map(group_texts, batched=True)["train"],
        data_collator=default_data_collator,
    )
    trainer.train()


if __name__ == "__main__":
    main()
'''

# Blocks packages the way a Python without them behaves, then runs the CLI.
BLOCKING = textwrap.dedent('''
    import importlib.abc, sys

    class Blocker(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, Blocker())
    from memlint.cli.main import main
    raise SystemExit(main(sys.argv[1:]))
''')
WITHOUT_TORCH = 'BLOCKED = ("torch", "transformers", "peft")' + BLOCKING


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "ignore"}


def memlint(*args: str, cwd: Path = ROOT, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memlint", "trace", *args], cwd=cwd, env=_env(),
                          capture_output=True, text=True, timeout=timeout)


def peak_row(text: str) -> tuple[float, float]:
    """(measured, estimated) GiB of the table's Peak row."""
    match = re.search(r"^  Peak\s+([\d,.]+)\s+([\d,.]+)\s", text, re.M)
    assert match, text
    return float(match[1].replace(",", "")), float(match[2].replace(",", ""))


@pytest.fixture
def extra_found() -> None:
    """torch and transformers are installed (found, not imported)."""
    import importlib.util

    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None:
        pytest.skip("the memlint[trace] extra is not installed")


# --------------------------------------------------------------------------- without torch
def test_importing_the_cli_does_not_import_torch() -> None:
    code = ("import sys, contextlib, memlint.cli.main\n"
            "with contextlib.suppress(SystemExit):\n"
            "    memlint.cli.main.main(['trace', '--help'])\n"
            "assert 'torch' not in sys.modules and 'transformers' not in sys.modules, 'imported'\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "--model-config" in proc.stdout and "--timeout" in proc.stdout and "--grad-accum" in proc.stdout


@pytest.mark.parametrize("args", [
    ["--model", "meta-llama/Llama-3.1-8B", "--batch", "1", "--seq", "2048", "--grad-ckpt"],
    ["examples/sft-llama3-h100/train.py"],
    ["examples"],
], ids=["flags", "script", "directory"])
def test_without_the_extra_one_line_and_exit_2(args: list[str]) -> None:
    proc = subprocess.run([sys.executable, "-c", WITHOUT_TORCH, "trace", *args], cwd=ROOT, env=_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == EXTRA_MESSAGE == "memlint trace needs the optional extra: pip install 'memlint[trace]'"
    assert proc.stdout == ""


def test_qlora_without_bitsandbytes_says_so(extra_found: None) -> None:
    code = 'BLOCKED = ("bitsandbytes",)' + BLOCKING
    proc = subprocess.run([sys.executable, "-c", code, "trace", "--model", "Qwen/Qwen2.5-0.5B", "--qlora"], cwd=ROOT,
                          env=_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == "memlint trace: QLoRA and 8-bit AdamW also need bitsandbytes: pip install bitsandbytes==0.50.2"


# --------------------------------------------------------------------------- run -> case (no torch)
LLAMA8B = resolve_model("meta-llama/Llama-3.1-8B")


def test_qlora_run_with_accumulation_becomes_a_qlora_case() -> None:
    setup = TrainingSetup(micro_batch=2, seq_len=4096, precision=Precision.BF16, optimizer=Optimizer.PAGED_ADAMW_8BIT,
                          grad_ckpt_every=1, attention=Attention.FLASH, grad_accum=8,
                          lora=Lora(r=32, targets=("all-linear",), alpha=16, dropout=0.0, quantization="nf4"))
    plan = trace_plan(LLAMA8B, setup)
    c = plan.case
    assert (c.batch_size, c.seq_len, c.precision, c.grad_ckpt, c.attn) == (2, 4096, "bf16", True, "sdpa")
    assert c.optimizer == "adamw-8bit" and c.lora is None
    assert c.qlora == {"r": 32, "alpha": 16, "dropout": 0.0, "target_modules": "all-linear", "quant_type": "nf4",
                       "double_quant": True}
    assert c.grad_accum == 2 and plan.setup.grad_accum == 8
    assert c.model["model_type"] == "llama" and c.model["num_hidden_layers"] == 32 and c.model_name == LLAMA8B.name
    said = " | ".join(plan.differences)
    for words in ("flash-attention 2 measured as SDPA", "paged 8-bit AdamW measured as 8-bit AdamW",
                  "prepare_model_for_kbit_training", "2 of the 8 accumulated micro-batches"):
        assert words in said
    assert plan.setup.lora.kbit_prepared is False and plan.setup.attention == Attention.SDPA


def test_data_parallel_and_fsdp_runs_measure_one_gpu() -> None:
    ddp = trace_plan(LLAMA8B, TrainingSetup(world_size=8, grad_ckpt_every=1))
    assert (ddp.case.world_size, ddp.case.sharding) == (1, "none")
    assert any("one of the 8 data-parallel replicas" in d for d in ddp.differences)
    fsdp = trace_plan(LLAMA8B, TrainingSetup(world_size=8, sharding=Sharding.FSDP_FULL, precision=Precision.AMP_BF16))
    assert (fsdp.case.world_size, fsdp.case.sharding, fsdp.differences) == (8, "fsdp-full", ())
    hybrid = trace_plan(LLAMA8B, TrainingSetup(world_size=32, sharding=Sharding.FSDP_HYBRID))
    assert (hybrid.case.world_size, hybrid.case.sharding) == (8, "fsdp-full")


@pytest.mark.parametrize(("setup", "hint"), [
    (TrainingSetup(sharding=Sharding.ZERO2, world_size=8), "--zero 0"),
    (TrainingSetup(sharding=Sharding.ZERO3, world_size=8, precision=Precision.MIXED_BF16), "--precision amp-bf16"),
    (TrainingSetup(optimizer=Optimizer.LION), "--optimizer"),
    (TrainingSetup(grad_ckpt_every=4), "--grad-ckpt"),
    (TrainingSetup(sharding=Sharding.FSDP_GRAD_OP, world_size=4), "--fsdp full"),
    (TrainingSetup(lora=Lora(quantization="int8")), "--qlora"),
], ids=["zero2", "zero3-mixed", "lion", "ckpt-every-4", "grad-op", "int8"])
def test_what_the_trace_cannot_run_says_which_flag_to_pass(setup: TrainingSetup, hint: str) -> None:
    with pytest.raises(NotMeasurable) as error:
        trace_plan(LLAMA8B, setup)
    assert hint in str(error.value)


def test_models_and_framework_rules() -> None:
    with pytest.raises(NotMeasurable, match="not a causal language model"):
        trace_plan(resolve_model("google/flan-t5-base"), TrainingSetup())
    gemma2 = trace_plan(resolve_model("google/gemma-2-9b"), TrainingSetup(grad_ckpt_every=1))
    assert gemma2.case.attn == "eager" and any("Gemma 2" in n for n in gemma2.notes)
    gpt2 = trace_plan(resolve_model("gpt2"), TrainingSetup(seq_len=2048))
    assert any("longer than the model's 1024 positions" in n for n in gpt2.notes)


@pytest.mark.parametrize("setup", [
    TrainingSetup(micro_batch=4, seq_len=1024, precision=Precision.AMP_FP16, optimizer=Optimizer.ADAMW_FUSED,
                  grad_accum=4),
    TrainingSetup(micro_batch=2, seq_len=4096, grad_ckpt_every=1, lora=Lora(r=16, quantization="nf4"), grad_accum=2),
    TrainingSetup(micro_batch=1, seq_len=8192, grad_ckpt_every=1, sharding=Sharding.FSDP_FULL, world_size=8,
                  precision=Precision.AMP_BF16, optimizer=Optimizer.ADAFACTOR),
    TrainingSetup(micro_batch=8, seq_len=512, precision=Precision.FP32, optimizer=Optimizer.SGD_MOMENTUM,
                  attention=Attention.EAGER, keep_logits=True, world_size=4),
], ids=["amp-fp16-accum", "qlora", "fsdp8-adafactor", "ddp-eager-keep-logits"])
def test_the_measured_setup_reads_back_from_the_case(setup: TrainingSetup) -> None:
    """The estimate beside a measurement prices what the case measures: the calibration
    tooling's reading of the case (trace_case_inputs) gives the same estimate."""
    plan = trace_plan(LLAMA8B, setup)
    arch, read_back = trace_case_inputs({"case": plan.case.to_dict()})
    assert estimate_training(arch, read_back).peak_bytes == estimate_training(LLAMA8B, plan.setup).peak_bytes


def test_a_script_path_becomes_a_case() -> None:
    from memlint.cli.named_run import plan_for_path

    args = Namespace(model=None, batch=None, seq=None, precision=None, optimizer=None, grad_ckpt=None, attn=None,
                     lora_r=None, lora_targets=None, lora_dropout=None, qlora=False, zero=None, fsdp=None,
                     offload=None, gpus=None, gpu=None, grad_accum=None, fused_loss=False, keep_logits=False)
    arch, setup, gpu = plan_for_path(str(ROOT / "examples" / "sft-llama3-h100" / "train.py"), args)
    c = trace_plan(arch, setup).case
    assert (c.model_name, c.batch_size, c.seq_len, c.precision, c.optimizer) == (
        "meta-llama/Llama-3.1-8B", 8, 4096, "bf16", "adamw-fused")
    assert c.grad_ckpt and c.grad_accum == 2 and gpu


def test_model_config_replaces_the_model_of_a_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from argparse import ArgumentParser

    from memlint.cli.trace import _runs, add_arguments

    (tmp_path / ".git").mkdir()
    (tmp_path / "run_clm.py").write_text(RUN_CLM)
    (tmp_path / "configs").mkdir()
    config = {"model_type": "llama", "hidden_size": 512, "intermediate_size": 1376, "num_hidden_layers": 4,
              "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 32000}
    (tmp_path / "configs" / "config.json").write_text(json.dumps(config))
    monkeypatch.chdir(tmp_path)
    parser = ArgumentParser()
    add_arguments(parser)
    (run,) = _runs(parser.parse_args(["run_clm.py", "--model-config", "configs/config.json", "--seq", "256"]))
    assert run.entry == "run_clm.py" and run.arch.model_type == "llama" and run.arch.num_layers == 4
    assert (run.setup.micro_batch, run.setup.seq_len, run.setup.grad_accum) == (8, 256, 4)
    assert run.setup.precision == Precision.AMP_FP16


# --------------------------------------------------------------------------- comparison (no torch)
@pytest.mark.parametrize("result", MEASURED, ids=[r["id"] for r in MEASURED])
def test_rows_add_up_to_both_peaks(result: dict) -> None:
    arch, setup = trace_case_inputs(result)
    budget = estimate_training(arch, setup)
    c = compare(result, budget)
    assert sum(r.measured for r in c.rows) == result["peak_bytes"] == c.measured_peak
    assert sum(r.estimated for r in c.rows) == budget.peak_bytes == c.estimated_peak
    assert [r.key for r in c.rows] == [k for k, _ in ROWS if k in {r.key for r in c.rows}]
    assert {p.key for p in c.phases} == {"forward", "backward", "optimizer_step"}
    assert max(p.measured for p in c.phases) == result["peak_bytes"]
    assert c.same_phase == (budget.peak_phase.name == {"forward": "forward", "backward": "backward",
                                                       "optimizer": "optimizer_step"}[result["peak_phase"][:-1]])


def test_optimizer_states_and_step_temporaries_are_told_apart() -> None:
    """Llama-2-7B, bf16, foreach AdamW: the peak is inside the first step, where torch's
    foreach AdamW holds a copy of the second moments beside the two states."""
    result = next(r for r in MEASURED if r["id"] == "llama2-7b-bf16-adamw-b1-s2048")
    rows = {r.key: r for r in compare(result, estimate_training(*trace_case_inputs(result))).rows}
    states = persistent_optimizer_bytes(result)
    weights = rows["weights"].measured  # (the weights row also holds the rotary buffers: a few KiB)
    assert rows["optimizer_states"].measured == states == pytest.approx(2 * weights, rel=1e-4)
    assert rows["optimizer_step_temp"].measured == pytest.approx(weights, rel=1e-4)
    assert rows["optimizer_step_temp"].estimated == pytest.approx(rows["optimizer_step_temp"].measured, rel=1e-4)


def test_phase_names_for_people() -> None:
    assert describe_phase("backward2") == "backward (step 2)"
    assert describe_phase("forward2.3") == "forward (step 2, micro-batch 3)"
    assert describe_phase("optimizer1") == "optimizer step (step 1)"
    assert describe_phase("optimizer_step") == "optimizer step"


# --------------------------------------------------------------------------- the command (torch)
@pytest.fixture(scope="module")
def extra() -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")


def test_catalogue_model_from_flags(extra: None) -> None:
    proc = memlint("--model", "gpt2", "--batch", "2", "--seq", "512", "--precision", "amp-bf16", "--optimizer", "adamw")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("openai-community/gpt2 — 124M parameters\n")
    assert re.search(r"^At the peak \(GiB\)\s+measured\s+estimated\s+difference$", out, re.M)
    for label in ("Weights", "Optimizer states", "Activations, logits and backward temporaries"):
        assert re.search(rf"^  {label}\s+[\d.]+\s+[\d.]+\s+", out, re.M), label
    assert re.search(r"^Measured: 2 training steps on fake tensors \(torch [\d.]+.*, transformers [\d.]+\) in", out, re.M)
    assert "Measured peak: backward (step 2); estimated peak: backward." in out
    measured, estimated = peak_row(out)
    assert abs(estimated - measured) <= TOLERANCE * measured
    assert "memlint: measuring gpt2-amp-bf16-adamw-b2-s512" in proc.stderr


def test_model_config_json_output(extra: None, tmp_path: Path) -> None:
    config = {"model_type": "llama", "hidden_size": 512, "intermediate_size": 1376, "num_hidden_layers": 4,
              "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 32000,
              "max_position_embeddings": 4096, "tie_word_embeddings": False, "rms_norm_eps": 1e-5}
    (tmp_path / "config.json").write_text(json.dumps(config))
    proc = memlint("--model-config", str(tmp_path / "config.json"), "--batch", "4", "--seq", "1024", "--grad-ckpt",
                   "--lora-r", "8", "--lora-targets", "q_proj,v_proj", "--grad-accum", "3", "--gpu", "a10g",
                   "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["status"] == doc["measurement"]["status"] == "ok"
    assert doc["measurement"]["case"]["model"]["hidden_size"] == 512
    assert doc["measurement"]["id"] == f"{tmp_path.name}-bf16-adamw-b4-s1024-gc-lora8-ga2"  # named after its folder
    assert doc["measurement"]["case"]["lora"]["target_modules"] == ["q_proj", "v_proj"]
    assert doc["measurement"]["case"]["grad_accum"] == 2 and doc["setup"]["grad_accum"] == 3
    peak = doc["comparison"]["peak"]
    assert peak["measured_bytes"] == doc["measurement"]["peak_bytes"]
    assert peak["estimated_bytes"] == doc["estimate"]["peak_bytes"]
    assert abs(peak["error_percent"]) <= TOLERANCE * 100
    assert sum(r["measured_bytes"] for r in doc["comparison"]["rows"]) == peak["measured_bytes"]
    assert doc["estimate"]["capacity"]["name"] == "NVIDIA A10G"
    assert any("2 of the 3 accumulated micro-batches" in d for d in doc["differences"])


def test_training_script_path(extra: None, tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "run_clm.py").write_text(RUN_CLM)
    proc = memlint("run_clm.py", "--seq", "512", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("Run of run_clm.py\ndistilbert/distilgpt2 — 81.9M parameters\n")
    assert "amp-fp16 · adamw-fused · micro-batch 8 × 512 tokens" in out
    assert "  - 2 of the 4 accumulated micro-batches measured" in out
    assert "Measured peak: backward (step 2, micro-batch 2)" in out
    measured, estimated = peak_row(out)
    assert abs(estimated - measured) <= TOLERANCE * measured
    assert "memlint: the run of run_clm.py" in proc.stderr


def test_directory_measures_what_it_can_and_says_what_it_skipped(extra: None, tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples" / "zero3-small-model", tmp_path / "zero3")
    (tmp_path / "clm").mkdir()
    (tmp_path / "clm" / "run_clm.py").write_text(RUN_CLM)
    proc = memlint(str(tmp_path), "--seq", "256", "--format", "json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    runs = json.loads(proc.stdout)
    assert [r["entry"] for r in runs] == ["clm/run_clm.py"]
    assert runs[0]["comparison"]["peak"]["measured_bytes"] > 0
    assert re.search(r"skipped zero3/launch\.sh: cannot measure this run: DeepSpeed ZeRO-3 .*--zero 0", proc.stderr)


def test_runs_it_cannot_measure_exit_2_with_the_flags_to_pass(extra: None) -> None:
    proc = memlint("examples/zero3-small-model/train.py")
    assert proc.returncode == 2 and proc.stdout == ""
    message = proc.stderr.strip().splitlines()[-1]
    assert message.startswith("memlint: error: examples/zero3-small-model/train.py: cannot measure this run: "
                              "DeepSpeed ZeRO-3")
    assert "--zero 0" in message and "--precision amp-bf16" in message and "Traceback" not in proc.stderr


def test_a_failed_measurement_is_reported_with_exit_1(extra: None, tmp_path: Path) -> None:
    # hidden size 250 is not a multiple of 4 heads: the estimator prices it, transformers refuses it
    config = {"model_type": "llama", "hidden_size": 250, "intermediate_size": 688, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 4096}
    (tmp_path / "config.json").write_text(json.dumps(config))
    proc = memlint("--model-config", str(tmp_path), "--batch", "1", "--seq", "64")
    assert proc.returncode == 1, proc.stderr
    assert "✗ The measurement failed (error): " in proc.stdout and "Traceback" not in proc.stdout
