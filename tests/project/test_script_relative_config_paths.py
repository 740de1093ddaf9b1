"""A config file a script finds from its own location, not from the working directory.

xt2201/finetune-qwen2.5-1.5b-ai-medical-chatbot's ``src/models/train_lora.py`` reads
``os.path.join(os.path.dirname(__file__), "../../configs/config.yml")`` through a
``load_config`` helper; others write ``Path(__file__).resolve().parent / "config.yaml"`` and
read it with ``yaml.safe_load(path.read_text())`` or ``with path.open() as f``. The path is the
script folder's, so the file's entries (the model, the micro-batch) are the run's values."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlint.lint.engine import run_context
from memlint.project.project import Project
from memlint.project.settings import Settings
from memlint.python.script_paths import SCRIPT_FILE, PathValue, call, divide, method
from tests.facts.facts_testing import dedent, write

CONFIG = dedent('''
    project:
      name: medical-chatbot
    model:
      name: Qwen/Qwen2.5-1.5B-Instruct
      max_length: 512
    training:
      per_device_train_batch_size: 6
      gradient_accumulation_steps: 4
''')

OS_PATH_SCRIPT = dedent('''
    import os

    import torch
    import yaml
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments


    def load_config(config_path="configs/config.yml"):
        with open(config_path, "r", encoding="utf-8") as f:
            return yaml.safe_load(f)


    def train():
        config_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../configs/config.yml")
        cfg = load_config(config_path)
        model = AutoModelForCausalLM.from_pretrained(cfg["model"]["name"], torch_dtype=torch.bfloat16)
        args = TrainingArguments(output_dir="out", bf16=True,
                                 per_device_train_batch_size=cfg["training"]["per_device_train_batch_size"])
        Trainer(model=model, args=args).train()


    if __name__ == "__main__":
        train()
''')

PATHLIB_SCRIPT = dedent('''
    from pathlib import Path

    import torch
    import yaml
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

    ROOT = Path(__file__).resolve().parent.parent.parent
    CONFIG = ROOT / "configs" / "config.yml"


    def main():
        cfg = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
        model = AutoModelForCausalLM.from_pretrained(cfg["model"]["name"], torch_dtype=torch.bfloat16)
        args = TrainingArguments(output_dir="out", bf16=True,
                                 per_device_train_batch_size=cfg["training"]["per_device_train_batch_size"])
        Trainer(model=model, args=args).train()


    if __name__ == "__main__":
        main()
''')


def _run(root: Path, files: dict[str, str]):
    write(root, files)
    (root / ".git").mkdir(exist_ok=True)
    settings = Settings(root=root).with_overrides(gpu="h100", gpus=1, cache=False, offline=True)
    [run] = Project(settings).runs_for(root / "src" / "models" / "train_lora.py", run_context(settings))
    return run


@pytest.mark.parametrize("script", [OS_PATH_SCRIPT, PATHLIB_SCRIPT], ids=["os.path", "pathlib"])
def test_the_config_next_to_the_script_gives_the_run_its_values(tmp_path: Path, script: str):
    run = _run(tmp_path, {"configs/config.yml": CONFIG, "src/models/train_lora.py": script})
    assert run.plan.value("model") == "Qwen/Qwen2.5-1.5B-Instruct"
    assert run.plan.value("micro_batch") == 6
    assert run.plan.get("model").origin.path.endswith("config.yml")


def test_a_path_that_leaves_the_project_names_no_file(tmp_path: Path):
    # the same script one folder higher: ../../configs is outside the project
    run = _run(tmp_path, {"configs/config.yml": CONFIG,
                          "src/models/train_lora.py": OS_PATH_SCRIPT.replace("../../configs", "../../../configs")})
    assert run.plan.value("model") is None


def test_the_paths_a_script_builds_from_its_file():
    assert call("os.path.dirname", [SCRIPT_FILE]) == "."
    assert call("os.path.join", [".", "../../configs/config.yml"]) == "../../configs/config.yml"
    folder = method(call("pathlib.Path", [SCRIPT_FILE]), "resolve", [])
    assert folder == PathValue(SCRIPT_FILE)
    parent = PathValue(".")
    assert divide(parent, "config.yaml") == PathValue("config.yaml")
    assert method(PathValue("a/b.yaml"), "with_name", ["c.yaml"]) == PathValue("a/c.yaml")
    assert call("os.path.join", ["/etc", "x.yaml"]) == "/etc/x.yaml"
    assert call("os.path.join", [None, "x.yaml"]) is None
