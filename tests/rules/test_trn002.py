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


def test_a_zero_grad_that_drops_a_bad_batch_is_not_every_micro_batch(lint):
    # open_flamingo's train_one_epoch: a NaN loss skips the batch (and the window it was in); the
    # accumulating path zeroes only after its step
    source = """\
    import torch


    def train_one_epoch(args, model, optimizer, lr_scheduler, loader, autocast):
        for num_steps, (images, input_ids, labels) in enumerate(loader):
            with autocast():
                loss = model(vision_x=images, lang_x=input_ids, labels=labels)[0]
                if torch.isnan(loss):
                    print("loss is nan, skipping this batch")
                    optimizer.zero_grad(set_to_none=True)
                    continue
            (loss / args.gradient_accumulation_steps).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            if ((num_steps + 1) % args.gradient_accumulation_steps) == 0:
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad(set_to_none=True)
    """
    assert lint("TRN002", source) == []
    # the same loop that zeroes at the top of every pass erases the window
    every_pass = source.replace("        for num_steps, (images, input_ids, labels) in enumerate(loader):\n",
                                "        for num_steps, (images, input_ids, labels) in enumerate(loader):\n"
                                "            optimizer.zero_grad()\n")
    assert [d.code for d in lint("TRN002", every_pass)] == ["TRN002"]


def test_clearing_a_selected_share_of_the_gradients_masks_them(lint):
    # RL4LMs' TRPO critic update: the shared optimizer steps the critic alone, so the actor's
    # gradients are dropped between backward and step on purpose
    source = """\
import torch.nn.functional as F


def update_critic(policy, rollout_buffer, actor_params, n_critic_updates, batch_size):
    for _ in range(n_critic_updates):
        for rollout_data in rollout_buffer.get(batch_size):
            values_pred = policy.predict_values(rollout_data.observations)
            value_loss = F.mse_loss(rollout_data.returns, values_pred.flatten())
            policy.optimizer.zero_grad()
            value_loss.backward()
            for param in actor_params:
                param.grad = None
            policy.optimizer.step()
"""
    assert lint("TRN002", source, path="rl4lms/algorithms/trpo/trpo.py") == []
    # every parameter of the model cleared: the step has nothing left
    every = source.replace("for param in actor_params:", "for param in policy.parameters():")
    assert [d.code for d in lint("TRN002", every, path="rl4lms/algorithms/trpo/trpo.py")] == ["TRN002"]
