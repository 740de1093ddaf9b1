"""A command a README or docstring shows with ``<placeholders>`` (stanford_alpaca's "Addressing OOM":
``--master_port=<your_random_port>``, ``--model_name_or_path <your_path_to_hf_converted_llama_ckpt>``)
is read: a placeholder is a word to fill in, not a shell redirection. The DeepSpeed config it names
says its model is a placeholder and where it is written, not that no launcher uses it."""

from __future__ import annotations

from pathlib import Path

from facts_testing import dedent, facts_of, write

from memlint.lint.engine import Linter
from memlint.project.settings import Settings

README = dedent('''
    ### Addressing OOM

    - DeepSpeed stage-3 (with offload) can at times be more memory efficient than FSDP with offload:
        ```bash
        pip install deepspeed
        torchrun --nproc_per_node=4 --master_port=<your_random_port> train.py \\
            --model_name_or_path <your_path_to_hf_converted_llama_ckpt_and_tokenizer> \\
            --data_path ./alpaca_data.json \\
            --bf16 True \\
            --output_dir <your_output_dir> \\
            --per_device_train_batch_size 4 \\
            --gradient_accumulation_steps 8 \\
            --deepspeed "./configs/default_offload_opt_param.json" \\
            --tf32 True
        ```
''')

TRAIN = dedent('''
    from dataclasses import dataclass, field
    from typing import Optional

    import transformers


    @dataclass
    class ModelArguments:
        model_name_or_path: Optional[str] = field(default="facebook/opt-125m")


    @dataclass
    class TrainingArguments(transformers.TrainingArguments):
        model_max_length: int = field(default=512)


    def train():
        parser = transformers.HfArgumentParser((ModelArguments, TrainingArguments))
        model_args, training_args = parser.parse_args_into_dataclasses()
        model = transformers.AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path)
        trainer = transformers.Trainer(model=model, args=training_args)
        trainer.train()


    if __name__ == "__main__":
        train()
''')

OFFLOAD = """{
  "bf16": {"enabled": "auto"},
  "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
  "zero_optimization": {
    "stage": 3,
    "offload_optimizer": {"device": "cpu", "pin_memory": true},
    "offload_param": {"device": "cpu", "pin_memory": true},
    "stage3_gather_16bit_weights_on_model_save": false
  },
  "gradient_accumulation_steps": "auto",
  "train_batch_size": "auto",
  "train_micro_batch_size_per_gpu": "auto"
}
"""


def test_a_placeholder_is_a_word_of_the_command():
    [launch] = facts_of(README, "README.md")
    assert launch.launches.value == "train.py"
    assert launch.cli_args["model_name_or_path"].value == "<your_path_to_hf_converted_llama_ckpt_and_tokenizer>"
    assert launch.cli_args["output_dir"].value == "<your_output_dir>"
    assert [r.value for r in launch.references] == ["./configs/default_offload_opt_param.json"]
    assert launch.world_size.value == 4


def test_the_config_says_its_model_is_a_placeholder_and_where(tmp_path: Path):
    write(tmp_path, {"README.md": README, "train.py": TRAIN, "configs/default_offload_opt_param.json": OFFLOAD})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", cache=False)
    [note] = [d for d in Linter(settings).lint_path(tmp_path / "configs/default_offload_opt_param.json")
              if d.code.startswith("MEM")]
    assert note.code == "MEM003"
    assert "'<your_path_to_hf_converted_llama_ckpt_and_tokenizer>' looks like a placeholder" in note.message
    assert "README.md:7" in note.message and "--model_name_or_path" in note.message
    assert "used by no launcher" not in note.message


def test_a_real_redirection_in_a_launcher_script_is_still_one():
    [launch] = facts_of("torchrun --nproc_per_node 2 train.py --model_name_or_path gpt2 < /dev/null > log.txt\n",
                        "run.sh")
    assert launch.cli_args["model_name_or_path"].value == "gpt2"
    assert not any("log.txt" in v.value for v in launch.cli_args.values())


# LongLoRA README.md, "Supervised Fine-tuning" (abridged): the model is a word to fill in
LONG_README = dedent('''
    ### Supervised Fine-tuning
    ```
    torchrun --nproc_per_node=8 supervised-fine-tune.py  \\
            --model_name_or_path path_to_Llama2_chat_models \\
            --bf16 True \\
            --output_dir path_to_saving_checkpoints       \\
            --model_max_length 16384 \\
            --per_device_train_batch_size 1     \\
            --gradient_accumulation_steps 8     \\
            --deepspeed "ds_configs/stage2.json" \\
            --tf32 True
    ```
''')

STAGE2 = '{"zero_optimization": {"stage": 2}, "bf16": {"enabled": "auto"}, ' \
         '"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto"}\n'


def _script_memory(tmp_path: Path, readme: str) -> list:
    write(tmp_path, {"README.md": readme, "supervised-fine-tune.py": TRAIN.replace(
        "default=512", "default=8192 * 4").replace("facebook/opt-125m", "EleutherAI/pythia-1.4b-deduped"),
        "ds_configs/stage2.json": STAGE2})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False)
    return [d for d in Linter(settings).lint_path(tmp_path / "supervised-fine-tune.py") if d.code.startswith("MEM")]


def test_a_script_whose_documented_model_is_a_placeholder_is_not_judged_on_its_defaults(tmp_path: Path):
    [note] = _script_memory(tmp_path, LONG_README)
    assert note.code == "MEM003"
    assert "'path_to_Llama2_chat_models' looks like a placeholder" in note.message
    assert "README.md:4" in note.message


def test_a_documented_model_id_is_the_scripts_run(tmp_path: Path):
    readme = LONG_README.replace("path_to_Llama2_chat_models", "meta-llama/Llama-2-7b-chat-hf")
    findings = _script_memory(tmp_path, readme)
    assert [d.code for d in findings if d.code == "MEM003"] == []
    # micro-batch 1 under ZeRO-2 of the README's command, not the defaults' 8 x 32768 tokens
    assert not any("pythia" in d.message or "micro-batch 8" in d.message for d in findings)


# Video-ChatGPT docs/train_video_chatgpt.md (abridged): placeholders written as words, one with
# backquotes in it; each is one value to fill in, and the options after them are still read
VIDEO_DOC = dedent('''
    ## Train Video-ChatGPT

    Train on 8 A100 40GB GPUs using the following command,
    ```shell
    torchrun --nproc_per_node=8 --master_port 29001 video_chatgpt/train/train_mem.py \\
              --model_name_or_path <path to LLaVA-7B-Lightening-v-1-1 model> \\
              --version v1 \\
              --data_path <path to the video_chatgpt using `convert_instruction_json_to_training_format.py` script.> \\
              --bf16 True \\
              --output_dir ./Video-ChatGPT_7B-1.1_Checkpoints \\
              --per_device_train_batch_size 4
    ```
''')


def test_a_placeholder_written_as_words_is_one_word_of_the_command():
    [launch] = facts_of(VIDEO_DOC, "docs/train_video_chatgpt.md")
    assert launch.cli_args["model_name_or_path"].value == "<path to LLaVA-7B-Lightening-v-1-1 model>"
    assert launch.cli_args["data_path"].value.startswith("<path to the video_chatgpt using `convert_")
    assert launch.cli_args["version"].value == "v1"
    assert launch.cli_args["per_device_train_batch_size"].value == "4"


def test_the_script_of_a_command_with_a_placeholder_in_words_says_so(tmp_path: Path):
    write(tmp_path, {"docs/train_video_chatgpt.md": VIDEO_DOC,
                     "video_chatgpt/train/train_mem.py": TRAIN.replace("default=512", "default=2048")})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False, offline=True)
    [note] = [d for d in Linter(settings).lint_path(tmp_path / "video_chatgpt/train/train_mem.py")
              if d.code.startswith("MEM")]
    assert note.code == "MEM003"
    assert "'<path to LLaVA-7B-Lightening-v-1-1 model>' looks like a placeholder, not a model" in note.message
    assert "unknown model" not in note.message and "Did you mean" not in note.message


# InternLM-XComposer-2.0 finetune/finetune.sh (abridged): the model is a description to replace
XCOMPOSER_SH = dedent('''
    #!/bin/bash
    export CUDA_DEVICE_MAX_CONNECTIONS=1
    DIR=`pwd`

    # export MODEL="internlm/internlm-xcomposer2-7b"
    export MODEL="model name or path"
    export DATA="path of data"

    GPUS_PER_NODE=8
    DISTRIBUTED_ARGS="
        --nproc_per_node $GPUS_PER_NODE \\
        --master_port 6001
    "

    torchrun $DISTRIBUTED_ARGS finetune.py \\
        --model_name_or_path $MODEL \\
        --data_path $DATA \\
        --bf16 True \\
        --output_dir output/finetune \\
        --per_device_train_batch_size 1 \\
        --gradient_accumulation_steps 8 \\
        --max_length 4096 \\
        --deepspeed ds_config_zero2.json \\
        --gradient_checkpointing True
''')


def test_a_launchers_model_written_as_words_gets_the_placeholder_note(tmp_path: Path):
    write(tmp_path, {"finetune.sh": XCOMPOSER_SH, "finetune.py": TRAIN, "ds_config_zero2.json": STAGE2})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False, offline=True)
    notes = [d for d in Linter(settings).lint_path(tmp_path / "finetune.sh") if d.code.startswith("MEM")]
    assert [d.code for d in notes] == ["MEM003"]
    assert "'model name or path' looks like a placeholder, not a model" in notes[0].message
    assert "unknown model" not in notes[0].message and "Did you mean" not in notes[0].message


DEEPSPEED_TRAIN = dedent('''
    import argparse
    import json

    import deepspeed
    from transformers import AutoModelForCausalLM


    def parse_args():
        parser = argparse.ArgumentParser()
        parser.add_argument("--model-path", type=str)
        parser.add_argument("--deepspeed-config-path", type=str)
        parser = deepspeed.add_config_arguments(parser)
        return parser.parse_args()


    def main():
        args = parse_args()
        model = AutoModelForCausalLM.from_pretrained(args.model_path)
        config = json.load(open(args.deepspeed_config_path, "r"))
        engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
        for batch in range(10):
            loss = engine(batch).loss
            engine.backward(loss)
            engine.step()


    if __name__ == "__main__":
        main()
''')

VARIABLE_README = dedent('''
    # Fine-tuning

    ```
    deepspeed train.py \\
        --model-path $MIXTRAL_HUGGINGFACE_PATH \\
        --deepspeed-config-path ./deepspeed_config.json
    ```
''')


def test_a_documented_command_passing_the_model_as_a_variable_is_named_in_the_note(tmp_path: Path):
    """Mixtral-Train's README passes ``--model-path $MIXTRAL_HUGGINGFACE_PATH``: the script's note
    says that command passes a value memlint cannot read, not that no command passes it."""
    write(tmp_path, {"train.py": DEEPSPEED_TRAIN, "README.md": VARIABLE_README,
                     "deepspeed_config.json": '{"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 3}}\n'})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False, offline=True)
    [note] = [d for d in Linter(settings).lint_path(tmp_path / "train.py") if d.code == "MEM003"]
    assert "the command at README.md:5 passes `--model-path` a value memlint cannot read" in note.message
    assert "no launcher" not in note.message
