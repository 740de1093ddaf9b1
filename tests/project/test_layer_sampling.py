"""LISA (layer-wise importance sampling): every few steps a callback freezes every decoder block
and unfreezes N sampled ones; the embeddings and the head always train. Only those hold gradients;
the optimizer, built over every parameter before the first switch, keeps the states of each block
it has stepped (OptimalScale/LMFlow's ``--use_lisa 1 --lisa_activated_layers N``, Axolotl's
``lisa_n_layers`` with ``lisa_step_interval``).

And a bare ``python train.py`` launch of a Trainer script runs one process: transformers' Trainer
spreads it over the GPUs it sees with nn.DataParallel, whose GPU 0 holds the gradients and the
optimizer states with no DDP buckets -- judged as one GPU, not as DDP on ``--gpus``."""

from __future__ import annotations

import pytest

from memlint.catalog.models import resolve
from memlint.estimate import TrainingSetup, estimate_training
from memlint.estimate.policy import Optimizer, Precision
from tests.facts.facts_testing import dedent
from tests.project.test_config_launchers import _memory, _project, _runs

# a fine-tuning script in LMFlow's manner: its own TrainingArguments subclass with LISA's switches
# and the layer-switching callback, which the Trainer calls before every step
FINETUNE = dedent('''
    from dataclasses import dataclass, field

    import numpy as np
    import transformers
    from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainerCallback


    @dataclass
    class ModelArguments:
        model_name_or_path: str = field(default=None)


    @dataclass
    class FinetunerArguments(transformers.TrainingArguments):
        block_size: int = field(default=512)
        use_lisa: bool = field(default=False, metadata={"help": "whether to use LISA training strategy."})
        lisa_activated_layers: int = field(default=2, metadata={"help": "the number of activated layers in LISA."})
        lisa_interval_steps: int = field(default=20)


    class DynamicLayerActivationCallback(TrainerCallback):
        def __init__(self, n_layers, interval_steps, model):
            self.n_layers, self.interval_steps, self.layers = n_layers, interval_steps, model.model.layers

        def on_step_begin(self, args, state, control, **kwargs):
            if state.global_step % self.interval_steps == 0:
                for layer in self.layers:
                    layer.requires_grad_(False)
                for index in np.random.choice(len(self.layers), self.n_layers, replace=False):
                    self.layers[index].requires_grad_(True)


    def main():
        model_args, training_args = HfArgumentParser((ModelArguments, FinetunerArguments)).parse_args_into_dataclasses()
        model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path, torch_dtype="bfloat16")
        callbacks = []
        if training_args.use_lisa:
            callbacks.append(DynamicLayerActivationCallback(training_args.lisa_activated_layers,
                                                            training_args.lisa_interval_steps, model))
        trainer = Trainer(model=model, args=training_args, train_dataset=load_blocks(training_args.block_size),
                          callbacks=callbacks)
        trainer.train()


    if __name__ == "__main__":
        main()
''')

LAUNCH = dedent('''
    #!/bin/bash
    model_name_or_path=meta-llama/Llama-2-7b-hf
    lisa_activated_layers=1

    python finetune.py \\
        --model_name_or_path ${model_name_or_path} \\
        --output_dir output_models/finetune_lisa \\
        --block_size 256 \\
        --per_device_train_batch_size 1 \\
        --bf16 \\
        --optim paged_adamw_32bit \\
        --gradient_checkpointing True \\
        --use_lisa 1 \\
        --lisa_activated_layers ${lisa_activated_layers} \\
        --lisa_interval_steps 20
''')


def _lisa_project(tmp_path, launch: str = LAUNCH):
    return _project(tmp_path, {"finetune.py": FINETUNE, "run_finetune_with_lisa.sh": launch})


def _part(budget, key: str) -> int:
    return sum(c.bytes for c in budget.components if c.key == key)


def _states(budget) -> int:
    """Optimizer states, in device memory and in CUDA managed memory (paged) together."""
    return sum(c.bytes for c in budget.components if c.key in ("optimizer_states", "paged_optimizer_states"))


def test_lisa_holds_gradients_of_the_sampled_blocks_and_states_of_all():
    """Llama-2-7B, bf16, 32-bit paged AdamW: the states of all 6.74B parameters (50.2 GiB), the
    gradients of one block (0.20B) and of the embeddings and head (0.26B) only."""
    arch = resolve("meta-llama/Llama-2-7b-hf").arch
    setup = TrainingSetup(micro_batch=1, seq_len=256, precision=Precision.BF16, optimizer=Optimizer.PAGED_ADAMW,
                          grad_ckpt_every=1)
    full = estimate_training(arch, setup)
    lisa = estimate_training(arch, setup.but(sampled_blocks=1))
    block = arch.blocks[0].params_per_block
    assert _states(lisa) == _states(full) == pytest.approx(arch.n_params * 8, rel=1e-6)
    expected = (arch.n_params - (arch.num_layers - 1) * block) * 2
    assert _part(lisa, "gradients") == pytest.approx(expected, rel=1e-6)
    assert _part(lisa, "gradients") < 0.9 * 2**30 < 12 * 2**30 < _part(full, "gradients")
    assert any("LISA: 1 of 32 blocks" in note for note in lisa.assumptions)


def test_ddp_buckets_still_copy_every_gradient():
    """DDP builds its buckets when it wraps the model, before LISA's first switch froze anything."""
    arch = resolve("meta-llama/Llama-2-7b-hf").arch
    setup = TrainingSetup(micro_batch=1, seq_len=256, optimizer=Optimizer.PAGED_ADAMW, grad_ckpt_every=1,
                          world_size=8, sampled_blocks=1)
    budget = estimate_training(arch, setup)
    assert _part(budget, "ddp_buckets") == pytest.approx(arch.n_params * 2, rel=1e-6)


def test_the_launch_of_a_lisa_script_is_read(tmp_path):
    settings = _lisa_project(tmp_path)
    [run] = _runs(settings, "run_finetune_with_lisa.sh")
    assert run.plan.value("layer_sampling") is True and run.plan.value("sampled_blocks") == 1
    assert run.setup.sampled_blocks == 1
    # one process: no DDP assumed on the 8 GPUs the check names
    assert run.setup.world_size == 1 and not any(a.fact == "parallelism" for a in run.assumed)
    # 12.6 GiB of bf16 weights + 50.2 GiB of paged states + under 1 GiB of gradients: fits an H100
    assert _memory(settings, "run_finetune_with_lisa.sh") == []


def test_without_lisa_every_gradient_is_counted(tmp_path):
    plain = LAUNCH.replace("    --use_lisa 1 \\\n", "")
    settings = _lisa_project(tmp_path, plain)
    [run] = _runs(settings, "run_finetune_with_lisa.sh")
    assert run.setup.sampled_blocks is None  # the count alone switches nothing on
    [finding] = _memory(settings, "run_finetune_with_lisa.sh")
    assert finding.code == "MEM002"  # 75.4 of 75.5 GiB: the full model's gradients are there too


def test_lmflow_default_count_when_the_launch_names_none(tmp_path):
    launch = LAUNCH.replace("    --lisa_activated_layers ${lisa_activated_layers} \\\n", "")
    settings = _lisa_project(tmp_path, launch)
    [run] = _runs(settings, "run_finetune_with_lisa.sh")
    assert run.setup.sampled_blocks == 2  # FinetunerArguments' default


AXOLOTL = dedent('''
    base_model: NousResearch/Llama-2-7b-hf
    datasets:
      - path: teknium/GPT4-LLM-Cleaned
        type: alpaca
    sequence_len: 4096
    sample_packing: true

    lisa_n_layers: 4
    lisa_step_interval: 20
    lisa_layers_attribute: model.layers

    gradient_accumulation_steps: 2
    micro_batch_size: 1
    num_epochs: 1
    optimizer: adamw_bnb_8bit
    bf16: auto
    gradient_checkpointing: true
    flash_attention: true
''')


@pytest.mark.parametrize("interval, sampled", [("lisa_step_interval: 20", 4), ("", None)])
def test_axolotl_samples_layers_when_both_keys_are_set(tmp_path, interval, sampled):
    settings = _project(tmp_path, {"lisa.yml": AXOLOTL.replace("lisa_step_interval: 20", interval)})
    [run] = _runs(settings, "lisa.yml")
    assert run.setup.sampled_blocks == sampled


@pytest.mark.parametrize("prefix, one_process", [
    ("", True),
    ("CUDA_VISIBLE_DEVICES=0,1 nohup ", True),
    ("srun --ntasks-per-node 8 ", False),
])
def test_a_bare_python_launch_of_a_trainer_script_is_one_process(tmp_path, prefix, one_process):
    plain = LAUNCH.replace("    --use_lisa 1 \\\n", "").replace("python finetune.py", f"{prefix}python finetune.py")
    settings = _lisa_project(tmp_path, plain)
    [run] = _runs(settings, "run_finetune_with_lisa.sh")
    assert (run.setup.world_size == 1) is one_process
    assert any(a.fact == "parallelism" for a in run.assumed) is not one_process


def test_a_python_launch_that_spreads_its_model_with_a_device_map_is_still_said_so(tmp_path):
    """One process whose model ``device_map="auto"`` spreads over the 8 GPUs it sees is naive model
    parallelism, which the estimate does not model: the note stays."""
    spread = FINETUNE.replace('torch_dtype="bfloat16")', 'torch_dtype="bfloat16", device_map="auto")')
    plain = LAUNCH.replace("    --use_lisa 1 \\\n", "")
    settings = _project(tmp_path, {"finetune.py": spread, "run_finetune_with_lisa.sh": plain})
    [run] = _runs(settings, "run_finetune_with_lisa.sh")
    assert run.problem is not None and "device_map" in run.problem
