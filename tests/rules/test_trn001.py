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
