"""A config whose keys look like LLaMA-Factory's but which a script fills its own class from.

finance-sft-qwen's ``scripts/train_sft.py`` (run as its docstring says, ``python
scripts/train_sft.py --config configs/train_sft.yaml``) loads the YAML into a dataclass of its
own, ``SFTConfig(**yaml.safe_load(...))``, and trains with ``Trainer``. ``dataset_dir`` made
the file look like a LLaMA-Factory recipe, whose missing ``do_train`` then said the run trains
nothing: the run went unchecked. Every key of the file is a field of the project's class, so
it is that class's format: no LLaMA-Factory default or ``do_train`` is the run's."""

from __future__ import annotations

from pathlib import Path

from memlint.lint.engine import Linter, run_context
from memlint.project.project import Project
from memlint.project.settings import Settings
from tests.facts.facts_testing import dedent, write

RECIPE = dedent('''
    model_name_or_path: Qwen/Qwen2.5-7B-Instruct
    dataset_dir: data/processed
    train_file: train.jsonl
    max_length: 4096
    bf16: true
    lora_rank: 16
    lora_alpha: 32
    per_device_train_batch_size: 8
    gradient_accumulation_steps: 2
    output_dir: outputs/checkpoints/final
''')

SCRIPT = dedent('''
    """Supervised fine-tuning.

    Usage:
        python scripts/train_sft.py --config configs/train_sft.yaml
    """
    import argparse
    from dataclasses import dataclass
    from pathlib import Path

    import torch
    import yaml
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments


    @dataclass
    class SFTConfig:
        model_name_or_path: str = "Qwen/Qwen2.5-7B-Instruct"
        dataset_dir: str = "data/processed"
        train_file: str = "train.jsonl"
        max_length: int = 1024
        bf16: bool = True
        lora_rank: int = 16
        lora_alpha: int = 32
        per_device_train_batch_size: int = 2
        gradient_accumulation_steps: int = 8
        output_dir: str = "outputs/checkpoints/final"


    def load_config(path: str) -> SFTConfig:
        return SFTConfig(**yaml.safe_load(Path(path).read_text(encoding="utf-8")))


    def train(config: SFTConfig) -> None:
        model = AutoModelForCausalLM.from_pretrained(config.model_name_or_path, torch_dtype=torch.bfloat16)
        model = get_peft_model(model, LoraConfig(r=config.lora_rank, lora_alpha=config.lora_alpha,
                                                 target_modules="all-linear"))
        args = TrainingArguments(output_dir=config.output_dir, bf16=config.bf16,
                                 per_device_train_batch_size=config.per_device_train_batch_size,
                                 gradient_accumulation_steps=config.gradient_accumulation_steps)
        Trainer(model=model, args=args, train_dataset=load_rows(config)).train()


    def main() -> None:
        parser = argparse.ArgumentParser()
        parser.add_argument("--config", default="configs/train_sft.yaml")
        args = parser.parse_args()
        train(load_config(args.config))


    if __name__ == "__main__":
        main()
''')


def _settings(root: Path, files: dict[str, str]) -> Settings:
    write(root, files)
    (root / ".git").mkdir(exist_ok=True)
    return Settings(root=root).with_overrides(gpu="h100", gpus=1, cache=False, offline=True)


def test_the_run_trains_by_the_scripts_own_code(tmp_path: Path):
    settings = _settings(tmp_path, {"configs/train_sft.yaml": RECIPE, "scripts/train_sft.py": SCRIPT})
    [run] = Project(settings).runs_for(tmp_path / "scripts" / "train_sft.py", run_context(settings))
    assert run.problem is None and run.trains
    assert run.plan.value("framework") == "hf-trainer"
    assert not any("LLaMA-Factory" in (fact.note or "") for fact in run.plan.facts.values())
    assert run.arch is not None and run.setup is not None and run.setup.micro_batch == 8


def test_a_real_llamafactory_recipe_still_needs_do_train(tmp_path: Path):
    # the same file with no project class of its shape is LLaMA-Factory's, launched by its CLI
    settings = _settings(tmp_path, {"configs/train_sft.yaml": RECIPE + "stage: sft\nfinetuning_type: lora\n",
                                    "run.sh": "llamafactory-cli train configs/train_sft.yaml\n"})
    [run] = Project(settings).runs_for(tmp_path / "configs" / "train_sft.yaml", run_context(settings))
    assert run.trains is False and "do_train" in (run.problem or "")
    assert Linter(settings).lint_path(tmp_path / "configs" / "train_sft.yaml") is not None


def test_the_class_filled_from_the_file_takes_its_values_and_a_launch_may_name_another(tmp_path: Path):
    settings = _settings(tmp_path / "alone", {"configs/train_sft.yaml": RECIPE.replace("lora_rank: 16\n", ""),
                                              "scripts/train_sft.py": SCRIPT})
    [run] = Project(settings).runs_for(settings.root / "scripts" / "train_sft.py", run_context(settings))
    # the file's values, not the class's defaults (micro-batch 2, 8x accumulation)
    assert run.plan.value("micro_batch") == 8 and run.plan.value("grad_accum") == 2
    assert run.plan.get("micro_batch").origin.path.endswith("train_sft.yaml")
    assert run.plan.value("lora_r") == 16  # a key the file does not write keeps the class's default

    launched = _settings(tmp_path / "launched", {
        "configs/train_sft.yaml": RECIPE, "configs/small.yaml": RECIPE.replace("Qwen2.5-7B", "Qwen2.5-0.5B"),
        "scripts/train_sft.py": SCRIPT, "run_small.sh": "python scripts/train_sft.py --config configs/small.yaml\n"})
    [small] = Project(launched).runs_for(launched.root / "run_small.sh", run_context(launched))
    assert small.plan.value("model") == "Qwen/Qwen2.5-0.5B-Instruct"
