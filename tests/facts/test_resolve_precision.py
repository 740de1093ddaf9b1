"""Precision as the framework executes it, decided in ``facts.resolve`` from what scripts state."""

from __future__ import annotations

import pytest
from facts_testing import dedent, write

from memlint.estimate import Precision
from memlint.lint.engine import run_context
from memlint.project.settings import Settings
from memlint.project.project import Project


def _precision(tmp_path, src: str) -> Precision:
    write(tmp_path, {"train.py": src})
    settings = Settings(root=tmp_path).with_overrides(cache=False)
    (run,) = Project(settings).runs_for(tmp_path / "train.py", run_context(settings))
    assert run.setup is not None, run.problem
    return run.setup.precision


LIGHTNING = dedent('''
    import lightning as L
    import torch
    from transformers import AutoModelForCausalLM

    class LitLM(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B-Instruct"{load})

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=3e-5)

    L.Trainer(precision={precision}{strategy}).fit(LitLM())
''')


@pytest.mark.parametrize(
    "load, precision, strategy, expected",
    [
        # "*-mixed" is autocast over the weights as loaded: a bf16 checkpoint stays bf16
        ("", '"bf16-mixed"', "", Precision.BF16),
        (", torch_dtype=torch.float32", '"bf16-mixed"', "", Precision.AMP_BF16),
        (", torch_dtype=torch.float32", "16", "", Precision.AMP_FP16),
        # "*-true" converts the module
        (", torch_dtype=torch.float32", '"bf16-true"', "", Precision.BF16),
        # "32-true" leaves the weights as loaded
        ("", '"32-true"', "", Precision.BF16),
        (", torch_dtype=torch.float32", '"32"', "", Precision.FP32),
        # under DeepSpeed, Lightning's mixed precision is DeepSpeed's half weights + fp32 master
        ("", '"16-mixed"', ', strategy="deepspeed_stage_3"', Precision.MIXED_FP16),
    ],
)
def test_lightning_precision(tmp_path, load, precision, strategy, expected):
    src = LIGHTNING.format(load=load, precision=precision, strategy=strategy)
    assert _precision(tmp_path, src) == expected


def test_hf_trainer_fp16_over_an_fp16_model_is_pure_half_precision(tmp_path):
    # The Trainer's GradScaler refuses fp16 gradients at the first step; until then every tensor
    # is fp16 -- no fp32 copy of the weights exists to make it mixed precision.
    src = dedent('''
        import torch
        from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

        model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B-Instruct", torch_dtype=torch.float16)
        Trainer(model=model, args=TrainingArguments(output_dir="o", fp16=True)).train()
    ''')
    assert _precision(tmp_path, src) == Precision.FP16


def test_hf_trainer_bf16_over_an_fp32_model_is_autocast(tmp_path):
    src = dedent('''
        import torch
        from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

        model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B-Instruct", torch_dtype=torch.float32)
        Trainer(model=model, args=TrainingArguments(output_dir="o", bf16=True)).train()
    ''')
    assert _precision(tmp_path, src) == Precision.AMP_BF16


FSDP_SCRIPT = dedent('''
    from dataclasses import dataclass, field

    import torch
    import transformers
    from transformers import Trainer


    @dataclass
    class ModelArguments:
        model_name_or_path: str = field(default="huggyllama/llama-7b")
        use_lora: bool = False


    def train():
        parser = transformers.HfArgumentParser((ModelArguments, transformers.TrainingArguments))
        model_args, training_args = parser.parse_args_into_dataclasses()
        model = transformers.AutoModelForCausalLM.from_pretrained(
            model_args.model_name_or_path, torch_dtype=torch.bfloat16
        )
        if model_args.use_lora:
            from peft import LoraConfig, get_peft_model

            model = get_peft_model(model, LoraConfig(r=16, target_modules=["q_proj", "v_proj"]))
        Trainer(model=model, args=training_args).train()


    if __name__ == "__main__":
        train()
''')

FSDP_LAUNCH = dedent('''
    #!/bin/bash
    torchrun --nproc_per_node={gpus} train.py \\
        --output_dir out \\
        --bf16 True \\
        --per_device_train_batch_size 1 {extra}
''')


def _launched_precision(tmp_path, gpus: int, extra: str) -> tuple[Precision, list[str]]:
    write(tmp_path, {"train.py": FSDP_SCRIPT, "run.sh": FSDP_LAUNCH.format(gpus=gpus, extra=extra)})
    settings = Settings(root=tmp_path).with_overrides(cache=False)
    (run,) = Project(settings).runs_for(tmp_path / "run.sh", run_context(settings))
    assert run.setup is not None, run.problem
    return run.setup.precision, run.assumptions


@pytest.mark.parametrize("gpus", [1, 8])
def test_fsdp_mixed_precision_upcasts_half_weights_to_fp32(tmp_path, gpus):
    # Accelerate's FSDP prepare_model upcasts trainable bf16 parameters to fp32 when mixed
    # precision is on: the shards, gradients and Adam states are fp32, also on one process.
    precision, notes = _launched_precision(tmp_path, gpus, '--fsdp "full_shard auto_wrap"')
    assert precision == Precision.AMP_BF16
    assert any("upcasts the bf16 weights to fp32" in n for n in notes)


def test_fsdp_without_mixed_precision_or_with_an_adapter_keeps_half_weights(tmp_path):
    assert _launched_precision(tmp_path, 8, '--fsdp "full_shard auto_wrap" --bf16 False')[0] == Precision.BF16
    # a LoRA adapter leaves the base frozen: nothing to upcast but the (already fp32) adapters
    assert _launched_precision(tmp_path, 8, '--fsdp full_shard --use_lora True')[0] == Precision.BF16
    # no FSDP: the Trainer's bf16 over bf16 weights is pure bf16
    assert _launched_precision(tmp_path, 8, "")[0] == Precision.BF16
