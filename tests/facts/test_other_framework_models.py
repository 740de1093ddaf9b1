"""A transformers model class of another framework (``TFAutoModelForSeq2SeqLM``,
``FlaxGPT2LMHeadModel``) trains in TensorFlow/Keras or JAX: the run is named as what memlint's
estimate does not model instead of being sized as a PyTorch fine-tune (microsoft/LMOps vendors
transformers' ``examples/tensorflow/translation``, whose README launch was read as one)."""

from __future__ import annotations

from pathlib import Path

from facts_testing import dedent, facts_of, write

from memlint.lint.engine import Linter
from memlint.project.settings import Settings

# transformers' examples/tensorflow/translation/run_translation.py, trimmed: HfArgumentParser,
# a Keras fit, the TF auto class imported among the PyTorch-neutral ones
RUN_TRANSLATION = dedent('''
    from dataclasses import dataclass, field
    from typing import Optional

    import tensorflow as tf
    from transformers import (
        AutoConfig,
        AutoTokenizer,
        HfArgumentParser,
        TFAutoModelForSeq2SeqLM,
        TFTrainingArguments,
        create_optimizer,
    )


    @dataclass
    class ModelArguments:
        model_name_or_path: str = field(metadata={"help": "Path to pretrained model"})


    def main():
        parser = HfArgumentParser((ModelArguments, TFTrainingArguments))
        model_args, training_args = parser.parse_args_into_dataclasses()
        config = AutoConfig.from_pretrained(model_args.model_name_or_path)
        tokenizer = AutoTokenizer.from_pretrained(model_args.model_name_or_path)
        with training_args.strategy.scope():
            model = TFAutoModelForSeq2SeqLM.from_pretrained(model_args.model_name_or_path, config=config)
            optimizer, lr_schedule = create_optimizer(init_lr=training_args.learning_rate, num_train_steps=1000,
                                                      num_warmup_steps=0)
            model.compile(optimizer=optimizer, jit_compile=training_args.xla)
            model.fit(tf_train_dataset, epochs=int(training_args.num_train_epochs))


    if __name__ == "__main__":
        main()
''')

README = dedent('''
    # Translation example

    ```bash
    python run_translation.py \\
        --model_name_or_path google-t5/t5-large \\
        --do_train \\
        --source_lang en \\
        --target_lang ro \\
        --output_dir /tmp/tst-translation \\
        --per_device_train_batch_size=16 \\
        --overwrite_output_dir
    ```
''')


def test_a_tensorflow_model_is_named_not_estimated():
    [script] = facts_of(RUN_TRANSLATION, "run_translation.py")
    what, advice = script.unmodelled.value
    assert what.startswith("a TensorFlow model (`TFAutoModelForSeq2SeqLM.from_pretrained(")
    assert "PyTorch training only" in advice
    assert script.model is None  # before: the README's t5-large, sized as a PyTorch fine-tune


def test_the_readme_launch_of_a_keras_script_gets_a_note_not_a_verdict(tmp_path: Path):
    write(tmp_path, {"examples/tensorflow/translation/run_translation.py": RUN_TRANSLATION,
                     "examples/tensorflow/translation/README.md": README})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="a10g", gpus=1, cache=False)
    found = [d for name in ("README.md", "run_translation.py")
             for d in Linter(settings).lint_path(tmp_path / "examples/tensorflow/translation" / name)
             if d.code.startswith("MEM")]
    assert [(d.code, Path(d.path).name) for d in found] == [("MEM003", "run_translation.py")]
    assert "a TensorFlow model" in found[0].message


def test_near_miss_a_pytorch_class_of_the_same_name_family_is_a_model():
    script = RUN_TRANSLATION.replace("TFAutoModelForSeq2SeqLM", "AutoModelForSeq2SeqLM")
    [facts] = facts_of(script, "run_translation.py")
    assert facts.unmodelled is None


def test_near_miss_an_output_record_of_another_framework_is_no_model():
    from memlint.python.library import is_model_loader, other_framework_model

    # distil-whisper's Flax distillation builds `FlaxBaseModelOutput(last_hidden_state=...)`
    assert other_framework_model("transformers.modeling_flax_outputs.FlaxBaseModelOutput") is None
    assert other_framework_model("transformers.FlaxWhisperForConditionalGeneration.from_pretrained") == "Flax"
    assert not is_model_loader("transformers.FlaxWhisperForConditionalGeneration.from_pretrained")
