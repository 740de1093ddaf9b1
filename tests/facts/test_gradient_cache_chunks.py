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


RETRIEVER_ARGUMENTS = dedent('''
    from dataclasses import dataclass, field

    from transformers import TrainingArguments


    @dataclass
    class ModelArguments:
        model_name_or_path: str = field(default="Qwen/Qwen2.5-7B")


    @dataclass
    class RetrieverTrainingArguments(TrainingArguments):
        gc_q_chunk_size: int = field(default=2, metadata={"help": "query side sub-batch"})
        gc_p_chunk_size: int = field(default=2, metadata={"help": "passage side sub-batch"})
''')

OWN_TRAINER = dedent('''
    """Embedding fine-tuning whose trainer keeps the gradient cache's chunk on itself."""
    import torch
    from transformers import AutoModel, HfArgumentParser, Trainer

    from grad_cache import GradCache
    from arguments import ModelArguments, RetrieverTrainingArguments


    class GradCacheTrainer(Trainer):
        def __init__(self, *args, chunk_size: int = 16, **kwargs):
            super().__init__(*args, **kwargs)
            self.chunk_size = chunk_size
            self.cache = None

        def training_step(self, model, inputs, num_items_in_batch=None):
            if self.cache is None:
                self.cache = GradCache(models=[model, model], chunk_sizes=self.chunk_size, loss_fn=self.loss_fn)
            return self.cache(inputs["query"], inputs["passage"])


    def main():
        parser = HfArgumentParser((ModelArguments, RetrieverTrainingArguments))
        model_args, training_args = parser.parse_args_into_dataclasses()
        model = AutoModel.from_pretrained(model_args.model_name_or_path, torch_dtype=torch.bfloat16)
        trainer = GradCacheTrainer(model=model, args=training_args, train_dataset=load_pairs(),
                                   chunk_size=training_args.gc_q_chunk_size)
        trainer.train()


    if __name__ == "__main__":
        main()
''')

IMPORTED_TRAINER = dedent('''
    import torch.distributed as dist
    from transformers import Trainer

    from src.grad_cache.grad_cache import GradCache
    from src.loss import SimpleContrastiveLoss


    class ContrastiveTrainer(Trainer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.gc = GradCache(
                models=[self.model, self.model],
                chunk_sizes=[self.args.gc_q_chunk_size, self.args.gc_p_chunk_size],
                loss_fn=SimpleContrastiveLoss(),
            )

        def training_step(self, model, inputs, *args, **kwargs):
            return self.gc(inputs[0], inputs[1], no_sync_except_last=dist.is_initialized())
''')

IMPORTING_SCRIPT = dedent('''
    import torch
    from transformers import AutoModel, HfArgumentParser

    from src.arguments import ModelArguments, RetrieverTrainingArguments
    from src.trainer import ContrastiveTrainer


    def main():
        parser = HfArgumentParser((ModelArguments, RetrieverTrainingArguments))
        model_args, training_args = parser.parse_args_into_dataclasses()
        model = AutoModel.from_pretrained(model_args.model_name_or_path, torch_dtype=torch.bfloat16)
        trainer = ContrastiveTrainer(model=model, args=training_args, train_dataset=load_pairs())
        trainer.train()


    if __name__ == "__main__":
        main()
''')


def _trainer_run(tmp_path: Path, files: dict[str, str], launched: str):
    launch = f"torchrun --nproc_per_node 8 {launched} --per_device_train_batch_size 64 --bf16 True\n"
    return only_run(checked_project(tmp_path, {**files, "run.sh": launch}), "run.sh")


def test_a_chunk_the_trainer_keeps_from_its_constructor(tmp_path: Path):
    files = {"train.py": OWN_TRAINER, "arguments.py": RETRIEVER_ARGUMENTS}
    run = _trainer_run(tmp_path / "default", files, "train.py")
    assert run.setup.micro_batch == 2  # self.chunk_size <- chunk_size=training_args.gc_q_chunk_size, default 2
    run = _trainer_run(tmp_path / "passed", files, "train.py --gc_q_chunk_size 8")
    assert run.setup.micro_batch == 8
    assert run.plan.get("gradient_cache_chunk").origin.path.endswith("run.sh")


def test_a_chunk_an_imported_trainer_reads_from_its_training_arguments(tmp_path: Path):
    files = {"train.py": IMPORTING_SCRIPT, "src/__init__.py": "", "src/arguments.py": RETRIEVER_ARGUMENTS,
             "src/trainer.py": IMPORTED_TRAINER}
    run = _trainer_run(tmp_path, files, "train.py --model_name_or_path Qwen/Qwen2.5-7B --gc_q_chunk_size 4 --gc_p_chunk_size 16")
    assert run.setup.micro_batch == 16  # one chunk size per model: the largest
    assert "max(gc_q_chunk_size, gc_p_chunk_size)" in run.plan.get("gradient_cache_chunk").note
