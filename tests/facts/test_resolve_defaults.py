"""Values no document states, filled in ``facts.resolve`` -- and said to be assumed."""

from __future__ import annotations

from facts_testing import dedent, write

from memlint.lint.engine import run_context
from memlint.project.settings import Settings
from memlint.project.project import Project

RUN_CLM = dedent('''
    from dataclasses import dataclass, field
    from typing import Optional

    from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainingArguments


    @dataclass
    class ModelArguments:
        model_name_or_path: Optional[str] = field(default=None)


    def main():
        parser = HfArgumentParser((ModelArguments, TrainingArguments))
        model_args, training_args = parser.parse_args_into_dataclasses()
        model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path)
        # the data pipeline cuts blocks of min(block_size, tokenizer.model_max_length) tokens
        Trainer(model=model, args=training_args, train_dataset=lm_datasets["train"]).train()


    if __name__ == "__main__":
        main()
''')


def _run(tmp_path, model: str, **settings):
    write(tmp_path, {"run_clm.py": RUN_CLM,
                     "run.sh": f"python run_clm.py --model_name_or_path {model} --do_train --output_dir out\n"})
    found = Settings(root=tmp_path).with_overrides(cache=False, **settings)
    (run,) = Project(found).runs_for(tmp_path / "run.sh", run_context(found))
    assert run.setup is not None, run.problem
    return run


def test_an_unstated_length_never_exceeds_the_models_positions(tmp_path):
    run = _run(tmp_path, "openai-community/gpt2")  # n_positions 1024
    assert run.setup.seq_len == 1024
    assert any("1024, the model's 1024 positions" in note for note in run.assumptions)


def test_the_setting_applies_below_the_models_positions(tmp_path):
    run = _run(tmp_path, "meta-llama/Llama-3.2-1B-Instruct", seq_len=4096)
    assert run.setup.seq_len == 4096
    assert run.setup.micro_batch == 8  # TrainingArguments' default per_device_train_batch_size
