"""The attention a run's model uses when no file names one follows the transformers (and torch)
release the project pins: eager attention before transformers 4.36 (SDPA by default since), and
a verdict that turns on it says so. A 2023-style continued-pretraining project: LLaMA-2-7B, ten
sequences of 4,096 tokens per GPU under ZeRO-3, ``transformers==4.31.0`` in requirements.txt."""

from __future__ import annotations

from pathlib import Path

import pytest
from facts_testing import checked_project, dedent, only_run, write

from memlint.facts.pinned_defaults import patches_attention, pinned_eager_attention
from memlint.lint.engine import Linter, run_context
from memlint.project.project import Project
from memlint.project.settings import Settings

PRETRAIN_PY = dedent('''
    import logging
    from dataclasses import dataclass, field
    from typing import Optional

    import torch
    from transformers import (AutoConfig, AutoModelForCausalLM, AutoTokenizer, HfArgumentParser, Trainer,
                              TrainingArguments, default_data_collator)


    @dataclass
    class ModelArguments:
        model_name_or_path: Optional[str] = field(default=None)
        torch_dtype: Optional[str] = field(default=None)


    @dataclass
    class DataTrainingArguments:
        train_files: Optional[str] = field(default=None)
        block_size: Optional[int] = field(default=None)


    def main():
        parser = HfArgumentParser((ModelArguments, DataTrainingArguments, TrainingArguments))
        model_args, data_args, training_args = parser.parse_args_into_dataclasses()
        config = AutoConfig.from_pretrained(model_args.model_name_or_path)
        tokenizer = AutoTokenizer.from_pretrained(model_args.model_name_or_path)
        model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path, config=config)
        trainer = Trainer(model=model, args=training_args, tokenizer=tokenizer, data_collator=default_data_collator)
        trainer.train()


    if __name__ == "__main__":
        main()
''')

PRETRAIN_SH = dedent('''
    deepspeed --num_gpus 8 pretrain_clm.py \\
        --model_name_or_path meta-llama/Llama-2-7b-hf \\
        --train_files data/train.csv \\
        --per_device_train_batch_size 10 \\
        --gradient_accumulation_steps 4 \\
        --block_size 4096 \\
        --bf16 \\
        --gradient_checkpointing \\
        --deepspeed ./ds_config_zero3.json \\
        --output_dir out
''')

ZERO3 = '{"bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 3}, ' \
        '"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto"}\n'

REQUIREMENTS = "accelerate==0.21.0\nsentencepiece\ntransformers==4.31.0\ntorch\n"


def _project(root: Path, requirements: str = REQUIREMENTS, script: str = PRETRAIN_PY) -> Settings:
    return checked_project(root, {
        "requirements.txt": requirements,
        "train/pretrain/pretrain_clm.py": script,
        "train/pretrain/pretrain.sh": PRETRAIN_SH,
        "train/pretrain/ds_config_zero3.json": ZERO3,
    })


def _run(settings: Settings):
    return only_run(settings, "train/pretrain/pretrain.sh")


def test_a_pin_before_436_runs_eager_attention_and_the_verdict_says_why(tmp_path: Path):
    settings = _project(tmp_path)
    run = _run(settings)
    assert run.setup.attention.value == "eager"
    fact = run.provenance["attention"]
    assert fact.origin.path.endswith("requirements.txt") and fact.origin.range.start.line == 3
    [finding] = [d for d in Linter(settings).lint_path(tmp_path / "train/pretrain/pretrain.sh")
                 if d.code in ("MEM001", "MEM002")]
    assert finding.code == "MEM001"
    assert "`transformers==4.31.0` (requirements.txt:3) predates SDPA by default" in finding.message
    assert "use SDPA / flash attention" in finding.message


@pytest.mark.parametrize("requirements", [
    "transformers>=4.31.0\n",          # admits the newest release: SDPA
    "transformers==4.38.2\ntorch==2.2.0\n",
    "transformers @ git+https://github.com/huggingface/transformers@336dc69\n",  # a commit: no release read
    "",                                # nothing pinned
])
def test_pins_that_install_sdpa_or_say_nothing_keep_it(tmp_path: Path, requirements: str):
    run = _run(_project(tmp_path, requirements))
    assert run.setup.attention.value == "sdpa"
    assert not [d for d in Linter(_project(tmp_path, requirements)).lint_path(
        tmp_path / "train/pretrain/pretrain.sh") if d.code == "MEM001"]


@pytest.mark.parametrize("requirements,eager", [
    ("transformers>=4.28,<4.34\n", True),
    ("transformers~=4.33.0\n", True),
    ("transformers>=4.31,<4.40\n", False),
    ("transformers==4.36.2\ntorch==2.0.1\n", True),   # SDPA by default needs torch 2.1.1
    ("transformers==4.36.2\ntorch>=2.0\n", False),
])
def test_which_specifiers_select_a_release_without_sdpa(tmp_path: Path, requirements: str, eager: bool):
    (tmp_path / "requirements.txt").write_text(requirements)
    assert (pinned_eager_attention(tmp_path, tmp_path / "train.py") is not None) is eager


def test_a_script_that_patches_the_attention_keeps_its_own(tmp_path: Path):
    patched = PRETRAIN_PY.replace(
        "import torch\n",
        "import torch\n\nfrom llama_flash_attn_monkey_patch import replace_llama_attn_with_flash_attn\n\n"
        "replace_llama_attn_with_flash_attn()\n")
    run = _run(_project(tmp_path, script=patched))
    assert run.setup.attention.value == "sdpa"
    # FastChat's train_mem.py: the launched script only patches and hands over to the trainer module
    write(tmp_path, {
        "train/pretrain/pretrain_clm.py": PRETRAIN_PY,
        "train/pretrain/train_mem.py": dedent('''
            from llama_flash_attn_monkey_patch import replace_llama_attn_with_flash_attn

            replace_llama_attn_with_flash_attn()

            from pretrain_clm import main

            if __name__ == "__main__":
                main()
        '''),
        "train/pretrain/pretrain.sh": PRETRAIN_SH.replace("pretrain_clm.py", "train_mem.py"),
    })
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False, offline=True)
    assert _run(settings).setup.attention.value == "sdpa"
    assert patches_attention(["model = load()\n", "from xformers.ops import memory_efficient_attention\n"])
    assert not patches_attention(["model = AutoModelForCausalLM.from_pretrained(name)\n", None])


@pytest.mark.parametrize("requirements,eager", [
    ("torch>=2.7.0,<2.7.1\n", False),       # a narrow window far after 2.1.1
    ("transformers==4.31.*\n", True),
    ("transformers<=4.35.2\n", True),
    ("transformers<4.37\n", False),
])
def test_upper_bounds_decide(tmp_path: Path, requirements: str, eager: bool):
    (tmp_path / "requirements.txt").write_text(requirements)
    assert (pinned_eager_attention(tmp_path, tmp_path / "train.py") is not None) is eager


def test_a_module_a_launched_sibling_hands_over_to_runs_as_launched_not_alone(tmp_path: Path):
    """FastChat's layout: ``train_mem.py`` patches the attention and calls ``train.main()``; the
    module's own defaults (a small model, no micro-batch) are no run of their own."""
    with_defaults = PRETRAIN_PY.replace("model_name_or_path: Optional[str] = field(default=None)",
                                        'model_name_or_path: Optional[str] = field(default="facebook/opt-125m")')
    write(tmp_path, {
        "requirements.txt": REQUIREMENTS,
        "train/pretrain/pretrain_clm.py": with_defaults,
        "train/pretrain/pretrain_clm_mem.py": dedent('''
            from llama_flash_attn_monkey_patch import replace_llama_attn_with_flash_attn

            replace_llama_attn_with_flash_attn()

            from pretrain_clm import main

            if __name__ == "__main__":
                main()
        '''),
        "train/pretrain/pretrain.sh": PRETRAIN_SH.replace("pretrain_clm.py", "pretrain_clm_mem.py"),
        "train/pretrain/ds_config_zero3.json": ZERO3,
    })
    (tmp_path / ".git").mkdir(exist_ok=True)
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False, offline=True)
    [run] = Project(settings).runs_for(tmp_path / "train/pretrain/pretrain_clm.py", run_context(settings))
    assert run.plan.get("model").value == "meta-llama/Llama-2-7b-hf"
    assert run.setup.micro_batch == 10 and run.setup.attention.value == "sdpa"


DDP_SH = PRETRAIN_SH.replace("deepspeed --num_gpus 8", "torchrun --nproc_per_node 8").replace(
    "--per_device_train_batch_size 10", "--per_device_train_batch_size 1").replace(
    "--block_size 4096", "--block_size 512").replace("    --deepspeed ./ds_config_zero3.json \\\n", "").replace(
    "    --gradient_accumulation_steps 4 \\\n", "")



@pytest.mark.parametrize("requirements,precision", [
    ("transformers==4.31.0\n", "amp-bf16"),     # 4.x: from_pretrained loads fp32, bf16=True autocasts
    ("transformers>=4.31.0,<5\n", "amp-bf16"),
    ("transformers>=4.31.0\n", "fp16"),  # the newest release: transformers 5 loads the checkpoint's fp16
    ("", "fp16"),
])
def test_a_4x_pin_loads_fp32_weights_where_the_script_names_no_dtype(tmp_path: Path, requirements: str,
                                                                      precision: str):
    settings = _project(tmp_path, requirements)
    write(tmp_path, {"train/pretrain/pretrain.sh": DDP_SH})
    run = _run(settings)
    assert run.setup.precision.value == precision
    if precision == "amp-bf16":
        assert any(note.startswith("weights load in fp32: `transformers") for note in run.assumptions)
    # a dtype the script names wins over the release's default
    named = PRETRAIN_PY.replace("config=config)", "config=config, torch_dtype=torch.bfloat16)")
    write(tmp_path, {"train/pretrain/pretrain_clm.py": named})
    assert _run(Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False, offline=True)
                ).setup.precision.value == "bf16"
    # a dtype memlint cannot evaluate (qlora's ``torch.float32 if args.fp16 else ...``) is still named
    unread = PRETRAIN_PY.replace("config=config)", "config=config, torch_dtype=pick_dtype(training_args))")
    write(tmp_path, {"train/pretrain/pretrain_clm.py": unread})
    run = _run(Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False, offline=True))
    assert not any(note.startswith("weights load in fp32") for note in run.assumptions)
