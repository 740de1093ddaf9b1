"""A launcher's options applied through the script's bindings (``facts.cli.facts_from_cli``)."""

from __future__ import annotations

from facts_testing import dedent, one, span, where

from memlint.facts.launch_options import facts_from_cli


def _apply(script_src: str, launcher_src: str) -> dict:
    script = one(script_src, "train.py")
    launcher = one(launcher_src, "run.sh")
    return {name: fact.value for name, fact in facts_from_cli(script, launcher).items()}


ARGPARSE = dedent('''
    import argparse
    import torch
    from torch.utils.data import DataLoader
    from transformers import AutoModelForCausalLM

    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="openai-community/gpt2")
    parser.add_argument("-b", "--batch-size", dest="batch_size", type=int, default=8)
    parser.add_argument("--no-checkpointing", dest="checkpointing", action="store_false")
    parser.add_argument("--bf16", action="store_true")
    parser.add_argument("--dtype", default="float32")
    args = parser.parse_args()

    model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=getattr(torch, args.dtype))
    if args.checkpointing:
        model.gradient_checkpointing_enable()
    loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
    optimizer = torch.optim.AdamW(model.parameters())
    for batch in loader:
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.bf16):
            loss = model(**batch).loss
        loss.backward()
''')


def test_argparse_options_short_and_long_flags_and_store_false():
    script = one(ARGPARSE)
    assert script.micro_batch.value == 8
    assert script.grad_ckpt.value == 1  # store_false: on by default
    assert script.autocast is None  # enabled=args.bf16 is off by default
    assert script.cli_bindings["b"] == script.cli_bindings["batch_size"] == ("micro_batch",)
    launched = _apply(ARGPARSE, "torchrun --nproc_per_node 2 train.py -b 32 --bf16 --dtype bfloat16 --model gpt2\n")
    assert launched == {"micro_batch": 32, "autocast": "bf16", "load_dtype": "bf16", "model": "gpt2"}
    # --no-checkpointing sets args.checkpointing to False: the switch does not fire
    assert "grad_ckpt" not in _apply(ARGPARSE, "python train.py --no-checkpointing\n")


def test_hf_fields_and_switches_from_the_launcher():
    script = dedent('''
        from dataclasses import dataclass, field
        import transformers
        from peft import prepare_model_for_kbit_training
        from transformers import BitsAndBytesConfig, HfArgumentParser, Trainer, TrainingArguments

        @dataclass
        class ModelArguments:
            model_name_or_path: str = field(default=None)
            q_lora: bool = False

        parser = HfArgumentParser((ModelArguments, TrainingArguments))
        model_args, training_args = parser.parse_args_into_dataclasses()
        model = transformers.AutoModelForCausalLM.from_pretrained(
            model_args.model_name_or_path,
            quantization_config=BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4") if model_args.q_lora else None,
        )
        Trainer(model=model, args=training_args).train()
    ''')
    launched = _apply(script, dedent('''
        deepspeed --num_gpus 4 train.py --model_name_or_path meta-llama/Llama-2-7b-hf --q_lora True \\
            --per_device_train_batch_size 2 --bf16 True --gradient_checkpointing --optim adamw_bnb_8bit \\
            --fsdp "full_shard auto_wrap" --model_max_length 4096 --deepspeed ds.json
    '''))
    assert launched == {
        "model": "meta-llama/Llama-2-7b-hf",
        "quantization": "nf4",
        "double_quant": False,  # BitsAndBytesConfig's default, stated once q_lora is on
        "micro_batch": 2,
        "mixed": "bf16",
        "grad_ckpt": 1,
        "optimizer": "adamw-8bit",
        "fsdp": "full",
        "seq_len": 4096,
        "seq_len_limit": "model_max_length",  # a truncation limit, not every batch's length
    }
    assert "quantization" not in _apply(script, "python train.py --q_lora False\n")


def test_options_the_script_does_not_read_change_nothing():
    assert _apply(ARGPARSE, "python train.py --per_device_train_batch_size 64 --max_length 8192\n") == {}


LENGTH_BY_NAME = dedent('''
    import argparse

    import deepspeed
    from deepspeed.ops.adam import FusedAdam
    from transformers import AutoModelForCausalLM

    from utils.data import create_prompt_dataset  # tokenizes to max_seq_len, padding="max_length"


    def parse_args():
        parser = argparse.ArgumentParser()
        parser.add_argument("--model_name_or_path", type=str, required=True)
        parser.add_argument("--per_device_train_batch_size", type=int, default=16)
        parser.add_argument("--max_seq_len", type=int, default=512)
        parser.add_argument("--max_prompt_seq_len", type=int, default=256)
        return parser.parse_args()


    def main():
        args = parse_args()
        train_data = create_prompt_dataset(args.data_path, args.max_seq_len)
        model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path)
        optimizer = FusedAdam(model.parameters(), lr=1e-3)
        engine, *_ = deepspeed.initialize(model=model, optimizer=optimizer,
                                          config={"train_micro_batch_size_per_gpu": args.per_device_train_batch_size})
''')


def test_a_length_option_the_script_hands_on_is_the_sequence_length():
    facts = one(LENGTH_BY_NAME)
    assert facts.seq_len.value == 512
    assert "--max_seq_len" in facts.seq_len.note
    assert where(facts.seq_len) == span(LENGTH_BY_NAME, '"--max_seq_len", type=int, default=«512»')
    # --max_prompt_seq_len is not one of the names a sequence length goes by
    assert facts.cli_bindings["max_seq_len"] == ("seq_len",)
    assert "max_prompt_seq_len" not in facts.cli_bindings
    assert _apply(LENGTH_BY_NAME, "deepspeed --num_gpus 4 main.py --max_seq_len 2048\n") == {"seq_len": 2048}


def test_a_length_the_script_states_wins_over_an_option_name():
    src = LENGTH_BY_NAME.replace(
        "train_data = create_prompt_dataset(args.data_path, args.max_seq_len)",
        "train_data = tokenizer(texts, max_length=1024, truncation=True, padding=\"max_length\")",
    )
    facts = one(src)
    assert facts.seq_len.value == 1024 and "tokenizer(max_length" in facts.seq_len.note
    assert "max_seq_len" not in facts.cli_bindings
