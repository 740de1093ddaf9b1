"""The training-code rules never crash on odd but valid Python (the engine reports a rule's
exception as an internal error; none may occur)."""

from __future__ import annotations

import pytest

from memlint.lint.engine import Linter
from memlint.project.settings import Settings
from memlint.rules import all_rules

TRAINING_RULES = tuple(code for code in all_rules() if code[:3] in ("ACC", "AMP", "CKP", "TRN"))

ODD_SOURCES = {
    "deep expression": "loss = " + " + ".join(f"x{i}" for i in range(1500)) + "\nloss.backward()\n",
    "long and chain": "if " + " and ".join(f"c{i}" for i in range(1500)) + ":\n    optimizer.step()\n",
    "recursion": """\
def step(model, batch, optimizer):
    loss = model(batch)
    loss.backward()
    optimizer.step()
    return step(model, batch, optimizer)

def other(x):
    return again(x)

def again(x):
    return other(x)

for batch in loader:
    step(model, batch, optimizer)
    other(batch)
""",
    "async and match": """\
async def train(model, loader, optimizer):
    async for batch in loader:
        async with lock:
            match batch:
                case {"x": x, "y": y}:
                    loss = model(x, y)
                case _:
                    continue
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
""",
    "odd receivers": """\
for i, (a, b) in enumerate(zip(xs, ys)):
    (a or b).backward()
    optimizers[i % 2].step()
    get_opt()().step()
    [o.zero_grad() for o in optimizers]
    lambda: loss.backward()
    f"{loss.item()}"
    x = (y := model(a)).sum()
""",
    "names without calls": """\
backward = loss.backward
step = optimizer.step
autocast = torch.autocast
GradScaler = None
checkpoint = torch.utils.checkpoint.checkpoint
for batch in loader:
    backward()
    step()
""",
    "class bodies and nested defs": """\
class Trainer:
    scaler = torch.cuda.amp.GradScaler(enabled=False)
    for name in ("a", "b"):
        pass

    def fit(self):
        def closure():
            self.opt.zero_grad()
            loss = self.model(self.x)
            loss.backward()
            return loss
        while self.running:
            self.opt.step(closure)

    @torch.autocast("cuda", dtype=torch.float16)
    @staticmethod
    def forward(*args, **kwargs):
        return checkpoint(*args, **kwargs)
""",
    "star arguments everywhere": """\
opt = torch.optim.AdamW(*groups, **cfg)
scaler = torch.amp.GradScaler(*a, **k)
with torch.autocast(*ctx_args, **ctx_kwargs):
    out = model(**batch)
torch.utils.checkpoint.checkpoint(*segments)
model.gradient_checkpointing_enable(**gc)
""",
    "empty and comments": "# nothing here\n",
}


@pytest.mark.parametrize("name", list(ODD_SOURCES))
def test_rules_survive_odd_code(name, tmp_path):
    path = tmp_path / "train.py"
    path.write_text(ODD_SOURCES[name], encoding="utf-8")
    linter = Linter(Settings(root=tmp_path, gpu="t4", select=TRAINING_RULES, cache=False))
    diagnostics = linter.lint_path(path)
    assert linter.internal_errors == []
    assert all(d.range.start.line >= 1 for d in diagnostics)
