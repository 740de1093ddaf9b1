"""DeepSpeed and Accelerate configs that no launcher, script or recipe of the project uses (a folder
of templates, as Accelerate's and TRL's examples keep): their schema checks as always, an estimate
with the settings' `model` when they name one, otherwise one note for the whole project (issue 14,
item 5), not one per file."""

from __future__ import annotations

from pathlib import Path

from facts_testing import dedent, write

from memlint.lint.engine import Linter, run_context
from memlint.project.project import Project
from memlint.project.settings import Settings

# examples/deepspeed_config_templates/ as Accelerate keeps them, trimmed
ZERO2 = dedent('''
    {
        "fp16": {"enabled": "auto", "loss_scale": 0, "initial_scale_power": 16},
        "optimizer": {"type": "AdamW", "params": {"lr": "auto", "weight_decay": "auto"}},
        "zero_optimization": {
            "stage": 2,
            "allgather_partitions": true,
            "overlap_comm": true,
            "contiguous_gradients": true
        },
        "gradient_accumulation_steps": 1,
        "gradient_clipping": "auto",
        "train_batch_size": "auto",
        "train_micro_batch_size_per_gpu": 2
    }
''')
ZERO3 = ZERO2.replace('"stage": 2', '"stage": 3')
MULTI_GPU = dedent('''
    compute_environment: LOCAL_MACHINE
    distributed_type: MULTI_GPU
    machine_rank: 0
    main_training_function: main
    mixed_precision: bf16
    num_machines: 1
    num_processes: 8
    use_cpu: false
''')
TEMPLATES = {
    "examples/deepspeed_config_templates/zero_stage2_config.json": ZERO2,
    "examples/deepspeed_config_templates/zero_stage3_config.json": ZERO3,
    "examples/config_yaml_templates/multi_gpu.yaml": MULTI_GPU,
}


def _settings(root: Path, files: dict[str, str], **overrides) -> Settings:
    write(root, files)
    (root / ".git").mkdir(exist_ok=True)
    return Settings(root=root).with_overrides(gpu="h100", cache=False, **overrides)


def _memory(settings: Settings) -> dict[str, list]:
    linter = Linter(settings)
    found = {}
    for name in sorted(p.relative_to(settings.root).as_posix() for p in settings.root.rglob("*.*")
                       if ".git" not in p.parts):
        found[name] = [d for d in linter.lint_path(settings.root / name) if d.code.startswith("MEM")]
    return found


def test_unused_templates_get_one_note_for_the_project(tmp_path: Path):
    found = _memory(_settings(tmp_path, TEMPLATES))
    notes = [(name, d) for name, ds in found.items() for d in ds]
    assert len(notes) == 1
    name, note = notes[0]
    assert name == "examples/config_yaml_templates/multi_gpu.yaml"  # the first in path order
    assert note.code == "MEM003" and note.severity.name.lower() == "info"
    assert "this config and 2 other DeepSpeed/Accelerate configs of the project are used by no launcher" \
        in note.message
    assert "set `model` in [tool.memlint]" in note.message


def test_a_lone_unused_config_says_so_of_itself(tmp_path: Path):
    found = _memory(_settings(tmp_path, {"ds_config.json": ZERO3}))
    [note] = found["ds_config.json"]
    assert note.code == "MEM003" and "this config is used by no launcher, script or recipe" in note.message


def test_with_the_settings_model_each_template_is_estimated(tmp_path: Path):
    settings = _settings(tmp_path, TEMPLATES, model="meta-llama/Llama-3.1-8B")
    project = Project(settings)
    [run] = project.runs_for(tmp_path / "examples/deepspeed_config_templates/zero_stage3_config.json",
                             run_context(settings))
    assert run.problem is None and run.arch is not None
    assert run.plan.value("zero_stage") == 3
    assert run.plan.value("micro_batch") == 2
    assert any("no launcher or script of the project uses zero_stage3_config.json" in a for a in run.assumptions)
    assert all(d.code != "MEM003" for ds in _memory(settings).values() for d in ds)


def test_a_config_a_launcher_uses_is_no_template(tmp_path: Path):
    launcher = "accelerate launch --config_file examples/config_yaml_templates/multi_gpu.yaml train.py\n"
    script = dedent('''
        from datasets import load_dataset
        from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

        model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B", torch_dtype="bfloat16")
        args = TrainingArguments(output_dir="out", per_device_train_batch_size=4, bf16=True,
                                 deepspeed="examples/deepspeed_config_templates/zero_stage2_config.json")
        Trainer(model=model, args=args, train_dataset=load_dataset("imdb", split="train")).train()
    ''')
    settings = _settings(tmp_path, {**TEMPLATES, "train.py": script, "launch.sh": launcher},
                         model="meta-llama/Llama-3.1-8B")
    project = Project(settings)
    [run] = project.runs_for(tmp_path / "examples/deepspeed_config_templates/zero_stage2_config.json",
                             run_context(settings))
    assert run.plan.value("model") == "Qwen/Qwen2.5-0.5B"  # the script's, not the settings' fallback
    assert not any("no launcher or script of the project uses" in a for a in run.assumptions)
    [template] = project.runs_for(tmp_path / "examples/deepspeed_config_templates/zero_stage3_config.json",
                                  run_context(settings))
    assert any("no launcher or script of the project uses zero_stage3_config.json" in a
               for a in template.assumptions)


def test_without_a_model_setting_only_the_unused_configs_count(tmp_path: Path):
    launcher = "accelerate launch --config_file examples/config_yaml_templates/multi_gpu.yaml train.py\n"
    script = dedent('''
        from datasets import load_dataset
        from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

        model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B", torch_dtype="bfloat16")
        args = TrainingArguments(output_dir="out", per_device_train_batch_size=4, bf16=True,
                                 deepspeed="examples/deepspeed_config_templates/zero_stage2_config.json")
        Trainer(model=model, args=args, train_dataset=load_dataset("imdb", split="train")).train()
    ''')
    found = _memory(_settings(tmp_path, {**TEMPLATES, "train.py": script, "launch.sh": launcher}))
    [note] = found["examples/deepspeed_config_templates/zero_stage3_config.json"]
    assert "this config is used by no launcher, script or recipe" in note.message
    assert found["examples/config_yaml_templates/multi_gpu.yaml"] == []
    assert found["examples/deepspeed_config_templates/zero_stage2_config.json"] == []
