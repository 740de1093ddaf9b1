"""A script that reads its settings from a YAML or JSON file of its own with ``yaml.safe_load``,
``json.load`` or ``OmegaConf.load`` (sft-training's ``train_sft.py``: ``def load_config(path=
"config/config.yaml")``, ``cfg = load_config()``, ``model_id = cfg["model"]["id"]``). The entries it
reads are the run's facts, located where the file writes them; the file is the one the script
writes, or the one a launch names with the option the script reads it from. A verdict decided by
such a file (which memlint does not lint as a run of its own) is reported at the run, saying where
the file writes the deciding value."""

from __future__ import annotations

from pathlib import Path

from memlint.lint.engine import Linter, run_context
from memlint.project.project import Project
from memlint.project.settings import Settings

from tests.facts.facts_testing import dedent, facts_of, write

TRAIN = dedent('''
    import os

    import torch
    import yaml
    from datasets import load_dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainingArguments
    from trl import SFTTrainer


    def load_config(path="config/config.yaml"):
        with open(path, "r", encoding="utf-8") as f:
            return yaml.safe_load(f)


    cfg = load_config()
    model_id = cfg["model"]["id"]
    train = cfg["training"]

    tokenizer = AutoTokenizer.from_pretrained(model_id, use_fast=True)
    model = AutoModelForCausalLM.from_pretrained(
        model_id,
        torch_dtype=torch.bfloat16,
        device_map=cfg["model"]["device_map"],
    )
    args = TrainingArguments(
        output_dir=cfg["output"]["dir"],
        per_device_train_batch_size=train["per_device_train_batch_size"],
        gradient_accumulation_steps=train.get("gradient_accumulation_steps", 1),
        learning_rate=float(train["learning_rate"]),
        bf16=True,
    )
    trainer = SFTTrainer(model=model, args=args, train_dataset=load_dataset("json", data_files="d.jsonl")["train"],
                         processing_class=tokenizer)
    trainer.train()
''')

CONFIG = dedent('''
    model:
      id: "Qwen/Qwen2.5-7B-Instruct"
      device_map: null
    output:
      dir: "outputs/qwen-sft"
    training:
      per_device_train_batch_size: 16
      learning_rate: 2e-4
''')


def _project(root: Path, files: dict[str, str], gpus: int = 1) -> Settings:
    write(root, files)
    (root / ".git").mkdir(exist_ok=True)
    return Settings(root=root).with_overrides(gpu="h100", gpus=gpus, cache=False)


def _run(settings: Settings, name: str):
    [run] = Project(settings).runs_for(settings.root / name, run_context(settings))
    return run


def test_the_script_binds_the_entries_it_reads_to_the_file():
    [facts] = facts_of(TRAIN)
    assert facts.model is None  # the script alone cannot know it
    bound = {option: bindings for option, bindings in facts.cli_bindings.items() if option.startswith("&file:")}
    assert bound['&file:["config/config.yaml",null,["model","id"]]'] == ("model",)
    assert bound['&file:["config/config.yaml",null,["training","per_device_train_batch_size"]]'] == (
        "hf:per_device_train_batch_size",)


def test_the_run_takes_its_facts_from_the_file_where_it_writes_them(tmp_path: Path):
    settings = _project(tmp_path, {"train_sft.py": TRAIN, "config/config.yaml": CONFIG})
    run = _run(settings, "train_sft.py")
    model = run.plan.get("model")
    assert model.value == "Qwen/Qwen2.5-7B-Instruct"
    assert Path(model.origin.path).name == "config.yaml" and model.origin.range.start.line == 2
    assert model.note == "model.id in config.yaml"
    assert run.plan.value("micro_batch") == 16
    accumulation = run.plan.get("grad_accum")  # the file writes none: the script's fallback stands
    assert accumulation.value == 1 and accumulation.note == (
        "training.gradient_accumulation_steps not in config.yaml: the script's fallback")


def test_a_verdict_the_file_decides_is_reported_at_the_run_saying_where(tmp_path: Path):
    settings = _project(tmp_path, {"train_sft.py": TRAIN, "config/config.yaml": CONFIG})
    [verdict] = [d for d in Linter(settings).lint_path(tmp_path / "train_sft.py") if d.code in ("MEM001", "MEM002")]
    assert Path(verdict.path).name == "train_sft.py"
    assert "(the value that decides it is written at config/config.yaml:" in verdict.message
    assert any(Path(r.path).name == "config.yaml" for r in verdict.related)
    # with a batch that fits, no verdict at all
    small = CONFIG.replace("per_device_train_batch_size: 16", "per_device_train_batch_size: 1")
    settings = _project(tmp_path, {"config/config.yaml": small})
    findings = Linter(settings).lint_path(tmp_path / "train_sft.py")
    assert not [d for d in findings if d.code in ("MEM001", "MEM002", "MEM003")]


def test_a_spread_device_map_in_the_file_is_naive_model_parallelism(tmp_path: Path):
    spread = CONFIG.replace("device_map: null", 'device_map: "auto"')
    settings = _project(tmp_path, {"train_sft.py": TRAIN, "config/config.yaml": spread}, gpus=8)
    [note] = [d for d in Linter(settings).lint_path(tmp_path / "train_sft.py") if d.code == "MEM003"]
    assert "naive model parallelism" in note.message and "(the value that decides it is written at config/config.yaml:3)" in note.message


OPTION_TRAIN = dedent('''
    import argparse
    import json

    from omegaconf import OmegaConf
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments


    def parse_args():
        parser = argparse.ArgumentParser()
        parser.add_argument("--config", default="configs/small.yaml")
        return parser.parse_args()


    def main():
        args = parse_args()
        cfg = OmegaConf.load(args.config)
        model = AutoModelForCausalLM.from_pretrained(cfg.model.name_or_path)
        training_args = TrainingArguments(output_dir="out", per_device_train_batch_size=cfg.train.batch_size,
                                          gradient_checkpointing=cfg.train.get("gradient_checkpointing", False))
        Trainer(model=model, args=training_args).train()


    if __name__ == "__main__":
        main()
''')


def test_the_file_a_launch_names_with_the_option_wins_over_its_default(tmp_path: Path):
    files = {
        "train.py": OPTION_TRAIN,
        "configs/small.yaml": "model:\n  name_or_path: Qwen/Qwen2.5-0.5B\ntrain:\n  batch_size: 8\n",
        "configs/large.yaml": ("model:\n  name_or_path: meta-llama/Llama-3.1-8B\ntrain:\n  batch_size: 4\n"
                               "  gradient_checkpointing: true\n"),
    }
    settings = _project(tmp_path, files)
    alone = _run(settings, "train.py")
    assert alone.plan.value("model") == "Qwen/Qwen2.5-0.5B" and alone.plan.value("micro_batch") == 8
    settings = _project(tmp_path, {"run.sh": "#!/bin/bash\npython train.py --config configs/large.yaml\n"})
    launched = _run(settings, "run.sh")
    assert launched.plan.value("model") == "meta-llama/Llama-3.1-8B"
    assert launched.plan.value("micro_batch") == 4 and launched.plan.value("grad_ckpt") == 1
    assert Path(launched.plan.get("model").origin.path).name == "large.yaml"


def test_a_json_file_read_with_json_load(tmp_path: Path):
    script = dedent('''
        import json
        from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

        settings = json.load(open("settings.json"))
        model = AutoModelForCausalLM.from_pretrained(settings["base_model"])
        Trainer(model=model, args=TrainingArguments(output_dir="o", per_device_train_batch_size=settings["batch"][0])).train()
    ''')
    settings = _project(tmp_path, {"train.py": script, "settings.json": '{"base_model": "gpt2", "batch": [2, 4]}\n'})
    run = _run(settings, "train.py")
    assert run.plan.value("model") == "gpt2" and run.plan.value("micro_batch") == 2


def test_a_key_the_file_lacks_or_a_missing_file_leaves_the_value_unknown(tmp_path: Path):
    settings = _project(tmp_path, {"train_sft.py": TRAIN, "config/config.yaml": "model:\n  name: gpt2\n"})
    said = "no model found: the script reads it as model.id in config/config.yaml, a file memlint cannot find"
    [note] = [d for d in Linter(settings).lint_path(tmp_path / "train_sft.py") if d.code == "MEM003"]
    assert said in note.message
    (tmp_path / "config/config.yaml").unlink()
    [note] = [d for d in Linter(settings).lint_path(tmp_path / "train_sft.py") if d.code == "MEM003"]
    assert said in note.message


def test_an_entry_the_script_assigns_after_reading_the_file_is_not_the_files(tmp_path: Path):
    """``cfg["training"]["per_device_train_batch_size"] = args.batch_size`` (a command line over the
    YAML): the file's 16 is not what runs, and the value is unknown; an assignment of the mapping
    above it (``cfg["model"] = {...}``) takes the file's entries back too."""
    script = TRAIN.replace('cfg = load_config()\n', 'cfg = load_config()\n'
                           'cfg["training"]["per_device_train_batch_size"] = int(os.environ.get("BATCH", "4"))\n'
                           'cfg["model"] = {"id": os.environ["MODEL"], "device_map": None}\n')
    assert 'cfg["model"] = {' in script
    settings = _project(tmp_path, {"train_sft.py": script, "config/config.yaml": CONFIG})
    run = _run(settings, "train_sft.py")
    assert run.plan.get("model") is None and run.plan.get("micro_batch") is None
    assert run.plan.value("mixed") == "bf16"  # what the script writes itself still stands


HELPER = dedent('''
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig


    def load_model(model_name, load_in_4bit=False):
        quantization = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4") if load_in_4bit else None
        return AutoModelForCausalLM.from_pretrained(model_name, quantization_config=quantization)
''')

HELPER_TRAIN = dedent('''
    import yaml
    from peft import LoraConfig, get_peft_model
    from transformers import Trainer, TrainingArguments

    from lib.models import load_model


    def main(config_path="configs/sft.yaml"):
        with open(config_path) as f:
            config = yaml.safe_load(f)
        model = load_model(config["model"]["checkpoint"], load_in_4bit=config["model"].get("load_in_4bit", True))
        model = get_peft_model(model, LoraConfig(r=16, task_type="CAUSAL_LM"))
        args = TrainingArguments(output_dir="out", per_device_train_batch_size=config["training"]["batch_size"])
        Trainer(model=model, args=args).train()


    if __name__ == "__main__":
        main()
''')


def test_an_entry_the_script_hands_a_helper_of_the_project_reaches_it(tmp_path: Path):
    """llm-training-pipeline's ``load_unsloth_model(model_name=checkpoint, load_in_4bit=config["model"].get(
    "load_in_4bit", True))``: the helper in another module of the project loads in 4 bits because the
    file says so; without it, the run was sized as a full-precision load (four wrong MEM001 errors)."""
    files = {"scripts/train.py": HELPER_TRAIN, "lib/__init__.py": "", "lib/models.py": HELPER,
             "configs/sft.yaml": "model:\n  checkpoint: Qwen/Qwen2.5-7B\n  load_in_4bit: true\ntraining:\n  batch_size: 2\n"}
    settings = _project(tmp_path, files)
    run = _run(settings, "scripts/train.py")
    assert run.plan.value("model") == "Qwen/Qwen2.5-7B"
    assert run.plan.value("quantization") == "nf4"
    assert run.plan.value("micro_batch") == 2
