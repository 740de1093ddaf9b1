"""A script that freezes the model it loads and trains modules of its own on top (Medusa's
decoding heads, a probe on a frozen encoder): memlint's estimate is of the loaded model trained,
so no verdict of it describes the run. The freeze is named once, in the script, whatever command
runs it; a freeze undone for a part of the model (LLaVA's projector), an adapter on the frozen
model, or a frozen teacher beside the trained model are other runs, estimated as before."""

from __future__ import annotations

from memlint.lint.engine import Linter
from tests.facts.facts_testing import dedent
from tests.project.test_config_launchers import _project, _runs

TRAIN_HEADS = dedent('''
    from dataclasses import dataclass, field

    import torch
    import transformers
    from torch import nn

    from draft_heads.model import DraftHeadModel


    @dataclass
    class ModelArguments:
        model_name_or_path: str = field(default="Qwen/Qwen2.5-7B")


    @dataclass
    class TrainingArguments(transformers.TrainingArguments):
        num_heads: int = field(default=4, metadata={"help": "draft heads trained on the frozen model"})
        model_max_length: int = field(default=2048)


    def train():
        parser = transformers.HfArgumentParser((ModelArguments, TrainingArguments))
        model_args, training_args = parser.parse_args_into_dataclasses()
        model = transformers.AutoModelForCausalLM.from_pretrained(
            model_args.model_name_or_path, torch_dtype=torch.bfloat16
        )
        # the base model only feeds the heads
        for param in model.base_model.parameters():
            param.requires_grad = False
        heads = DraftHeadModel(model, num_heads=training_args.num_heads)
        trainer = transformers.Trainer(model=heads, args=training_args, train_dataset=load_dataset())
        trainer.train()


    if __name__ == "__main__":
        train()
''')

README = dedent('''
    # Draft heads

    Train four heads on a frozen Qwen2.5-7B, 8 GPUs:

    ```bash
    torchrun --nproc_per_node=8 train/train_heads.py --model_name_or_path Qwen/Qwen2.5-7B \\
        --bf16 True --output_dir out --per_device_train_batch_size 16 \\
        --model_max_length 4096 --num_heads 4 --deepspeed ds_zero2.json
    ```
''')

ZERO2 = '{"bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 2}, "train_micro_batch_size_per_gpu": "auto"}\n'


def _notes(settings, name):
    return [d for d in Linter(settings).lint_path(settings.root / name) if d.code.startswith("MEM")]


def test_heads_on_a_frozen_model_are_not_judged_as_the_model_trained(tmp_path):
    settings = _project(tmp_path, {"train/train_heads.py": TRAIN_HEADS, "README.md": README, "ds_zero2.json": ZERO2})
    # a 7B full fine-tune at 16 x 4096 tokens would be far over an H100: that is not this run
    assert [d.code for d in _notes(settings, "README.md")] == []
    assert [d.code for d in _notes(settings, "ds_zero2.json")] == []
    [note] = _notes(settings, "train/train_heads.py")
    assert note.code == "MEM003" and note.range.start.line == 28  # the freezing loop
    assert "freezes the model it loads (`model.base_model`" in note.message
    assert "trains modules the script adds" in note.message


def test_model_frozen_whole_with_requires_grad_(tmp_path):
    text = TRAIN_HEADS.replace("    for param in model.base_model.parameters():\n        param.requires_grad = False\n",
                               "    model.requires_grad_(False)\n")
    settings = _project(tmp_path, {"train/train_heads.py": text})
    [run] = _runs(settings, "train/train_heads.py")
    assert run.plan.value("frozen_model") == "model"
    assert run.problem is not None and "freezes the model it loads" in run.problem


def test_a_part_turned_back_on_an_adapter_or_a_frozen_teacher_are_estimated(tmp_path):
    projector = TRAIN_HEADS.replace(
        "    heads = DraftHeadModel",
        "    for param in model.lm_head.parameters():\n        param.requires_grad = True\n    heads = DraftHeadModel")
    adapter = TRAIN_HEADS.replace(
        "from torch import nn\n", "from peft import LoraConfig, get_peft_model\nfrom torch import nn\n").replace(
        "    heads = DraftHeadModel(model, num_heads=training_args.num_heads)\n",
        "    heads = get_peft_model(model, LoraConfig(r=16, target_modules=[\"q_proj\", \"v_proj\"]))\n")
    vision = TRAIN_HEADS.replace("model.base_model.parameters()", "model.vision_tower.parameters()")
    for name, text in (("projector.py", projector), ("adapter.py", adapter), ("vision.py", vision)):
        settings = _project(tmp_path / name[:-3], {name: text})
        [run] = _runs(settings, name)
        assert run.problem is None, (name, run.problem)
