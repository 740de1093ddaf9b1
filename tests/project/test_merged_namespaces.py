"""A namespace merged from parsed dataclasses: qlora's ``train()`` parses ``ModelArguments``,
``DataArguments`` and ``TrainingArguments`` with ``HfArgumentParser``, then hands
``argparse.Namespace(**vars(model_args), **vars(data_args), **vars(training_args))`` to the
helper that loads the model (``get_accelerate_model(args, checkpoint_dir)``), which quantizes
by ``load_in_4bit=args.bits == 4``. ``args.bits`` is the field of whichever dataclass declares
it (its default, or what the launch passes), and ``args.bf16`` the library field of
``TrainingArguments``."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlint.facts.launch_options import cleared_by_cli, facts_from_cli, hidden_by_cli
from memlint.lint.engine import run_context
from memlint.project.project import Project
from memlint.project.settings import Settings

from tests.facts.facts_testing import dedent, one, write

SCRIPT = dedent('''
    from collections import defaultdict
    import argparse
    from dataclasses import dataclass, field
    from typing import Dict, Optional, Sequence

    import torch
    import transformers
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig, Seq2SeqTrainer


    @dataclass
    class ModelArguments:
        model_name_or_path: Optional[str] = field(default="EleutherAI/pythia-12b")
        trust_remote_code: Optional[bool] = field(
            default=False,
            metadata={"help": "Enable unpickling of arbitrary code in AutoModelForCausalLM#from_pretrained."}
        )


    @dataclass
    class DataArguments:
        source_max_len: int = field(default=1024)
        target_max_len: int = field(default=256)


    @dataclass
    class TrainingArguments(transformers.Seq2SeqTrainingArguments):
        double_quant: bool = field(default=True, metadata={"help": "Compress the quantization statistics."})
        quant_type: str = field(default="nf4", metadata={"help": "fp4 or nf4."})
        bits: int = field(default=4, metadata={"help": "How many bits to use."})
        lora_r: int = field(default=64)
        lora_alpha: float = field(default=16)


    def get_accelerate_model(args, checkpoint_dir):
        compute_dtype = (torch.float16 if args.fp16 else (torch.bfloat16 if args.bf16 else torch.float32))
        model = AutoModelForCausalLM.from_pretrained(
            args.model_name_or_path,
            load_in_4bit=args.bits == 4,
            load_in_8bit=args.bits == 8,
            device_map="auto",
            quantization_config=BitsAndBytesConfig(
                load_in_4bit=args.bits == 4,
                load_in_8bit=args.bits == 8,
                bnb_4bit_compute_dtype=compute_dtype,
                bnb_4bit_use_double_quant=args.double_quant,
                bnb_4bit_quant_type=args.quant_type,
            ),
            torch_dtype=(torch.float32 if args.fp16 else (torch.bfloat16 if args.bf16 else torch.float32)),
        )
        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=args.gradient_checkpointing)
        config = LoraConfig(r=args.lora_r, lora_alpha=args.lora_alpha, target_modules=["q_proj", "v_proj"],
                            task_type="CAUSAL_LM")
        return get_peft_model(model, config)


    def train():
        hfparser = transformers.HfArgumentParser((ModelArguments, DataArguments, TrainingArguments))
        model_args, data_args, training_args, extra_args = hfparser.parse_args_into_dataclasses(
            return_remaining_strings=True)
        args = argparse.Namespace(**vars(model_args), **vars(data_args), **vars(training_args))
        model = get_accelerate_model(args, None)
        trainer = Seq2SeqTrainer(model=model, args=training_args, train_dataset=build_dataset(args))
        trainer.train()


    if __name__ == "__main__":
        train()
''')

LAUNCH = dedent('''
    python qlora.py \\
        --model_name_or_path huggyllama/llama-7b \\
        --output_dir ./output/guanaco-7b \\
        --per_device_train_batch_size 1 \\
        --gradient_accumulation_steps 16 \\
        --gradient_checkpointing \\
        --source_max_len 16 \\
        --target_max_len 512 \\
        {switches}
''')


def _run(root: Path, switches: str):
    write(root, {"qlora.py": SCRIPT, "scripts/finetune.sh": LAUNCH.replace("{switches}", switches)})
    (root / ".git").mkdir(exist_ok=True)
    settings = Settings(root=root).with_overrides(gpu="h100", gpus=1, cache=False, offline=True)
    [run] = Project(settings).runs_for(root / "scripts/finetune.sh", run_context(settings))
    return run


def test_the_field_of_the_dataclass_that_declares_it_quantizes_the_model(tmp_path: Path):
    run = _run(tmp_path, "--bf16 --bits 4")
    assert run.setup.lora is not None and run.setup.lora.quantization == "nf4"
    assert run.setup.lora.r == 64
    assert run.setup.precision.value == "amp-bf16"


def test_the_default_of_the_field_quantizes_where_the_launch_omits_it(tmp_path: Path):
    run = _run(tmp_path, "--bf16")
    assert run.setup.lora is not None and run.setup.lora.quantization == "nf4"



@pytest.mark.parametrize(("switches", "expected"), [
    ("--bits 4 --quant_type nf4", "nf4"),
    ("--bits 8", "int8"),
    ("--bits 16", None),
    ("--bits=32 --bf16", None),
])
def test_the_launch_redoes_the_comparison_with_its_bits(tmp_path: Path, switches: str, expected: str | None):
    """``--bits 16`` loads the weights unquantised, ``--bits 8`` in int8: not the default's 4 bits."""
    run = _run(tmp_path, switches)
    assert run.setup.lora is not None and run.setup.lora.quantization == expected
    quantization = run.plan.get("quantization")
    assert (quantization.value if quantization is not None else None) == expected
    if expected == "int8":
        assert quantization.origin.path.endswith("finetune.sh") and "bits == 8" in quantization.note


def test_the_comparison_is_bound_not_the_option_as_a_switch():
    script = one(SCRIPT, "qlora.py")
    assert script.quantization.value == "nf4"
    assert not any(b.startswith("if:quantization") for b in script.cli_bindings["bits"])
    sixteen = one("python qlora.py --bits 16\n", "run.sh")
    assert cleared_by_cli(script, sixteen) == {"quantization"}
    eight = one("python qlora.py --bits 8\n", "run.sh")
    assert cleared_by_cli(script, eight) == frozenset()  # the launch states int8 itself
    unknown = one("python qlora.py --bits $BITS\n", "run.sh")
    assert "quantization" in hidden_by_cli(script, unknown) and "quantization" not in facts_from_cli(script, unknown)
