"""Hand-written training loops: optimizers, DataLoaders, tokenizer lengths, autocast, half
models, checkpointing, and the output object that keeps the logits alive through backward()."""

from __future__ import annotations

from facts_testing import dedent, one, span, where

PLAIN_LOOP = dedent('''
    import torch
    from torch.utils.data import DataLoader
    from transformers import AutoModelForCausalLM, AutoTokenizer

    MODEL = "meta-llama/Llama-3.2-1B-Instruct"
    BATCH = 8
    tokenizer = AutoTokenizer.from_pretrained(MODEL)


    def tokenize(example):
        return tokenizer(example["text"], truncation=True, max_length=1024, padding="max_length")


    def train(train_set, eval_set, epochs=1):
        model = AutoModelForCausalLM.from_pretrained(MODEL).cuda()
        model.gradient_checkpointing_enable()
        optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5, fused=True)
        train_loader = DataLoader(train_set.map(tokenize), batch_size=BATCH, shuffle=True)
        eval_loader = DataLoader(eval_set.map(tokenize), batch_size=BATCH * 4)
        for _ in range(epochs):
            for batch in train_loader:
                batch = {k: v.cuda() for k, v in batch.items()}
                with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                    outputs = model(**batch)
                    loss = outputs.loss
                loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            with torch.no_grad():
                for batch in eval_loader:
                    eval_outputs = model(**batch)
                    print(eval_outputs.loss.item())
''')


def test_plain_pytorch_loop():
    facts = one(PLAIN_LOOP)
    src = PLAIN_LOOP
    assert facts.framework is None  # a hand-written loop: resolve treats it as plain PyTorch
    assert facts.model.value == "meta-llama/Llama-3.2-1B-Instruct"
    assert where(facts.model) == span(src, 'MODEL = «"meta-llama/Llama-3.2-1B-Instruct"»')
    assert facts.micro_batch.value == 8
    assert where(facts.micro_batch) == span(src, "BATCH = «8»")
    assert facts.seq_len.value == 1024
    assert where(facts.seq_len) == span(src, "max_length=«1024»")
    assert facts.optimizer.value == "adamw-fused"
    assert where(facts.optimizer) == span(src, "fused=«True»")
    assert facts.grad_ckpt.value == 1
    assert where(facts.grad_ckpt) == span(src, "model.«gradient_checkpointing_enable»()")
    assert facts.autocast.value == "bf16"
    assert where(facts.autocast) == span(src, "dtype=«torch.bfloat16»")
    assert facts.keep_logits.value is True
    assert where(facts.keep_logits) == span(src, "outputs = «model(**batch)»")
    assert facts.half_model is None


def test_accelerate_loop_with_8bit_adam_and_fp16_autocast():
    src = dedent('''
        import bitsandbytes as bnb
        import torch
        from accelerate import Accelerator
        from torch.utils.data import DataLoader
        from transformers import AutoModelForCausalLM

        accelerator = Accelerator(mixed_precision="fp16", gradient_accumulation_steps=4)
        model = AutoModelForCausalLM.from_pretrained("openai-community/gpt2-large")
        optimizer = bnb.optim.AdamW8bit(model.parameters(), lr=1e-4)
        loader = DataLoader(dataset, batch_size=2, shuffle=True)
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        for batch in loader:
            with accelerator.accumulate(model):
                loss = model(**batch).loss
                accelerator.backward(loss)
                optimizer.step()
    ''')
    facts = one(src)
    assert facts.framework.value == "accelerate"
    assert facts.mixed.value == "fp16"
    assert where(facts.mixed) == span(src, 'mixed_precision=«"fp16"»')
    assert facts.grad_accum.value == 4
    assert facts.optimizer.value == "adamw-8bit"
    assert where(facts.optimizer) == span(src, "optimizer = «bnb.optim.AdamW8bit»(")
    assert facts.micro_batch.value == 2
    assert facts.keep_logits is None  # `model(**batch).loss` frees the output object at once


def test_half_models_and_legacy_autocast():
    src = dedent('''
        import torch
        from torch.cuda.amp import GradScaler, autocast
        from transformers import AutoModelForSeq2SeqLM

        model = AutoModelForSeq2SeqLM.from_pretrained("google-t5/t5-large").half()
        optimizer = torch.optim.AdamW(model.parameters(), foreach=False)
        scaler = GradScaler()
        for batch in loader:
            with autocast():
                loss = model(**batch).loss
            scaler.scale(loss).backward()
    ''')
    facts = one(src)
    assert facts.half_model.value == "fp16"
    assert where(facts.half_model) == span(src, '.«half»()')
    assert facts.autocast.value == "fp16"  # torch.cuda.amp.autocast defaults to float16
    assert where(facts.autocast) == span(src, "with «autocast»():")
    assert facts.optimizer.value == "adamw-forloop"
    assert where(facts.optimizer) == span(src, "foreach=«False»")


def test_model_to_dtype_and_custom_checkpointed_forward():
    src = dedent('''
        import torch
        import torch.nn as nn
        from torch.utils.checkpoint import checkpoint


        class Net(nn.Module):
            def __init__(self, blocks):
                super().__init__()
                self.blocks = nn.ModuleList(blocks)

            def forward(self, x):
                for block in self.blocks:
                    x = checkpoint(block, x, use_reentrant=False)
                return x


        model = Net([nn.Linear(4096, 4096) for _ in range(32)])
        model = model.to("cuda", dtype=torch.bfloat16)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        activations = torch.randn(8, 4096).to(torch.float16)
        model(activations).sum().backward()
    ''')
    facts = one(src)
    assert facts.half_model.value == "bf16"
    assert where(facts.half_model) == span(src, "dtype=«torch.bfloat16»")
    assert facts.grad_ckpt.value == 1
    assert where(facts.grad_ckpt) == span(src, "x = «checkpoint»(block")
    assert facts.optimizer.value == "sgd"
    assert facts.model is None  # a custom module: no Hub id


def test_hf_trainer_compute_loss_override_does_not_keep_logits():
    src = dedent('''
        from transformers import Trainer, TrainingArguments

        class WeightedTrainer(Trainer):
            def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
                outputs = model(**inputs)
                loss = outputs.loss * 2
                return (loss, outputs) if return_outputs else loss

        WeightedTrainer(model=model, args=TrainingArguments(output_dir="o", per_device_train_batch_size=2)).train()
    ''')
    facts = one(src)
    assert facts.keep_logits is None
    assert facts.framework.value == "hf-trainer"  # a subclass of Trainer is a Trainer
    assert facts.micro_batch.value == 2


def test_outputs_deleted_before_backward_do_not_keep_logits():
    src = dedent('''
        import torch

        def step(model, batch, optimizer):
            outputs = model(**batch)
            loss = outputs.loss
            del outputs
            loss.backward()
            optimizer.step()
    ''')
    facts = one(src)
    assert facts.keep_logits is None


def test_dataloaders_that_disagree_state_no_batch():
    src = dedent('''
        import torch
        from torch.utils.data import DataLoader

        def run(model, a, b, optimizer):
            first = DataLoader(a, batch_size=4)
            second = DataLoader(b, batch_size=16)
            for batch in first:
                model(batch).sum().backward()
                optimizer.step()
    ''')
    facts = one(src)
    assert facts.micro_batch is None
