"""A script the README names as a stand-in for another in its documented command ("train.py can be
replaced by train_qlora.py for 4-bit fine-tuning", "use `train_qlora.py` instead of `train.py`")
runs under that command with its own name: judged on the command's arguments, not on its defaults
(dvlab-research/LongLoRA: ``supervised-fine-tune.py can be replaced by supervised-fine-tune-qlora.py``)."""

from __future__ import annotations

import pytest

from tests.facts.facts_testing import dedent
from tests.project.test_config_launchers import _memory, _project, _runs

# a QLoRA fine-tuning script whose defaults are a 32k context and TrainingArguments' micro-batch 8
TRAIN_QLORA = dedent('''
    from dataclasses import dataclass, field

    import torch
    import transformers
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig, Trainer


    @dataclass
    class ModelArguments:
        model_name_or_path: str = field(default="meta-llama/Llama-2-7b-hf")


    @dataclass
    class TrainingArguments(transformers.TrainingArguments):
        model_max_length: int = field(default=32768, metadata={"help": "Maximum sequence length."})


    def train():
        parser = transformers.HfArgumentParser((ModelArguments, TrainingArguments))
        model_args, training_args = parser.parse_args_into_dataclasses()
        model = AutoModelForCausalLM.from_pretrained(
            model_args.model_name_or_path,
            quantization_config=BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                                   bnb_4bit_compute_dtype=torch.bfloat16),
            torch_dtype=torch.bfloat16,
        )
        model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"]))
        trainer = Trainer(model=model, args=training_args, train_dataset=load_data(training_args))
        trainer.train()


    if __name__ == "__main__":
        train()
''')

TRAIN = TRAIN_QLORA.replace("quantization_config=BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type=\"nf4\",\n"
                            "                                               bnb_4bit_compute_dtype=torch.bfloat16),\n", "")

COMMAND = dedent('''
    ```
    torchrun --nproc_per_node=8 train.py \\
        --model_name_or_path meta-llama/Llama-2-7b-hf \\
        --bf16 True \\
        --output_dir checkpoints \\
        --model_max_length 8192 \\
        --per_device_train_batch_size 1 \\
        --gradient_accumulation_steps 8 \\
        --gradient_checkpointing True
    ```
''')


def readme(sentence: str) -> str:
    return f"# Long-context fine-tuning\n\n## Fine-tuning\n{COMMAND}\n{sentence}\n"


@pytest.mark.parametrize("sentence", [
    "Note that train.py can be replaced by train_qlora.py if you want 4-bit fine-tuning.",
    "For 4-bit fine-tuning, use `train_qlora.py` instead of `train.py`.",
    "To save memory, replace `train.py` with `train_qlora.py` in the command above.",
])
def test_the_stand_in_runs_under_the_documented_command(tmp_path, sentence):
    settings = _project(tmp_path, {"README.md": readme(sentence), "train.py": TRAIN, "train_qlora.py": TRAIN_QLORA})
    [run] = _runs(settings, "train_qlora.py")
    assert run.plan.value("micro_batch") == 1 and run.plan.value("seq_len") == 8192
    assert _memory(settings, "train_qlora.py") == []  # its defaults (8 x 32,768 tokens) are not the run
    [documented] = _runs(settings, "train.py")  # the documented script keeps its own run
    assert documented.plan.value("micro_batch") == 1


def test_without_the_sentence_the_other_script_is_judged_on_its_defaults(tmp_path):
    settings = _project(tmp_path, {"README.md": readme("QLoRA is supported too."), "train.py": TRAIN,
                                   "train_qlora.py": TRAIN_QLORA})
    [diagnostic] = _memory(settings, "train_qlora.py")
    assert "a sample of 32768 tokens" in diagnostic.message  # the defaults are judged
