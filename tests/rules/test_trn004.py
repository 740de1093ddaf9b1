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


def test_a_call_on_one_pass_of_the_loop_is_not_every_step(lint, where):
    """MOSS's finetune script frees the cache once, after the first batch of the first epoch
    (``if batch_cnt == 1 and epoch == 0:``): a loop counter compared for equality holds on one
    pass. A rank test (``if rank == 0:``) holds on every step of that process, and is reported."""
    source = """\
    import argparse

    import torch
    from accelerate import Accelerator

    from sft.data import make_loaders
    from sft.model import load_model


    def train(args):
        accelerator = Accelerator(mixed_precision="bf16")
        model = load_model(args.model_name_or_path)
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate)
        train_dataloader, _ = make_loaders(args)
        model, optimizer, train_dataloader = accelerator.prepare(model, optimizer, train_dataloader)
        rank = accelerator.process_index
        for epoch in range(args.n_epochs):
            for batch_cnt, (input_ids, attention_mask, labels) in enumerate(train_dataloader):
                if batch_cnt == 1 and epoch == 0:
                    torch.cuda.empty_cache()
                optimizer.zero_grad()
                loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
                accelerator.backward(loss)
                optimizer.step()
                if rank == 0:
                    torch.cuda.empty_cache()


    if __name__ == "__main__":
        parser = argparse.ArgumentParser()
        parser.add_argument("--model_name_or_path", default="fnlp/moss-moon-003-base")
        parser.add_argument("--learning_rate", type=float, default=1.5e-5)
        parser.add_argument("--n_epochs", type=int, default=2)
        train(parser.parse_args())
    """
    assert [d.range.start.line for d in lint("TRN004", source)] == [26]
