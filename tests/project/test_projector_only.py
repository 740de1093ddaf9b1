"""A vision-language model's alignment stage trains its projector alone: the language model is
frozen (no gradients, no optimizer states), while its activations stay, since the loss's gradient
flows back through every block to the projector's output. Mantis's ``train_mllava.py`` states it by
freezing every parameter but ``multi_modal_projector`` under ``--do_pretrain``; estimated as a full
fine-tune of Llama-3-8B its runs got a MEM001 and a MEM002 at first contact, both wrong."""

from __future__ import annotations

from pathlib import Path

from memlint.estimate import estimate_training
from memlint.lint.engine import run_context
from memlint.project.project import Project
from memlint.project.settings import Settings

from tests.facts.facts_testing import dedent, write

TRAIN_PY = dedent('''
    from dataclasses import dataclass, field
    from typing import Optional

    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    from mymodels.llava import LlavaForConditionalGeneration


    @dataclass
    class ModelArguments:
        llm_backbone: Optional[str] = field(default="meta-llama/Meta-Llama-3-8B-Instruct")
        do_pretrain: Optional[bool] = field(default=False, metadata={"help": "train the projector only"})


    def load_model(model_args, training_args):
        llm = AutoModelForCausalLM.from_pretrained(model_args.llm_backbone, torch_dtype=torch.bfloat16)
        model = LlavaForConditionalGeneration(llm)
        if model_args.do_pretrain:
            for name, param in model.named_parameters():
                if any([x in name for x in {kept}]):
                    print("Tuning", name)
                else:
                    param.requires_grad = False
        return model


    def main():
        parser = transformers.HfArgumentParser((ModelArguments, transformers.TrainingArguments))
        model_args, training_args = parser.parse_args_into_dataclasses()
        model = load_model(model_args, training_args)
        trainer = transformers.Trainer(model=model, args=training_args)
        trainer.train()


    if __name__ == "__main__":
        main()
''')

LAUNCH = dedent('''
    #!/bin/bash
    torchrun --nproc_per_node 8 train.py \\
        --llm_backbone meta-llama/Meta-Llama-3-8B-Instruct \\
        --bf16 True \\
        --output_dir ckpt/pretrain \\
        --per_device_train_batch_size 8 \\
        --gradient_checkpointing True \\
        --model_max_length 2048 \\
        --do_pretrain {pretrain}
''')


def _run(tmp_path: Path, kept: str = '["multi_modal_projector"]', pretrain: str = "True"):
    write(tmp_path, {"train.py": TRAIN_PY.replace("{kept}", kept), "run.sh": LAUNCH.format(pretrain=pretrain)})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False, offline=True)
    [run] = Project(settings).runs_for(tmp_path / "run.sh", run_context(settings))
    return run


def _states_gib(run) -> float:
    budget = estimate_training(run.arch, run.setup)
    return sum(c.bytes for c in budget.components if "ptimizer" in c.label or "aster" in c.label) / 2**30


def test_freezing_all_but_the_projector_trains_the_projector_alone(tmp_path: Path):
    run = _run(tmp_path)
    assert run.plan.get("projector_only").value is True
    assert run.setup.trains_inputs and run.setup.trainable_params < 100_000_000
    # the projector's states: well under a GiB; as a full fine-tune of the 8B model, ~30 GiB
    assert _states_gib(run) < 1.0
    # the frozen blocks still keep their checkpointed inputs for the projector's gradient
    assert any("Activations" in c.label and c.bytes > 2**30 for c in estimate_training(run.arch, run.setup).components)


def test_the_stage_the_launch_does_not_turn_on_is_a_full_fine_tune(tmp_path: Path):
    run = _run(tmp_path, pretrain="False")
    assert run.plan.get("projector_only") is None
    assert _states_gib(run) > 20  # AdamW over 8B parameters


def test_a_trained_part_memlint_does_not_price_is_not_checked(tmp_path: Path):
    # Mantis's Qwen2-VL-VAE stage: every parameter but a new visual encoder's is frozen
    run = _run(tmp_path, kept='["vae_visual"]')
    assert run.setup is None
    assert "freezes the model it loads (`model except vae_visual`" in run.problem


def test_a_selection_naming_language_model_parameters_is_left_to_the_other_facts(tmp_path: Path):
    # the last block and the head train: part of the language model, not a projector stage
    run = _run(tmp_path, kept='["layers.31.", "lm_head"]')
    assert run.plan.get("projector_only") is None and run.setup is not None
