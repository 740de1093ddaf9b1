"""A launch that turns off what the script's defaults turn on.

qlora's ``load_in_4bit=args.bits == 4`` with ``bits: int = 4`` loads 4-bit weights by default;
``--bits 16`` loads them unquantised and ``--bits 8`` in int8 (the comparison is redone with the
launch's value). A boolean field on by default (``use_lora: bool = True``) is turned off by
``--use_lora False`` or HfArgumentParser's ``--no_use_lora``; an argparse ``store_false`` flag by
passing it."""

from __future__ import annotations

import pytest

from memlint.facts.launch_options import cleared_by_cli, facts_from_cli, hidden_by_cli

from tests.facts.facts_testing import checked_project, dedent, one, only_run

QLORA = dedent('''
    from dataclasses import dataclass, field
    from typing import Optional

    import torch
    import transformers
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig, Seq2SeqTrainer


    @dataclass
    class ModelArguments:
        model_name_or_path: Optional[str] = field(default="EleutherAI/pythia-12b")


    @dataclass
    class TrainingArguments(transformers.Seq2SeqTrainingArguments):
        double_quant: bool = field(default=True, metadata={"help": "Compress the quantization statistics."})
        quant_type: str = field(default="nf4", metadata={"help": "fp4 or nf4."})
        bits: int = field(default=4, metadata={"help": "How many bits to use."})
        lora_r: int = field(default=64, metadata={"help": "Lora R dimension."})
        per_device_train_batch_size: int = field(default=1)
        gradient_checkpointing: bool = field(default=True)


    def get_accelerate_model(args):
        compute_dtype = torch.bfloat16 if args.bf16 else torch.float32
        model = AutoModelForCausalLM.from_pretrained(
            args.model_name_or_path,
            load_in_4bit=args.bits == 4,
            load_in_8bit=args.bits == 8,
            quantization_config=BitsAndBytesConfig(
                load_in_4bit=args.bits == 4,
                load_in_8bit=args.bits == 8,
                bnb_4bit_compute_dtype=compute_dtype,
                bnb_4bit_use_double_quant=args.double_quant,
                bnb_4bit_quant_type=args.quant_type,
            ),
            torch_dtype=torch.bfloat16,
        )
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=args.gradient_checkpointing)
        config = LoraConfig(r=args.lora_r, lora_alpha=16, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
        return get_peft_model(model, config)


    def train():
        parser = transformers.HfArgumentParser((ModelArguments, TrainingArguments))
        model_args, training_args = parser.parse_args_into_dataclasses()
        args = argparse.Namespace(**vars(model_args), **vars(training_args))
        model = get_accelerate_model(args)
        trainer = Seq2SeqTrainer(model=model, args=training_args, train_dataset=train_dataset)
        trainer.train()


    if __name__ == "__main__":
        train()
''').replace("from typing import Optional\n", "import argparse\nfrom typing import Optional\n")


def _launched(tmp_path, command: str):
    settings = checked_project(tmp_path, {
        "qlora.py": QLORA,
        "scripts/finetune.sh": dedent(f'''
            #!/bin/bash
            python qlora.py \\
                --model_name_or_path meta-llama/Llama-2-7b-hf \\
                --output_dir ./output/llama-2-7b \\
                --bf16 \\
                {command}
        '''),
    })
    return only_run(settings, "scripts/finetune.sh")


@pytest.mark.parametrize(("command", "expected"), [
    ("--per_device_train_batch_size 1", "nf4"),  # the script's default: 4 bits
    ("--bits 4 --quant_type nf4", "nf4"),
    ("--bits 8", "int8"),
    ("--bits 16", None),
    ("--bits=32", None),
])
def test_a_launch_chooses_the_bits_the_script_compares(tmp_path, command, expected):
    run = _launched(tmp_path, command)
    quantization = run.plan.get("quantization")
    assert (quantization.value if quantization is not None else None) == expected
    if expected is None:  # unquantised bf16 weights: 2 bytes a parameter
        assert run.setup.lora is not None and run.setup.lora.quantization is None
    elif expected == "int8":
        assert run.setup.lora.quantization == "int8"
        assert quantization.origin.path.endswith("finetune.sh")


def test_an_unknown_bit_count_leaves_the_quantization_unknown():
    script = one(QLORA, "qlora.py")
    launcher = one("python qlora.py --model_name_or_path gpt2 --bits $BITS\n", "run.sh")
    assert "quantization" in hidden_by_cli(script, launcher)
    assert "quantization" not in facts_from_cli(script, launcher)


def test_the_comparison_is_bound_not_the_option_as_a_switch():
    script = one(QLORA, "qlora.py")
    assert script.quantization.value == "nf4"
    assert not any(b.startswith("if:quantization") for b in script.cli_bindings["bits"])
    launcher = one("python qlora.py --bits 16\n", "run.sh")
    assert cleared_by_cli(script, launcher) == {"quantization"}
    eight = one("python qlora.py --bits 8\n", "run.sh")
    assert cleared_by_cli(script, eight) == frozenset()  # the launch states int8 itself
    assert facts_from_cli(script, eight)["quantization"].value == "int8"
    assert "bits == 8" in facts_from_cli(script, eight)["quantization"].note


LORA_DEFAULT_ON = dedent('''
    from dataclasses import dataclass, field

    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainingArguments


    @dataclass
    class ModelArguments:
        model_name_or_path: str = field(default="meta-llama/Llama-2-7b-hf")
        use_lora: bool = field(default=True, metadata={"help": "Train a LoRA adapter instead of the model."})
        lora_rank: int = 16


    def main():
        parser = HfArgumentParser((ModelArguments, TrainingArguments))
        model_args, training_args = parser.parse_args_into_dataclasses()
        model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path)
        if model_args.use_lora:
            config = LoraConfig(r=model_args.lora_rank, target_modules=["q_proj", "v_proj"])
            model = get_peft_model(model, config)
        Trainer(model=model, args=training_args, train_dataset=train_dataset).train()


    if __name__ == "__main__":
        main()
''')


@pytest.mark.parametrize(("passed", "adapter"), [
    ("", True),
    ("--use_lora True", True),
    ("--use_lora False", False),
    ("--use_lora false", False),
    ("--use_lora 0", False),
    ("--no_use_lora", False),
])
def test_a_boolean_field_on_by_default_is_turned_off_by_the_launch(passed, adapter):
    script = one(LORA_DEFAULT_ON)
    assert script.lora_r.value == 16
    launcher = one(f"torchrun --nproc_per_node 8 train.py --bf16 True {passed}\n", "run.sh")
    assert ("lora_r" not in cleared_by_cli(script, launcher)) == adapter


ARGPARSE_FLAG = dedent('''
    import argparse

    import torch
    from transformers import AutoModelForCausalLM

    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="gpt2-large")
    parser.add_argument("--no_grad_ckpt", dest="grad_ckpt", action="store_false")
    parser.add_argument("--batch_size", type=int, default=8)
    args = parser.parse_args()

    model = AutoModelForCausalLM.from_pretrained(args.model)
    if args.grad_ckpt:
        model.gradient_checkpointing_enable()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    for batch in loader:
        model(**batch).loss.backward()
        optimizer.step()
''')


def test_a_store_false_flag_passed_takes_the_fact_back(tmp_path):
    script = one(ARGPARSE_FLAG)
    assert script.grad_ckpt.value == 1
    assert cleared_by_cli(script, one("python train.py --no_grad_ckpt\n", "run.sh")) == {"grad_ckpt"}
    assert cleared_by_cli(script, one("python train.py --batch_size 4\n", "run.sh")) == frozenset()
    settings = checked_project(tmp_path, {"train.py": ARGPARSE_FLAG,
                                          "run.sh": "python train.py --model gpt2 --no_grad_ckpt\n"})
    assert only_run(settings, "run.sh").plan.get("grad_ckpt") is None
