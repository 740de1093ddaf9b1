"""A verdict whose deciding value is written in a file memlint does not lint as a run (a settings
module of constants, dolly's ``training/consts.py``: ``DEFAULT_INPUT_MODEL = "EleutherAI/pythia-6.9b"``)
is reported at the run in the document being linted, saying where that value is written; before,
it pointed into that file and no one saw it."""

from __future__ import annotations

from pathlib import Path

from memlint.lint.engine import Linter
from memlint.project.settings import Settings

from tests.facts.facts_testing import dedent, write

CONSTS = 'DEFAULT_INPUT_MODEL = "EleutherAI/pythia-12b"\nDEFAULT_SEED = 42\n'

TRAINER = dedent('''
    import click
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

    from .consts import DEFAULT_INPUT_MODEL, DEFAULT_SEED


    def train(*, input_model: str, local_output_dir: str, per_device_train_batch_size: int, seed: int):
        model = AutoModelForCausalLM.from_pretrained(input_model)
        training_args = TrainingArguments(output_dir=local_output_dir, per_device_train_batch_size=per_device_train_batch_size,
                                          bf16=True, seed=seed)
        trainer = Trainer(model=model, args=training_args)
        trainer.train()


    @click.command()
    @click.option("--input-model", type=str, default=DEFAULT_INPUT_MODEL, help="Input model to fine tune")
    @click.option("--local-output-dir", type=str, required=True)
    @click.option("--per-device-train-batch-size", type=int, default=1)
    @click.option("--seed", type=int, default=DEFAULT_SEED)
    def main(**kwargs):
        train(**kwargs)


    if __name__ == "__main__":
        main()
''')


def test_a_verdict_decided_in_a_constants_module_is_reported_at_the_run(tmp_path: Path):
    write(tmp_path, {"training/__init__.py": "", "training/consts.py": CONSTS, "training/trainer.py": TRAINER})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=1, cache=False, offline=True)
    linter = Linter(settings)
    [verdict] = [d for d in linter.lint_path(tmp_path / "training/trainer.py") if d.code == "MEM001"]
    assert Path(verdict.path).name == "trainer.py"
    assert "(the value that decides it is written at training/consts.py:1)" in verdict.message
    assert [Path(r.path).name for r in verdict.related][:1] == ["consts.py"]
    assert not [d for d in linter.lint_path(tmp_path / "training/consts.py") if d.code == "MEM001"]
