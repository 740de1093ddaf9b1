"""Configs a script parses as its whole command line from its first argument (llm2vec's
``experiments/run_word_task.py``: ``parse_json_file(json_file=os.path.abspath(sys.argv[1]))``),
of which the README runs one (``python experiments/run_word_task.py
train_configs/word-task/Llama2-bi-mntp.json``) and its folder holds more. Each sibling runs the way
the README runs its folder's config, as a named assumption; and where the script itself says why
no estimate holds (it freezes everything but a classifier: ``for n, p in
list(model.named_parameters())``), no config of it is judged alone as full fine-tuning."""

from __future__ import annotations

from memlint.lint.engine import Linter

from tests.facts.facts_testing import dedent
from tests.project.test_config_launchers import _project, _runs

RUN_WORD_TASK = dedent('''
    import os
    import sys
    from dataclasses import dataclass, field

    import torch
    from transformers import AutoModelForTokenClassification, HfArgumentParser, Trainer, TrainingArguments


    @dataclass
    class ModelArguments:
        model_name_or_path: str = field(default=None)
        torch_dtype: str = field(default="bfloat16")


    def main():
        parser = HfArgumentParser((ModelArguments, TrainingArguments))
        if len(sys.argv) == 2 and sys.argv[1].endswith(".json"):
            model_args, training_args = parser.parse_json_file(json_file=os.path.abspath(sys.argv[1]))
        else:
            model_args, training_args = parser.parse_args_into_dataclasses()
        model = AutoModelForTokenClassification.from_pretrained(
            model_args.model_name_or_path, num_labels=17, torch_dtype=getattr(torch, model_args.torch_dtype))
        # only train the classifier
        for n, p in list(model.named_parameters()):
            if "classifier" in n:
                p.requires_grad = True
            else:
                p.requires_grad = False
        trainer = Trainer(model=model, args=training_args, train_dataset=load_tags())
        trainer.train()


    if __name__ == "__main__":
        main()
''')

CONFIG = dedent('''
    {{
        "model_name_or_path": "{model}",
        "torch_dtype": "bfloat16",
        "output_dir": "output/word-task/pos_tags/{name}",
        "num_train_epochs": 10,
        "learning_rate": 5e-4,
        "do_train": true,
        "save_steps": 250
    }}
''')

README = dedent('''
    # Word-level tasks

    ```bash
    python experiments/run_word_task.py train_configs/word-task/Llama2-bi-mntp.json
    ```
''')


def _files(script: str = RUN_WORD_TASK) -> dict[str, str]:
    return {"experiments/run_word_task.py": script, "README.md": README,
            "train_configs/word-task/Llama2-bi-mntp.json": CONFIG.format(model="meta-llama/Llama-2-7b-chat-hf", name="bi-mntp"),
            "train_configs/word-task/Mistral-bi.json": CONFIG.format(model="mistralai/Mistral-7B-Instruct-v0.2", name="bi")}


def _codes(settings, name: str) -> list[tuple[str, str]]:
    return [(d.code, d.message) for d in Linter(settings).lint_path(settings.root / name) if d.code.startswith("MEM")]


def test_a_sibling_config_runs_as_the_readme_runs_its_folder(tmp_path):
    settings = _project(tmp_path, _files())
    [run] = _runs(settings, "train_configs/word-task/Mistral-bi.json")
    assert run.plan.value("frozen_model") == "model except classifier"  # the script's freeze applies to it
    assert str(settings.root / "experiments/run_word_task.py") in run.plan.documents


def test_the_freeze_is_said_once_in_the_script_and_no_config_is_judged_alone(tmp_path):
    settings = _project(tmp_path, _files())
    assert _codes(settings, "train_configs/word-task/Llama2-bi-mntp.json") == []
    assert _codes(settings, "train_configs/word-task/Mistral-bi.json") == []
    [(code, message)] = _codes(settings, "experiments/run_word_task.py")
    assert code == "MEM003" and "freezes the model" in message


def test_without_the_freeze_the_siblings_are_estimated_through_the_script(tmp_path):
    trained = RUN_WORD_TASK.replace("p.requires_grad = False", "p.requires_grad = True")
    settings = _project(tmp_path, _files(trained))
    [run] = _runs(settings, "train_configs/word-task/Mistral-bi.json")
    assert run.problem is None
    assert run.plan.value("model") == "mistralai/Mistral-7B-Instruct-v0.2"
    assert run.plan.get("frozen_model") is None
    assert any("run_word_task.py" in note for note in run.assumptions)  # the README's launch, assumed
