"""Unsloth's loaders (``FastLanguageModel`` / ``FastModel``), written as its starter scripts and
notebooks write them: the model, 4-bit loading by default, LoRA and checkpointing from
``get_peft_model``'s own defaults, and the fused cross-entropy Unsloth patches in."""

from __future__ import annotations

from facts_testing import dedent, one, span, where

STARTER = dedent('''
    """LoRA fine-tuning with Unsloth, from the command line."""
    import argparse

    from datasets import load_dataset
    from trl import SFTConfig, SFTTrainer

    DEFAULT_MODEL = "unsloth/llama-3-8b"


    def run(args):
        from unsloth import FastLanguageModel as Fast

        model, tokenizer = Fast.from_pretrained(
            model_name=args.model_name,
            max_seq_length=args.max_seq_length,
            dtype=None,
        )
        model = Fast.get_peft_model(
            model,
            target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
            lora_alpha=16,
            lora_dropout=0,
        )
        dataset = load_dataset("yahma/alpaca-cleaned", split="train")
        trainer = SFTTrainer(
            model=model,
            processing_class=tokenizer,
            train_dataset=dataset,
            args=SFTConfig(
                per_device_train_batch_size=args.per_device_train_batch_size,
                gradient_accumulation_steps=4,
                max_length=args.max_seq_length,
                optim="adamw_8bit",
                output_dir="outputs",
            ),
        )
        trainer.train()


    if __name__ == "__main__":
        parser = argparse.ArgumentParser()
        model_group = parser.add_argument_group("Model Options")
        model_group.add_argument("--model_name", type=str, default=DEFAULT_MODEL)
        model_group.add_argument("--max_seq_length", type=int, default=2048)
        parser.add_argument("--per_device_train_batch_size", type=int, default=2)
        run(parser.parse_args())
''')


def test_unsloths_defaults_are_read_from_the_loader_and_the_peft_wrap():
    facts = one(STARTER)
    assert facts.model.value == "unsloth/llama-3-8b"
    assert where(facts.model) == span(STARTER, 'DEFAULT_MODEL = «"unsloth/llama-3-8b"»')
    # load_in_4bit is not written: Unsloth's default (True, NF4 with double quantization)
    assert (facts.quantization.value, facts.double_quant.value) == ("nf4", True)
    assert where(facts.quantization) == span(STARTER, "«Fast.from_pretrained»(")
    assert "unless load_in_4bit=False" in facts.quantization.note
    assert facts.fused_loss.value is True
    assert facts.lora_r.value == 16  # get_peft_model's default rank
    assert len(facts.lora_targets.value) == 7
    assert facts.grad_ckpt.value == 1  # use_gradient_checkpointing="unsloth" by default
    assert where(facts.grad_ckpt) == span(STARTER, "«Fast.get_peft_model»(")
    assert facts.micro_batch.value == 2 and facts.seq_len.value == 2048
    assert facts.attention.value == "flash"  # Unsloth's own attention kernels


def test_gpt_oss_under_unsloth_is_not_estimated_with_eager_attention(tmp_path):
    # rmarnold/llm-training-pipeline: gpt-oss-20b under Unsloth at 32,768 tokens; transformers runs
    # gpt-oss eagerly (attention sinks), Unsloth with its flex attention
    from memlint.lint.engine import Linter
    from memlint.project.settings import Settings

    script = STARTER.replace('"unsloth/llama-3-8b"', '"openai/gpt-oss-20b"').replace(
        "default=2048", "default=32768").replace("default=2)", "default=1)")
    (tmp_path / "train.py").write_text(script)
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=1, cache=False)
    found = [d for d in Linter(settings).lint_path(tmp_path / "train.py") if d.code in ("MEM001", "MEM002")]
    assert found == []  # before: MEM001, thousands of GiB of eager attention scores


def test_switches_written_in_the_call_decide():
    full = STARTER.replace("dtype=None,", "dtype=None,\n        load_in_4bit=False,").replace(
        "lora_dropout=0,", "lora_dropout=0,\n        use_gradient_checkpointing=False,")
    facts = one(full)
    assert facts.quantization is None
    assert facts.grad_ckpt is None or facts.grad_ckpt.value == 0
    eight = STARTER.replace("dtype=None,", "dtype=None,\n        load_in_8bit=True,")
    assert one(eight).quantization.value == "int8"


# A script that offers Unsloth as an option beside plain transformers + bitsandbytes (the shape
# of peft's ``examples/sft/utils.py``): by default the transformers branch runs.
OPTIONAL_UNSLOTH = dedent('''
    import argparse

    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig, Trainer, TrainingArguments


    def load(args):
        if args.use_unsloth:
            from unsloth import FastLanguageModel

            model, _ = FastLanguageModel.from_pretrained(
                model_name=args.model_name_or_path,
                max_seq_length=args.max_length,
                load_in_4bit=args.use_4bit_quantization,
            )
            return FastLanguageModel.get_peft_model(model, r=args.lora_r)
        quantization = BitsAndBytesConfig(load_in_4bit=args.use_4bit_quantization, bnb_4bit_quant_type="nf4")
        model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, quantization_config=quantization)
        return get_peft_model(model, LoraConfig(r=args.lora_r, target_modules="all-linear"))


    if __name__ == "__main__":
        parser = argparse.ArgumentParser()
        parser.add_argument("--model_name_or_path", default="meta-llama/Llama-2-7b-hf")
        parser.add_argument("--use_unsloth", action="store_true")
        parser.add_argument("--use_4bit_quantization", action="store_true")
        parser.add_argument("--max_length", type=int, default=2048)
        parser.add_argument("--lora_r", type=int, default=8)
        args = parser.parse_args()
        model = load(args)
        Trainer(model=model, args=TrainingArguments(output_dir="out", per_device_train_batch_size=2)).train()
''')


def test_an_unsloth_branch_that_does_not_run_by_default_states_none_of_unsloths_defaults():
    facts = one(OPTIONAL_UNSLOTH)
    assert facts.model.value == "meta-llama/Llama-2-7b-hf"
    assert facts.fused_loss is None  # Unsloth's fused cross-entropy is not the default run's
    assert facts.grad_ckpt is None  # nor its get_peft_model's checkpointing
    assert facts.lora_r.value == 8
