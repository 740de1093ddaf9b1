"""A click command that hands its options on with ``**kwargs`` and takes a default from a
constant of the project (dolly's ``training/trainer.py``: ``@click.option("--input-model",
default=DEFAULT_INPUT_MODEL)`` over ``def main(**kwargs): train(**kwargs)``, with ``from .consts
import DEFAULT_INPUT_MODEL`` and the model loaded in a helper). The default is what a launch
without ``--input-model`` runs, so it is the run's model, located in ``consts.py``."""

from __future__ import annotations

from pathlib import Path

from memlint.lint.engine import run_context
from memlint.project.project import Project
from memlint.project.settings import Settings

from tests.facts.facts_testing import dedent, facts_of, write

CONSTS = dedent('''
    DEFAULT_INPUT_MODEL = "EleutherAI/pythia-2.8b"
    SUGGESTED_INPUT_MODELS = ["EleutherAI/pythia-2.8b", "EleutherAI/pythia-6.9b"]
    DEFAULT_TRAINING_DATASET = "databricks/databricks-dolly-15k"
    DEFAULT_SEED = 42
''')

TRAINER = dedent('''
    import logging

    import click
    from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments, set_seed

    from .consts import DEFAULT_INPUT_MODEL, DEFAULT_SEED, DEFAULT_TRAINING_DATASET

    logger = logging.getLogger(__name__)


    def load_model(pretrained_model_name_or_path: str = DEFAULT_INPUT_MODEL, *, gradient_checkpointing: bool = False):
        logger.info(f"Loading model for {pretrained_model_name_or_path}")
        return AutoModelForCausalLM.from_pretrained(
            pretrained_model_name_or_path, trust_remote_code=True, use_cache=False if gradient_checkpointing else True
        )


    def get_model_tokenizer(pretrained_model_name_or_path: str = DEFAULT_INPUT_MODEL, *, gradient_checkpointing: bool = False):
        tokenizer = AutoTokenizer.from_pretrained(pretrained_model_name_or_path)
        model = load_model(pretrained_model_name_or_path, gradient_checkpointing=gradient_checkpointing)
        return model, tokenizer


    def train(*, input_model: str, local_output_dir: str, epochs: int, per_device_train_batch_size: int,
              lr: float, seed: int, deepspeed: str, gradient_checkpointing: bool, bf16: bool,
              training_dataset: str = DEFAULT_TRAINING_DATASET):
        set_seed(seed)
        model, tokenizer = get_model_tokenizer(
            pretrained_model_name_or_path=input_model, gradient_checkpointing=gradient_checkpointing
        )
        training_args = TrainingArguments(
            output_dir=local_output_dir,
            per_device_train_batch_size=per_device_train_batch_size,
            fp16=not bf16,
            bf16=bf16,
            learning_rate=lr,
            num_train_epochs=epochs,
            deepspeed=deepspeed,
            gradient_checkpointing=gradient_checkpointing,
        )
        trainer = Trainer(model=model, tokenizer=tokenizer, args=training_args)
        trainer.train()


    @click.command()
    @click.option("--input-model", type=str, help="Input model to fine tune", default=DEFAULT_INPUT_MODEL)
    @click.option("--local-output-dir", type=str, help="Write directly to this local path", required=True)
    @click.option("--epochs", type=int, default=3, help="Number of epochs to train for.")
    @click.option("--per-device-train-batch-size", type=int, default=8, help="Batch size to use for training.")
    @click.option("--lr", type=float, default=1e-5, help="Learning rate to use for training.")
    @click.option("--seed", type=int, default=DEFAULT_SEED, help="Seed to use for training.")
    @click.option("--deepspeed", type=str, default=None, help="Path to deepspeed config file.")
    @click.option(
        "--gradient-checkpointing/--no-gradient-checkpointing",
        is_flag=True,
        default=True,
        help="Use gradient checkpointing?",
    )
    @click.option("--bf16", type=bool, default=None, help="Whether to use bf16 (preferred on A100's).")
    def main(**kwargs):
        train(**kwargs)


    if __name__ == "__main__":
        main()
''')


def test_a_forwarded_click_option_binds_the_callees_parameter():
    [facts] = facts_of(TRAINER, "training/trainer.py")
    assert facts.cli_bindings["input_model"] == ("model",)
    assert facts.micro_batch.value == 8  # --per-device-train-batch-size's default, through **kwargs
    assert facts.grad_ckpt.value  # "--gradient-checkpointing/--no-gradient-checkpointing", default=True
    assert facts.option_constants == {"input_model": (".consts", "DEFAULT_INPUT_MODEL")}
    assert facts.model is None  # the constant is in another module


def test_the_imported_constant_is_the_runs_model(tmp_path: Path):
    write(tmp_path, {"training/__init__.py": "", "training/consts.py": CONSTS, "training/trainer.py": TRAINER})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False)
    [run] = Project(settings).runs_for(tmp_path / "training/trainer.py", run_context(settings))
    model = run.plan.get("model")
    assert model.value == "EleutherAI/pythia-2.8b"
    assert Path(model.origin.path).name == "consts.py" and model.origin.range.start.line == 1


def test_a_constant_of_a_library_module_is_not_read(tmp_path: Path):
    trainer = TRAINER.replace("from .consts import", "from dolly_consts import")
    write(tmp_path, {"training/trainer.py": trainer})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False)
    [run] = Project(settings).runs_for(tmp_path / "training/trainer.py", run_context(settings))
    assert run.plan.get("model") is None
