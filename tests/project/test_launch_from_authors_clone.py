"""A launcher that ``cd``s into the folder where its author cloned the project, then runs the
trainer as a module (GritLM's ``scripts/training/train_gritlm_7b.sh``: ``cd
/home/niklas/gritlm/gritlm`` then ``accelerate launch ... -m training.run``). The module and the
relative paths are read from that folder, which is the project's layout under another root; the
trainer's arguments live in a module of its own (``from .arguments import ...``), and its adapter
switches (``if training_args.lora or training_args.qlora:``) stay off unless the launch passes them."""

from __future__ import annotations

from pathlib import Path

from memlint.estimate import Sharding

from tests.facts.facts_testing import checked_project, dedent, only_run

ARGUMENTS_PY = dedent('''
    from dataclasses import dataclass, field
    from typing import Optional

    from transformers import TrainingArguments


    @dataclass
    class ModelArguments:
        model_name_or_path: Optional[str] = field(default=None)


    @dataclass
    class FinetuneArguments(TrainingArguments):
        lora: bool = field(default=False, metadata={"help": "train LoRA adapters"})
        qlora: bool = field(default=False, metadata={"help": "train LoRA adapters on a 4-bit base"})
''')

TRAIN_PY = dedent('''
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig, HfArgumentParser, Trainer

    from .arguments import FinetuneArguments as TrainArgs, ModelArguments


    def main():
        parser = HfArgumentParser((ModelArguments, TrainArgs))
        model_args, training_args = parser.parse_args_into_dataclasses()
        quantization_config = None
        if training_args.qlora:
            quantization_config = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4")
        model = AutoModelForCausalLM.from_pretrained(
            model_args.model_name_or_path, torch_dtype=torch.bfloat16, quantization_config=quantization_config
        )
        if (training_args.lora) or (training_args.qlora):
            config = LoraConfig(r=16, lora_alpha=32, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
            model = get_peft_model(model, config)
        Trainer(model=model, args=training_args).train()


    if __name__ == "__main__":
        main()
''')

LAUNCH = dedent('''
    #!/bin/bash
    #SBATCH --job-name=finetune
    #SBATCH --nodes=1
    #SBATCH --gres=gpu:8
    cd /home/alice/proj
    source .venv/bin/activate
    torchrun --nproc_per_node 8 -m pkg.train \\
        --model_name_or_path meta-llama/Llama-3.1-8B \\
        --deepspeed configs/zero3.json \\
        --per_device_train_batch_size 2 \\
        --gradient_checkpointing \\
        --bf16 \\
        --output_dir /scratch/alice/out{extra}
''')

ZERO3 = '{"zero_optimization": {"stage": 3}, "bf16": {"enabled": "auto"}, "train_micro_batch_size_per_gpu": "auto"}\n'


def _run(tmp_path: Path, extra: str = ""):
    return only_run(checked_project(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/arguments.py": ARGUMENTS_PY,
        "pkg/train.py": TRAIN_PY,
        "configs/zero3.json": ZERO3,
        "scripts/finetune.sh": LAUNCH.format(extra=extra),
    }), "scripts/finetune.sh")


def test_the_module_and_the_config_are_read_under_the_clone(tmp_path: Path):
    run = _run(tmp_path)
    framework = run.plan.get("framework")
    assert framework is not None and framework.origin is not None
    assert framework.origin.path.endswith("pkg/train.py")  # the module the launch runs
    assert run.setup.sharding is Sharding.ZERO3  # configs/zero3.json, read from the clone
    assert run.setup.world_size == 8


def test_a_cd_into_a_placeholder_for_the_clone_reads_from_the_project(tmp_path: Path):
    # VLM2Vec's train scripts: `cd PATH_TO_VLM2VEC_REPO`, a folder each reader fills in
    files = {"pkg/__init__.py": "", "pkg/arguments.py": ARGUMENTS_PY, "pkg/train.py": TRAIN_PY,
             "configs/zero3.json": ZERO3,
             "scripts/finetune.sh": LAUNCH.format(extra="").replace("cd /home/alice/proj", "cd PATH_TO_PROJ_REPO")}
    run = only_run(checked_project(tmp_path, files), "scripts/finetune.sh")
    assert run.setup.sharding is Sharding.ZERO3  # configs/zero3.json, not PATH_TO_PROJ_REPO/configs/...


def test_adapter_switches_of_an_imported_arguments_class_stay_off(tmp_path: Path):
    setup = _run(tmp_path).setup
    assert setup.lora is None  # a full fine-tune: neither --lora nor --qlora is passed


def test_the_launch_that_passes_the_switch_trains_the_quantized_adapter(tmp_path: Path):
    lora = _run(tmp_path, " \\\n    --qlora").setup.lora
    assert lora is not None and lora.r == 16 and lora.quantization == "nf4"
    plain = _run(tmp_path, " \\\n    --lora").setup.lora
    assert plain is not None and plain.r == 16 and plain.quantization is None


# the author keeps the Accelerate configs in a subfolder of the published folder on their machine
ACCELERATE_LAUNCH = dedent('''
    #!/bin/bash
    cd /home/alice/proj
    accelerate launch --config_file /home/alice/proj/scripts/accelerate/mine/fsdp_8gpus.yaml \\
        --num_processes 8 -m pkg.train \\
        --model_name_or_path meta-llama/Llama-3.1-8B \\
        --per_device_train_batch_size 2 \\
        --gradient_checkpointing \\
        --bf16 \\
        --output_dir /scratch/alice/out
''')

FSDP_CONFIG = dedent('''
    compute_environment: LOCAL_MACHINE
    distributed_type: FSDP
    fsdp_config:
      fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
      fsdp_sharding_strategy: FULL_SHARD
      fsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer
    mixed_precision: bf16
    num_machines: 1
    num_processes: 8
''')


def _accelerate_run(tmp_path: Path, configs: dict[str, str]):
    return only_run(checked_project(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/arguments.py": ARGUMENTS_PY,
        "pkg/train.py": TRAIN_PY,
        "scripts/launch_fsdp.sh": ACCELERATE_LAUNCH,
        **configs,
    }), "scripts/launch_fsdp.sh")


def test_the_one_config_of_its_name_in_the_clones_folder_stands_in(tmp_path: Path):
    run = _accelerate_run(tmp_path, {"scripts/accelerate/fsdp_8gpus.yaml": FSDP_CONFIG})
    assert run.setup.sharding is Sharding.FSDP_FULL
    assert not any(a.fact.endswith("parallelism") for a in run.assumed)


def test_two_configs_of_that_name_leave_the_parallelism_unread(tmp_path: Path):
    run = _accelerate_run(tmp_path, {"scripts/accelerate/fsdp_8gpus.yaml": FSDP_CONFIG,
                                     "scripts/accelerate/old/fsdp_8gpus.yaml": FSDP_CONFIG})
    assert run.setup.sharding is Sharding.NONE
    assert any(a.fact == "unread_parallelism" for a in run.assumed)  # an assumption, said as such


def test_a_common_folder_name_alone_is_no_sign_of_the_clone(tmp_path: Path):
    # of ``.../proj/scripts/accelerate/mine/`` the project has only an ``accelerate`` folder: one common
    # name is no sign that the path is a clone of this project
    run = _accelerate_run(tmp_path, {"accelerate/fsdp_8gpus.yaml": FSDP_CONFIG})
    assert run.setup.sharding is Sharding.NONE
