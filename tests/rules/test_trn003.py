"""TRN003: a host-device sync on the loss every micro-batch."""

from __future__ import annotations

SCRIPT = """\
import argparse

import wandb
from tqdm import tqdm

parser = argparse.ArgumentParser()
parser.add_argument("--accum", type=int, default=32)
parser.add_argument("--log_every", type=int, default=10)
args = parser.parse_args()

total = 0.0
bar = tqdm(loader)
for step, batch in enumerate(bar):
    loss = model(**batch).loss
    loss = loss / args.accum
    loss.backward()
    total += loss.detach().float().cpu().item()
    wandb.log({"micro_loss": float(loss)})
    if step % args.log_every == 0:
        bar.set_postfix(loss=loss.item())
    if (step + 1) % args.accum == 0:
        optimizer.step()
        optimizer.zero_grad()
        print(f"step loss {loss.item() * args.accum:.4f}")
"""


def test_syncs_on_every_micro_batch_fire_once_per_expression(lint, where):
    diagnostics = lint("TRN003", SCRIPT)
    assert where(diagnostics) == [(17, 13, 17, 47), (18, 29, 18, 40)]
    assert all("`args.accum` times per optimizer step" in d.message for d in diagnostics)


def test_inner_micro_step_loop(lint, where):
    source = """\
    for it in range(max_iters):
        for micro_step in range(grad_accum_steps):
            logits, loss = model(X, Y)
            loss = loss / grad_accum_steps
            losses.append(loss.item())
            loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        print(f"iter {it}: loss {loss.item():.4f}")
    """
    assert where(lint("TRN003", source)) == [(5, 22, 5, 33)]


def test_no_accumulation_is_not_reported(lint):
    source = """\
    for batch in loader:
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        bar.set_postfix(loss=loss.item())
    """
    assert lint("TRN003", source) == []


def test_a_builtin_around_a_method_sync_is_one_copy(lint, where):
    # `float(loss.detach().item())`: the `.item()` copies, `float` converts the Python number;
    # one wait for the GPU, one finding at the outer call (an accelerate loop of a VLM project)
    source = """\
    from accelerate import Accelerator

    accelerator = Accelerator()
    for step, batch in enumerate(loader):
        with accelerator.autocast():
            outputs = model(**batch)
        loss = outputs.loss / float(args.grad_accum)
        accelerator.backward(loss)
        update_loss += float(loss.detach().item())
        if (step + 1) % args.grad_accum == 0:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    """
    diagnostics = lint("TRN003", source)
    assert where(diagnostics) == [(9, 19, 9, 46)]
    assert "`float(loss.detach().item())`" in diagnostics[0].message
