"""Settings a script reads from the environment with a fallback.

``MODEL_ID = os.getenv("MODEL_ID", "google/gemma-4-E2B")`` (RashedDoha/LoRA-PEFT-Finetune, a
settings dataclass) and ``os.getenv("QWEN_MODEL", "/mnt/g/.../Qwen3-1.7B")``
(xu-0306/qwen3-finetune): the fallback is what a plain ``python train.py`` runs, as an
option's default is; a launch that exports the variable, or sets it before the command
(``BATCH=2 python train.py``), replaces it, and one that exports it with a value the launch
cannot know leaves it unknown. Variables a distributed launcher sets for each process
(``LOCAL_RANK``, ``MASTER_ADDR``, ``SLURM_*``) are never their fallbacks."""

from __future__ import annotations

from pathlib import Path

from facts_testing import dedent, one, write

from memlint.facts.launch_options import facts_from_cli, hidden_by_cli
from memlint.lint.engine import Linter, run_context
from memlint.project.project import Project
from memlint.project.settings import Settings

SETTINGS_SCRIPT = dedent('''
    import os
    from dataclasses import dataclass

    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments


    @dataclass
    class Settings:
        model_id: str = os.getenv("MODEL_ID", "Qwen/Qwen2.5-7B")
        micro_batch: int = int(os.environ.get("MICRO_BATCH", "4"))
        max_len: int = int(os.getenv("MAX_LEN", 1024))
        local_rank: int = int(os.environ.get("LOCAL_RANK", 0))


    def build_model(settings: Settings):
        model = AutoModelForCausalLM.from_pretrained(settings.model_id, torch_dtype=torch.bfloat16)
        return get_peft_model(model, LoraConfig(r=16, target_modules="all-linear"))


    def main():
        settings = Settings()
        model = build_model(settings)
        args = TrainingArguments(output_dir="out", per_device_train_batch_size=settings.micro_batch,
                                 bf16=True, gradient_checkpointing=True)
        Trainer(model=model, args=args, train_dataset=load(settings.max_len)).train()


    if __name__ == "__main__":
        main()
''')


def test_a_fallback_is_the_value_a_plain_run_reads():
    facts = one(SETTINGS_SCRIPT, "train.py")
    assert facts.model.value == "Qwen/Qwen2.5-7B"
    assert facts.micro_batch.value == 4
    assert "$MICRO_BATCH" in facts.cli_bindings and "$MODEL_ID" in facts.cli_bindings


def test_a_launch_that_exports_the_variable_replaces_the_fallback():
    script = one(SETTINGS_SCRIPT, "train.py")
    launcher = one(dedent('''
        #!/bin/bash
        export MODEL_ID=Qwen/Qwen2.5-0.5B
        export WANDB_PROJECT=sft
        MICRO_BATCH=16 torchrun --nproc_per_node 4 train.py
    '''), "run.sh")
    applied = facts_from_cli(script, launcher)
    assert applied["model"].value == "Qwen/Qwen2.5-0.5B"
    assert applied["micro_batch"].value == 16
    assert applied["micro_batch"].origin.path == "run.sh" and "environment" in applied["micro_batch"].note


def test_a_variable_set_without_export_stays_in_the_shell():
    # ``MODEL_ID=x`` on a line of its own is the shell's variable: the script does not see it
    script = one(SETTINGS_SCRIPT, "train.py")
    launcher = one("MODEL_ID=Qwen/Qwen2.5-0.5B\npython train.py\n", "run.sh")
    assert "model" not in facts_from_cli(script, launcher)


def test_an_export_the_launch_cannot_evaluate_hides_the_fallback():
    script = one(SETTINGS_SCRIPT, "train.py")
    launcher = one('#!/bin/bash\nexport MODEL_ID="$1"\npython train.py\n', "run.sh")
    assert "model" not in facts_from_cli(script, launcher)
    assert "model" in hidden_by_cli(script, launcher)


def test_no_fallback_or_a_launcher_set_variable_is_no_fact():
    facts = one(dedent('''
        import os

        import torch
        from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

        model = AutoModelForCausalLM.from_pretrained(os.environ["BASE_MODEL"], torch_dtype=torch.bfloat16)
        rank = int(os.environ.get("LOCAL_RANK", 0))
        batch = int(os.getenv("SLURM_NTASKS", 4))
        args = TrainingArguments("out", per_device_train_batch_size=batch, bf16=True)
        Trainer(model=model, args=args).train()
    '''))
    assert facts.model is None and facts.micro_batch is None


def _settings(root: Path, files: dict[str, str]) -> Settings:
    write(root, files)
    (root / ".git").mkdir()
    return Settings(root=root).with_overrides(gpu="h100", cache=False, offline=True)


def test_the_project_estimates_the_fallback_model_or_the_exported_one(tmp_path: Path):
    alone = _settings(tmp_path / "alone", {"train.py": SETTINGS_SCRIPT})
    [run] = Project(alone).runs_for(alone.root / "train.py", run_context(alone))
    assert run.plan.value("model") == "Qwen/Qwen2.5-7B" and run.plan.value("micro_batch") == 4

    launched = _settings(tmp_path / "launched", {
        "train.py": SETTINGS_SCRIPT,
        "scripts/small.sh": "#!/bin/bash\nexport MODEL_ID=Qwen/Qwen2.5-0.5B\ncd .. && python train.py\n"})
    [run] = Project(launched).runs_for(launched.root / "scripts" / "small.sh", run_context(launched))
    assert run.plan.value("model") == "Qwen/Qwen2.5-0.5B"
    assert [d.code for d in Linter(launched).lint_path(launched.root / "scripts" / "small.sh")
            if d.code.startswith("MEM")] == []


def test_the_environment_is_kept_apart_from_the_command_line():
    # MyRLHF's ``export VLLM_WORKER_MULTIPROC_METHOD=spawn`` before an OpenRLHF batch-inference
    # command: taken for options, the exported names changed what the command line read as (a
    # training command of the usual flags, a Trainer's options to an installed module)
    from memlint.configs.command_line import options_as_config

    launcher = one(dedent('''
        #!/bin/bash
        export VLLM_WORKER_MULTIPROC_METHOD=spawn
        export OUTPUT_DIR=${PWD}/out
        python finetune.py --model_name_or_path sshleifer/bart-tiny-random --train_batch_size=2 \\
            --learning_rate=3e-5 --output_dir=$OUTPUT_DIR --num_train_epochs=1
    '''), "run.sh")
    assert not any(key.startswith("$") for key in (*launcher.cli_args, *launcher.cli_unknown))
    assert "$VLLM_WORKER_MULTIPROC_METHOD" in launcher.environment
    assert "$OUTPUT_DIR" in launcher.passed() or "$OUTPUT_DIR" in launcher.passed_unknown()
    found = options_as_config(launcher)
    assert found is not None and found.framework is not None
