"""Launch commands in a Makefile's recipes (issue 14, item 3): ``make train`` runs a recipe that
starts a training script with make variables for the model and batch size. Each value is located
in the Makefile; recipes that launch nothing, variables a conditional sets and lines outside
recipes are no launches."""

from __future__ import annotations

from pathlib import Path

from facts_testing import dedent, facts_of, span, where, write

from memlint.lint.engine import Linter, run_context
from memlint.project.project import Project
from memlint.project.settings import Settings

TRAIN = dedent('''
    from dataclasses import dataclass, field

    from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainingArguments


    @dataclass
    class ModelArguments:
        model_name_or_path: str = field(default="openai-community/gpt2")


    def main():
        parser = HfArgumentParser((ModelArguments, TrainingArguments))
        model_args, training_args = parser.parse_args_into_dataclasses()
        model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path)
        Trainer(model=model, args=training_args).train()


    if __name__ == "__main__":
        main()
''')
# as projects write them: variables on top, a help target, tab-indented recipes, continuation lines
MAKEFILE = (
    "# Training entry points\n"
    "MODEL ?= Qwen/Qwen2.5-7B\n"
    "BATCH := 16\n"
    "NGPU = 4\n"
    "\n"
    ".PHONY: help install train lint\n"
    "\n"
    "help:  ## show the targets\n"
    "\t@grep -E '^[a-z]+:' Makefile\n"
    "\n"
    "install:\n"
    "\tpip install -e .\n"
    "\n"
    "train: install\n"
    "\t@echo \"training $(MODEL) on $(NGPU) GPUs\"\n"
    "\t@torchrun --nproc_per_node $(NGPU) scripts/train.py \\\n"
    "\t\t--model_name_or_path $(MODEL) \\\n"
    "\t\t--per_device_train_batch_size $(BATCH) \\\n"
    "\t\t--gradient_checkpointing True \\\n"
    "\t\t--bf16 True --output_dir out/$$USER\n"
    "\n"
    "lint:\n"
    "\truff check .\n"
)


def test_a_recipe_is_a_launch_with_the_variables_located_in_the_makefile():
    [launch] = facts_of(MAKEFILE, "Makefile")
    assert launch.launches.value == "scripts/train.py"
    assert launch.world_size.value == 4
    assert where(launch.world_size) == span(MAKEFILE, "NGPU = «4»")
    model = launch.cli_args["model_name_or_path"]
    assert model.value == "Qwen/Qwen2.5-7B" and where(model) == span(MAKEFILE, "MODEL ?= «Qwen/Qwen2.5-7B»")
    assert launch.cli_args["per_device_train_batch_size"].value == "16"
    assert launch.cli_args["gradient_checkpointing"].value == "True"
    assert launch.cli_args["bf16"].value == "True"  # a continued line keeps its leading dashes
    assert "output_dir" not in launch.cli_args  # out/$$USER: the shell's $USER, unknown here


def test_the_same_commands_outside_recipes_or_under_conditionals():
    # a command in a comment or a variable is no recipe; a conditional variable is unknown
    text = (
        "ifdef FAST\n"
        "BATCH = 64\n"
        "else\n"
        "BATCH = 8\n"
        "endif\n"
        "CMD = torchrun --nproc_per_node 8 scripts/train.py\n"
        "# torchrun scripts/train.py --per_device_train_batch_size 2\n"
        "train:\n"
        "\ttorchrun scripts/train.py --model_name_or_path Qwen/Qwen2.5-0.5B --per_device_train_batch_size $(BATCH)\n"
    )
    [launch] = facts_of(text, "Makefile")  # the recipe's, not the variable's or the comment's
    assert launch.world_size is None  # --nproc_per_node 8 is in CMD, which no recipe runs
    assert launch.cli_args["model_name_or_path"].value == "Qwen/Qwen2.5-0.5B"
    assert "per_device_train_batch_size" not in launch.cli_args  # 64 or 8: which one runs is unknown


def test_make_train_is_judged_like_the_launcher_script(tmp_path: Path):
    write(tmp_path, {"scripts/train.py": TRAIN, "Makefile": MAKEFILE})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="a100-40gb", cache=False)
    [run] = Project(settings).runs_for(tmp_path / "Makefile", run_context(settings))
    assert run.plan.value("model") == "Qwen/Qwen2.5-7B"
    assert run.plan.value("micro_batch") == 16 and run.plan.value("world_size") == 4
    found = [d for d in Linter(settings).lint_path(tmp_path / "Makefile") if d.code.startswith("MEM")]
    [finding] = found
    assert finding.code == "MEM001"
    assert (finding.range.start.line, finding.range.start.column) == span(MAKEFILE, "BATCH := «16»")[:2]
    # the script runs through the Makefile that launches it: its options apply there too
    [through] = Project(settings).runs_for(tmp_path / "scripts/train.py", run_context(settings))
    assert through.plan.entry.endswith("Makefile") and through.plan.value("micro_batch") == 16


def test_a_makefile_without_training_commands_says_nothing(tmp_path: Path):
    write(tmp_path, {"Makefile": "install:\n\tpip install -e .\n\nlint:\n\truff check .\n\ntest:\n\tpython -m pytest\n"})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", cache=False)
    assert Linter(settings).lint_path(tmp_path / "Makefile") == []
