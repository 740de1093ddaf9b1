"""Hugging Face / TRL training scripts written the way people write them: argparse with
constants defined elsewhere in the file, helper functions, dataclasses + HfArgumentParser,
aliased imports, dicts unpacked with ``**``. Every fact is asserted with its exact range."""

from __future__ import annotations

from facts_testing import dedent, one, span, where

TRL_QLORA = dedent('''
    """QLoRA fine-tuning of Llama 3.1 8B on a chat dataset with TRL."""
    import argparse

    import torch
    from datasets import load_dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig
    from trl import SFTConfig as Config, SFTTrainer

    OUTPUT_ROOT = "checkpoints"


    def parse_args():
        parser = argparse.ArgumentParser(description=__doc__)
        parser.add_argument("--model", default=MODEL_ID)
        parser.add_argument("--batch-size", type=int, default=4)
        parser.add_argument("--grad-accum", type=int, default=BASE_ACCUM * 2)
        parser.add_argument("--max-len", type=int, default=2048)
        parser.add_argument("--gradient-checkpointing", action="store_true")
        parser.add_argument("--lora-r", type=int, default=16)
        return parser.parse_args()


    def build_config(args, learning_rate=2e-4):
        return Config(
            output_dir=f"{OUTPUT_ROOT}/r{args.lora_r}",
            per_device_train_batch_size=args.batch_size,
            gradient_accumulation_steps=args.grad_accum,
            gradient_checkpointing=args.gradient_checkpointing,
            max_length=args.max_len,
            bf16=True,
            learning_rate=learning_rate,
            optim="paged_adamw_8bit",
        )


    def main():
        args = parse_args()
        quantization = BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=torch.bfloat16,
        )
        model = AutoModelForCausalLM.from_pretrained(
            args.model,
            quantization_config=quantization,
            torch_dtype=torch.bfloat16,
            attn_implementation="flash_attention_2",
        )
        tokenizer = AutoTokenizer.from_pretrained(args.model)
        peft_config = LoraConfig(r=args.lora_r, lora_alpha=32, lora_dropout=0.05,
                                 target_modules=["q_proj", "k_proj", "v_proj", "o_proj"], task_type="CAUSAL_LM")
        trainer = SFTTrainer(
            model=model,
            args=build_config(args),
            train_dataset=load_dataset("trl-lib/Capybara", split="train"),
            processing_class=tokenizer,
            peft_config=peft_config,
        )
        trainer.train()


    MODEL_ID = "meta-llama/Llama-3.1-8B"
    BASE_ACCUM = 4

    if __name__ == "__main__":
        main()
''')


def test_trl_qlora_script_with_argparse_constants_and_a_helper():
    facts = one(TRL_QLORA)
    src = TRL_QLORA
    assert facts.model.value == "meta-llama/Llama-3.1-8B"
    assert where(facts.model) == span(src, 'MODEL_ID = «"meta-llama/Llama-3.1-8B"»')
    assert facts.micro_batch.value == 4
    assert where(facts.micro_batch) == span(src, '"--batch-size", type=int, default=«4»')
    assert facts.grad_accum.value == 8
    assert where(facts.grad_accum) == span(src, "default=«BASE_ACCUM * 2»")
    assert facts.seq_len.value == 2048
    assert where(facts.seq_len) == span(src, "default=«2048»")
    assert facts.grad_ckpt.value == 0  # store_true: off unless the launcher passes it
    assert where(facts.grad_ckpt) == span(src, '"--gradient-checkpointing", action=«"store_true"»')
    assert facts.mixed.value == "bf16"
    assert where(facts.mixed) == span(src, "bf16=«True»")
    assert facts.optimizer.value == "paged-adamw-8bit"
    assert where(facts.optimizer) == span(src, 'optim=«"paged_adamw_8bit"»')
    assert (facts.quantization.value, facts.double_quant.value) == ("nf4", True)
    assert where(facts.quantization) == span(src, 'bnb_4bit_quant_type=«"nf4"»')
    assert where(facts.double_quant) == span(src, "bnb_4bit_use_double_quant=«True»")
    assert facts.load_dtype.value == "bf16"
    assert where(facts.load_dtype) == span(src, "torch_dtype=«torch.bfloat16»")
    assert facts.attention.value == "flash"
    assert facts.lora_r.value == 16
    assert where(facts.lora_r) == span(src, '"--lora-r", type=int, default=«16»')
    assert facts.lora_dropout.value == 0.05
    assert facts.lora_targets.value == ("q_proj", "k_proj", "v_proj", "o_proj")
    assert facts.framework.value == "trl"
    assert facts.anchor.range.start.line == span(src, "trainer = «SFTTrainer»")[0]
    assert facts.cli_bindings["batch_size"] == ("hf:per_device_train_batch_size",)
    assert facts.cli_bindings["grad_accum"] == ("hf:gradient_accumulation_steps",)
    assert facts.cli_bindings["max_len"] == ("hf:max_length",)
    assert facts.cli_bindings["gradient_checkpointing"] == ("hf:gradient_checkpointing",)
    assert facts.cli_bindings["lora_r"] == ("lora_r",)
    assert facts.cli_bindings["model"] == ("model",)


ALIASED_WITH_DICTS = dedent('''
    from datasets import load_dataset
    from transformers import AutoModelForCausalLM, Trainer as HFTrainer, TrainingArguments as TA

    COMMON = dict(output_dir="out/qwen", logging_steps=10, bf16=True, report_to="none")
    PER_GPU = {"per_device_train_batch_size": 2, "gradient_accumulation_steps": 16}


    def make_args(**overrides):
        return TA(**COMMON, **PER_GPU, gradient_checkpointing=True, deepspeed="configs/ds_zero3.json", **overrides)


    model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-7B", dtype="auto")
    trainer = HFTrainer(model=model, args=make_args(), train_dataset=load_dataset("imdb", split="train"))
    trainer.train()
''')


def test_aliased_imports_and_dicts_unpacked_with_stars():
    facts = one(ALIASED_WITH_DICTS)
    src = ALIASED_WITH_DICTS
    assert facts.framework.value == "hf-trainer"
    assert facts.micro_batch.value == 2
    assert where(facts.micro_batch) == span(src, '"per_device_train_batch_size": «2»')
    assert facts.grad_accum.value == 16
    assert where(facts.grad_accum) == span(src, '"gradient_accumulation_steps": «16»')
    assert facts.mixed.value == "bf16"
    assert where(facts.mixed) == span(src, "bf16=«True»")
    assert facts.grad_ckpt.value == 1
    assert [r.value for r in facts.references] == ["configs/ds_zero3.json"]
    assert where(facts.references[0]) == span(src, 'deepspeed=«"configs/ds_zero3.json"»')
    assert facts.model.value == "Qwen/Qwen2.5-7B"
    assert facts.load_dtype.value == "auto"
    anchor = facts.anchor.range
    assert (anchor.start.line, anchor.start.column, anchor.end.line, anchor.end.column) == span(
        src, "trainer = «HFTrainer»(")


ALPACA = dedent('''
    from dataclasses import dataclass, field
    from typing import Optional

    import transformers
    from transformers import Trainer


    @dataclass
    class ModelArguments:
        model_name_or_path: Optional[str] = field(default="facebook/opt-125m")


    @dataclass
    class DataArguments:
        data_path: str = field(default=None, metadata={"help": "Path to the training data."})
        max_length: int = 128  # used for evaluation prompts only


    @dataclass
    class TrainingArguments(transformers.TrainingArguments):
        cache_dir: Optional[str] = field(default=None)
        optim: str = field(default="adamw_torch")
        model_max_length: int = field(
            default=512,
            metadata={"help": "Maximum sequence length."},
        )


    def train():
        parser = transformers.HfArgumentParser((ModelArguments, DataArguments, TrainingArguments))
        model_args, data_args, training_args = parser.parse_args_into_dataclasses()
        model = transformers.AutoModelForCausalLM.from_pretrained(
            model_args.model_name_or_path,
            cache_dir=training_args.cache_dir,
        )
        tokenizer = transformers.AutoTokenizer.from_pretrained(
            model_args.model_name_or_path,
            model_max_length=training_args.model_max_length,
            padding_side="right",
        )
        if training_args.gradient_checkpointing:
            model.gradient_checkpointing_enable()
        trainer = Trainer(model=model, tokenizer=tokenizer, args=training_args)
        trainer.train()


    if __name__ == "__main__":
        train()
''')


def test_dataclasses_and_hf_argument_parser():
    facts = one(ALPACA)
    src = ALPACA
    assert facts.model.value == "facebook/opt-125m"
    assert where(facts.model) == span(src, 'field(default=«"facebook/opt-125m"»)')
    assert facts.optimizer.value == "adamw"
    assert where(facts.optimizer) == span(src, 'optim: str = field(default=«"adamw_torch"»)')
    assert facts.seq_len.value == 512
    assert where(facts.seq_len) == span(src, "default=«512»")
    assert facts.framework.value == "hf-trainer"
    # the guarded call runs only when --gradient_checkpointing is passed
    assert facts.grad_ckpt is None
    bindings = facts.cli_bindings
    assert "if:grad_ckpt=1" in bindings["gradient_checkpointing"]
    assert "hf:gradient_checkpointing" in bindings["gradient_checkpointing"]
    assert "hf:per_device_train_batch_size" in bindings["per_device_train_batch_size"]
    assert "hf:model_name_or_path" in bindings["model_name_or_path"]
    assert "model" in bindings["model_name_or_path"]
    assert "hf:model_max_length" in bindings["model_max_length"]
    # DataArguments.max_length is an option, but its default says nothing about training
    assert facts.seq_len.value != 128


HELPER_DEFAULTS = dedent('''
    import torch
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments


    def build_args(output_dir, batch_size=4, accumulation=8, checkpointing=False):
        return TrainingArguments(
            output_dir=output_dir,
            per_device_train_batch_size=batch_size,
            gradient_accumulation_steps=accumulation,
            gradient_checkpointing=checkpointing,
            fp16=True,
        )


    def main():
        model = AutoModelForCausalLM.from_pretrained("mistralai/Mistral-7B-v0.1", torch_dtype=torch.float16)
        args = build_args("out/mistral", accumulation=2)
        Trainer(model=model, args=args).train()


    main()
''')


def test_helper_function_defaults_and_call_site_arguments():
    facts = one(HELPER_DEFAULTS)
    src = HELPER_DEFAULTS
    assert facts.micro_batch.value == 4
    assert where(facts.micro_batch) == span(src, "batch_size=«4»")
    assert facts.grad_accum.value == 2  # the call passes accumulation=2
    assert where(facts.grad_accum) == span(src, "accumulation=«2»)")
    assert facts.grad_ckpt.value == 0
    assert facts.mixed.value == "fp16"
    assert facts.load_dtype.value == "fp16"
    assert facts.model.value == "mistralai/Mistral-7B-v0.1"


def test_trainer_arguments_stated_twice_differently_take_neither_helper_value():
    src = dedent('''
        from transformers import Trainer, TrainingArguments

        def build_args(batch_size):
            return TrainingArguments(output_dir="out", per_device_train_batch_size=batch_size)

        def sweep(model):
            for trial in range(3):
                Trainer(model=model, args=build_args(4)).train()
            Trainer(model=model, args=build_args(16)).train()
    ''')
    facts = one(src)
    assert facts.micro_batch is None  # two call sites disagree: no single value
    assert facts.framework.value == "hf-trainer"


def test_trl_trainer_with_model_id_and_old_max_seq_length():
    src = dedent('''
        from trl import SFTTrainer
        from datasets import load_dataset

        MAX_SEQ = 1024 * 4
        trainer = SFTTrainer("Qwen/Qwen2.5-0.5B", train_dataset=load_dataset("trl-lib/Capybara", split="train"),
                             max_seq_length=MAX_SEQ, packing=True)
        trainer.train()
    ''')
    facts = one(src)
    assert facts.model.value == "Qwen/Qwen2.5-0.5B"
    assert where(facts.model) == span(src, 'SFTTrainer(«"Qwen/Qwen2.5-0.5B"»')
    assert facts.seq_len.value == 4096
    assert where(facts.seq_len) == span(src, "MAX_SEQ = «1024 * 4»")
    assert facts.framework.value == "trl"


def test_trl_parser_scripts_bind_every_library_field():
    src = dedent('''
        from trl import ModelConfig, ScriptArguments, SFTConfig, SFTTrainer, TrlParser

        def main(script_args, training_args, model_args):
            trainer = SFTTrainer(model=model_args.model_name_or_path, args=training_args)
            trainer.train()

        if __name__ == "__main__":
            parser = TrlParser((ScriptArguments, SFTConfig, ModelConfig))
            main(*parser.parse_args_and_config())
    ''')
    facts = one(src)
    assert facts.framework.value == "trl"
    assert facts.model is None  # ModelConfig's default is None: the command line decides
    assert "model" in facts.cli_bindings["model_name_or_path"]
    for option in ("per_device_train_batch_size", "max_length", "gradient_checkpointing", "bf16", "lora_r"):
        assert f"hf:{option}" in facts.cli_bindings[option]


def test_qlora_guarded_by_a_dataclass_flag():
    src = dedent('''
        import typing
        from dataclasses import dataclass, field

        import transformers
        from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training
        from transformers import BitsAndBytesConfig, Trainer


        @dataclass
        class LoraArguments:
            lora_r: int = 8
            lora_target_modules: typing.List[str] = field(default_factory=lambda: ["q_proj", "v_proj"])
            q_lora: bool = False


        def train():
            parser = transformers.HfArgumentParser((transformers.TrainingArguments, LoraArguments))
            training_args, lora_args = parser.parse_args_into_dataclasses()
            model = transformers.AutoModelForCausalLM.from_pretrained(
                "lmsys/vicuna-7b-v1.5",
                quantization_config=BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4")
                if lora_args.q_lora
                else None,
            )
            config = LoraConfig(r=lora_args.lora_r, target_modules=lora_args.lora_target_modules)
            if lora_args.q_lora:
                model = prepare_model_for_kbit_training(model)
            model = get_peft_model(model, config)
            Trainer(model=model, args=training_args).train()
    ''')
    facts = one(src)
    assert facts.quantization is None  # q_lora defaults to False
    assert facts.grad_ckpt is None
    assert "if:quantization=nf4" in facts.cli_bindings["q_lora"]
    assert "if:grad_ckpt=1" in facts.cli_bindings["q_lora"]
    assert facts.lora_r.value == 8
    assert where(facts.lora_r) == span(src, "lora_r: int = «8»")
    assert facts.lora_targets.value == ("q_proj", "v_proj")
    assert facts.cli_bindings["lora_r"] == ("hf:lora_r", "lora_r")


INT8_LORA = dedent('''
    """LoRA on an 8-bit LLaMA with peft's older int8 preparation (peft < 0.4)."""
    import argparse

    import torch
    import transformers
    from peft import LoraConfig, get_peft_model, prepare_model_for_int8_training as prepare_int8
    from transformers import LlamaForCausalLM

    parser = argparse.ArgumentParser()
    parser.add_argument("--model_path", default="huggyllama/llama-7b")
    parser.add_argument("--micro_batch", type=int, default=4)
    parser.add_argument("--load_8bit", action="store_true")
    args = parser.parse_args()

    model = LlamaForCausalLM.from_pretrained(args.model_path, load_in_8bit=LOAD_8BIT, torch_dtype=torch.float16)
    model = prepare_int8(model)
    model = get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "v_proj"]))
    trainer = transformers.Trainer(
        model=model,
        args=transformers.TrainingArguments(per_device_train_batch_size=args.micro_batch, fp16=True, output_dir="out"),
    )
    trainer.train()
''')


def test_int8_preparation_checkpoints_an_8bit_model():
    src = INT8_LORA.replace("LOAD_8BIT", "True")
    facts = one(src)
    assert facts.quantization.value == "int8"
    assert facts.grad_ckpt.value == 1
    assert where(facts.grad_ckpt) == span(src, "model = «prepare_int8»(model)")
    assert facts.lora_r.value == 8


def test_int8_preparation_follows_the_option_that_loads_in_8_bits():
    src = INT8_LORA.replace("LOAD_8BIT", "args.load_8bit")
    facts = one(src)
    assert facts.quantization is None and facts.grad_ckpt is None  # --load_8bit is off by default
    assert "if:quantization=int8" in facts.cli_bindings["load_8bit"]
    assert "if:grad_ckpt=1" in facts.cli_bindings["load_8bit"]


def test_int8_preparation_leaves_a_16bit_model_unchanged():
    # peft checkpoints only ``if loaded_in_8bit and use_gradient_checkpointing``
    facts = one(INT8_LORA.replace("load_in_8bit=LOAD_8BIT, ", ""))
    assert facts.quantization is None and facts.grad_ckpt is None
    facts = one(INT8_LORA.replace("prepare_int8(model)", "prepare_int8(model, use_gradient_checkpointing=False)")
                .replace("LOAD_8BIT", "True"))
    assert facts.quantization.value == "int8" and facts.grad_ckpt is None


def test_lora_applied_only_when_an_option_says_so():
    src = dedent('''
        import argparse
        from peft import LoraConfig, get_peft_model
        from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

        parser = argparse.ArgumentParser()
        parser.add_argument("--use_lora", action="store_true")
        args = parser.parse_args()
        model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B-Instruct")
        lora = LoraConfig(r=64, lora_dropout=0.1)
        if args.use_lora:
            model = get_peft_model(model, lora)
        Trainer(model=model, args=TrainingArguments(output_dir="out")).train()
    ''')
    facts = one(src)
    assert facts.lora_r is None
    assert "if:lora_r=64" in facts.cli_bindings["use_lora"]


def test_from_config_and_liger_and_model_init_kwargs():
    src = dedent('''
        import torch
        from liger_kernel.transformers import apply_liger_kernel_to_llama
        from transformers import AutoConfig, AutoModelForCausalLM
        from trl import SFTConfig, SFTTrainer

        apply_liger_kernel_to_llama()
        config = AutoConfig.from_pretrained("meta-llama/Llama-3.2-3B")
        model = AutoModelForCausalLM.from_config(config)
        args = SFTConfig(output_dir="out", model_init_kwargs={"torch_dtype": torch.bfloat16}, max_length=8192)
        SFTTrainer(model=model, args=args).train()
    ''')
    facts = one(src)
    assert facts.model.value == "meta-llama/Llama-3.2-3B"
    assert where(facts.model) == span(src, 'AutoConfig.from_pretrained(«"meta-llama/Llama-3.2-3B"»)')
    assert facts.fused_loss.value is True
    assert where(facts.fused_loss) == span(src, "«apply_liger_kernel_to_llama»()")
    assert facts.load_dtype.value == "bf16"
    assert facts.seq_len.value == 8192


def test_one_run_per_function_that_builds_its_own_trainer():
    src = dedent('''
        import sys

        import torch
        from transformers import AutoModelForCausalLM
        from trl import DPOConfig, DPOTrainer, SFTConfig, SFTTrainer

        BASE = "Qwen/Qwen2.5-7B"


        def load():
            return AutoModelForCausalLM.from_pretrained(BASE, torch_dtype=torch.bfloat16)


        def sft():
            args = SFTConfig(output_dir="out/sft", per_device_train_batch_size=8, max_length=2048)
            SFTTrainer(model=load(), args=args).train()


        def dpo():
            args = DPOConfig(output_dir="out/dpo", per_device_train_batch_size=2, max_length=1024,
                             gradient_checkpointing=True)
            DPOTrainer(model=load(), ref_model=load(), args=args).train()


        if __name__ == "__main__":
            sft() if sys.argv[1] == "sft" else dpo()
    ''')
    from facts_testing import facts_of

    first, second = facts_of(src)
    assert (first.micro_batch.value, first.seq_len.value, first.grad_ckpt) == (8, 2048, None)
    assert (second.micro_batch.value, second.seq_len.value, second.grad_ckpt.value) == (2, 1024, 1)
    for run in (first, second):
        assert run.model.value == "Qwen/Qwen2.5-7B"
        assert run.load_dtype.value == "bf16"
        assert run.framework.value == "trl"
    assert first.anchor.range.start.line < second.anchor.range.start.line


def test_value_spellings_fstrings_min_getattr_class_constants_and_dataclass_instances():
    src = dedent('''
        from dataclasses import dataclass

        import torch
        from liger_kernel.transformers import AutoLigerKernelForCausalLM
        from transformers import Seq2SeqTrainer, Seq2SeqTrainingArguments

        CONFIG_DIR = "configs"
        STAGE = 3


        class Defaults:
            MAX_LENGTH = 8192
            DTYPE = "bfloat16"


        @dataclass
        class RunConfig:
            batch_size: int = 4
            accumulation: int = 2


        config = RunConfig(batch_size=16)
        model = AutoLigerKernelForCausalLM.from_pretrained("Qwen/Qwen2.5-3B", torch_dtype=getattr(torch, Defaults.DTYPE))
        args = Seq2SeqTrainingArguments(
            output_dir=f"out/stage{STAGE}",
            deepspeed=f"{CONFIG_DIR}/zero{STAGE}.json",
            per_device_train_batch_size=config.batch_size,
            gradient_accumulation_steps=config.accumulation,
            max_length=min(Defaults.MAX_LENGTH, 4096),
            use_liger_kernel=True,
        )
        Seq2SeqTrainer(model=model, args=args).train()
    ''')
    facts = one(src)
    assert [r.value for r in facts.references] == ["configs/zero3.json"]
    assert where(facts.references[0]) == span(src, 'deepspeed=«f"{CONFIG_DIR}/zero{STAGE}.json"»')
    assert facts.micro_batch.value == 16
    assert where(facts.micro_batch) == span(src, "RunConfig(batch_size=«16»)")
    assert facts.grad_accum.value == 2
    assert where(facts.grad_accum) == span(src, "accumulation: int = «2»")
    assert facts.seq_len.value == 4096
    assert facts.load_dtype.value == "bf16"
    assert facts.fused_loss.value is True
    assert facts.model.value == "Qwen/Qwen2.5-3B"
    assert facts.framework.value == "hf-trainer"


def test_legacy_8bit_loading_and_half_casts():
    src = dedent('''
        import torch
        import transformers

        model = transformers.AutoModelForCausalLM.from_pretrained("facebook/opt-125m", load_in_8bit=True)
        reference = transformers.AutoModelForCausalLM.from_pretrained("facebook/opt-125m")
        reference = reference.to(torch.float16)
        optimizer = torch.optim.Adam(model.parameters())
    ''')
    facts = one(src)
    assert facts.quantization.value == "int8"
    assert where(facts.quantization) == span(src, "load_in_8bit=«True»")
    assert facts.half_model.value == "fp16"
    assert where(facts.half_model) == span(src, "reference.to(«torch.float16»)")
    assert facts.optimizer.value == "adam"
