"""What must not become a fact: look-alikes on unrelated calls, comments, values only known at
run time, files that do not train, files memlint cannot parse."""

from __future__ import annotations

import time

from facts_testing import dedent, facts_of, one


def test_batch_size_on_unrelated_calls_is_no_fact():
    src = dedent('''
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer, TrainingArguments, Trainer, pipeline

        tokenizer = AutoTokenizer.from_pretrained("openai-community/gpt2")
        embedder = pipeline("feature-extraction", model="sentence-transformers/all-MiniLM-L6-v2", batch_size=256)
        vectors = embedder(corpus, batch_size=128)
        index = build_index(vectors, batch_size=64, max_length=4096)
        model = AutoModelForCausalLM.from_pretrained("openai-community/gpt2")
        samples = model.generate(**tokenizer("Hello", return_tensors="pt"), max_length=200)
        Trainer(model=model, args=TrainingArguments(output_dir="out")).train()
    ''')
    facts = one(src)
    assert facts.micro_batch is None  # TrainingArguments leaves it at the Trainer default
    assert facts.seq_len is None  # generate(max_length=...) is not a training length
    assert facts.model.value == "openai-community/gpt2"


def test_commented_out_trainer_arguments_are_ignored():
    src = dedent('''
        from transformers import Trainer, TrainingArguments

        # args = TrainingArguments(output_dir="out", per_device_train_batch_size=64, gradient_checkpointing=True)
        args = TrainingArguments(
            output_dir="out",
            # per_device_train_batch_size=64,
            per_device_train_batch_size=2,
        )
        """
        trainer = Trainer(model=model, args=TrainingArguments(output_dir="x", per_device_train_batch_size=128))
        """
        Trainer(model=model, args=args).train()
    ''')
    facts = one(src)
    assert facts.micro_batch.value == 2
    assert facts.grad_ckpt is None


def test_values_known_only_at_run_time_are_no_facts():
    src = dedent('''
        import os
        import sys

        import torch
        import yaml
        from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

        config = yaml.safe_load(open(sys.argv[1]))
        batch = int(os.environ.get("BATCH_SIZE", 8))
        length = config["max_length"]
        dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        accumulation = 4
        if torch.cuda.device_count() > 1:
            accumulation = 1
        model = AutoModelForCausalLM.from_pretrained(config["model"], torch_dtype=dtype)
        args = TrainingArguments(
            output_dir="out",
            per_device_train_batch_size=batch,
            gradient_accumulation_steps=accumulation,
            max_length=length,
            **config["trainer"],
        )
        Trainer(model=model, args=args).train()
    ''')
    facts = one(src)
    for name in ("seq_len", "load_dtype", "grad_accum", "model"):
        assert getattr(facts, name) is None, name
    # an environment variable's fallback is what a plain run reads; a launch's environment replaces it
    assert facts.micro_batch.value == 8 and "$BATCH_SIZE" in facts.cli_bindings
    assert facts.framework.value == "hf-trainer"


def test_an_inference_script_defines_no_training_run():
    src = dedent('''
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-70B", torch_dtype=torch.bfloat16)
        tokenizer = AutoTokenizer.from_pretrained("meta-llama/Llama-3.1-70B")
        with torch.inference_mode():
            print(model.generate(**tokenizer("Hi", return_tensors="pt"), max_new_tokens=32))
    ''')
    assert facts_of(src) == []


def test_files_without_training_imports_are_skipped_before_parsing_metadata():
    src = dedent('''
        import argparse

        def main():
            parser = argparse.ArgumentParser()
            parser.add_argument("--batch_size", type=int, default=4096)
            args = parser.parse_args()
            optimizer = make_optimizer(lr=1e-3)
            loss.backward()
    ''') * 200
    from memlint.documents.parsed import parse_document
    from memlint.documents.reading import document_from_text
    from memlint.facts.extract import extract

    parsed = parse_document(document_from_text("tool.py", src))
    assert extract(parsed) == []
    # no libcst metadata is built for a file that imports no ML library
    assert parsed.python is None or not {"positions", "scopes", "_qualified"} & set(parsed.python.__dict__)


def test_syntax_errors_and_odd_files_do_not_crash():
    assert facts_of("import torch\ndef broken(:\n    pass\n") == []
    assert facts_of("") == []
    assert facts_of("import torch\n" + "x = " + "(" * 500 + "1" + ")" * 500 + "\n") == []
    deep = "import torch\nfrom transformers import TrainingArguments\nA0 = 1\n" + "".join(
        f"A{i} = A{i - 1} + 1\n" for i in range(1, 400)) + "TrainingArguments(per_device_train_batch_size=A399)\n"
    facts = facts_of(deep)
    assert len(facts) == 1 and facts[0].micro_batch is None  # too deep to follow: unknown, not an error


def test_a_name_assigned_twice_differently_is_unknown():
    src = dedent('''
        from transformers import Trainer, TrainingArguments

        BATCH = 4
        if debug:
            BATCH = 1
        Trainer(model=model, args=TrainingArguments(output_dir="o", per_device_train_batch_size=BATCH)).train()
    ''')
    assert one(src).micro_batch is None


def test_local_names_that_shadow_library_names_are_not_recognised():
    src = dedent('''
        import torch

        def TrainingArguments(**kwargs):
            return kwargs

        def DataLoader(items, batch_size):
            return items

        settings = TrainingArguments(per_device_train_batch_size=64)
        loader = DataLoader(range(10), batch_size=32)
        optimizer = torch.optim.SGD(params, lr=0.1)
    ''')
    facts = one(src)
    assert facts.micro_batch is None
    assert facts.framework is None


def test_a_model_definition_that_imports_torch_costs_no_metadata():
    src = dedent('''
        import torch
        from torch import nn


        class MLP(nn.Module):
            def __init__(self, width=4096):
                super().__init__()
                self.up = nn.Linear(width, 4 * width)
                self.down = nn.Linear(4 * width, width)

            def forward(self, x):
                return self.down(torch.nn.functional.gelu(self.up(x)))
    ''')
    from memlint.documents.parsed import parse_document
    from memlint.documents.reading import document_from_text
    from memlint.facts.extract import extract

    parsed = parse_document(document_from_text("mlp.py", src))
    assert extract(parsed) == []
    assert not {"positions", "scopes", "_qualified"} & set(parsed.python.__dict__)
