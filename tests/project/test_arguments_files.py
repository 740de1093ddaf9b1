"""A script that reads all its arguments from a JSON file (Firefly's layout: ``train.py`` takes
``--train_args_file`` with a default path and parses it with ``HfArgumentParser((
CustomizedArguments, TrainingArguments)).parse_json_file(...)``; the project's own dataclass
defaults ``train_mode`` to ``"qlora"``, and ``load_model`` loads 4-bit weights only ``if
args.train_mode == 'qlora':``). Each JSON of ``train_args/`` is that script's command line: it is
linked to the script (by a README call, the option's default, or its folder), its keys bind to
the script's options, the dataclass defaults fill what it omits, and a branch on such a field is
decided by the value that runs. The JSON is not a LLaMA-Factory config, whatever keys it shares."""

from __future__ import annotations

import json
from pathlib import Path

from memlint.lint.engine import Linter, run_context
from memlint.project.project import Project
from memlint.project.settings import Settings

from tests.facts.facts_testing import dedent, facts_of, write

ARGUMENT = dedent('''
    from dataclasses import dataclass, field
    from typing import Optional


    @dataclass
    class CustomizedArguments:
        """Firefly's own arguments, beside TrainingArguments."""
        max_seq_length: int = field(metadata={"help": "max sequence length"})
        train_file: str = field(metadata={"help": "training set"})
        model_name_or_path: str = field(metadata={"help": "pretrained weights"})
        template_name: str = field(default="", metadata={"help": "chat template"})
        eval_file: Optional[str] = field(default="", metadata={"help": "eval set"})
        task_type: str = field(default="sft", metadata={"help": "[pretrain, sft]"})
        train_mode: str = field(default="qlora", metadata={"help": "[full, qlora]"})
        lora_rank: Optional[int] = field(default=64, metadata={"help": "lora rank"})
        lora_alpha: Optional[int] = field(default=16, metadata={"help": "lora alpha"})
        lora_dropout: Optional[float] = field(default=0.05, metadata={"help": "lora dropout"})
''')

TRAIN = dedent('''
    import argparse
    import os

    import torch
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training
    from transformers import (AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig, HfArgumentParser, Trainer,
                              TrainingArguments)

    from component.argument import CustomizedArguments


    def setup_everything():
        parser = argparse.ArgumentParser()
        parser.add_argument("--train_args_file", type=str, default='train_args/sft/qlora/qwen-7b-sft-qlora.json', help="")
        parser.add_argument("--local_rank", type=int, help="")
        args = parser.parse_args()
        train_args_file = args.train_args_file
        parser = HfArgumentParser((CustomizedArguments, TrainingArguments))
        args, training_args = parser.parse_json_file(json_file=train_args_file)
        if not os.path.exists(training_args.output_dir):
            os.makedirs(training_args.output_dir)
        assert args.train_mode in ['full', 'lora', 'qlora'], "train_mode should be in ['full', 'lora', 'qlora']"
        return args, training_args


    def load_model(args, training_args):
        torch_dtype = torch.float16 if training_args.fp16 else torch.bfloat16
        if args.train_mode == 'qlora':
            quantization_config = BitsAndBytesConfig(
                load_in_4bit=True,
                bnb_4bit_compute_dtype=torch.float16 if training_args.fp16 else torch.bfloat16,
                bnb_4bit_use_double_quant=True,
                bnb_4bit_quant_type="nf4",
            )
        else:
            quantization_config = None
        model_kwargs = dict(
            trust_remote_code=True,
            torch_dtype=torch_dtype,
            use_cache=False if training_args.gradient_checkpointing else True,
            quantization_config=quantization_config,
        )
        model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, **model_kwargs)
        if args.train_mode == 'qlora':
            model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=training_args.gradient_checkpointing)
        if args.train_mode != 'full':
            peft_config = LoraConfig(r=args.lora_rank, lora_alpha=args.lora_alpha, lora_dropout=args.lora_dropout,
                                     target_modules="all-linear", task_type="CAUSAL_LM")
            model = get_peft_model(model, peft_config)
        return model


    def main():
        args, training_args = setup_everything()
        tokenizer = AutoTokenizer.from_pretrained(args.model_name_or_path, trust_remote_code=True)
        model = load_model(args, training_args)
        trainer = Trainer(model=model, args=training_args, tokenizer=tokenizer)
        trainer.train()


    if __name__ == "__main__":
        main()
''')

README = dedent('''
    # Firefly

    Full-parameter SFT with DeepSpeed:

    ```bash
    deepspeed --num_gpus={num_gpus} train.py --train_args_file train_args/sft/full/llama3-8b-sft-full.json
    ```

    QLoRA on one GPU:

    ```bash
    python train.py --train_args_file train_args/sft/qlora/qwen-7b-sft-qlora.json
    ```
''')


def _args(model: str, **extra) -> str:
    fields = {"output_dir": "output/firefly", "model_name_or_path": model, "train_file": "./data/dummy_data.jsonl",
              "template_name": "mixtral", "num_train_epochs": 1, "per_device_train_batch_size": 1,
              "gradient_accumulation_steps": 16, "learning_rate": 1e-4, "max_seq_length": 1024,
              "lora_rank": 16, "lora_alpha": 16, "lora_dropout": 0.05, "gradient_checkpointing": True,
              "optim": "paged_adamw_32bit", "fp16": True, "report_to": "tensorboard", "remove_unused_columns": False}
    fields.update(extra)
    return json.dumps(fields, indent=4)


ZERO3 = json.dumps({"fp16": {"enabled": "auto"}, "bf16": {"enabled": "auto"},
                    "zero_optimization": {"stage": 3, "overlap_comm": True, "contiguous_gradients": True},
                    "gradient_accumulation_steps": "auto", "train_batch_size": "auto",
                    "train_micro_batch_size_per_gpu": "auto"}, indent=4)

MIXTRAL = "train_args/sft/qlora/mixtral-8x7b-sft-qlora.json"
FULL = "train_args/sft/full/llama3-8b-sft-full.json"
FILES = {
    "component/__init__.py": "",
    "component/argument.py": ARGUMENT,
    "train.py": TRAIN,
    "README.md": README,
    "train_args/ds_z3_config.json": ZERO3,
    "train_args/sft/qlora/qwen-7b-sft-qlora.json": _args("Qwen/Qwen2.5-7B-Instruct", template_name="qwen"),
    MIXTRAL: _args("mistralai/Mixtral-8x7B-Instruct-v0.1"),
    FULL: _args("meta-llama/Meta-Llama-3-8B-Instruct", train_mode="full", learning_rate=1e-5,
                deepspeed="./train_args/ds_z3_config.json", template_name="llama3"),
}


def _project(root: Path, files: dict[str, str] = FILES) -> Settings:
    write(root, files)
    (root / ".git").mkdir(exist_ok=True)
    return Settings(root=root).with_overrides(gpu="h100", gpus=8, cache=False)


def _run(settings: Settings, name: str):
    [run] = Project(settings).runs_for(settings.root / name, run_context(settings))
    return run


def test_the_script_says_which_option_names_its_arguments_file():
    [facts] = facts_of(TRAIN, "train.py")
    assert facts.arguments_file.value == "train_args_file"
    assert facts.arguments_default.value == "train_args/sft/qlora/qwen-7b-sft-qlora.json"
    # the 4-bit load runs only when train_mode is "qlora": a binding, not a fact of the script
    assert facts.quantization is None
    assert "is=qlora:quantization=nf4" in facts.cli_bindings["train_mode"]


def test_a_file_of_the_folder_runs_as_the_script_with_the_dataclass_defaults(tmp_path: Path):
    settings = _project(tmp_path)
    run = _run(settings, MIXTRAL)
    assert run.plan.value("seq_len") == 1024  # Firefly's max_seq_length, not LLaMA-Factory's cutoff_len default
    assert run.plan.value("lora_r") == 16
    quantization = run.plan.get("quantization")
    assert quantization.value == "nf4"  # train_mode's default, read in component/argument.py
    assert Path(quantization.origin.path).name == "argument.py"
    assert any("train.py parses the files of its folder as its arguments" in a for a in run.assumptions)
    memory = [d for d in Linter(settings).lint_path(tmp_path / MIXTRAL) if d.code in ("MEM001", "MEM002")]
    assert memory == []  # 4-bit Mixtral with LoRA fits an H100


def test_a_file_a_readme_call_names_takes_its_own_fields(tmp_path: Path):
    settings = _project(tmp_path)
    run = _run(settings, FULL)
    assert run.plan.get("quantization") is None  # train_mode: full
    assert run.plan.value("zero_stage") == 3  # its "deepspeed" key names the ZeRO-3 config
    assert not any("launch assumed" in a for a in run.assumptions)


def test_the_script_alone_reads_its_default_file(tmp_path: Path):
    settings = _project(tmp_path, {k: v for k, v in FILES.items() if k != "README.md"})  # no launch: run as it is
    run = _run(settings, "train.py")
    assert run.plan.value("model") == "Qwen/Qwen2.5-7B-Instruct"
    assert run.plan.value("quantization") == "nf4"


CHAT_TRAIN = dedent('''
    import os
    import sys

    from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainingArguments

    from config import DataArguments, ModelArguments


    def main():
        parser = HfArgumentParser((ModelArguments, DataArguments, TrainingArguments))
        if len(sys.argv) == 2 and sys.argv[1].endswith(".yaml"):
            model_args, data_args, training_args = parser.parse_yaml_file(os.path.abspath(sys.argv[1]))
        else:
            model_args, data_args, training_args = parser.parse_args_into_dataclasses()
        model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path)
        trainer = Trainer(model=model, args=training_args)
        trainer.train()


    if __name__ == "__main__":
        main()
''')

CHAT_CONFIG = dedent('''
    from dataclasses import dataclass, field
    from typing import Optional


    @dataclass
    class ModelArguments:
        model_name_or_path: Optional[str] = field(default=None, metadata={"help": "the checkpoint"})


    @dataclass
    class DataArguments:
        dataset_name: Optional[str] = field(default=None, metadata={"help": "the dataset"})
''')


def test_the_last_argument_read_as_the_arguments_file():
    """LOMO's ``train_lomo.py``: ``if sys.argv[-1].endswith(".yaml"): parser.parse_yaml_file(
    yaml_file=os.path.abspath(sys.argv[-1]))``, launched with the YAML as its only argument."""
    last = CHAT_TRAIN.replace("len(sys.argv) == 2 and sys.argv[1]", "sys.argv[-1]").replace(
        "parse_yaml_file(os.path.abspath(sys.argv[1]))", "parse_yaml_file(yaml_file=os.path.abspath(sys.argv[-1]))")
    assert "sys.argv[-1]))" in last
    [facts] = facts_of(last, "lomo/src/train_lomo.py")
    assert facts.arguments_file.value == "1"
    second_last = last.replace("sys.argv[-1]))", "sys.argv[-2]))")
    [facts] = facts_of(second_last, "lomo/src/train_lomo.py")
    assert facts.arguments_file is None


def test_a_script_that_names_no_model_says_what_its_documented_command_runs(tmp_path: Path):
    """starcoder's ``chat/train.py`` parses ``sys.argv[1]``; its README runs ``torchrun
    --nproc_per_node=8 train.py config.yaml``, whose model memlint does not know offline. The
    script's note names that model and where it is written, not "no model found"."""
    files = {
        "chat/train.py": CHAT_TRAIN,
        "chat/config.py": CHAT_CONFIG,
        "chat/config.yaml": "model_name_or_path: bigcode/starcoderbase-unreleased\nper_device_train_batch_size: 4\n"
                            "gradient_accumulation_steps: 8\nbf16: true\n",
        "chat/README.md": "## Launch training\n\n```\ntorchrun --nproc_per_node=8 train.py config.yaml\n```\n",
    }
    [facts] = facts_of(CHAT_TRAIN, "chat/train.py")
    assert facts.arguments_file.value == "1"
    settings = _project(tmp_path, files)
    notes = [d.message for d in Linter(settings).lint_path(tmp_path / "chat/train.py") if d.code == "MEM003"]
    assert len(notes) == 1
    assert "unknown model 'bigcode/starcoderbase-unreleased'" in notes[0]
    assert "from chat/config.yaml:1" in notes[0]


TRL_PARSER_SCRIPT = dedent('''
    from dataclasses import dataclass, field

    import torch
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig, TrainingArguments
    from trl import SFTTrainer
    from trl.commands.cli_utils import TrlParser


    @dataclass
    class ScriptArguments:
        dataset_path: str = field(default=None, metadata={"help": "Path to the dataset"})
        model_id: str = field(default=None, metadata={"help": "Model ID to use for SFT training"})
        max_seq_length: int = field(default=512, metadata={"help": "The maximum sequence length for SFT Trainer"})


    def training_function(script_args, training_args):
        quantization_config = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                                 bnb_4bit_compute_dtype=torch.bfloat16,
                                                 bnb_4bit_quant_storage=torch.bfloat16)
        model = AutoModelForCausalLM.from_pretrained(script_args.model_id, quantization_config=quantization_config,
                                                     torch_dtype=torch.bfloat16)
        peft_config = LoraConfig(r=16, lora_alpha=8, lora_dropout=0.05, target_modules="all-linear",
                                 task_type="CAUSAL_LM")
        trainer = SFTTrainer(model=model, args=training_args, peft_config=peft_config,
                             max_seq_length=script_args.max_seq_length)
        trainer.train()


    if __name__ == "__main__":
        parser = TrlParser((ScriptArguments, TrainingArguments))
        script_args, training_args = parser.parse_args_and_config()
        training_function(script_args, training_args)
''')

TRL_RECIPE = dedent('''
    # script parameters
    model_id: "meta-llama/Meta-Llama-3-70b" # Hugging Face model id
    dataset_path: "."                      # path to dataset
    max_seq_len:  3072 # 2048              # max sequence length for model and packing of the dataset
    # training parameters
    output_dir: "./llama-3-70b-hf-no-robot"
    learning_rate: 0.0002
    per_device_train_batch_size: 1
    gradient_accumulation_steps: 2
    bf16: true
    gradient_checkpointing: true
    fsdp: "full_shard auto_wrap offload"
''')


def test_a_trlparser_script_takes_its_options_from_the_config_the_launch_names(tmp_path: Path):
    """fsdp-qlora (philschmid's Llama 3 70B FSDP-QLoRA post): ``TrlParser(...).parse_args_and_config()``
    makes each key of ``--config llama_3_70b_fsdp_qlora.yaml`` the default of its option, so the
    ``model_id`` the script's own ``ScriptArguments`` declares is the model the README's command
    trains; the options the command writes win over the file."""
    files = {"run_fsdp_qlora.py": TRL_PARSER_SCRIPT, "llama_3_70b_fsdp_qlora.yaml": TRL_RECIPE,
             "README.md": "```\nACCELERATE_USE_FSDP=1 torchrun --nproc_per_node=8 ./run_fsdp_qlora.py "
                          "--config llama_3_70b_fsdp_qlora.yaml{extra}\n```\n"}
    [facts] = facts_of(TRL_PARSER_SCRIPT, "run_fsdp_qlora.py")
    assert (facts.arguments_file.value, facts.arguments_under_cli) == ("config", True)
    settings = _project(tmp_path, {**files, "README.md": files["README.md"].format(extra="")})
    run = _run(settings, "run_fsdp_qlora.py")
    assert run.problem is None
    assert run.plan.value("model") == "meta-llama/Meta-Llama-3-70b"
    assert Path(run.plan.get("model").origin.path).name == "llama_3_70b_fsdp_qlora.yaml"
    settings = _project(tmp_path, {**files, "README.md": files["README.md"].format(
        extra=" --model_id meta-llama/Meta-Llama-3-8B")})
    assert _run(settings, "run_fsdp_qlora.py").plan.value("model") == "meta-llama/Meta-Llama-3-8B"


def test_a_note_on_a_config_names_the_arguments_file_its_model_comes_from(tmp_path: Path):
    """Aria's ``recipes/accelerate_configs/zero2.yaml``: the README's ``accelerate launch
    --config_file ... train.py --config recipes/config_lora.yaml`` is the one run that uses it, and
    its model (unknown offline) is a key of the TrlParser arguments file, not an option the command
    writes: the note says where the model is written, not that the command passes it."""
    accelerate = "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\ndeepspeed_config:\n" \
                 "  zero_stage: 2\nmixed_precision: bf16\nnum_processes: 8\n"
    files = {"train.py": TRL_PARSER_SCRIPT,
             "recipes/config_lora.yaml": TRL_RECIPE.replace("meta-llama/Meta-Llama-3-70b", "acme-labs/secret-model-13b"),
             "recipes/accelerate_configs/zero2.yaml": accelerate,
             "README.md": "```bash\naccelerate launch --config_file recipes/accelerate_configs/zero2.yaml train.py "
                          "--config recipes/config_lora.yaml\n```\n"}
    settings = _project(tmp_path, files).with_overrides(select=("MEM003",))
    [note] = Linter(settings).lint_path(tmp_path / "recipes/accelerate_configs/zero2.yaml")
    assert "unknown model 'acme-labs/secret-model-13b'" in note.message
    assert note.message.endswith("(the run that uses this config takes it from recipes/config_lora.yaml:2)")
