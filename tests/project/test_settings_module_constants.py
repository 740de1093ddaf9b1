"""A training script configured from a settings module of the project (``config.py`` holding
``MODEL_CHECKPOINT = "..."``, ``PER_DEVICE_TRAIN_BATCH_SIZE = 4``, imported by name): the
constants are the run's values, where the module writes them. A name imported from a library
stays the library's object."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlint.lint.engine import run_context
from memlint.project.project import Project
from memlint.project.settings import Settings
from tests.facts.facts_testing import dedent, write

CONFIG = dedent('''
    """Settings of the fine-tuning run."""
    MODEL_CHECKPOINT = "Qwen/Qwen2.5-0.5B-Instruct"
    TRAINING_OUTPUT_DIR = "outputs/qwen-0.5b-sft"
    PER_DEVICE_TRAIN_BATCH_SIZE = 8
    GRADIENT_ACCUMULATION_STEPS = 4
    LEARNING_RATE = 2e-5
    MAX_LENGTH = 1024
    GRADIENT_CHECKPOINTING = True
''')

TRAIN = dedent('''
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments
    from transformers.utils import WEIGHTS_NAME

    from config import (
        GRADIENT_ACCUMULATION_STEPS,
        GRADIENT_CHECKPOINTING,
        LEARNING_RATE,
        MAX_LENGTH,
        MODEL_CHECKPOINT,
        PER_DEVICE_TRAIN_BATCH_SIZE,
        TRAINING_OUTPUT_DIR,
    )
    from data_preparation import load_and_prepare_dataset


    def main():
        tokenizer = AutoTokenizer.from_pretrained(MODEL_CHECKPOINT)
        model = AutoModelForCausalLM.from_pretrained(MODEL_CHECKPOINT, torch_dtype=torch.bfloat16)
        dataset = load_and_prepare_dataset(tokenizer, max_length=MAX_LENGTH)
        args = TrainingArguments(
            output_dir=TRAINING_OUTPUT_DIR,
            per_device_train_batch_size=PER_DEVICE_TRAIN_BATCH_SIZE,
            gradient_accumulation_steps=GRADIENT_ACCUMULATION_STEPS,
            learning_rate=LEARNING_RATE,
            gradient_checkpointing=GRADIENT_CHECKPOINTING,
            bf16=True,
        )
        Trainer(model=model, args=args, train_dataset=dataset).train()
        print("weights in", WEIGHTS_NAME)


    if __name__ == "__main__":
        main()
''')


def _run(tmp_path: Path):
    (tmp_path / ".git").mkdir(exist_ok=True)
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=1, cache=False)
    [run] = Project(settings).runs_for(tmp_path / "model_training.py", run_context(settings))
    return run


def test_the_settings_modules_constants_are_the_runs_values(tmp_path: Path):
    write(tmp_path, {"config.py": CONFIG, "model_training.py": TRAIN,
                     "data_preparation.py": "def load_and_prepare_dataset(tokenizer, max_length):\n    return []\n"})
    run = _run(tmp_path)
    # before: "no model found", and the Trainer's defaults (micro-batch 8, no accumulation)
    assert run.plan.value("model") == "Qwen/Qwen2.5-0.5B-Instruct"
    assert (run.plan.value("micro_batch"), run.plan.value("grad_accum")) == (8, 4)
    assert run.plan.value("grad_ckpt")
    model = run.plan.get("model")
    assert model.origin.path.endswith("config.py") and model.origin.range.start.line == 2


def test_a_constant_of_a_module_the_project_does_not_hold_is_unknown(tmp_path: Path):
    # the same names from an installed package: nothing to read, no model found (and no command
    # line option to name for it)
    write(tmp_path, {"model_training.py": TRAIN.replace("from config import", "from speech_toolkit.config import")})
    run = _run(tmp_path)
    assert run.plan.value("model") is None and run.plan.value("micro_batch") is None
    assert run.problem.startswith("no model found (set `model` in [tool.memlint]")


TRAIN_WITH_MODULE = dedent('''
    import torch
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

    import config as cfg
    from data_preparation import load_and_prepare_dataset

    model = AutoModelForCausalLM.from_pretrained(cfg.MODEL_CHECKPOINT, torch_dtype=torch.bfloat16)
    args = TrainingArguments(
        output_dir=cfg.TRAINING_OUTPUT_DIR,
        per_device_train_batch_size=cfg.PER_DEVICE_TRAIN_BATCH_SIZE,
        gradient_accumulation_steps=cfg.GRADIENT_ACCUMULATION_STEPS,
        gradient_checkpointing=cfg.GRADIENT_CHECKPOINTING,
        bf16=True,
    )
    Trainer(model=model, args=args, train_dataset=load_and_prepare_dataset(cfg.MAX_LENGTH)).train()
''')


def test_a_settings_module_imported_whole_under_another_name(tmp_path: Path):
    write(tmp_path, {"config.py": CONFIG, "model_training.py": TRAIN_WITH_MODULE,
                     "data_preparation.py": "def load_and_prepare_dataset(max_length):\n    return []\n"})
    run = _run(tmp_path)
    assert run.plan.value("model") == "Qwen/Qwen2.5-0.5B-Instruct"
    assert (run.plan.value("micro_batch"), run.plan.value("grad_accum")) == (8, 4)


@pytest.mark.parametrize("header", ["", "import torch\n\nDTYPE = torch.bfloat16\n"])
def test_an_unknown_model_of_the_settings_module_is_noted_at_the_run(tmp_path: Path, header: str):
    # config.py has no run of its own to carry the note (whether or not it imports torch, as
    # HunyuanDiT's hydit/constants.py does): it stands at the Trainer, and says where
    from memlint.lint.engine import Linter

    config = header + CONFIG.replace("Qwen/Qwen2.5-0.5B-Instruct", "acme-labs/speech-7b")
    write(tmp_path, {"config.py": config, "model_training.py": TRAIN,
                     "data_preparation.py": "def load_and_prepare_dataset(tokenizer, max_length):\n    return []\n"})
    (tmp_path / ".git").mkdir(exist_ok=True)
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=1, cache=False, offline=True,
                                                       select=("MEM003",))
    linter = Linter(settings)
    [note] = linter.lint_path(tmp_path / "model_training.py")
    assert "unknown model 'acme-labs/speech-7b'" in note.message
    line = 2 + header.count("\n")
    assert note.message.endswith(f"(written at config.py:{line}:20)")
    assert linter.lint_path(tmp_path / "config.py") == []


# sh-kim's Qwen3 QLoRA pipeline: ``from config import *`` and a model name built from another constant
STARRED_CONFIG = dedent('''
    """QLoRA fine-tuning settings."""
    from pathlib import Path

    MODEL_BASE_NAME = "Qwen3-4B"
    MODEL_NAME = f"Qwen/{MODEL_BASE_NAME}"
    TOKENIZER_NAME = MODEL_NAME + "-Base"
    PER_DEVICE_TRAIN_BATCH_SIZE = 8
    OUTPUT_DIR = Path("outputs") / MODEL_BASE_NAME
''')

STARRED_TRAIN = dedent('''
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments

    from config import *


    def main():
        tokenizer = AutoTokenizer.from_pretrained(TOKENIZER_NAME)
        model = AutoModelForCausalLM.from_pretrained(MODEL_NAME, torch_dtype=torch.bfloat16)
        args = TrainingArguments(output_dir=str(OUTPUT_DIR), per_device_train_batch_size=PER_DEVICE_TRAIN_BATCH_SIZE,
                                 bf16=True, gradient_checkpointing=True)
        Trainer(model=model, args=args).train()


    if __name__ == "__main__":
        main()
''')


def test_a_star_imported_settings_module_gives_its_constants(tmp_path: Path):
    write(tmp_path, {"config.py": STARRED_CONFIG, "model_training.py": STARRED_TRAIN})
    run = _run(tmp_path)
    # the f-string over the module's own constant is text too
    assert run.plan.value("model") == "Qwen/Qwen3-4B"
    assert run.plan.value("micro_batch") == 8
    assert run.plan.get("model").origin.path.endswith("config.py")


def test_two_star_imports_leave_the_name_unknown(tmp_path: Path):
    write(tmp_path, {"config.py": STARRED_CONFIG, "defaults.py": 'MODEL_NAME = "Qwen/Qwen3-8B"\n',
                     "model_training.py": STARRED_TRAIN.replace("from config import *",
                                                                "from config import *\nfrom defaults import *")})
    run = _run(tmp_path)
    assert run.plan.value("model") is None
