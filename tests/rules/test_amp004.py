"""AMP004: deprecated torch.cuda.amp / torch.cpu.amp names, and their fixes."""

from __future__ import annotations

SCRIPT = """\
import argparse

import torch
import torch.cuda.amp as amp

parser = argparse.ArgumentParser()
parser.add_argument("--amp", action="store_true")
args = parser.parse_args()

scaler = torch.cuda.amp.GradScaler(
    init_scale=2.0**16,
    enabled=args.amp,
)


@torch.cuda.amp.autocast()
def forward_loss(model, batch):
    return model(**batch).loss


for batch in loader:
    with amp.autocast(args.amp, torch.float16):
        loss = forward_loss(model, batch)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
"""


def test_every_spelling_is_reported_where_written(lint, where):
    diagnostics = lint("AMP004", SCRIPT)
    assert where(diagnostics) == [(10, 9, 10, 34), (16, 1, 16, 24), (22, 9, 22, 21)]
    assert all(d.fix is not None and d.fix.applicability == "safe" for d in diagnostics)


def test_fix_adds_the_device_and_names_positional_autocast_arguments(fix):
    fixed = fix("AMP004", SCRIPT)
    assert 'scaler = torch.amp.GradScaler("cuda", \n    init_scale=2.0**16,' in fixed
    assert '@torch.amp.autocast("cuda")\n' in fixed
    assert 'with torch.amp.autocast("cuda", enabled=args.amp, dtype=torch.float16):' in fixed


def test_from_import_is_reported_on_the_import_and_fixed_at_every_call(lint, where, fix):
    source = """\
    from torch.cpu.amp import autocast


    def infer(model, x):
        with autocast(dtype=torch.bfloat16):
            return model(x)


    def train_step(model, x):
        with autocast():
            return model(x).sum()
    """
    diagnostics = lint("AMP004", source)
    assert where(diagnostics) == [(1, 26, 1, 34)]
    assert 'pass "cpu" first' in diagnostics[0].message
    fixed = fix("AMP004", source)
    assert fixed.startswith("from torch.amp import autocast\n")
    assert 'with autocast("cpu", dtype=torch.bfloat16):' in fixed
    assert 'with autocast("cpu"):' in fixed


def test_no_fix_when_a_name_is_used_without_calling_it(lint):
    source = """\
    from functools import partial

    from torch.cuda.amp import autocast

    amp_ctx = partial(autocast, dtype=torch.float16)
    """
    diagnostics = lint("AMP004", source)
    assert len(diagnostics) == 1 and diagnostics[0].fix is None


def test_current_api_and_other_modules_are_quiet(lint):
    source = """\
    import torch
    from torch.amp import GradScaler, autocast
    from apex import amp

    scaler = GradScaler("cuda")
    with autocast("cuda", dtype=torch.float16), torch.autocast("cuda"):
        pass
    model, optimizer = amp.initialize(model, optimizer, opt_level="O1")
    """
    assert lint("AMP004", source) == []
