"""AMP001 where the float16 autocast sits in a helper behind one of its parameters
(cloneofsimo/lora's ``loss_step(..., mixed_precision=False)``: ``if mixed_precision: with
torch.cuda.amp.autocast(): ...``). Each loop that calls the helper is judged by what its call
passes: ``False``, the default, or a parameter of the loop's own function that its caller sets
to ``False`` never runs the autocast; ``True`` does, and so may an option the launch sets."""

from __future__ import annotations

PROJECT = """\
import argparse

import torch
import torch.nn.functional as F
from torch.cuda.amp import autocast as amp_autocast

from mymodels import build_loader, build_model


def training_step(model, batch, use_amp=False):
    inputs, labels = batch
    if use_amp:
        with amp_autocast():
            logits = model(inputs.cuda())
    else:
        logits = model(inputs.cuda())
    return F.cross_entropy(logits, labels.cuda())


def pretrain(model, loader, optimizer, use_amp: bool = False):
    for batch in loader:
        loss = training_step(model, batch, use_amp=use_amp)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()


def finetune(model, loader, optimizer, epochs=3):
    for epoch in range(epochs):
        for batch in loader:
            loss = training_step(model, batch, {finetune_amp})
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fp16", action="store_true")
    parser.add_argument("--lr", type=float, default=1e-4)
    args = parser.parse_args()
    model = build_model().cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    pretrain(model, build_loader("pretrain"), optimizer, use_amp={pretrain_amp})
    finetune(model, build_loader("finetune"), optimizer)


if __name__ == "__main__":
    main()
"""

PRETRAIN_BACKWARD = (23, 8, 23, 23)
FINETUNE_BACKWARD = (32, 12, 32, 27)


def _project(pretrain_amp: str, finetune_amp: str) -> str:
    return PROJECT.format(pretrain_amp=pretrain_amp, finetune_amp=finetune_amp)


def test_each_loop_is_judged_by_what_its_call_passes(lint, where):
    # pretrain's caller passes False through pretrain's own parameter; finetune passes True
    diagnostics = lint("AMP001", _project("False", "True"))
    assert where(diagnostics) == [FINETUNE_BACKWARD]
    assert "autocasts to float16 on CUDA (line 13), switched on by what the call on line 31 passes" \
        in diagnostics[0].message


def test_an_option_the_launch_sets_can_run_the_autocast(lint, where):
    diagnostics = lint("AMP001", _project("args.fp16", "use_amp=False"))
    assert where(diagnostics) == [PRETRAIN_BACKWARD]
    assert "switched on" not in diagnostics[0].message  # --fp16 decides, not the calls


def test_a_call_that_leaves_the_parameter_at_its_default_never_autocasts(lint):
    source = _project("False", "True").replace("training_step(model, batch, True)", "training_step(model, batch)")
    assert lint("AMP001", source) == []


def test_a_parameter_no_caller_decides_keeps_the_finding(lint, where):
    # pretrain is never called here: its use_amp is whatever a caller elsewhere passes
    source = _project("False", "False").replace(
        '    pretrain(model, build_loader("pretrain"), optimizer, use_amp=False)\n', "")
    assert where(lint("AMP001", source)) == [PRETRAIN_BACKWARD]


TRAINER = """\
import torch
from torch.cuda.amp import autocast


class Trainer:
    def __init__(self, model, optimizer, loader):
        self.model, self.optimizer, self.loader = model, optimizer, loader

    def compute_loss(self, batch, fp16=False):
        if fp16:
            with autocast():
                outputs = self.model(**batch)
        else:
            outputs = self.model(**batch)
        return outputs.loss

    def train(self, epochs):
        for epoch in range(epochs):
            for batch in self.loader:
                loss = self.compute_loss(batch{passed})
                loss.backward()
                self.optimizer.step()
                self.optimizer.zero_grad()
"""


def test_a_method_called_on_self_is_read_at_that_call(lint, where):
    assert lint("AMP001", TRAINER.format(passed="")) == []
    assert lint("AMP001", TRAINER.format(passed=", fp16=False")) == []
    assert where(lint("AMP001", TRAINER.format(passed=", True"))) == [(21, 16, 21, 31)]


ENABLED = """\
import torch


def forward_loss(model, batch, amp_enabled):
    with torch.autocast("cuda", dtype=torch.float16, enabled=amp_enabled):
        return model(batch["input_ids"].cuda(), labels=batch["labels"].cuda()).loss


def train(model, loader, optimizer):
    model.train()
    for batch in loader:
        loss = forward_loss(model, batch, amp_enabled={passed})
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
"""


def test_an_autocast_the_call_turns_off_is_quiet(lint, where):
    assert lint("AMP001", ENABLED.format(passed="False")) == []
    assert where(lint("AMP001", ENABLED.format(passed="True"))) == [(13, 8, 13, 23)]


# ml-4m's run_training_4m_fsdp.py: the epoch function's dtype defaults to float16, but main passes
# the one `--dtype` chose (bfloat16 unless the launch asks for float16)
EPOCH_DTYPE = """\
import argparse

import torch

from mylib import build_loader, build_model


def train_one_epoch(model, loader, optimizer, accum_iter, dtype: torch.dtype = torch.float16):
    model.train()
    for step, batch in enumerate(loader):
        with torch.cuda.amp.autocast(dtype=dtype, enabled=dtype != torch.float32):
            loss = model(**batch)
        loss = loss / accum_iter
        loss.backward()
        if (step + 1) % accum_iter == 0:
            optimizer.step()
            optimizer.zero_grad()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dtype", type=str, default="bfloat16")
    parser.add_argument("--accum_iter", type=int, default=1)
    args = parser.parse_args()
    if args.dtype in ["float16", "fp16"]:
        dtype = torch.float16
    elif args.dtype in ["bfloat16", "bf16"]:
        dtype = torch.bfloat16
    else:
        dtype = torch.float32
    model = build_model().cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    train_one_epoch(model, build_loader(), optimizer, args.accum_iter, {passed})


if __name__ == "__main__":
    main()
"""


def test_a_dtype_the_caller_passes_replaces_the_parameters_default(lint):
    # before: the parameter's float16 default made the autocast certainly float16
    [finding] = lint("AMP001", EPOCH_DTYPE.format(passed="dtype=dtype"))
    assert "which can pick float16" in finding.message  # --dtype float16 still runs it unscaled
    assert lint("AMP001", EPOCH_DTYPE.format(passed="dtype=torch.bfloat16")) == []
    assert lint("AMP001", EPOCH_DTYPE.format(passed="torch.bfloat16")) == []  # positionally


def test_a_call_that_leaves_the_dtype_at_its_default_runs_float16(lint):
    [finding] = lint("AMP001", EPOCH_DTYPE.replace(", {passed})", ")"))
    assert "which can pick" not in finding.message
