"""AMP001: float16 training without loss scaling."""

from __future__ import annotations

NANOGPT_NO_SCALER = """\
from contextlib import nullcontext

import torch

device = "cuda"
dtype = "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"
device_type = "cuda" if "cuda" in device else "cpu"
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
ctx = nullcontext() if device_type == "cpu" else torch.amp.autocast(device_type=device_type, dtype=ptdtype)

model = GPT(gptconf).to(device)
optimizer = model.configure_optimizers(weight_decay, learning_rate, (beta1, beta2), device_type)

while True:
    for micro_step in range(gradient_accumulation_steps):
        with ctx:
            logits, loss = model(X, Y)
            loss = loss / gradient_accumulation_steps
        X, Y = get_batch("train")
        loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
"""


def test_a_context_that_can_pick_float16_fires(lint, where):
    diagnostics = lint("AMP001", NANOGPT_NO_SCALER)
    assert where(diagnostics) == [(20, 8, 20, 23)]
    message = diagnostics[0].message
    # float16 is only the fallback of the bfloat16 check: the message says where it runs
    assert "float16 autocast (line 9), float16 where `torch.cuda.is_bf16_supported()` (line 6) is false" in message
    assert 'torch.amp.GradScaler("cuda")' in message
    assert diagnostics[0].related[0].range.start.line == 9


def test_a_float16_fallback_is_quiet_on_a_target_gpu_with_bfloat16(lint, where):
    """nanoGPT's bench.py picks bfloat16 wherever `is_bf16_supported()` says so: judged for an
    H100 (bfloat16), the float16 path never runs; for a V100 it stays reported."""
    assert lint("AMP001", NANOGPT_NO_SCALER, settings={"gpu": "h100"}) == []
    assert lint("AMP001", NANOGPT_NO_SCALER, settings={"gpu": "a100"}) == []
    assert where(lint("AMP001", NANOGPT_NO_SCALER, settings={"gpu": "v100"})) == [(20, 8, 20, 23)]


def test_a_dtype_the_user_picks_is_reported_whatever_the_target(lint, where):
    source = NANOGPT_NO_SCALER.replace(
        'dtype = "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"',
        'dtype = "bfloat16" if args.bf16 else "float16"')
    assert where(lint("AMP001", source, settings={"gpu": "h100"})) == [(20, 8, 20, 23)]


def test_a_lookup_of_a_dtype_the_script_sets_to_bfloat16_never_runs_float16(lint, where):
    """Sophia's train_sophiag.py: `dtype = 'bfloat16' # 'float32', 'bfloat16'`, then the nanoGPT
    table `{...}[dtype]`: only the bfloat16 entry is looked up, whatever else the table holds."""
    fixed = NANOGPT_NO_SCALER.replace(
        'dtype = "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float16"',
        'dtype = "bfloat16"  # "float32", "bfloat16"')
    assert lint("AMP001", fixed) == []
    assert where(lint("AMP001", fixed.replace('dtype = "bfloat16"  #', 'dtype = "float16"  #'))) == [(20, 8, 20, 23)]
    # a table looked up by an option keeps every entry: a launch may pick any of them
    chosen = fixed.replace("[dtype]", "[args.dtype]")
    assert where(lint("AMP001", chosen)) == [(20, 8, 20, 23)]


def test_nanogpt_with_its_scaler_is_quiet(lint):
    source = NANOGPT_NO_SCALER.replace(
        "optimizer = model.configure",
        'scaler = torch.amp.GradScaler("cuda", enabled=(dtype == "float16"))\noptimizer = model.configure',
    ).replace(
        "        loss.backward()\n    optimizer.step()",
        "        scaler.scale(loss).backward()\n    scaler.step(optimizer)\n    scaler.update()",
    )
    assert lint("AMP001", source) == []


def test_half_model_trained_with_a_plain_backward(lint, where):
    source = """\
    import argparse

    import torch
    import torchvision

    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=90)
    args = parser.parse_args()

    model = torchvision.models.resnet50().cuda().half()
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    for epoch in range(args.epochs):
        for images, target in train_loader:
            output = model(images.cuda().half())
            loss = criterion(output, target.cuda())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    """
    diagnostics = lint("AMP001", source)
    assert where(diagnostics) == [(19, 8, 19, 23)]
    assert "float16 weights from `.half()` (line 10)" in diagnostics[0].message
    # GradScaler refuses float16 gradients: the remedy keeps float32 weights under autocast
    assert "keep float32 weights, autocast the forward to float16" in diagnostics[0].message


def test_lora_on_a_float16_checkpoint(lint, where):
    source = """\
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    MODEL = "mistralai/Mistral-7B-v0.1"

    base = AutoModelForCausalLM.from_pretrained(MODEL, torch_dtype=torch.float16, device_map="auto")
    model = get_peft_model(base, LoraConfig(r=16, lora_alpha=32, target_modules=["q_proj", "v_proj"]))
    optimizer = torch.optim.AdamW(filter(lambda p: p.requires_grad, model.parameters()), lr=2e-4)

    model.train()
    for batch in loader:
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    """
    diagnostics = lint("AMP001", source)
    assert where(diagnostics) == [(14, 4, 14, 19)]
    assert "from_pretrained(torch_dtype=...)" in diagnostics[0].message
    # PEFT keeps the adapters it trains in float32: the message says what is at stake (the
    # gradients through the float16 base), not that float16 weights lose their updates
    # (rlhf-and-reward-modelling-alt's ppo_grpo_v2_pilot.py had been told so)
    assert "adapters PEFT trains stay float32" in diagnostics[0].message
    assert "weights lose small updates" not in diagnostics[0].message


def test_autocast_decorating_forward_and_in_a_helper(lint, where):
    decorated = """\
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(512, 512), nn.GELU(), nn.Linear(512, 10))

        @torch.autocast("cuda", dtype=torch.float16)
        def forward(self, x):
            return self.body(x)


    net = Net().cuda()
    opt = torch.optim.Adam(net.parameters())
    for x, y in loader:
        loss = nn.functional.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    """
    assert where(lint("AMP001", decorated)) == [(20, 4, 20, 19)]
    helper = """\
    import torch.cuda.amp as amp
    import torch.nn.functional as F


    def compute_loss(model, batch):
        with amp.autocast():
            return F.cross_entropy(model(batch["x"]), batch["y"])


    def train(model, loader, optimizer):
        for batch in loader:
            loss = compute_loss(model, batch)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    """
    diagnostics = lint("AMP001", helper)
    assert where(diagnostics) == [(13, 8, 13, 23)]
    assert "`amp.autocast()` autocasts to float16 on CUDA (line 6)" in diagnostics[0].message


def test_scaled_backward_in_a_helper_with_a_direct_step_in_the_loop(lint, where):
    source = """\
    import torch

    scaler = torch.amp.GradScaler("cuda")


    def backward_step(model, batch):
        with torch.autocast("cuda"):
            loss = model(**batch).loss
        scaler.scale(loss).backward()
        return loss


    for step, batch in enumerate(loader):
        backward_step(model, batch)
        optimizer.step()
        optimizer.zero_grad()
    """
    diagnostics = lint("AMP001", source)
    assert where(diagnostics) == [(15, 4, 15, 20)]
    assert "call `scaler.step(optimizer)`" in diagnostics[0].message


# ---------------------------------------------------------------------- near misses


def test_a_plain_backward_on_the_branch_where_the_scaler_is_off(lint):
    source = """\
    import torch

    def train_one_epoch(model, loader, optimizer, scaler=None, amp_dtype=torch.float16):
        for x, y in loader:
            with torch.autocast("cuda", dtype=amp_dtype, enabled=scaler is not None):
                loss = model(x, y)
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
            else:
                loss.backward()
                optimizer.step()
            optimizer.zero_grad()
    """
    assert lint("AMP001", source) == []


def test_float16_only_where_nothing_is_trained(lint):
    source = """\
    import torch

    teacher = AutoModelForCausalLM.from_pretrained("teacher-13b", torch_dtype=torch.float16).cuda().eval()
    student = AutoModelForCausalLM.from_pretrained("student-1b").cuda()
    optimizer = torch.optim.AdamW(student.parameters(), lr=1e-4)


    @torch.no_grad()
    def evaluate(model, loader):
        with torch.autocast("cuda", dtype=torch.float16):
            return sum(model(**b).loss.item() for b in loader)


    for batch in loader:
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.float16):
            teacher_logits = teacher(**batch).logits
        loss = distill_loss(student(**batch).logits, teacher_logits)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    """
    assert lint("AMP001", source) == []


def test_an_evaluation_loop_beside_the_training_loop(lint):
    source = """\
    import torch

    def main(model, train_loader, val_loader, optimizer, epochs):
        for epoch in range(epochs):
            model.train()
            for batch in train_loader:
                loss = model(**batch).loss
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            model.eval()
            for batch in val_loader:
                with torch.autocast("cuda", dtype=torch.float16):
                    val_loss = model(**batch).loss
    """
    assert lint("AMP001", source) == []


def test_other_dtypes_devices_and_disabled_autocast(lint):
    for header in (
        'torch.autocast("cuda", dtype=torch.bfloat16)',
        'torch.autocast("cpu")',
        "torch.cpu.amp.autocast()",
        'torch.autocast("cuda", dtype=torch.float16, enabled=False)',
    ):
        source = f"""\
    import torch

    for x, y in loader:
        with {header}:
            loss = model(x, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    """
        assert lint("AMP001", source) == [], header


def test_frameworks_that_scale_the_loss(lint):
    accelerate = """\
    from accelerate import Accelerator

    accelerator = Accelerator(mixed_precision="fp16")
    model = model.half()
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for batch in loader:
        loss = model(**batch).loss
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
    """
    deepspeed_engine = """\
    import deepspeed
    import torch

    engine, optimizer, _, _ = deepspeed.initialize(model=model, config="ds_fp16.json")
    for batch in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = engine(batch)
        engine.backward(loss)
        engine.step()
    """
    trainer = """\
    import torch
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

    model = AutoModelForCausalLM.from_pretrained("gpt2", torch_dtype=torch.float16)
    Trainer(model=model, args=TrainingArguments(output_dir="out", fp16=True), train_dataset=ds).train()
    """
    for source in (accelerate, deepspeed_engine, trainer):
        assert lint("AMP001", source) == []


# The shape of llm-foundry's tests/models/layers/test_flash_torch.py: two attention
# implementations run under fp16 autocast and their gradients compared; nothing is stepped.
GRADIENT_COMPARISON_TEST = """\
import pytest
import torch

from mylib.attention import build_attention_layer


def allclose_helper(t0, t1, rtol=1e-2, atol=1e-2):
    return torch.allclose(t0, t1, rtol=rtol, atol=atol)


@pytest.mark.gpu
@pytest.mark.parametrize("attn_impl_0, attn_impl_1", [("flash", "torch")])
def test_attn_impl(attn_impl_0, attn_impl_1, device="cuda"):
    attn0 = build_attention_layer(attn_impl_0).to(device)
    attn1 = build_attention_layer(attn_impl_1).to(device)
    attn1.load_state_dict(attn0.state_dict())
    x0 = torch.randn(4, 128, 256, device=device).requires_grad_(True)
    x1 = x0.detach().clone().requires_grad_(True)
    with torch.autocast(x0.device.type):
        y0, _, _ = attn0(x0)
        y1, _, _ = attn1(x1)
        y0 *= torch.rand_like(y0)
        y1 *= torch.rand_like(y1)
    loss0 = y0.sum()
    loss1 = y1.sum()
    loss0.backward()
    loss1.backward()
    assert allclose_helper(y0, y1)
    assert allclose_helper(x0.grad, x1.grad)
"""


def test_gradients_compared_in_a_test_train_nothing(lint):
    assert lint("AMP001", GRADIENT_COMPARISON_TEST, path="tests/test_flash_torch.py") == []


def test_the_same_backward_with_an_optimizer_step_in_its_function_trains(lint, where):
    source = GRADIENT_COMPARISON_TEST.replace("def test_attn_impl", "def finetune_attention").replace(
        "    loss1.backward()\n",
        "    loss1.backward()\n    opt = torch.optim.SGD(attn0.parameters(), lr=0.1)\n    opt.step()\n",
    )
    diagnostics = lint("AMP001", source, path="tests/test_flash_torch.py")
    assert [d.range.start.line for d in diagnostics] == [26, 27]


def test_a_train_step_helper_called_from_a_loop_elsewhere_trains(lint):
    source = """\
    import torch


    def train_step(model, batch, optimizer):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss.item()
    """
    diagnostics = lint("AMP001", source)
    assert [d.range.start.line for d in diagnostics] == [7]


# llm.c's train_gpt2.py, trimmed: a one-off backward that writes reference gradients for the C
# tests, before the training loop that enters the autocast context
LLMC_STYLE = """\
import argparse
from contextlib import nullcontext

import torch


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtype", type=str, default="float32", help="float32|float16|bfloat16")
    parser.add_argument("--write_tensors", type=int, default=1)
    parser.add_argument("--num_iterations", type=int, default=10)
    args = parser.parse_args()
    model = GPT.from_pretrained("gpt2").cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[args.dtype]
    ctx = torch.amp.autocast(device_type="cuda", dtype=ptdtype)
    if args.write_tensors:
        x, y = next_batch()
        logits, loss = model(x, y)
        loss.backward()
        write_state(model, x, y, logits, loss, "gpt2_124M_debug_state.bin")
    for step in range(args.num_iterations):
        x, y = next_batch()
        with ctx:
            _, loss = model(x, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
"""


def test_a_backward_before_the_autocast_region_is_not_under_it(lint):
    """Only the training loop's backward follows the `with ctx:` that can pick float16 (the same
    bug nanoGPT fixed in its PR #87 by adding a GradScaler for --dtype float16)."""
    diagnostics = lint("AMP001", LLMC_STYLE)
    assert [d.range.start.line for d in diagnostics] == [26]
    assert "which can pick float16 (line 16)" in diagnostics[0].message


def test_a_copy_of_the_trainers_apex_branch_is_apex_s_own_idiom(lint):
    """GritLM's gradcache_trainer.py copies the HF Trainer's inner loop: its Apex branch scales the
    loss with ``amp.scale_loss`` (``amp`` imported behind ``is_apex_available()`` elsewhere) and
    steps the optimizer Apex patched; no GradScaler is bypassed."""
    source = """
    from transformers import Trainer


    class GradCacheTrainer(Trainer):
        def _inner_training_loop(self, batch_size=None, args=None, trial=None):
            model = self._wrap_model(self.model_wrapped)
            for epoch in range(int(args.num_train_epochs)):
                for step, inputs in enumerate(self.get_train_dataloader()):
                    loss = self.compute_loss(model, inputs)
                    if self.use_apex:
                        with amp.scale_loss(loss, self.optimizer) as scaled_loss:
                            scaled_loss.backward()
                    else:
                        self.accelerator.backward(loss)
                    if (step + 1) % args.gradient_accumulation_steps == 0:
                        self.optimizer.step()
                        self.lr_scheduler.step()
                        model.zero_grad()
    """
    assert lint("AMP001", source, path="gradcache_trainer.py") == []
