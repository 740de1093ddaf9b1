"""Command-line options a script copies into a dict of overrides (rmarnold/llm-training-pipeline's
``cli_overrides``, ``{k: v for k, v in vars(args).items() if v is not None}``): an entry read
back with ``.get(name, fallback)`` is the option of that name over the fallback, so a launch's
``--per_device_train_batch_size 1`` is the run's micro-batch. A micro-batch written with a value
memlint cannot read is unknown, never TrainingArguments' default of 8."""

from __future__ import annotations

from pathlib import Path

from facts_testing import checked_project, dedent, one

from memlint.lint.engine import Linter, run_context
from memlint.project.project import Project

# scripts/14_train_core_agent.py as llm-training-pipeline writes it, trimmed: the YAML config holds
# the settings, the options that are set override them through a dict
OVERRIDES_LOOP = dedent('''
    import argparse

    import yaml
    from transformers import AutoModelForCausalLM
    from trl import SFTConfig, SFTTrainer


    def train_core_agent(config_path="configs/core_agent.yaml", cli_overrides=None):
        cli_overrides = cli_overrides or {}
        with open(config_path) as f:
            config = yaml.safe_load(f)
        base_model = cli_overrides.get("base_model", "Qwen/Qwen2.5-7B")
        model = AutoModelForCausalLM.from_pretrained(base_model, torch_dtype="bfloat16")
        training_args = SFTConfig(
            output_dir=cli_overrides.get("output_dir", config["checkpointing"]["output_dir"]),
            per_device_train_batch_size=cli_overrides.get(
                "per_device_train_batch_size",
                config["training"].get("per_device_train_batch_size", 1),
            ),
            gradient_accumulation_steps=cli_overrides.get("gradient_accumulation_steps", 4),
            max_length=cli_overrides.get("max_seq_length", 2048),
            bf16=True,
        )
        SFTTrainer(model=model, args=training_args, train_dataset=None).train()


    if __name__ == "__main__":
        parser = argparse.ArgumentParser()
        parser.add_argument("--config", default="configs/core_agent.yaml")
        parser.add_argument("--base_model", type=str)
        parser.add_argument("--per_device_train_batch_size", type=int)
        parser.add_argument("--gradient_accumulation_steps", type=int)
        parser.add_argument("--max_seq_length", type=int)
        parser.add_argument("--output_dir", type=str)
        args = parser.parse_args()

        cli_overrides = {}
        for key in ["base_model", "per_device_train_batch_size", "gradient_accumulation_steps",
                    "max_seq_length", "output_dir"]:
            val = getattr(args, key)
            if val is not None:
                cli_overrides[key] = val
        train_core_agent(config_path=args.config, cli_overrides=cli_overrides)
''')

LAUNCH = ("python scripts/train_core_agent.py --base_model Qwen/Qwen2.5-0.5B --per_device_train_batch_size 2 "
          "--max_seq_length 8192\n")


def test_an_option_copied_into_the_overrides_is_bound_to_its_field():
    bindings = one(OVERRIDES_LOOP, "scripts/train_core_agent.py").cli_bindings
    assert bindings["per_device_train_batch_size"] == ("hf:per_device_train_batch_size",)
    assert bindings["gradient_accumulation_steps"] == ("hf:gradient_accumulation_steps",)
    assert bindings["max_seq_length"] == ("hf:max_length",)
    assert bindings["base_model"] == ("model",)
    assert "config" not in bindings  # an option the script reads itself, not through the dict


def test_the_launch_sets_what_the_overrides_carry_and_the_fallbacks_fill_the_rest(tmp_path: Path):
    settings = checked_project(tmp_path, {"scripts/train_core_agent.py": OVERRIDES_LOOP, "train.sh": LAUNCH})
    [run] = Project(settings).runs_for(tmp_path / "train.sh", run_context(settings))
    assert run.plan.value("model") == "Qwen/Qwen2.5-0.5B"
    assert run.plan.value("micro_batch") == 2
    assert run.plan.value("seq_len") == 8192
    assert run.plan.value("grad_accum") == 4  # not passed: the .get's fallback


def test_a_micro_batch_the_script_cannot_know_alone_is_not_the_trainer_default(tmp_path: Path):
    # a 7B full fine-tune on 8 H100s without sharding: at TrainingArguments' micro-batch of 8 it
    # would not fit, but nothing says the run uses 8 (the YAML or the launch decides)
    settings = checked_project(tmp_path, {"scripts/train_core_agent.py": OVERRIDES_LOOP})
    [run] = Project(settings).runs_for(tmp_path / "scripts/train_core_agent.py", run_context(settings))
    assert run.plan.value("micro_batch") is None
    assert run.plan.value("micro_batch_unknown").startswith('cli_overrides.get( "per_device_train_batch_size",')
    findings = Linter(settings).lint_path(tmp_path / "scripts/train_core_agent.py")
    assert not [d for d in findings if d.code in ("MEM001", "MEM002")]


def test_a_comprehension_of_the_set_options_reads_the_same(tmp_path: Path):
    script = OVERRIDES_LOOP.replace('''    cli_overrides = {}
    for key in ["base_model", "per_device_train_batch_size", "gradient_accumulation_steps",
                "max_seq_length", "output_dir"]:
        val = getattr(args, key)
        if val is not None:
            cli_overrides[key] = val
''', '''    cli_overrides = {k: v for k, v in vars(args).items() if v is not None}
''')
    assert "vars(args).items()" in script
    settings = checked_project(tmp_path, {"scripts/train_core_agent.py": script, "train.sh": LAUNCH})
    [run] = Project(settings).runs_for(tmp_path / "train.sh", run_context(settings))
    assert (run.plan.value("model"), run.plan.value("micro_batch"), run.plan.value("grad_accum")) == (
        "Qwen/Qwen2.5-0.5B", 2, 4)


def test_a_dict_filled_in_a_loop_with_anything_else_holds_no_options():
    script = OVERRIDES_LOOP.replace("val = getattr(args, key)", "val = lookup(key)")
    bindings = one(script, "scripts/train_core_agent.py").cli_bindings
    assert "per_device_train_batch_size" not in bindings and "base_model" not in bindings


def test_get_on_a_dict_the_script_writes_is_its_entry_or_the_fallback():
    script = dedent('''
        from transformers import TrainingArguments

        HPARAMS = {"batch_size": 4, "lr": 2e-5}

        args = TrainingArguments(
            output_dir="out",
            per_device_train_batch_size=HPARAMS.get("batch_size", 16),
            gradient_accumulation_steps=HPARAMS.get("accumulation", 8),
        )
    ''')
    facts = one(script)
    assert facts.micro_batch is not None and facts.micro_batch.value == 4
    assert facts.grad_accum is not None and facts.grad_accum.value == 8
