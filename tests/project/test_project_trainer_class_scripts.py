"""A script that trains only through a Trainer subclass of its own project, re-exported by a
package's ``__init__`` (Qwen2-VL-Finetune's ``src/train/train_sft.py`` loads the model, parses its
options with project dataclasses and hands both to ``QwenSFTTrainer`` from ``src.trainer``). Read
alone the script calls no library trainer, so nothing in it trains; the project, which reads the
class's ``Trainer`` base, now takes the script's own facts too: its model loader, the options the
launch passes, the dtype it loads in."""

from __future__ import annotations

from tests.facts.facts_testing import dedent
from tests.project.test_config_launchers import _memory, _project, _runs

TRAIN_SFT = dedent('''
    import torch
    from transformers import HfArgumentParser, Qwen2_5_VLForConditionalGeneration

    from src.params import DataArguments, ModelArguments, TrainingArguments
    from src.trainer import VisionSFTTrainer


    def train():
        parser = HfArgumentParser((ModelArguments, DataArguments, TrainingArguments))
        model_args, data_args, training_args = parser.parse_args_into_dataclasses()
        compute_dtype = torch.bfloat16 if training_args.bf16 else torch.float32
        model = Qwen2_5_VLForConditionalGeneration.from_pretrained(
            model_args.model_id,
            dtype=compute_dtype,
            attn_implementation="flash_attention_2",
        )
        model.config.use_cache = False
        trainer = VisionSFTTrainer(model=model, args=training_args, train_dataset=build_dataset(data_args))
        trainer.train()


    if __name__ == "__main__":
        train()
''')

PARAMS = dedent('''
    from dataclasses import dataclass, field
    from typing import Optional

    from transformers import TrainingArguments as HFTrainingArguments


    @dataclass
    class ModelArguments:
        model_id: Optional[str] = field(default="Qwen/Qwen2-VL-7B-Instruct")


    @dataclass
    class DataArguments:
        data_path: str = field(default=None)
        image_folder: Optional[str] = field(default=None)


    @dataclass
    class TrainingArguments(HFTrainingArguments):
        freeze_vision_tower: bool = field(default=False)
        vision_lr: Optional[float] = None
''')

TRAINER_INIT = dedent('''
    from .dpo_trainer import VisionDPOTrainer
    from .sft_trainer import VisionSFTTrainer

    __all__ = ["VisionSFTTrainer", "VisionDPOTrainer"]
''')

SFT_TRAINER = dedent('''
    from transformers import Trainer


    class VisionSFTTrainer(Trainer):
        """Separate learning rates for the vision tower and the merger."""

        def create_optimizer(self):
            return super().create_optimizer()
''')

DPO_TRAINER = dedent('''
    from trl import DPOTrainer


    class VisionDPOTrainer(DPOTrainer):
        pass
''')

LAUNCH = dedent('''
    #!/bin/bash
    # MODEL_NAME="Qwen/Qwen2-VL-7B-Instruct"
    MODEL_NAME="Qwen/Qwen2.5-VL-3B-Instruct"

    export PYTHONPATH=src:$PYTHONPATH

    deepspeed src/train/train_sft.py \\
        --deepspeed scripts/zero2.json \\
        --model_id $MODEL_NAME \\
        --data_path /path/to/your/training/data.json \\
        --bf16 True \\
        --per_device_train_batch_size {batch} \\
        --gradient_checkpointing True \\
        --output_dir output/sft
''')

ZERO2 = '{"zero_optimization": {"stage": 2}, "bf16": {"enabled": "auto"}, "train_micro_batch_size_per_gpu": "auto"}\n'


def _files(batch: int = 4, trainer: str = SFT_TRAINER) -> dict[str, str]:
    return {"src/train/train_sft.py": TRAIN_SFT, "src/params.py": PARAMS, "src/__init__.py": "",
            "src/trainer/__init__.py": TRAINER_INIT, "src/trainer/sft_trainer.py": trainer,
            "src/trainer/dpo_trainer.py": DPO_TRAINER, "scripts/finetune.sh": LAUNCH.format(batch=batch),
            "scripts/zero2.json": ZERO2}


def test_the_script_handing_its_model_to_a_project_trainer_is_the_run(tmp_path):
    settings = _project(tmp_path, _files())
    [run] = _runs(settings, "scripts/finetune.sh")
    assert run.problem is None
    assert run.plan.value("model") == "Qwen/Qwen2.5-VL-3B-Instruct"  # the launch's --model_id, read in the script
    assert run.plan.value("framework") == "hf-trainer"
    assert run.plan.value("micro_batch") == 4
    assert run.plan.value("load_dtype") == "bf16"
    assert run.plan.value("zero_stage") == 2


def test_a_run_too_large_for_the_gpu_is_judged(tmp_path):
    settings = _project(tmp_path, _files(batch=64))
    [finding] = _memory(settings, "scripts/finetune.sh")
    assert finding.code == "MEM001"


def test_a_project_class_without_a_trainer_base_trains_nothing(tmp_path):
    """The same script handing its model to a class that only evaluates states no run."""
    plain = SFT_TRAINER.replace("from transformers import Trainer\n", "").replace(
        "class VisionSFTTrainer(Trainer):", "class VisionSFTTrainer:")
    settings = _project(tmp_path, _files(trainer=plain))
    runs = _runs(settings, "scripts/finetune.sh")
    assert all(run.plan is None or run.plan.value("model") is None for run in runs)


# NExT-GPT's layout: train_mem.py only calls train.train(), whose module parses its options with a
# project subclass that shadows the class it extends (``class TrainingArguments(TrainingArguments)``)
# and hands its model to the project's NextGPTTrainer
TRAIN_MEM = dedent('''
    from train import train

    if __name__ == "__main__":
        train(attn_implementation="flash_attention_2")
''')

TRAIN = dedent('''
    import torch
    import transformers

    from training_utils import ModelArguments, TrainingArguments
    from nextgpt_trainer import NextGPTTrainer


    def train(attn_implementation=None):
        parser = transformers.HfArgumentParser((ModelArguments, TrainingArguments))
        model_args, training_args = parser.parse_args_into_dataclasses()
        model = transformers.LlamaForCausalLM.from_pretrained(
            model_args.model_name_or_path, attn_implementation=attn_implementation, torch_dtype=torch.bfloat16)
        model.config.use_cache = False
        trainer = NextGPTTrainer(model=model, args=training_args, train_dataset=build_dataset())
        trainer.train()
''')

TRAINING_UTILS = dedent('''
    from dataclasses import dataclass, field
    from typing import Optional

    from transformers import TrainingArguments


    @dataclass
    class ModelArguments:
        model_name_or_path: Optional[str] = field(default="facebook/opt-125m")


    @dataclass
    class TrainingArguments(TrainingArguments):
        model_max_length: int = field(default=512)
        lora_enable: bool = False
''')

NEXTGPT_TRAINER = dedent('''
    from transformers import Trainer


    class NextGPTTrainer(Trainer):
        def create_optimizer(self):
            return super().create_optimizer()
''')

FINETUNE = dedent('''
    #!/bin/bash
    deepspeed --include localhost:0 --master_port 28460 train_mem.py \\
        --deepspeed ./scripts/zero2.json \\
        --model_name_or_path meta-llama/Llama-2-7b-hf \\
        --bf16 True \\
        --per_device_train_batch_size 4 \\
        --model_max_length 2048 \\
        --gradient_checkpointing True \\
        --output_dir ./checkpoints/finetune_1
''')


def test_a_delegated_module_that_trains_through_a_project_trainer_is_the_run(tmp_path):
    settings = _project(tmp_path, {"train_mem.py": TRAIN_MEM, "train.py": TRAIN, "training_utils.py": TRAINING_UTILS,
                                   "nextgpt_trainer.py": NEXTGPT_TRAINER, "scripts/finetune.sh": FINETUNE,
                                   "scripts/zero2.json": ZERO2})
    [run] = _runs(settings, "scripts/finetune.sh")
    assert str(settings.root / "train.py") in run.plan.documents
    assert run.plan.value("framework") == "hf-trainer"
    assert run.plan.value("model") == "meta-llama/Llama-2-7b-hf"
    # bound through the subclass that shadows transformers.TrainingArguments
    assert run.plan.value("micro_batch") == 4
    assert run.plan.value("seq_len_limit") == "model_max_length"
    assert run.plan.value("world_size") == 1


# SPPO's layout: the script parses a positional YAML and the options after it with the project's
# own parser subclass (H4ArgumentParser), then hands its model to the project's SPPOTrainer; the
# launch's options win over the YAML's values, as the parser applies them
RUN_PAIRS = dedent('''
    import sys

    import torch
    from transformers import AutoModelForCausalLM

    from alignment import H4ArgumentParser, ModelArguments, PairsConfig
    from trainer import PairsTrainer


    def main():
        parser = H4ArgumentParser((ModelArguments, PairsConfig))
        model_args, training_args = parser.parse()
        model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path, torch_dtype=torch.bfloat16)
        trainer = PairsTrainer(model=model, args=training_args, train_dataset=load_pairs())
        trainer.train()


    if __name__ == "__main__":
        main()
''')

ALIGNMENT = dedent('''
    import sys
    from dataclasses import dataclass, field

    from transformers import HfArgumentParser, TrainingArguments


    class H4ArgumentParser(HfArgumentParser):
        def parse(self):
            if len(sys.argv) > 1 and sys.argv[1].endswith(".yaml"):
                return self.parse_yaml_and_args(sys.argv[1], sys.argv[2:])
            return self.parse_args_into_dataclasses()


    @dataclass
    class ModelArguments:
        model_name_or_path: str = field(default=None)


    @dataclass
    class PairsConfig(TrainingArguments):
        beta: float = field(default=0.1)
        max_length: int = field(default=2048)
''')

PAIRS_TRAINER = dedent('''
    from transformers import Trainer


    class PairsTrainer(Trainer):
        def compute_loss(self, model, inputs, return_outputs=False):
            return super().compute_loss(model, inputs, return_outputs)
''')

CONFIG_FULL = dedent('''
    model_name_or_path: mistralai/Mistral-7B-Instruct-v0.2
    bf16: true
    beta: 0.01
    per_device_train_batch_size: 8
    gradient_checkpointing: true
    max_length: 1024
    optim: adamw_torch
    output_dir: outputs
''')

PIPELINE = dedent('''
    #!/bin/bash
    BATCH_SIZE=2
    OPTIM="rmsprop"
    accelerate launch --num_processes 8 \\
        scripts/run_pairs.py recipes/config_full.yaml \\
        --optim="$OPTIM" \\
        --per_device_train_batch_size=$BATCH_SIZE
''')


def test_the_launchs_options_win_over_the_positional_yaml_of_a_project_parser(tmp_path):
    settings = _project(tmp_path, {"scripts/run_pairs.py": RUN_PAIRS, "scripts/alignment.py": ALIGNMENT,
                                   "scripts/trainer.py": PAIRS_TRAINER, "recipes/config_full.yaml": CONFIG_FULL,
                                   "scripts/pipeline.sh": PIPELINE})
    [run] = _runs(settings, "scripts/pipeline.sh")
    assert run.plan.value("micro_batch") == 2  # the launch's, not the YAML's 8
    assert run.plan.value("optimizer") != "adamw"  # --optim rmsprop, not the YAML's adamw_torch
    assert run.plan.value("model") == "mistralai/Mistral-7B-Instruct-v0.2"  # the YAML's, the launch sets none
