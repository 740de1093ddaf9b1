"""TRN002: zero_grad that erases gradients before the step uses them."""

from __future__ import annotations


def test_zero_grad_between_backward_and_scaled_step(lint, where):
    source = """\
    import torch

    scaler = torch.amp.GradScaler("cuda")
    for images, targets in loader:
        with torch.autocast("cuda", dtype=torch.float16):
            loss = criterion(model(images), targets)
        scaler.scale(loss).backward()
        optimizer.zero_grad(set_to_none=True)
        scaler.step(optimizer)
        scaler.update()
    """
    diagnostics = lint("TRN002", source)
    assert where(diagnostics) == [(8, 4, 8, 41)]
    assert "runs after `scaler.scale(loss).backward()` (line 7) and before `scaler.step(optimizer)`" in (
        diagnostics[0].message
    )


def test_zero_grad_every_micro_batch_in_a_continue_shaped_loop(lint, where):
    source = """\
    from dataclasses import dataclass


    @dataclass
    class Cfg:
        grad_accum: int = 8


    def train(model, loader, optim, cfg: Cfg):
        for i, batch in enumerate(loader):
            model.zero_grad()
            loss = model(**batch).loss / cfg.grad_accum
            loss.backward()
            if (i + 1) % cfg.grad_accum != 0:
                continue
            optim.step()
    """
    diagnostics = lint("TRN002", source)
    assert where(diagnostics) == [(11, 8, 11, 25)]
    assert "only every `cfg.grad_accum` (line 16)" in diagnostics[0].message


def test_near_misses(lint):
    ordinary = """\
    for batch in loader:
        optimizer.zero_grad()
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
    """
    gan = """\
    for real in loader:
        d_loss = critic_loss(real)
        d_loss.backward()
        g_opt.zero_grad()
        d_opt.step()
        d_opt.zero_grad()
    """
    zero_with_the_step = """\
    for step, batch in enumerate(loader):
        (model(**batch).loss / accum).backward()
        if (step + 1) % accum == 0:
            optimizer.step()
            optimizer.zero_grad()
    """
    zero_on_another_branch = """\
    for batch in loader:
        loss = model(**batch).loss
        loss.backward()
        if torch.isfinite(loss):
            optimizer.step()
        else:
            optimizer.zero_grad()
    """
    for source in (ordinary, gan, zero_with_the_step, zero_on_another_branch):
        assert lint("TRN002", source) == []
