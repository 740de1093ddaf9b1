"""A TRL SFT script written as s1's ``train/sft.py`` is (a project dataclass beside ``SFTConfig``
parsed by ``HfArgumentParser``, ``args.max_seq_length = config.block_size``, a torchrun launch
with FSDP): what TRL turns on by default depends on the TRL release the project pins, and a
length the script hands to a truncation limit is one."""

from __future__ import annotations

from pathlib import Path

from memlint.lint.engine import Linter, run_context
from memlint.project.project import Project
from memlint.project.settings import Settings

from tests.facts.facts_testing import dedent, write

SFT_PY = dedent('''
    import os
    from dataclasses import dataclass, field, asdict
    from typing import Optional

    from datasets import load_dataset
    import transformers
    import trl


    @dataclass
    class TrainingConfig:
        model_name: str = field(default="Qwen/Qwen2.5-7B-Instruct")
        block_size: int = field(default=16384)
        train_file_path: Optional[str] = field(default="my-org/reasoning-traces")


    def train():
        parser = transformers.HfArgumentParser((TrainingConfig, trl.SFTConfig))
        config, args = parser.parse_args_into_dataclasses()
        model = transformers.AutoModelForCausalLM.from_pretrained(config.model_name)
        dataset = load_dataset(config.train_file_path)
        tokenizer = transformers.AutoTokenizer.from_pretrained(config.model_name, use_fast=True)
        args.dataset_text_field = "text"
        args.max_seq_length = config.block_size
        trainer = trl.SFTTrainer(model, train_dataset=dataset["train"], args=args)
        trainer.train()
        trainer.save_model(output_dir=args.output_dir)


    if __name__ == "__main__":
        train()
''')

LAUNCH = dedent('''
    base_model="Qwen/Qwen2.5-7B-Instruct"
    gpu_count=$(nvidia-smi -L | wc -l)
    torchrun --nproc-per-node ${gpu_count} --master_port 12345 \\
        train/sft.py \\
        --block_size=16384 \\
        --per_device_train_batch_size=1 \\
        --model_name=${base_model} \\
        --fsdp="full_shard auto_wrap" \\
        --bf16=True \\
        --output_dir="ckpts/run"{extra}
''')


def _project(root: Path, trl_pin: str, extra: str = "") -> Settings:
    write(root, {"train/sft.py": SFT_PY, "train/sft.sh": LAUNCH.replace("{extra}", extra),
                 "requirements.txt": f"torch==2.5.1\ntransformers==4.46.1\n{trl_pin}\n"})
    (root / ".git").mkdir(exist_ok=True)
    return Settings(root=root).with_overrides(gpu="h100", gpus=8, cache=False)


def _run(settings: Settings):
    [run] = Project(settings).runs_for(settings.root / "train/sft.sh", run_context(settings))
    return run


def test_a_trl_release_before_its_own_defaults_trains_without_checkpointing(tmp_path: Path):
    run = _run(_project(tmp_path, "trl==0.12.0"))
    assert run.setup.grad_ckpt == 0
    [note] = [a for a in run.assumptions if "trl==0.12.0" in a]
    assert "requirements.txt:3" in note and "`gradient_checkpointing` from 0.22.0" in note


def test_a_newer_trl_turns_checkpointing_on(tmp_path: Path):
    run = _run(_project(tmp_path, "trl>=0.22"))
    assert run.setup.grad_ckpt == 1
    assert any("TRL default gradient_checkpointing=True" in a for a in run.assumptions)


def test_the_launch_still_decides_over_any_default(tmp_path: Path):
    run = _run(_project(tmp_path, "trl==0.12.0", extra=" \\\n    --gradient_checkpointing=True"))
    assert run.setup.grad_ckpt == 1
    assert not [a for a in run.assumptions if "trl==0.12.0" in a]


def test_a_block_size_handed_to_max_seq_length_is_a_truncation_limit(tmp_path: Path):
    settings = _project(tmp_path, "trl==0.12.0", extra=" \\\n    --gradient_checkpointing=True")
    run = _run(settings)
    assert run.setup.seq_len == 16384
    [assumed] = [a for a in run.assumed if a.fact == "seq_len_limit"]
    assert "max_seq_length" in assumed.value
    findings = [d for d in Linter(settings).lint_path(tmp_path / "train/sft.sh") if d.code == "MEM001"]
    for finding in findings:  # a verdict at the limit rests on the data's length
        assert finding.severity.name != "ERROR" and "if a batch holds a sample of 16384 tokens" in finding.message


def test_a_block_size_the_script_keeps_for_itself_stays_the_batch_length(tmp_path: Path):
    settings = _project(tmp_path, "trl==0.12.0")
    (tmp_path / "train/sft.py").write_text(SFT_PY.replace("args.max_seq_length = config.block_size", "print(config.block_size)"))
    run = _run(settings)
    assert run.setup.seq_len == 16384
    assert not [a for a in run.assumed if a.fact == "seq_len_limit"]


RECIPE = dedent('''
    model_name_or_path: Qwen/Qwen2.5-7B
    dataset_name: my-org/reasoning-traces
    per_device_train_batch_size: 2
    max_length: 4096
    packing: true
    learning_rate: 1.0e-5
    output_dir: data/qwen-7b-sft
''')


def _recipe_run(root: Path, trl_pin: str):
    write(root, {"recipes/sft.yaml": RECIPE, "requirements.txt": f"transformers==4.46.1\n{trl_pin}\n"})
    (root / ".git").mkdir(exist_ok=True)
    settings = Settings(root=root).with_overrides(gpu="h100", gpus=8, cache=False)
    [run] = Project(settings).runs_for(root / "recipes/sft.yaml", run_context(settings))
    return run


def test_a_trl_recipe_follows_the_pinned_release_too(tmp_path: Path):
    old = _recipe_run(tmp_path / "old", "trl==0.12.0")
    new = _recipe_run(tmp_path / "new", "trl==0.23.0")
    assert old.setup.grad_ckpt == 0 and new.setup.grad_ckpt == 1
    assert any("trl==0.12.0" in a for a in old.assumptions)
