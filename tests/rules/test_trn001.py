"""TRN001: training loops that never reset the gradients."""

from __future__ import annotations

HELPER = """\
import torch
from tqdm import tqdm


def training_step(model, batch, optimizer, scaler):
    with torch.autocast("cuda", dtype=torch.float16):
        loss = model(**batch).loss
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.detach()


def fit(model, loader, optimizer, epochs=3):
    scaler = torch.amp.GradScaler("cuda")
    optimizer.zero_grad()
    for epoch in range(epochs):
        for batch in tqdm(loader):
            training_step(model, batch, optimizer, scaler)
"""


def test_steps_in_a_helper_without_zero_grad_in_the_loop(lint, where):
    diagnostics = lint("TRN001", HELPER)
    assert where(diagnostics) == [(9, 4, 9, 26)]
    message = diagnostics[0].message
    assert "only runs outside this loop, line 16" in message
    assert "`scaler.scale(loss).backward()` adds to the gradients" in message


def test_zero_grad_in_the_helper_or_by_setting_grads_to_none(lint):
    in_helper = HELPER.replace(
        "    scaler.update()\n", "    scaler.update()\n    optimizer.zero_grad(set_to_none=True)\n"
    )
    grads_to_none = """\
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        for p in model.parameters():
            p.grad = None
    """
    model_zero_grad = """\
    for x, y in loader:
        model.zero_grad()
        criterion(model(x), y).backward()
        opt.step()
    """
    for source in (in_helper, grads_to_none, model_zero_grad):
        assert lint("TRN001", source) == []


def test_frameworks_that_zero_themselves_and_loops_without_a_step(lint):
    deepspeed_engine = """\
    for batch in loader:
        loss = engine(batch)
        engine.backward(loss)
        engine.step()
    """
    gradient_only = """\
    grads = []
    for x, y in probe_loader:
        loss = criterion(model(x), y)
        loss.backward()
        grads.append([p.grad.clone() for p in model.parameters()])
        model.zero_grad()
    """
    fresh_optimizer_per_step = """\
    for t in timesteps:
        x_in = latents.detach().clone().requires_grad_(True)
        opt = torch.optim.SGD([x_in], lr=0.1)
        loss = guidance_loss(unet(x_in, t).sample)
        loss.backward()
        opt.step()
    """
    for source in (deepspeed_engine, gradient_only, fresh_optimizer_per_step):
        assert lint("TRN001", source) == []


def test_a_determinism_test_stepping_two_models_in_lockstep_is_no_training(lint):
    # llm-foundry tests/models/test_model.py: two models trained side by side must agree
    source = """\
    import pytest
    import torch


    @pytest.mark.gpu
    @pytest.mark.parametrize("precision", [torch.bfloat16, torch.float16])
    def test_determinism(precision, tiny_cfg):
        model_1 = build_model(tiny_cfg).cuda()
        model_2 = build_model(tiny_cfg).cuda()
        model_2.load_state_dict(model_1.state_dict())
        optimizer_1 = torch.optim.AdamW(model_1.parameters(), lr=1e-3)
        optimizer_2 = torch.optim.AdamW(model_2.parameters(), lr=1e-3)
        for i in range(5):
            with torch.autocast("cuda", dtype=precision):
                batch = gen_random_batch(2, tiny_cfg)
                loss_1 = model_1(batch).loss
                loss_2 = model_2(batch).loss
                assert loss_1 == loss_2, f"differed at step {i}"
                loss_1.backward()
                loss_2.backward()
                optimizer_1.step()
                optimizer_2.step()
    """
    assert lint("TRN001", source, path="tests/models/test_model.py") == []
    assert lint("AMP001", source, path="tests/models/test_model.py") == []


# HunyuanDiT's hydit/train_deepspeed.py: the engine comes from a helper of another module, kept
# under the model's name; it runs `model.backward(loss)` and `model.step(...)`, which zeroes the
# gradients itself (the `else:` branch is the script's non-DeepSpeed path)
ENGINE_LOOP = """\
import torch

from hydit.engine import deepspeed_initialize
from hydit.data import build_loader


def main(args, model, diffusion):
{setup}
    model.train()
    for epoch in range(args.epochs):
        for batch in build_loader(args):
            loss = diffusion.training_losses(model=model, x_start=batch["latents"])["loss"].mean()
{step}
"""

ENGINE_SETUP = """\
    opt = None
    if args.deepspeed:
        model, opt, scheduler = deepspeed_initialize(args, model, opt)"""

ENGINE_STEP = """\
            if args.deepspeed:
                model.backward(loss)
            else:
                loss.backward()
            if args.deepspeed:
                model.step(lr_kwargs={"last_batch_iteration": epoch})
            else:
                opt.step()
                scheduler.step()"""


def test_an_engine_whose_backward_the_loop_calls_steps_and_zeroes_itself(lint):
    assert lint("TRN001", ENGINE_LOOP.format(setup=ENGINE_SETUP, step=ENGINE_STEP)) == []


def test_near_miss_without_the_engine_the_plain_loop_never_zeroes(lint):
    plain = ENGINE_LOOP.format(setup="    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)",
                               step="            loss.backward()\n            opt.step()")
    assert len(lint("TRN001", plain)) == 1
