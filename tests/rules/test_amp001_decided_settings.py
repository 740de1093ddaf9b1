"""AMP001 and what the script decides by itself: a settings object built with no argument picks
the autocast dtype, and a scaler kept in the run's state steps where it scaled.

GZbridge-huginn-full-finetune's audio scripts (abridged): `cfg = CLISettings()`, a dataclass whose
`precision` is "bf16-mixed", then `torch.bfloat16 if cfg.precision == "bf16-mixed" else
torch.float16`: four warnings said float16 could be picked. Its FSDP script keeps a ShardedGradScaler
in `state["scaler"]`, scales the backward and steps through it when it is enabled, else steps the
optimizer: three warnings said the scaled gradients reached a plain `optimizer.step()`."""

from __future__ import annotations

AUDIO = """\
from dataclasses import dataclass

import torch
from torch.utils.data import DataLoader


@dataclass
class CLISettings:
    model_name: str = "models/huginn-0125"
    micro_batch_size: int = 3
    lr: float = 1e-4
    precision: str = "bf16-mixed"


def main():
    cfg = CLISettings()
    model = build_model(cfg.model_name).cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    autocast_dtype = torch.bfloat16 if cfg.precision == "bf16-mixed" else torch.float16
    for batch in DataLoader(load_dataset(), batch_size=cfg.micro_batch_size):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type="cuda", dtype=autocast_dtype):
            loss = model(**batch).loss
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
"""


def test_a_dtype_the_scripts_own_default_settings_decide(lint):
    assert lint("AMP001", AUDIO) == []
    # the same choice made by an option (or by settings the command line fills) stays reported
    from_options = AUDIO.replace("    cfg = CLISettings()\n",
                                 "    cfg = CLISettings(precision=os.environ.get('PRECISION', 'bf16-mixed'))\n")
    assert len(lint("AMP001", "import os\n" + from_options)) == 1
    float16 = AUDIO.replace('precision: str = "bf16-mixed"', 'precision: str = "fp16-mixed"')
    assert len(lint("AMP001", float16)) == 1


FSDP_STATE = """\
import torch
from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler


def train(model, optimizer, loader, cfg):
    state = {"model": model, "optimizer": optimizer,
             "scaler": ShardedGradScaler(enabled=cfg.precision in {"fp16-mixed", "fp16-true"})}
    for batch in loader:
        with torch.autocast(device_type="cuda", dtype=torch.float16):
            loss = model(**batch).loss
        if state["scaler"].is_enabled():
            state["scaler"].scale(loss).backward()
        else:
            loss.backward()
        if state["scaler"].is_enabled():
            state["scaler"].step(optimizer)
            state["scaler"].update()
        else:
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
"""


def test_a_scaler_kept_in_the_runs_state_steps_where_it_scaled(lint):
    assert lint("AMP001", FSDP_STATE) == []


def test_a_plain_step_on_the_other_branch_of_the_scaled_backward(lint):
    # a scaler handed in under a name memlint does not know as one: the branches still exclude each other
    helper = FSDP_STATE.replace('state["scaler"]', "amp").replace(
        '    state = {"model": model, "optimizer": optimizer,\n'
        '             "scaler": ShardedGradScaler(enabled=cfg.precision in {"fp16-mixed", "fp16-true"})}\n', "").replace(
        "def train(model, optimizer, loader, cfg):", "def train(model, optimizer, loader, amp):")
    assert "amp.scale(loss).backward()" in helper
    found = lint("AMP001", helper)
    assert all("optimizer.step()` after" not in d.message for d in found)
    # without the branch, the plain step after a scaled backward is still the bug
    unbranched = helper.replace("        else:\n            optimizer.step()\n", "        optimizer.step()\n")
    assert any("optimizer.step()` after" in d.message for d in lint("AMP001", unbranched))
