"""A launch that turns off what the script's defaults turn on: a boolean field on by default
(``use_lora: bool = True``) is turned off by ``--use_lora False`` or HfArgumentParser's
``--no_use_lora``, an argparse ``store_false`` flag by passing it; the script's statement under
it is then not the run's. (A comparison of options, qlora's ``load_in_4bit=args.bits == 4``:
``test_merged_namespaces``.)"""

from __future__ import annotations

import pytest

from memlint.facts.launch_options import cleared_by_cli

from tests.facts.facts_testing import checked_project, dedent, one, only_run

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


def test_a_boolean_optional_action_is_turned_off_by_its_no_flag():
    script = one(ARGPARSE_FLAG.replace(
        'parser.add_argument("--no_grad_ckpt", dest="grad_ckpt", action="store_false")',
        'parser.add_argument("--grad-ckpt", action=argparse.BooleanOptionalAction, default=True)'))
    assert script.grad_ckpt.value == 1
    assert cleared_by_cli(script, one("python train.py --no-grad-ckpt\n", "run.sh")) == {"grad_ckpt"}
    assert cleared_by_cli(script, one("python train.py --grad-ckpt\n", "run.sh")) == frozenset()
