"""A reward-modelling project laid out as Reward-Model-Overoptimization is: launchers in
``scripts/`` that ``cd ../reward_models`` (or ``../rm_eval``) before ``accelerate launch``, training
scripts whose own ``ScriptArguments`` dataclass sets the micro-batch and checkpointing, an
evaluation script whose options are its own dataclass's, and a GRPO launch that hands the reward
model its own DeepSpeed plugin."""

from __future__ import annotations

from pathlib import Path

from facts_testing import dedent, one

from memlint.lint.engine import run_context
from memlint.project.project import Project
from memlint.project.settings import Settings

from tests.facts.facts_testing import write

TRAIN_RM = dedent('''
    from dataclasses import dataclass, field
    from typing import Optional

    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForSequenceClassification, HfArgumentParser, Trainer, TrainingArguments


    @dataclass
    class ScriptArguments:
        per_device_train_batch_size: Optional[int] = field(default=1)
        gradient_accumulation_steps: Optional[int] = field(default=16)
        learning_rate: Optional[float] = field(default=1e-5)
        max_length: Optional[int] = field(default=1024)
        gradient_checkpointing: Optional[bool] = field(default=True)
        bf16: Optional[bool] = field(default=True)
        base_model: Optional[str] = field(default="google/gemma-2b-it")
        use_lora: Optional[bool] = field(default=True)
        lora_r: Optional[int] = field(default=32)
        log_dir: Optional[str] = field(default="./reward_models_train")


    parser = HfArgumentParser(ScriptArguments)
    script_args = parser.parse_args_into_dataclasses()[0]
    training_args = TrainingArguments(
        output_dir=script_args.log_dir,
        per_device_train_batch_size=script_args.per_device_train_batch_size,
        gradient_accumulation_steps=script_args.gradient_accumulation_steps,
        learning_rate=script_args.learning_rate,
        gradient_checkpointing=script_args.gradient_checkpointing,
        bf16=script_args.bf16,
    )
    model = AutoModelForSequenceClassification.from_pretrained(script_args.base_model, num_labels=1)
    if script_args.use_lora:
        model = get_peft_model(model, LoraConfig(r=script_args.lora_r, task_type="SEQ_CLS"))
    trainer = Trainer(model=model, args=training_args, train_dataset=None)
    trainer.train()
''')

TRAIN_SH = dedent('''
    devices=0,1,2,3,4,5
    n_gpu=6
    base_model='google/gemma-2b-it'
    max_length=1024

    cd ../reward_models
    CUDA_VISIBLE_DEVICES=${devices} accelerate launch --num_processes ${n_gpu} run_rm_train.py \\
        --base_model ${base_model} --max_length ${max_length} --use_lora True --gradient_accumulation_steps 4
''')

EVAL_RM = dedent('''
    from dataclasses import dataclass, field
    from typing import Optional

    import torch
    from transformers import HfArgumentParser

    from rm_utils import load_model_withhead


    @dataclass
    class ScriptArguments:
        per_device_eval_batch_size: Optional[int] = field(default=8)
        max_length: Optional[int] = field(default=1024)
        base_model: Optional[str] = field(default="google/gemma-2b-it")
        log_dir: Optional[str] = field(default="./eval_reward")


    script_args = HfArgumentParser(ScriptArguments).parse_args_into_dataclasses()[0]
    model = load_model_withhead(script_args.base_model)
    with torch.no_grad():
        print(model)
''')

EVAL_SH = dedent('''
    per_device_eval_batch_size=1
    max_length=1024
    cd ../rm_eval
    for task in 'unified' 'hhh'
    do
        accelerate launch eval_rm.py --base_model google/gemma-2b-it \\
            --per_device_eval_batch_size ${per_device_eval_batch_size} --max_length ${max_length} --log_dir ./eval
    done
''')


def test_a_launcher_scripts_cd_up_and_over_is_read_from_its_own_folder():
    facts = one(TRAIN_SH, "scripts/train_rm_lora.sh")
    assert facts.launches.value == "../reward_models/run_rm_train.py"


def test_the_launched_scripts_own_defaults_hold_micro_batch_and_checkpointing(tmp_path: Path):
    write(tmp_path, {"scripts/train_rm_lora.sh": TRAIN_SH, "reward_models/run_rm_train.py": TRAIN_RM})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False)
    [run] = Project(settings).runs_for(tmp_path / "scripts/train_rm_lora.sh", run_context(settings))
    # before: the script was not found from scripts/, and the options were read as bare
    # TrainingArguments: micro-batch 8, no checkpointing, no LoRA (112.7 GiB on the real project)
    assert run.setup is not None and run.setup.micro_batch == 1
    assert run.plan.value("grad_ckpt") and run.plan.value("lora_r") == 32


def test_an_evaluation_script_whose_options_are_its_own_dataclass_trains_nothing(tmp_path: Path):
    write(tmp_path, {"scripts/eval_rm.sh": EVAL_SH, "rm_eval/eval_rm.py": EVAL_RM,
                     "rm_eval/rm_utils.py": "def load_model_withhead(name):\n    return name\n"})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False)
    runs = Project(settings).runs_for(tmp_path / "scripts/eval_rm.sh", run_context(settings))
    # before: --per_device_eval_batch_size and --max_length read as TrainingArguments: a full
    # fine-tune of gemma-2b at micro-batch 8 (MEM001 on an evaluation)
    assert all(not run.plan.trains for run in runs)


def test_a_reward_models_own_deepspeed_plugin_is_not_the_policys_config(tmp_path: Path):
    grpo = dedent('''
        accelerate launch --num_processes 8 train_grpo.py --model_name_or_path Qwen/Qwen3-0.6B \\
            --per_device_train_batch_size 1 --gradient_accumulation_steps 4 \\
            --rm_deepspeed_plugin configs/rm_zero2.json
    ''')
    facts = one(grpo, "scripts/grpo.sh")
    assert [r.note for r in facts.references] == ["--rm_deepspeed_plugin (another model's config)"]
    rm_config = '{"zero_optimization": {"stage": 2}, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 32}'
    train = dedent('''
        from transformers import AutoModelForCausalLM
        from trl import GRPOConfig, GRPOTrainer, TrlParser

        parser = TrlParser((GRPOConfig,))
        (args,) = parser.parse_args_and_config()
        trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B"), args=args)
        trainer.train()
    ''')
    write(tmp_path, {"scripts/grpo.sh": grpo, "train_grpo.py": train, "configs/rm_zero2.json": rm_config})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False, select=("CFG",))
    project = Project(settings)
    [run] = project.runs_for(tmp_path / "scripts/grpo.sh", run_context(settings))
    assert run.plan.get("zero_stage") is None  # the policy runs plain data parallelism
    # and the plugin is no unused config either
    assert project.runs_for(tmp_path / "configs/rm_zero2.json", run_context(settings)) == []


def test_near_miss_a_script_with_its_own_options_that_trains_through_a_submodule_is_a_run(tmp_path: Path):
    # open-instruct's dpo.py shape: a plain dataclass of its own options, handed to the project's
    # `dpo_utils` module (imported as `from pkg import module`) that builds the optimizer
    script = dedent('''
        from dataclasses import dataclass

        from transformers import HfArgumentParser

        from open_instruct import dpo_utils


        @dataclass
        class DPOExperimentConfig:
            model_name_or_path: str = "allenai/Olmo-3-1025-7B"
            per_device_train_batch_size: int = 1
            max_seq_length: int = 2048
            output_dir: str = "output"


        if __name__ == "__main__":
            (args,) = HfArgumentParser((DPOExperimentConfig,)).parse_args_into_dataclasses()
            dpo_utils.run(args)
    ''')
    utils = "import torch\n\n\ndef run(args):\n    optimizer = torch.optim.AdamW([])\n    optimizer.step()\n"
    launch = ("accelerate launch open_instruct/dpo.py --model_name_or_path Qwen/Qwen2.5-0.5B "
              "--per_device_train_batch_size 1 --max_seq_length 1024 --output_dir out\n")
    write(tmp_path, {"open_instruct/__init__.py": "", "open_instruct/dpo.py": script,
                     "open_instruct/dpo_utils.py": utils, "scripts/dpo.sh": launch})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False)
    runs = Project(settings).runs_for(tmp_path / "scripts/dpo.sh", run_context(settings))
    assert runs and runs[0].plan.trains and runs[0].plan.value("model") == "Qwen/Qwen2.5-0.5B"


EVAL_ENCODER = dedent('''
    import argparse
    import sys

    sys.path.append("../")

    from src.model_wrapper import ModelWrapper


    def parse_args():
        parser = argparse.ArgumentParser(description="entity linking evaluation")
        parser.add_argument("--model_dir", required=True)
        parser.add_argument("--dictionary_path", type=str, required=True)
        parser.add_argument("--data_dir", type=str, required=True)
        parser.add_argument("--use_cuda", action="store_true")
        parser.add_argument("--max_length", default=25, type=int)
        parser.add_argument("--batch-size", default=1024, type=int)
        parser.add_argument("--output_dir", type=str, default="tmp/")
        parser.add_argument("--save_predictions", action="store_true")
        return parser.parse_args()


    def main(args):
        wrapper = ModelWrapper().load_model(path=args.model_dir, use_cuda=args.use_cuda)
        print(wrapper.embed(args.dictionary_path, batch_size=args.batch_size, max_length=args.max_length))


    if __name__ == "__main__":
        main(parse_args())
''')

MODEL_WRAPPER = dedent('''
    import torch
    from transformers import AutoModel, AutoTokenizer


    class ModelWrapper:
        def load_model(self, path, use_cuda=True):
            self.tokenizer = AutoTokenizer.from_pretrained(path)
            self.encoder = AutoModel.from_pretrained(path)
            if use_cuda:
                self.encoder = self.encoder.cuda()
            return self

        @torch.no_grad()
        def embed(self, names, batch_size, max_length):
            return self.encoder(**self.tokenizer(names, max_length=max_length, truncation=True))
''')

EVAL_ENCODER_SH = dedent('''
    MODEL_DIR="cambridgeltl/SapBERT-from-PubMedBERT-fulltext"
    CUDA_VISIBLE_DEVICES=$1 python3 eval.py \\
        --model_dir $MODEL_DIR \\
        --dictionary_path data/dictionary.txt \\
        --data_dir data/test.csv \\
        --use_cuda \\
        --output_dir tmp/ \\
        --max_length 25 \\
        --save_predictions \\
        --batch-size 512
''')


def test_an_evaluation_script_whose_options_are_its_own_argparse_options_trains_nothing(tmp_path: Path):
    write(tmp_path, {"evaluation/eval.sh": EVAL_ENCODER_SH, "evaluation/eval.py": EVAL_ENCODER,
                     "src/__init__.py": "", "src/model_wrapper.py": MODEL_WRAPPER})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False)
    runs = Project(settings).runs_for(tmp_path / "evaluation/eval.sh", run_context(settings))
    # before: --output_dir and --max_length read as a training config over the project's own
    # model wrapper, a run with no model found (a MEM003 note on each evaluation launch)
    assert all(not run.plan.trains for run in runs)


def test_an_argparse_script_that_hands_its_options_to_a_training_module_is_a_run(tmp_path: Path):
    trainer = MODEL_WRAPPER + dedent('''

        def fit(wrapper, loader, lr):
            optimizer = torch.optim.AdamW(wrapper.encoder.parameters(), lr=lr)
            for batch in loader:
                wrapper.encoder(**batch).loss.backward()
                optimizer.step()
                optimizer.zero_grad()
    ''')
    script = EVAL_ENCODER.replace("from src.model_wrapper import ModelWrapper",
                                  "from src.model_wrapper import ModelWrapper, fit")
    script = script.replace("    print(wrapper.embed(", "    fit(wrapper, [], 1e-5)\n    print(wrapper.embed(")
    write(tmp_path, {"train/train.sh": EVAL_ENCODER_SH, "train/eval.py": script,
                     "src/__init__.py": "", "src/model_wrapper.py": trainer})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False)
    runs = Project(settings).runs_for(tmp_path / "train/train.sh", run_context(settings))
    assert runs and any(run.plan.trains for run in runs)


ANGLE_TRAINER = dedent('''
    import argparse

    from angle_emb import AnglE

    parser = argparse.ArgumentParser()
    parser.add_argument("--model_name_or_path", type=str, default="WhereIsAI/UAE-Large-V1")
    parser.add_argument("--save_dir", type=str, default=None)
    parser.add_argument("--learning_rate", type=float, default=1e-5)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--gradient_accumulation_steps", type=int, default=1)
    parser.add_argument("--logging_steps", type=int, default=100)
    args = parser.parse_args()

    model = AnglE(args.model_name_or_path, max_length=512)
    model.fit(train_ds=None, output_dir=args.save_dir, batch_size=args.batch_size, epochs=args.epochs,
              learning_rate=args.learning_rate)
''')

ANGLE_LAUNCH = dedent('''
    CUDA_VISIBLE_DEVICES=0,1,2,3 accelerate launch --multi_gpu --num_processes 4 \\
        -m angle_emb.angle_trainer \\
        --model_name_or_path WhereIsAI/UAE-Large-V1 \\
        --save_dir ckpts/use-nli \\
        --learning_rate 1e-5 \\
        --batch_size 32 \\
        --epochs 1 \\
        --logging_steps 10 \\
        --gradient_accumulation_steps 2
''')


def test_an_argparse_script_that_fits_a_class_its_package_re_exports_is_a_run(tmp_path: Path):
    # AnglE's layout: angle_trainer.py calls fit() on AnglE, which angle_emb/__init__.py takes from
    # angle.py with `from .angle import *` (before: its own argparse options and no training one
    # level down made the launch no run)
    write(tmp_path, {"examples/Training/bert.sh": ANGLE_LAUNCH, "angle_emb/angle_trainer.py": ANGLE_TRAINER,
                     "angle_emb/__init__.py": "from .angle import *  # NOQA\n",
                     "angle_emb/angle.py": "from transformers import Trainer\n\n\nclass AnglE:\n    pass\n"})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False)
    runs = Project(settings).runs_for(tmp_path / "examples/Training/bert.sh", run_context(settings))
    assert runs and all(run.plan.trains for run in runs)
    # a package whose modules train nothing still hands on nothing
    write(tmp_path, {"angle_emb/angle.py": "class AnglE:\n    pass\n",
                     "angle_emb/angle_trainer.py": ANGLE_TRAINER.replace("model.fit(", "model.encode(")})
    runs = Project(settings).runs_for(tmp_path / "examples/Training/bert.sh", run_context(settings))
    assert all(not run.plan.trains for run in runs)
