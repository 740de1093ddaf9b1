"""Entry points across modules (issue 14, item 4): a launched script that trains by calling a
``train()``/``main()`` it imports from another module of the project (FastChat's
``fastchat/train/train_mem.py``) runs that module's run: its argument definitions and defaults,
with the launch command's options applied. An import that is never called, or of a module that
trains nothing, brings no facts."""

from __future__ import annotations

from pathlib import Path

from facts_testing import dedent, span, where, write

from memlint.lint.engine import Linter, run_context
from memlint.project.project import Project
from memlint.project.settings import Settings

# fastchat/train/train.py, trimmed: its own TrainingArguments add model_max_length (512)
TRAIN = dedent('''
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
            model_args.model_name_or_path, cache_dir=training_args.cache_dir
        )
        tokenizer = transformers.AutoTokenizer.from_pretrained(
            model_args.model_name_or_path, model_max_length=training_args.model_max_length
        )
        trainer = Trainer(model=model, tokenizer=tokenizer, args=training_args)
        trainer.train()


    if __name__ == "__main__":
        train()
''')
# fastchat/train/train_mem.py: a monkey patch, then the imported train()
TRAIN_MEM = dedent('''
    # Make it more memory efficient by monkey patching the LLaMA model with FlashAttn.

    # Need to call this before importing transformers.
    from fastchat.train.llama2_flash_attn_monkey_patch import (
        replace_llama_attn_with_flash_attn,
    )

    replace_llama_attn_with_flash_attn()

    from fastchat.train.train import train

    if __name__ == "__main__":
        train()
''')
PATCH = "def replace_llama_attn_with_flash_attn():\n    pass\n"
# scripts/train_vicuna_7b.sh, trimmed
LAUNCH = dedent('''
    torchrun --nproc_per_node=4 --master_port=20001 fastchat/train/train_mem.py \\
        --model_name_or_path lmsys/vicuna-7b-v1.5 \\
        --data_path ~/datasets/sharegpt_clean.json \\
        --bf16 True \\
        --output_dir output_vicuna_7b \\
        --per_device_train_batch_size 2 \\
        --gradient_accumulation_steps 16 \\
        --fsdp "full_shard auto_wrap" \\
        --fsdp_transformer_layer_cls_to_wrap 'LlamaDecoderLayer' \\
        --gradient_checkpointing True
''')
FASTCHAT = {
    "fastchat/__init__.py": "",
    "fastchat/train/__init__.py": "",
    "fastchat/train/train.py": TRAIN,
    "fastchat/train/train_mem.py": TRAIN_MEM,
    "fastchat/train/llama2_flash_attn_monkey_patch.py": PATCH,
    "scripts/train_vicuna_7b.sh": LAUNCH,
}


def _project(root: Path, files: dict[str, str], gpu: str = "h100") -> tuple[Settings, Project]:
    write(root, files)
    (root / ".git").mkdir(exist_ok=True)
    settings = Settings(root=root).with_overrides(gpu=gpu, cache=False)
    return settings, Project(settings)


def test_the_imported_train_function_runs_with_the_launch_options(tmp_path: Path):
    settings, project = _project(tmp_path, FASTCHAT)
    [run] = project.runs_for(tmp_path / "scripts/train_vicuna_7b.sh", run_context(settings))
    plan = run.plan
    assert run.problem is None and run.arch is not None
    assert plan.value("model") == "lmsys/vicuna-7b-v1.5"
    assert plan.value("micro_batch") == 2 and plan.value("grad_accum") == 16
    assert plan.value("world_size") == 4
    # the module's own default, which the command line does not change
    seq = plan.get("seq_len")
    assert seq.value == 512 and seq.origin.path.endswith("fastchat/train/train.py")
    assert where(seq) == span(TRAIN, "default=«512»")
    assert any(str(d).endswith("fastchat/train/train.py") for d in plan.documents)
    # the batch size is the launcher's, located there
    assert plan.get("micro_batch").origin.path.endswith("train_vicuna_7b.sh")


def test_an_aliased_main_in_a_src_layout(tmp_path: Path):
    cli = TRAIN.replace("def train():", "def main():").replace("        train()\n", "        main()\n")
    files = {
        "src/mytrainer/__init__.py": "",
        "src/mytrainer/cli.py": cli,
        "run_train.py": "from mytrainer.cli import main as run_main\n\nif __name__ == '__main__':\n    run_main()\n",
        "train.sh": "python run_train.py --model_name_or_path Qwen/Qwen2.5-0.5B --per_device_train_batch_size 8 "
                    "--model_max_length 1024\n",
    }
    settings, project = _project(tmp_path, files)
    [run] = project.runs_for(tmp_path / "train.sh", run_context(settings))
    assert run.plan.value("model") == "Qwen/Qwen2.5-0.5B"
    assert run.plan.value("micro_batch") == 8
    assert run.plan.value("seq_len") == 1024


def test_an_import_that_is_not_called_brings_no_facts(tmp_path: Path):
    # the script imports train() only to read its docstring; it trains nothing
    files = {**FASTCHAT, "fastchat/train/train_mem.py": "from fastchat.train.train import train\n\nprint(train.__doc__)\n"}
    settings, project = _project(tmp_path, files)
    runs = project.runs_for(tmp_path / "scripts/train_vicuna_7b.sh", run_context(settings))
    assert all(not any(str(d).endswith("fastchat/train/train.py") for d in r.plan.documents) for r in runs)


def test_a_called_helper_module_that_trains_nothing_brings_no_facts(tmp_path: Path):
    files = {**FASTCHAT,
             "fastchat/train/train_mem.py": "from fastchat.data.clean import run_cleaning\n\nrun_cleaning()\n",
             "fastchat/data/__init__.py": "",
             "fastchat/data/clean.py": "import json\n\ndef run_cleaning():\n    print(json.dumps({}))\n"}
    settings, project = _project(tmp_path, files)
    runs = project.runs_for(tmp_path / "scripts/train_vicuna_7b.sh", run_context(settings))
    assert all(not any("fastchat/data/clean.py" in str(d) for d in r.plan.documents) for r in runs)
    assert all(r.plan.get("seq_len") is None or not r.plan.get("seq_len").origin.path.endswith(".py") for r in runs)


def test_the_launcher_gets_the_memory_verdict(tmp_path: Path):
    heavy = LAUNCH.replace("--per_device_train_batch_size 2", "--per_device_train_batch_size 64").replace(
        "--gradient_checkpointing True", "--gradient_checkpointing False")
    settings, _ = _project(tmp_path, {**FASTCHAT, "scripts/train_vicuna_7b.sh": heavy}, gpu="a100-40gb")
    found = [d for d in Linter(settings).lint_path(tmp_path / "scripts/train_vicuna_7b.sh") if d.code.startswith("MEM")]
    assert [d.code for d in found] == ["MEM001"]
    assert "exceeds" in found[0].message


# a project that keeps its argument dataclasses in a module of their own
ARGUMENTS = dedent('''
    from dataclasses import dataclass, field
    from typing import Optional


    @dataclass
    class ModelArguments:
        model_name_or_path: Optional[str] = field(default="Qwen/Qwen2.5-0.5B")
        use_lora: bool = False


    @dataclass
    class DataArguments:
        data_path: str = "data/train.json"
        max_seq_length: int = field(default=4096, metadata={"help": "tokens per sample"})
''')
SFT = dedent('''
    import transformers
    from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainingArguments

    from myproj.arguments import DataArguments, ModelArguments


    def main():
        parser = HfArgumentParser((ModelArguments, DataArguments, TrainingArguments))
        model_args, data_args, training_args = parser.parse_args_into_dataclasses()
        model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path)
        tokenizer = transformers.AutoTokenizer.from_pretrained(
            model_args.model_name_or_path, model_max_length=data_args.max_seq_length
        )
        Trainer(model=model, args=training_args, processing_class=tokenizer).train()


    if __name__ == "__main__":
        main()
''')


def test_an_imported_arguments_dataclass_gives_its_defaults(tmp_path: Path):
    files = {"myproj/__init__.py": "", "myproj/arguments.py": ARGUMENTS, "train_sft.py": SFT,
             "run.sh": "torchrun --nproc_per_node 2 train_sft.py --per_device_train_batch_size 2 --output_dir out\n"}
    settings, project = _project(tmp_path, files)
    [run] = project.runs_for(tmp_path / "run.sh", run_context(settings))
    model, seq = run.plan.get("model"), run.plan.get("seq_len")
    assert model.value == "Qwen/Qwen2.5-0.5B" and model.origin.path.endswith("myproj/arguments.py")
    assert seq.value == 4096 and where(seq) == span(ARGUMENTS, "default=«4096»")
    # the launcher's option beats the module's default
    files["run.sh"] = "torchrun train_sft.py --model_name_or_path meta-llama/Llama-3.1-8B --max_seq_length 1024\n"
    settings, project = _project(tmp_path, files)
    [run] = project.runs_for(tmp_path / "run.sh", run_context(settings))
    assert run.plan.value("model") == "meta-llama/Llama-3.1-8B" and run.plan.value("seq_len") == 1024
    # and the script alone (no launcher) runs with the defaults too
    [own] = project.runs_for(tmp_path / "train_sft.py", run_context(settings))
    assert own.plan.value("seq_len") in (1024, 4096)  # through run.sh, or its own defaults


def test_a_class_that_is_no_dataclass_or_not_in_the_project_gives_nothing(tmp_path: Path):
    plain = ARGUMENTS.replace("@dataclass\n", "")
    files = {"myproj/__init__.py": "", "myproj/arguments.py": plain, "train_sft.py": SFT,
             "run.sh": "python train_sft.py --output_dir out\n"}
    settings, project = _project(tmp_path, files)
    [run] = project.runs_for(tmp_path / "run.sh", run_context(settings))
    assert run.plan.get("seq_len") is None and run.plan.get("model") is None
    # the same import of a package installed outside the project (no myproj/ folder) reads nothing
    files = {"train_sft.py": SFT, "run.sh": "python train_sft.py --output_dir out\n"}
    settings, project = _project(tmp_path / "other", files)
    [run] = project.runs_for(tmp_path / "other/run.sh", run_context(settings))
    assert run.plan.get("seq_len") is None
