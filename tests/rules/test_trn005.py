"""TRN005: training steps that run in eval mode."""

from __future__ import annotations

CLASSIFIER = """\
import torch
from torch import nn


class Trainer:
    def __init__(self, model, optimizer, loaders):
        self.model = model
        self.optimizer = optimizer
        self.train_loader, self.val_loader = loaders
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)

    @torch.no_grad()
    def validate(self):
        self.model.eval()
        return sum(nn.functional.cross_entropy(self.model(x), y).item() for x, y in self.val_loader)

    def fit(self, epochs):
        self.model.train()
        for epoch in range(epochs):
            for i, (x, y) in enumerate(self.train_loader):
                loss = nn.functional.cross_entropy(self.model(x), y)
                loss.backward()
                self.optimizer.step()
                self.optimizer.zero_grad()
            print(epoch, self.validate())
"""


def test_validation_in_the_epoch_loop_without_train_again(lint, where):
    diagnostics = lint("TRN005", CLASSIFIER)
    assert where(diagnostics) == [(25, 25, 25, 40)]
    assert "`self.model.eval()` (through `self.validate()`)" in diagnostics[0].message


def test_train_at_the_start_of_each_epoch_is_enough_for_an_end_of_epoch_eval(lint):
    fixed = CLASSIFIER.replace("            for i, (x, y)", "            self.model.train()\n            for i, (x, y)")
    assert lint("TRN005", fixed) == []


def test_direct_eval_inside_the_step_loop(lint, where):
    source = """\
    for epoch in range(epochs):
        model.train()
        for step, batch in enumerate(loader):
            loss = model(**batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            if step % 1000 == 0:
                model.eval()
                with torch.no_grad():
                    val = sum(model(**b).loss.item() for b in val_loader)
    """
    assert where(lint("TRN005", source)) == [(9, 12, 9, 24)]


def test_frozen_models_may_stay_in_eval_mode(lint):
    source = """\
    import copy

    import torch

    teacher.eval()
    ema = copy.deepcopy(model)
    model.train()
    for batch in loader:
        ema.eval()
        teacher.eval()
        with torch.no_grad():
            target = teacher(**batch).logits
        loss = kl(model(**batch).logits, target)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    """
    assert lint("TRN005", source) == []


def test_from_pretrained_without_train(lint, where):
    source = """\
    import torch
    from accelerate import Accelerator
    from transformers import AutoModelForSeq2SeqLM

    accelerator = Accelerator()
    model = AutoModelForSeq2SeqLM.from_pretrained("t5-base")
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for batch in loader:
        loss = model(**batch).loss
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
    """
    diagnostics = lint("TRN005", source)
    assert where(diagnostics) == [(6, 8, 6, 56)]
    assert "never calls `model.train()`" in diagnostics[0].message


def test_from_pretrained_with_a_trainer_or_a_train_call(lint):
    trainer = """\
    from transformers import AutoModelForCausalLM, Trainer

    model = AutoModelForCausalLM.from_pretrained("gpt2")
    Trainer(model=model, args=args, train_dataset=ds).train()
    """
    called = """\
    model = AutoModelForCausalLM.from_pretrained("gpt2")
    optimizer = torch.optim.AdamW(model.parameters())
    model.train()
    for batch in loader:
        model(**batch).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    """
    for source in (trainer, called):
        assert lint("TRN005", source) == []
