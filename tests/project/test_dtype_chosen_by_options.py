"""A training script that hands its load dtype to a model class of its own project, picking it
with a helper that reads the precision options (GritLM's ``run.py``: ``def args_to_dtype(args):
if args.bf16: return torch.bfloat16`` ... ``return torch.float32``, then ``GritLMTrainModel(
model_name_or_path=..., torch_dtype=args_to_dtype(training_args))``, whose constructor calls
``from_pretrained(..., **kwargs)``). A launch with ``--bf16`` loads bf16 weights; under FSDP with
mixed precision Accelerate upcasts them to fp32 only from 0.30.0 on, so a project pinning an
earlier release trains bf16 shards, gradients and optimizer states."""

from __future__ import annotations

from pathlib import Path

from memlint.estimate import Precision, Sharding

from tests.facts.facts_testing import checked_project, dedent, only_run

MODEL_PY = dedent('''
    import torch
    from transformers import AutoModel


    class EmbeddingModel(torch.nn.Module):
        """Mean-pooled embeddings of a decoder, trained with a contrastive loss."""

        def __init__(self, model_name_or_path: str, temperature: float = 0.02, **kwargs):
            super().__init__()
            self.model = AutoModel.from_pretrained(model_name_or_path, **kwargs)
            self.temperature = temperature
''')

TRAIN_PY = dedent('''
    from dataclasses import dataclass, field

    import torch
    from transformers import HfArgumentParser, Trainer, TrainingArguments

    from .modeling import EmbeddingModel


    @dataclass
    class ModelArguments:
        model_name_or_path: str = field(default=None)
        temperature: float = field(default=0.02)


    def args_to_dtype(args):
        """The dtype the weights load in: the training precision's."""
        if args.bf16: return torch.bfloat16
        if args.fp16:
            return torch.float16
        return torch.float32


    def main():
        parser = HfArgumentParser((ModelArguments, TrainingArguments))
        model_args, training_args = parser.parse_args_into_dataclasses()
        model = EmbeddingModel(
            model_name_or_path=model_args.model_name_or_path,
            temperature=model_args.temperature,
            torch_dtype=args_to_dtype(training_args),
        )
        Trainer(model=model, args=training_args).train()


    if __name__ == "__main__":
        main()
''')

FSDP_YAML = dedent('''
    compute_environment: LOCAL_MACHINE
    distributed_type: FSDP
    fsdp_config:
      fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
      fsdp_sharding_strategy: FULL_SHARD
      fsdp_transformer_layer_cls_to_wrap: MistralDecoderLayer
    mixed_precision: bf16
    num_machines: 1
    num_processes: 8
''')

LAUNCH = dedent('''
    #!/bin/bash
    accelerate launch --config_file configs/fsdp.yaml -m embed.train \\
        --model_name_or_path mistralai/Mistral-7B-v0.1 \\
        --per_device_train_batch_size 4 \\
        --gradient_checkpointing \\
        --output_dir out{precision}
''')


EMBED_PACKAGE = {"embed/__init__.py": "", "embed/modeling.py": MODEL_PY, "embed/train.py": TRAIN_PY}


def _run(tmp_path: Path, accelerate: str, precision: str = " \\\n    --bf16"):
    requirements = f"accelerate=={accelerate}\ntransformers==4.37.2\ntorch\n"
    files = {**EMBED_PACKAGE, "requirements.txt": requirements, "configs/fsdp.yaml": FSDP_YAML,
             "launch.sh": LAUNCH.format(precision=precision)}
    return only_run(checked_project(tmp_path, files), "launch.sh")


def test_the_helper_picks_bf16_for_a_bf16_launch_and_old_accelerate_keeps_it(tmp_path: Path):
    run = _run(tmp_path, "0.26.1")
    assert run.plan.value("load_dtype") == "bf16"
    assert run.setup.sharding is Sharding.FSDP_FULL
    assert run.setup.precision is Precision.BF16  # bf16 shards, gradients and AdamW states


def test_accelerate_from_030_upcasts_the_bf16_shards(tmp_path: Path):
    run = _run(tmp_path, "0.34.2")
    assert run.plan.value("load_dtype") == "bf16"
    assert run.setup.precision is Precision.AMP_BF16  # fp32 shards under bf16 autocast


def test_without_a_precision_option_the_helper_loads_fp32(tmp_path: Path):
    run = _run(tmp_path, "0.26.1", precision="")
    load = run.plan.get("load_dtype")
    assert load is not None and load.value == "fp32" and load.origin is not None
    assert load.origin.path.endswith("train.py")
