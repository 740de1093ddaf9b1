"""TRN004: torch.cuda.empty_cache() every training step."""

from __future__ import annotations


def test_empty_cache_in_the_step_and_in_a_helper(lint, where):
    source = """\
    import gc

    import torch
    from torch.cuda import empty_cache


    def cleanup():
        gc.collect()
        torch.cuda.empty_cache()


    def train(model, loader, optimizer):
        for batch in loader:
            loss = model(**batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            del loss
            empty_cache()
            cleanup()
    """
    diagnostics = lint("TRN004", source)
    assert where(diagnostics) == [(9, 4, 9, 28), (19, 8, 19, 21)]


def test_near_misses(lint):
    source = """\
    import torch

    for epoch in range(epochs):
        for step, batch in enumerate(loader):
            try:
                loss = model(**batch).loss
                loss.backward()
                optimizer.step()
            except torch.cuda.OutOfMemoryError:
                torch.cuda.empty_cache()
            optimizer.zero_grad()
            if step % 500 == 0:
                torch.cuda.empty_cache()
        torch.cuda.empty_cache()
        evaluate(model)

    for batch in eval_loader:
        with torch.no_grad():
            outputs.append(model(**batch).logits.cpu())
        torch.cuda.empty_cache()
    """
    assert lint("TRN004", source) == []
