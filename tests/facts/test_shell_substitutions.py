"""A ``$(...)`` or ``$((...))`` written with spaces inside is one word of its command, as the shell
reads it. dart-math's launch passes ``--num_cpu_threads_per_process $(($(nproc) / 2 / n_gpus))``
before its script: split at the spaces, the lone ``/`` read as the launched script, so neither
``pipeline/train.py`` nor the ZeRO-3 config reached the run, and memlint judged an 8B run under
plain data parallelism."""

from __future__ import annotations

from memlint.facts.shell_words import commands

from tests.facts.facts_testing import dedent
from tests.project.test_config_launchers import _memory, _project, _runs

LAUNCH = dedent('''
    #! /bin/bash
    model_path="meta-llama/Meta-Llama-3-8B"
    gpu_ids="0,1,2,3,4,5,6,7"
    bs=64
    n_gpus=$(echo "${gpu_ids}" | awk -F, '{print NF}')
    train_bs_per_gpu=$((bs / n_gpus))
    deepspeed_config_file="cfgs/deepspeed/zero-stage3.conf"

    accelerate launch \\
        --mixed_precision bf16 \\
        --num_processes "${n_gpus}" \\
        --num_cpu_threads_per_process $(($(nproc) / 2 / n_gpus)) \\
        --use_deepspeed \\
        --deepspeed_config_file "${deepspeed_config_file}" \\
        pipeline/train.py \\
        --model_name_or_path "${model_path}" \\
        --model_max_length 4096 \\
        --per_device_train_batch_size 2 \\
        --gradient_checkpointing True \\
        --tokenized_cache_home "$(realpath data/cache-tokenized)" \\
        --bf16 True \\
        --deepspeed "${deepspeed_config_file}" \\
        --output_dir "models/out"
''')

TRAIN = dedent('''
    from dataclasses import dataclass, field

    import torch
    import transformers


    @dataclass
    class ModelArguments:
        model_name_or_path: str = field(default="meta-llama/Llama-2-7b-hf")


    @dataclass
    class TrainingArguments(transformers.TrainingArguments):
        model_max_length: int = field(default=2048)
        tokenized_cache_home: str = field(default="data/cache")


    def train():
        parser = transformers.HfArgumentParser((ModelArguments, TrainingArguments))
        model_args, training_args = parser.parse_args_into_dataclasses()
        model = transformers.AutoModelForCausalLM.from_pretrained(
            model_args.model_name_or_path, torch_dtype=torch.bfloat16)
        tokenizer = transformers.AutoTokenizer.from_pretrained(
            model_args.model_name_or_path, model_max_length=training_args.model_max_length)
        trainer = transformers.Trainer(model=model, tokenizer=tokenizer, args=training_args)
        trainer.train()


    if __name__ == "__main__":
        train()
''')

ZERO3 = '{"bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": "auto"}\n'


def test_a_substitution_with_spaces_is_one_word():
    *_, launch = commands(LAUNCH)
    words = [w.text for w in launch.words]
    at = words.index("--num_cpu_threads_per_process")
    assert words[at + 1] == "$(($(nproc) / 2 / n_gpus))"
    assert words[at + 2] == "--use_deepspeed"
    assert "pipeline/train.py" in words and "/" not in words
    # the word keeps its exact place in the file
    word = launch.words[at + 1]
    assert LAUNCH[word.start:word.end] == "$(($(nproc) / 2 / n_gpus))"
    # a command substitution with a pipe inside stays one word of its assignment
    assert commands(LAUNCH)[3].words[0].raw == "n_gpus=$(echo \"${gpu_ids}\" | awk -F, '{print NF}')"


def test_an_unclosed_substitution_keeps_its_words():
    [command] = commands("echo $(foo bar\n")
    assert [w.text for w in command.words] == ["echo", "$(foo", "bar"]


def test_the_launch_runs_its_script_under_its_deepspeed_config(tmp_path):
    settings = _project(tmp_path, {"scripts/train-single-node.sh": LAUNCH, "pipeline/train.py": TRAIN,
                                   "cfgs/deepspeed/zero-stage3.conf": ZERO3})
    [run] = _runs(settings, "scripts/train-single-node.sh")
    assert run.plan.value("zero_stage") == 3
    assert run.plan.value("model") == "meta-llama/Meta-Llama-3-8B"
    assert run.plan.value("micro_batch") == 2
    assert run.plan.value("seq_len") == 4096
    assert _memory(settings, "scripts/train-single-node.sh") == []  # ZeRO-3 over 8 GPUs fits
