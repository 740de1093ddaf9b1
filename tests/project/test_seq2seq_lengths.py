"""An encoder-decoder's inputs and labels truncated to lengths of their own (run_summarization's
``max_source_length`` / ``max_target_length``): the decoder runs over the labels only. Priced at the
inputs' length, a FLAN-T5-large run with 16-token labels was estimated at 138.5 GiB instead of
~55 GiB (AgentTuning's ScienceWorld agent, a false MEM001 at first contact)."""

from __future__ import annotations

from pathlib import Path

from memlint.catalog.models import resolve_model
from memlint.estimate.training import estimate_training
from memlint.lint.engine import run_context
from memlint.project.project import Project
from memlint.project.settings import Settings

from tests.facts.facts_testing import dedent, write

# a run_summarization.py-style script, as projects copy it
TRAIN_PY = dedent('''
    from dataclasses import dataclass, field
    from typing import Optional

    import datasets
    from transformers import (AutoModelForSeq2SeqLM, AutoTokenizer, DataCollatorForSeq2Seq, HfArgumentParser,
                              Seq2SeqTrainer, Seq2SeqTrainingArguments)


    @dataclass
    class ModelArguments:
        model_name_or_path: str = field(metadata={"help": "Path to pretrained model or model identifier"})


    @dataclass
    class DataTrainingArguments:
        train_file: Optional[str] = field(default=None)
        max_source_length: Optional[int] = field(default=1024)
        max_target_length: Optional[int] = field(default=128)
        val_max_target_length: Optional[int] = field(default=None)


    def main():
        parser = HfArgumentParser((ModelArguments, DataTrainingArguments, Seq2SeqTrainingArguments))
        model_args, data_args, training_args = parser.parse_args_into_dataclasses()
        tokenizer = AutoTokenizer.from_pretrained(model_args.model_name_or_path)
        model = AutoModelForSeq2SeqLM.from_pretrained(model_args.model_name_or_path)
        raw = datasets.load_dataset("json", data_files={"train": data_args.train_file})
        max_target_length = data_args.max_target_length

        def preprocess(examples):
            model_inputs = tokenizer(examples["input"], max_length=data_args.max_source_length, truncation=True)
            with tokenizer.as_target_tokenizer():
                labels = tokenizer(examples["target"], max_length=max_target_length, truncation=True)
            model_inputs["labels"] = labels["input_ids"]
            return model_inputs

        train_dataset = raw["train"].map(preprocess, batched=True)
        if training_args.do_eval:
            max_target_length = data_args.val_max_target_length
        trainer = Seq2SeqTrainer(model=model, args=training_args, train_dataset=train_dataset,
                                 data_collator=DataCollatorForSeq2Seq(tokenizer, model=model))
        trainer.train()


    if __name__ == "__main__":
        main()
''')

LAUNCH = dedent('''
    #!/bin/bash
    deepspeed --num_gpus 8 train.py \\
        --model_name_or_path {model} \\
        --train_file data/train.jsonl \\
        --output_dir ckpt/agent \\
        --do_train \\
        --max_source_length 1024 \\
        --max_target_length 16 \\
        --per_device_train_batch_size 8 \\
        --learning_rate 1e-4
''')


def _run(tmp_path: Path, model: str = "google/flan-t5-large", launch: str = LAUNCH):
    write(tmp_path, {"train.py": TRAIN_PY, "run.sh": launch.format(model=model)})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False, offline=True)
    [run] = Project(settings).runs_for(tmp_path / "run.sh", run_context(settings))
    assert run.setup is not None, run.problem
    return run


def test_the_decoder_runs_over_the_labels_the_launch_truncates_to(tmp_path: Path):
    run = _run(tmp_path)
    assert (run.setup.seq_len, run.setup.decoder_len) == (1024, 16)
    arch = resolve_model("google/flan-t5-large", offline=True)
    peak = estimate_training(arch, run.setup).peak_bytes / 2**30
    # the encoder over 8 x 1024 tokens (fp32, no checkpointing) is most of it; the decoder over
    # 8 x 16 labels adds little. Priced at the inputs' length it was 138.9 GiB
    assert 40 < peak < 70


def test_labels_of_an_unread_length_keep_the_decoder_as_long_as_the_inputs(tmp_path: Path):
    launch = "".join(line for line in LAUNCH.splitlines(keepends=True) if "max_target_length" not in line)
    run = _run(tmp_path, launch=launch)
    # the labels' limit is then a local the script reassigns under `do_eval`, which memlint does not
    # evaluate: the decoder is priced as long as the inputs (the larger figure), as before
    assert (run.setup.seq_len, run.setup.decoder_len) == (1024, 0)


def test_a_decoder_only_model_ignores_the_labels_length(tmp_path: Path):
    run = _run(tmp_path, model="Qwen/Qwen2.5-0.5B")
    assert run.setup.decoder_len == 0


def test_the_estimate_prices_the_decoder_by_its_own_length():
    # measured by `memlint trace` (fake tensors, PyTorch's memory tracker) in
    # tests/calibration/results.json; here only the direction: fewer label positions, less memory,
    # and labels as long as the inputs are the equal-length estimate
    from dataclasses import replace

    from memlint.estimate.policy import Precision
    from memlint.estimate.setup import TrainingSetup

    arch = resolve_model("google/flan-t5-base", offline=True)
    base = TrainingSetup(micro_batch=8, seq_len=512, precision=Precision.BF16)
    same = estimate_training(arch, base).peak_bytes
    assert estimate_training(arch, replace(base, decoder_len=512)).peak_bytes == same
    short = estimate_training(arch, replace(base, decoder_len=64)).peak_bytes
    long = estimate_training(arch, replace(base, decoder_len=1024)).peak_bytes
    assert short < same < long


def test_the_examples_json_or_command_line_parse_keeps_the_field_defaults(tmp_path: Path):
    # transformers' examples parse a lone .json argument with parse_json_file and anything else from
    # the command line: `data_args` is assigned twice, to the same classes either way. Read as
    # unknown, the inputs' default length was lost and a T5-large translation run was priced at the
    # assumed 2048 tokens (a false MEM001, chatglm3-qlora-advertisegen's run_translation.py)
    parse = "    model_args, data_args, training_args = parser.parse_args_into_dataclasses()\n"
    assert parse in TRAIN_PY
    either = ("    if len(sys.argv) == 2 and sys.argv[1].endswith(\".json\"):\n"
              "        model_args, data_args, training_args = parser.parse_json_file(\n"
              "            json_file=os.path.abspath(sys.argv[1]))\n"
              "    else:\n    " + parse)
    script = "import os\nimport sys\n" + TRAIN_PY.replace(parse, either)
    launch = "".join(line for line in LAUNCH.splitlines(keepends=True) if "_length" not in line)
    write(tmp_path, {"train.py": script, "run.sh": launch.format(model="google/flan-t5-large")})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False, offline=True)
    [run] = Project(settings).runs_for(tmp_path / "run.sh", run_context(settings))
    assert run.setup is not None, run.problem
    assert run.setup.seq_len == 1024
    # located at the field's default (positions count lines from 1)
    assert run.plan.get("seq_len").origin.range.start.line == script.splitlines().index(
        "    max_source_length: Optional[int] = field(default=1024)") + 1
