"""A contrastive trainer that uses a gradient cache (the GradCache library): the loader's batch
of 128 pairs runs forward and backward ``chunk_sizes`` samples at a time, so the activations the
estimate holds are those of a chunk, not of the whole batch. The chunk is an option of the
script, which a launch may change."""

from __future__ import annotations

from pathlib import Path

from tests.facts.facts_testing import checked_project, dedent, only_run

TRAIN_RETRIEVER = dedent('''
    """Contrastive fine-tuning of a dense retriever with a large in-batch negative pool."""
    import argparse

    import torch
    from torch.utils.data import DataLoader
    from transformers import AutoModel, AutoTokenizer

    from grad_cache import GradCache as CachedStep
    from grad_cache.loss import SimpleContrastiveLoss


    def main():
        parser = argparse.ArgumentParser()
        parser.add_argument("--model", default="Qwen/Qwen2.5-7B")
        parser.add_argument("--batch_size", type=int, default=128)
        parser.add_argument("--chunk_size", type=int, default=8)
        parser.add_argument("--max_length", type=int, default=1024)
        args = parser.parse_args()

        tokenizer = AutoTokenizer.from_pretrained(args.model)
        model = AutoModel.from_pretrained(args.model, torch_dtype=torch.bfloat16).cuda()
        model.gradient_checkpointing_enable()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)

        def collate(batch):
            queries = tokenizer([q for q, _ in batch], padding="max_length", truncation=True,
                                max_length=args.max_length, return_tensors="pt")
            passages = tokenizer([p for _, p in batch], padding="max_length", truncation=True,
                                 max_length=args.max_length, return_tensors="pt")
            return queries, passages

        loader = DataLoader(load_pairs(), batch_size=args.batch_size, shuffle=True, collate_fn=collate)
        cache = CachedStep(models=[model, model], chunk_sizes=args.chunk_size, loss_fn=SimpleContrastiveLoss(),
                           get_rep_fn=lambda out: out.last_hidden_state[:, -1])
        model.train()
        for queries, passages in loader:
            optimizer.zero_grad()
            cache(queries, passages)
            optimizer.step()


    if __name__ == "__main__":
        main()
''')


def _micro_batch(tmp_path: Path, options: str = "") -> int:
    launch = f"torchrun --nproc_per_node 8 train_retriever.py{options}\n"
    run = only_run(checked_project(tmp_path, {"train_retriever.py": TRAIN_RETRIEVER, "run.sh": launch}), "run.sh")
    return run.setup.micro_batch


def test_the_activations_are_those_of_one_chunk(tmp_path: Path):
    assert _micro_batch(tmp_path) == 8


def test_the_launch_chooses_the_chunk(tmp_path: Path):
    assert _micro_batch(tmp_path, " --chunk_size 32 --batch_size 256") == 32


def test_a_chunk_larger_than_the_batch_leaves_the_batch(tmp_path: Path):
    assert _micro_batch(tmp_path, " --chunk_size 512") == 128
