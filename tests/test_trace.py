"""Tests of ``memlint.trace`` (measuring a training step on fake tensors).

The case-validation tests need nothing but memlint. The measuring tests need the optional extra
``memlint[trace]`` (torch, transformers, peft) and are skipped cleanly without it. They follow
the oracle's validation: a tiny model is measured on fake tensors and then trained for real on
the CPU under the same tracker, and both must give the same peak, to the byte.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from memlint.trace.case import OPTIMIZERS, PRECISIONS, Case, CaseError, from_oracle_dict, parse_cases

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TINY_LLAMA = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 2,
              "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 4096,
              "max_position_embeddings": 512, "tie_word_embeddings": False}
# Qwen2.5-VL / Qwen3-VL with their published keys at small sizes (2 language layers, 2 vision
# blocks, a 4,096-token vocabulary with the image tokens inside it)
_VL_TEXT = {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 2,
            "num_key_value_heads": 1, "head_dim": 128, "vocab_size": 4096, "rope_theta": 1000000.0, "bos_token_id": 1, "eos_token_id": 2,
            "rope_scaling": {"mrope_section": [16, 24, 24], "rope_type": "default"}}
_VL_TOKENS = {"vision_start_token_id": 3998, "vision_end_token_id": 3999, "image_token_id": 4000,
              "video_token_id": 4001}
TINY_QWEN25_VL = {"model_type": "qwen2_5_vl", **_VL_TOKENS, "text_config": _VL_TEXT,
                  "vision_config": {"depth": 2, "hidden_size": 64, "intermediate_size": 128, "num_heads": 2,
                                    "out_hidden_size": 256, "fullatt_block_indexes": [1], "window_size": 112}}
TINY_QWEN3_VL = {"model_type": "qwen3_vl", **_VL_TOKENS, "text_config": _VL_TEXT,
                 "vision_config": {"depth": 2, "hidden_size": 64, "intermediate_size": 128, "num_heads": 2,
                                   "out_hidden_size": 256, "deepstack_visual_indexes": [0],
                                   "num_position_embeddings": 256}}
TINY_GPT2 = {"model_type": "gpt2", "n_embd": 192, "n_layer": 2, "n_head": 4, "vocab_size": 4096, "n_positions": 512}


def _case(**kw: object) -> dict:
    base = {"id": "t", "model": TINY_LLAMA, "batch_size": 2, "seq_len": 128, "precision": "bf16"}
    base.update(kw)
    return base


# --------------------------------------------------------------------------- validation (no torch)
def test_unknown_precision_is_rejected_with_a_suggestion() -> None:
    with pytest.raises(CaseError) as e:
        Case.from_dict(_case(precision="bfloat16"))
    msg = str(e.value)
    assert "precision 'bfloat16' must be one of" in msg
    for p in PRECISIONS:
        assert repr(p) in msg


def test_unknown_optimizer_is_rejected_with_did_you_mean() -> None:
    with pytest.raises(CaseError, match=r"optimizer 'adamw8bit' must be one of .*did you mean 'adamw-8bit'\?"):
        Case.from_dict(_case(optimizer="adamw8bit"))
    with pytest.raises(CaseError, match="optimizer 'lion'"):
        Case.from_dict(_case(optimizer="lion"))


def test_other_bad_cases_have_clear_messages() -> None:
    with pytest.raises(CaseError, match=r"unknown field\(s\) 'attn_impl' \(did you mean 'attn'\?\)"):
        Case.from_dict(_case(attn_impl="eager"))
    with pytest.raises(CaseError, match="missing field 'seq_len'"):
        Case.from_dict({"id": "x", "model": TINY_LLAMA, "batch_size": 1, "precision": "bf16"})
    with pytest.raises(CaseError, match="world_size=4 needs sharding='fsdp-full'"):
        Case.from_dict(_case(world_size=4))
    with pytest.raises(CaseError, match="sharding 'fsdp' must be one of"):
        Case.from_dict(_case(sharding="fsdp", world_size=2))
    with pytest.raises(CaseError, match="not in the file's 'models' table; did you mean 'llama-2-7b'"):
        parse_cases({"models": {"llama-2-7b": TINY_LLAMA}, "cases": [_case(model="llama-2-7")]})
    with pytest.raises(CaseError, match="batch_size must be a positive integer"):
        Case.from_dict(_case(batch_size=0))
    with pytest.raises(CaseError, match="either lora or qlora"):
        Case.from_dict(_case(lora={"r": 8}, qlora={"r": 8}))


def test_defaults_and_names() -> None:
    c = Case.from_dict(_case())
    assert (c.optimizer, c.attn, c.sharding, c.world_size, c.steps, c.round_bytes) == ("adamw", "sdpa", "none", 1, 2, 512)
    assert set(OPTIMIZERS) >= {"adamw", "adamw-fused", "adamw-forloop", "adam", "sgd", "sgd-momentum", "adafactor",
                               "adamw-8bit"}
    assert PRECISIONS == ("fp32", "bf16", "fp16", "amp-bf16", "amp-fp16")


def test_oracle_spelling_is_translated() -> None:
    d = from_oracle_dict({"id": "o", "model": "m", "batch_size": 1, "seq_len": 8, "precision": "bf16",
                          "optimizer": "sgd", "attn_impl": "eager", "sharding": "fsdp2", "world_size": 2})
    assert (d["optimizer"], d["attn"], d["sharding"]) == ("sgd-momentum", "eager", "fsdp-full")
    assert from_oracle_dict({"optimizer_impl": "fused"})["optimizer"] == "adamw-fused"


def test_calibration_suite_is_valid() -> None:
    from memlint.trace.case import load_cases

    cases = load_cases(os.path.join(ROOT, "tests", "calibration", "cases.json"))
    assert len(cases) >= 64
    assert len({c.model["model_type"] for c in cases}) >= 9


def test_importing_the_package_does_not_import_torch() -> None:
    code = "import sys, memlint.trace, memlint.trace.case; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT,
                   env={**os.environ, "PYTHONPATH": ROOT})


# --------------------------------------------------------------------------- measuring (torch)
@pytest.fixture(scope="module")
def measure():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from memlint.trace.measure import measure_case

    return measure_case


REAL_VS_FAKE = [
    dict(id="llama-fp32-adamw", precision="fp32"),
    dict(id="llama-bf16-adamw-gc", precision="bf16", grad_ckpt=True),
    dict(id="llama-ampbf16-adam-eager", precision="amp-bf16", optimizer="adam", attn="eager"),
    dict(id="llama-ampfp16-gradscaler", precision="amp-fp16"),
    dict(id="llama-fp16-sgd-momentum", precision="fp16", optimizer="sgd-momentum"),
    dict(id="llama-bf16-adafactor", precision="bf16", optimizer="adafactor"),
    dict(id="llama-bf16-lora", precision="bf16", lora={"r": 8, "alpha": 16, "dropout": 0.05,
                                                       "target_modules": ["q_proj", "v_proj"]}),
    dict(id="gpt2-fp32-adamw-dropout", model=TINY_GPT2, precision="fp32"),
    dict(id="gpt2-ampbf16-eager", model=TINY_GPT2, precision="amp-bf16", attn="eager"),
    dict(id="llama-bf16-accum2-gc", precision="bf16", grad_ckpt=True, grad_accum=2),
    # vision-language: pixel_values, image_grid_thw and placeholder tokens for two 224-pixel images
    dict(id="qwen2.5vl-bf16-images", model=TINY_QWEN25_VL, precision="bf16", seq_len=256,
         images={"per_sequence": 2, "height": 224, "width": 224}),
    dict(id="qwen3vl-bf16-lora-all-linear-image", model=TINY_QWEN3_VL, precision="bf16",
         images={"per_sequence": 1, "height": 256, "width": 192},
         lora={"r": 8, "alpha": 16, "dropout": 0.05, "target_modules": "all-linear"}),
]


@pytest.mark.parametrize("variant", REAL_VS_FAKE, ids=[v["id"] for v in REAL_VS_FAKE])
def test_fake_run_equals_real_cpu_run(measure, variant: dict) -> None:
    case = Case.from_dict(_case(round_bytes=1, **variant))
    fake = measure(case, fake=True)
    real = measure(case, fake=False)
    assert fake["status"] == real["status"] == "ok"
    assert fake["peak_bytes"] == real["peak_bytes"], (fake["breakdown"], real["breakdown"])
    assert fake["peak_phase"] == real["peak_phase"]
    assert fake["breakdown"] == real["breakdown"]
    assert fake["params"]["trainable"] == real["params"]["trainable"]


def test_fsdp2_fake_run_equals_real_cpu_run(measure) -> None:
    case = Case.from_dict(_case(id="fsdp", precision="fp32", world_size=2, sharding="fsdp-full", round_bytes=1))
    fake = measure(case, fake=True)
    real = measure(case, fake=False)
    assert fake["peak_bytes"] == real["peak_bytes"]
    assert "Sharded Param" in fake["breakdown"]


def test_result_shape_and_rounding(measure) -> None:
    case = Case.from_dict(_case(id="shape", precision="bf16"))
    res = measure(case)
    assert res["status"] == "ok"
    assert res["peak_bytes"] % 512 == 0 or res["peak_bytes"] > 0
    assert res["peak_phase"] in {p["phase"] for p in res["phases"]}
    names = [p["phase"] for p in res["phases"]]
    assert names[:4] == ["forward1", "backward1", "optimizer1", "zero_grad1"] and names[-1] == "zero_grad2"
    assert max(p["peak_bytes"] for p in res["phases"]) == res["peak_bytes"]
    assert res["params"]["total"] == res["params"]["trainable"] > 0
    assert res["breakdown"]["Optstate"] > 0
    assert {"torch", "transformers"} <= set(res["versions"])
    exact = measure(Case.from_dict(_case(id="exact", precision="bf16", round_bytes=1)))
    assert exact["peak_bytes"] <= res["peak_bytes"]


def test_gradient_accumulation_keeps_gradients_through_the_next_micro_batch(measure) -> None:
    one = measure(Case.from_dict(_case(id="ga1", precision="bf16", optimizer="sgd")))
    two = measure(Case.from_dict(_case(id="ga2", precision="bf16", optimizer="sgd", grad_accum=2)))
    names = [p["phase"] for p in two["phases"]]
    # the first step only creates the optimizer's states: one micro-batch; the last runs both
    assert names == ["forward1.1", "backward1.1", "optimizer1", "zero_grad1",
                     "forward2.1", "backward2.1", "forward2.2", "backward2.2", "optimizer2", "zero_grad2"]
    phases = {p["phase"]: p for p in two["phases"]}
    grads = phases["backward2.1"]["end_breakdown"]["Gradient"]
    assert grads > 0
    # the second micro-batch's forward runs with the first one's gradients alive ...
    assert phases["forward2.2"]["end_breakdown"]["Gradient"] == grads
    assert phases["forward2.2"]["peak_bytes"] >= phases["forward2.1"]["peak_bytes"] + grads
    assert two["peak_phase"] in ("forward2.2", "backward2.2")
    # ... which without accumulation (plain SGD: no states) never happens
    assert two["peak_bytes"] > one["peak_bytes"]
    assert two["case"]["grad_accum"] == 2 and two["id"] == "ga2"


def test_cli_runs_a_config_file_and_reports_failures(measure, tmp_path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(TINY_LLAMA))
    env = {**os.environ, "PYTHONPATH": ROOT}
    out = tmp_path / "one.json"
    subprocess.run([sys.executable, "-m", "memlint.trace", "--model-config", str(cfg), "--batch", "2", "--seq", "64",
                    "--precision", "bf16", "--optimizer", "adamw", "--grad-ckpt", "--out", str(out)],
                   check=True, cwd=ROOT, env=env, capture_output=True)
    doc = json.loads(out.read_text())
    assert doc["results"][0]["status"] == "ok" and doc["results"][0]["case"]["grad_ckpt"] is True

    bad = dict(TINY_LLAMA, hidden_size=250)  # not divisible by the heads: the model cannot be built
    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps({"models": {"tiny": TINY_LLAMA, "bad": bad}, "cases": [
        {"id": "good", "model": "tiny", "batch_size": 1, "seq_len": 32, "precision": "fp32"},
        {"id": "broken", "model": "bad", "batch_size": 1, "seq_len": 32, "precision": "fp32"}]}))
    out = tmp_path / "two.json"
    proc = subprocess.run([sys.executable, "-m", "memlint.trace", str(cases), "--jobs", "2", "--out", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 1
    res = {r["id"]: r for r in json.loads(out.read_text())["results"]}
    assert res["good"]["status"] == "ok"
    assert res["broken"]["status"] == "error" and res["broken"]["error"]

    proc = subprocess.run([sys.executable, "-m", "memlint.trace", str(cases), "--ids", "nope"], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "unknown case ids: nope" in proc.stderr


TINY_DEEPSEEK_V2 = {"model_type": "deepseek_v2", "hidden_size": 256, "intermediate_size": 640,
                    "moe_intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
                    "num_key_value_heads": 4, "vocab_size": 4096, "kv_lora_rank": 64, "q_lora_rank": None,
                    "qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "v_head_dim": 32, "n_routed_experts": 8,
                    "n_shared_experts": 2, "num_experts_per_tok": 2, "first_k_dense_replace": 1,
                    "tie_word_embeddings": False}


def test_values_narrower_than_queries_run_a_fused_kernel_as_on_cuda(measure) -> None:
    """DeepSeek's MLA (q/k heads of 48, v heads of 32 here): CPU flash wants one head size and
    would fall back to the math kernel, which CUDA does not (memory-efficient attention)."""
    res = measure(Case.from_dict(_case(id="mla", model=TINY_DEEPSEEK_V2, precision="bf16")))
    assert res["status"] == "ok", res.get("error")
    assert "aten._scaled_dot_product_flash_attention_for_cpu" in res["kernels"]
    assert "aten._safe_softmax" not in res["kernels"]


def test_a_mask_that_trains_runs_the_math_kernel_with_its_dropout_as_on_cuda() -> None:
    """T5's relative position bias trains, so SDPA's mask needs a gradient: CUDA then runs the
    math kernel and its dropout over the fp32 probabilities (tests/calibration/gpu_op_probe.json).
    The emulation must run that dropout too; a mask without a gradient keeps the fused kernel."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F
    from torch.utils._python_dispatch import TorchDispatchMode

    from memlint.trace.emulation import cuda_sdpa_kernel_choice

    class Ops(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[tuple[str, tuple[int, ...]]] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            out = func(*args, **(kwargs or {}))
            if isinstance(out, torch.Tensor):
                self.seen.append((str(func), tuple(out.shape)))
            return out

    batch, heads, seq, dim = 2, 12, 64, 64  # t5-base's heads and head size
    q, k, v = (torch.randn(batch, heads, seq, dim, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    probabilities = (batch, heads, seq, seq)

    def run(bias: torch.Tensor) -> list[tuple[str, tuple[int, ...]]]:
        with cuda_sdpa_kernel_choice(), Ops() as ops:
            F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=0.1).sum().backward()
        return ops.seen

    trained = run(torch.zeros(1, heads, seq, seq, dtype=torch.bfloat16, requires_grad=True))
    assert ("aten._safe_softmax.default", probabilities) in trained
    assert ("aten.bernoulli_.float", probabilities) in trained  # CPU's dropout over the probabilities
    frozen = run(torch.zeros(1, heads, seq, seq, dtype=torch.bfloat16))
    assert not any(op == "aten._safe_softmax.default" for op, _ in frozen)
    assert not any(shape == probabilities and "bernoulli" in op for op, shape in frozen)
