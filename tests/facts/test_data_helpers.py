"""Where a hand-written loop's sequence length comes from when the tokenizing happens in the
project's own data code, and what memlint assumes when nothing says."""

from __future__ import annotations

from memlint.documents.parsed import parse_document
from memlint.documents.reading import document_from_text
from memlint.facts.extract import extract
from memlint.facts.resolve import RunContext, resolve
from memlint.facts.plan import merge

from facts_testing import dedent, one, span, where

LOOP = dedent('''
    import argparse

    import torch
    from torch.utils.data import DataLoader
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from data import load_corpus


    def get_args():
        parser = argparse.ArgumentParser()
        parser.add_argument("--model", default="openai-community/gpt2-medium")
        parser.add_argument("--seq-len", type=int, default=768)
        return parser.parse_args()


    def main():
        args = get_args()
        tokenizer = AutoTokenizer.from_pretrained(args.model)
        model = AutoModelForCausalLM.from_pretrained(args.model).cuda()
        optimizer = torch.optim.AdamW(model.parameters(), lr=3e-5)
        dataset = load_corpus(tokenizer, max_length=args.seq_len)
        for batch in DataLoader(dataset, batch_size=8, shuffle=True):
            model(**batch).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
''')


def test_a_length_handed_to_a_data_helper_with_the_tokenizer_is_the_sequence_length():
    facts = one(LOOP)
    assert facts.seq_len.value == 768
    assert where(facts.seq_len) == span(LOOP, 'add_argument("--seq-len", type=int, default=«768»)')


def test_a_generation_helpers_length_is_not_the_training_length():
    text = LOOP.replace("dataset = load_corpus(tokenizer, max_length=args.seq_len)",
                        "dataset = load_corpus()\n    print_samples(model, tokenizer, max_length=args.gen_len)")
    text = text.replace('"--seq-len", type=int, default=768', '"--gen-len", type=int, default=768')
    assert one(text).seq_len is None


def test_the_assumed_length_never_exceeds_the_models_context():
    text = LOOP.replace("dataset = load_corpus(tokenizer, max_length=args.seq_len)", "dataset = load_corpus()")
    text = text.replace('    parser.add_argument("--seq-len", type=int, default=768)\n', "")
    facts = one(text)
    assert facts.seq_len is None
    run = resolve(merge(facts, []), RunContext(seq_len=2048))
    assert run.setup.seq_len == 1024  # GPT-2's n_positions
    assert any("sequence length not found: 1024, the model's 1024 positions" in n for n in run.assumptions)


PACKED = dedent('''
    import argparse

    import torch
    from transformers import AutoModelForCausalLM

    from corpus import packed_loader, eval_loader


    def parse_args():
        parser = argparse.ArgumentParser()
        parser.add_argument("--micro-batch", type=int, default=2)
        parser.add_argument("--seq-len", type=int, default=4096)
        return parser.parse_args()


    def main():
        args = parse_args()
        model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-1.5B").cuda()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
        train = packed_loader("Qwen/Qwen2.5-1.5B", seq_len=args.seq_len, batch_size=args.micro_batch)
        held_out = eval_loader("Qwen/Qwen2.5-1.5B", seq_len=args.seq_len, batch_size=32)
        for batch in train:
            model(**batch).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
''')


def test_the_projects_own_loader_takes_the_micro_batch_and_length():
    facts = one(PACKED)
    assert facts.micro_batch.value == 2 and facts.seq_len.value == 4096
    assert where(facts.micro_batch) == span(PACKED, '"--micro-batch", type=int, default=«2»')
    assert facts.cli_bindings["micro_batch"] == ("micro_batch",)


def test_a_library_function_taking_batch_size_is_not_the_projects_loader():
    text = PACKED.replace("from corpus import packed_loader, eval_loader",
                          "from datasets import load_dataset as packed_loader, load_dataset as eval_loader")
    assert one(text).micro_batch is None


def test_a_loader_defined_in_the_script_itself():
    text = PACKED.replace("from corpus import packed_loader, eval_loader\n", "").replace(
        "def parse_args():",
        "def packed_loader(model_id, seq_len, batch_size):\n    return make_blocks(model_id, seq_len, batch_size)\n\n\n"
        "def eval_loader(model_id, seq_len, batch_size):\n    return make_blocks(model_id, seq_len, batch_size)\n\n\n"
        "def parse_args():",
    )
    facts = one(text)
    assert facts.micro_batch.value == 2 and facts.seq_len.value == 4096


def test_a_callable_object_is_not_the_projects_data_code():
    text = PACKED.replace(
        'train = packed_loader("Qwen/Qwen2.5-1.5B", seq_len=args.seq_len, batch_size=args.micro_batch)',
        'embed = make_embedder()\n    vectors = embed(corpus, batch_size=args.micro_batch)\n    train = []',
    )
    assert one(text).micro_batch is None


# peft's examples/eva_finetuning/eva_finetuning.py, trimmed: a module-level setting handed to the
# project's own collator class (``from utils import DataCollator``), which cuts every batch to it
COLLATOR = dedent('''
    from torch.utils.data import DataLoader
    from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments
    from utils import DataCollator

    model_name = "meta-llama/Llama-3.1-8B"
    max_seq_len = 512
    batch_size = 4

    model = AutoModelForCausalLM.from_pretrained(model_name)
    tokenizer = AutoTokenizer.from_pretrained(model_name)
    data_collator = DataCollator(tokenizer.eos_token_id, max_length=max_seq_len)
    args = TrainingArguments(output_dir="out", per_device_train_batch_size=batch_size, bf16=True)
    Trainer(model=model, args=args, train_dataset=dataset, data_collator=data_collator).train()
''')


def test_a_length_handed_to_the_projects_collator_class_is_the_sequence_length():
    facts = one(COLLATOR)
    assert facts.seq_len.value == 512
    assert where(facts.seq_len) == span(COLLATOR, "max_seq_len = «512»")
    # a collator for evaluation says so in its name: not the training length
    evaluation = COLLATOR.replace("DataCollator", "EvalDataCollator")
    assert one(evaluation).seq_len is None



NESTED = dedent('''
    import argparse

    import torch
    from transformers import AutoModelForCausalLM

    from corpus import packed_loader


    class Runner:
        def __init__(self, args):
            self.args = args

        def fit(self):
            model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-1.5B").cuda()
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
            train = packed_loader("Qwen/Qwen2.5-1.5B", seq_len=4096, batch_size=2)
            for epoch in range(3):
                for step, batch in enumerate(train):
                    model(**batch).loss.backward()
                    optimizer.step()
                    optimizer.zero_grad()


    if __name__ == "__main__":
        parser = argparse.ArgumentParser()
        parser.add_argument("--output_dir", default="out")
        Runner(parser.parse_args()).fit()
''')


def test_a_loader_iterated_in_a_nested_loop_of_a_method_as_check_reads_it():
    """The loops a loader is looked for in are every ``for`` of the module, at any depth (a
    trainer class's epoch loop), in the units the editor parses and in ``check``'s whole module."""
    whole = extract(parse_document(document_from_text("train.py", NESTED), whole=True))
    assert len(whole) == 1
    for facts in (one(NESTED), whole[0]):
        assert facts.micro_batch.value == 2 and facts.seq_len.value == 4096
    # a loader no loop iterates is not the training batches
    assert one(NESTED.replace("enumerate(train)", "enumerate(range(10))")).micro_batch is None
