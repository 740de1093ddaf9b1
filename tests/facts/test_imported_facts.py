"""Facts that live in another module of the project (issue 15): a script calls a helper function
or builds a trainer class it imports from its own project, and the model load, its quantization
and LoRA, the trainer's kind, the engine it builds are read there, with the call's arguments
bound (an options object passed through, an option passed as it is, a library class)."""

from __future__ import annotations

from pathlib import Path

from facts_testing import dedent, span, where, write

from memlint.lint.engine import Linter, run_context
from memlint.project.project import Project
from memlint.project.settings import Settings

# peft's examples/sft: train.py parses dataclasses and hands them to utils.create_and_prepare_model
SFT_TRAIN = dedent('''
    import os
    import sys
    from dataclasses import dataclass, field
    from typing import Optional

    from transformers import HfArgumentParser, set_seed
    from trl import SFTConfig, SFTTrainer

    from utils import create_and_prepare_model, create_datasets


    @dataclass
    class ModelArguments:
        model_name_or_path: str = field(metadata={"help": "Path to pretrained model"})
        lora_alpha: Optional[int] = field(default=16)
        lora_dropout: Optional[float] = field(default=0.1)
        lora_r: Optional[int] = field(default=64)
        lora_target_modules: Optional[str] = field(default="q_proj,k_proj,v_proj,o_proj")
        use_peft_lora: Optional[bool] = field(default=False)
        use_4bit_quantization: Optional[bool] = field(default=False)
        use_nested_quant: Optional[bool] = field(default=False)
        bnb_4bit_compute_dtype: Optional[str] = field(default="float16")
        bnb_4bit_quant_type: Optional[str] = field(default="nf4")


    @dataclass
    class DataTrainingArguments:
        dataset_name: Optional[str] = field(default="timdettmers/openassistant-guanaco")


    def main(model_args, data_args, training_args):
        set_seed(training_args.seed)
        model, peft_config, tokenizer = create_and_prepare_model(model_args, data_args, training_args)
        train_dataset, eval_dataset = create_datasets(tokenizer, data_args, training_args)
        trainer = SFTTrainer(model=model, processing_class=tokenizer, args=training_args,
                             train_dataset=train_dataset, eval_dataset=eval_dataset, peft_config=peft_config)
        trainer.train()


    if __name__ == "__main__":
        parser = HfArgumentParser((ModelArguments, DataTrainingArguments, SFTConfig))
        if len(sys.argv) == 2 and sys.argv[1].endswith(".json"):
            model_args, data_args, training_args = parser.parse_json_file(json_file=os.path.abspath(sys.argv[1]))
        else:
            model_args, data_args, training_args = parser.parse_args_into_dataclasses()
        main(model_args, data_args, training_args)
''')
SFT_UTILS = dedent('''
    import torch
    from datasets import load_dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, BitsAndBytesConfig


    def create_datasets(tokenizer, data_args, training_args):
        data = load_dataset(data_args.dataset_name)
        return data["train"], data["test"]


    def create_and_prepare_model(args, data_args, training_args):
        bnb_config = None
        if args.use_4bit_quantization:
            compute_dtype = getattr(torch, args.bnb_4bit_compute_dtype)
            bnb_config = BitsAndBytesConfig(
                load_in_4bit=args.use_4bit_quantization,
                bnb_4bit_quant_type=args.bnb_4bit_quant_type,
                bnb_4bit_compute_dtype=compute_dtype,
                bnb_4bit_use_double_quant=args.use_nested_quant,
            )
        model = AutoModelForCausalLM.from_pretrained(
            args.model_name_or_path, quantization_config=bnb_config, dtype=torch.bfloat16
        )
        peft_config = None
        if args.use_peft_lora:
            peft_config = LoraConfig(
                lora_alpha=args.lora_alpha,
                lora_dropout=args.lora_dropout,
                r=args.lora_r,
                target_modules=args.lora_target_modules.split(","),
                task_type="CAUSAL_LM",
            )
        tokenizer = AutoTokenizer.from_pretrained(args.model_name_or_path)
        return model, peft_config, tokenizer
''')
QLORA_LAUNCH = dedent('''
    python train.py \\
        --model_name_or_path meta-llama/Llama-2-70b-hf \\
        --per_device_train_batch_size 2 \\
        --gradient_accumulation_steps 2 \\
        --gradient_checkpointing True \\
        --max_length 2048 \\
        --bf16 True \\
        --use_peft_lora True \\
        --lora_r 8 \\
        --use_4bit_quantization True \\
        --output_dir llama-sft-qlora
''')


def _project(root: Path, files: dict[str, str], gpu: str = "h100") -> tuple[Settings, Project]:
    write(root, files)
    (root / ".git").mkdir(exist_ok=True)
    settings = Settings(root=root).with_overrides(gpu=gpu, cache=False)
    return settings, Project(settings)


def test_a_helper_module_decides_4bit_and_lora_from_the_options_object(tmp_path: Path):
    files = {"train.py": SFT_TRAIN, "utils.py": SFT_UTILS, "run_qlora.sh": QLORA_LAUNCH}
    settings, project = _project(tmp_path, files)
    [run] = project.runs_for(tmp_path / "run_qlora.sh", run_context(settings))
    plan = run.plan
    assert plan.value("model") == "meta-llama/Llama-2-70b-hf"
    # the launch turns on the helper's BitsAndBytesConfig; its quant type is the script's default
    assert plan.value("quantization") == "nf4"
    assert plan.get("quantization").origin.path.endswith("run_qlora.sh")
    assert plan.value("lora_r") == 8
    assert any(str(d).endswith("utils.py") for d in plan.documents)
    # a 70B model in 4 bits with LoRA: no longer judged as a bf16 full fine-tune
    found = [d.code for d in Linter(settings).lint_path(tmp_path / "run_qlora.sh") if d.code.startswith("MEM")]
    assert "MEM001" not in found


def test_without_the_option_the_helper_loads_the_full_model(tmp_path: Path):
    launch = QLORA_LAUNCH.replace("    --use_4bit_quantization True \\\n", "")
    settings, project = _project(tmp_path, {"train.py": SFT_TRAIN, "utils.py": SFT_UTILS, "run.sh": launch})
    [run] = project.runs_for(tmp_path / "run.sh", run_context(settings))
    assert run.plan.get("quantization") is None
    assert run.plan.value("lora_r") == 8


def test_the_scripts_own_default_turns_the_helpers_branch_on(tmp_path: Path):
    # ``use_4bit_quantization`` defaults to True in the script: the helper quantizes unless told not to
    train = SFT_TRAIN.replace("use_4bit_quantization: Optional[bool] = field(default=False)",
                              "use_4bit_quantization: Optional[bool] = field(default=True)")
    launch = QLORA_LAUNCH.replace("    --use_4bit_quantization True \\\n", "")
    settings, project = _project(tmp_path, {"train.py": train, "utils.py": SFT_UTILS, "run.sh": launch})
    [run] = project.runs_for(tmp_path / "run.sh", run_context(settings))
    quantization = run.plan.get("quantization")
    assert quantization is not None and quantization.value == "nf4"
    # read where the helper writes it, with the script's default
    assert quantization.origin.path.endswith("utils.py")
    assert where(quantization) == span(SFT_UTILS, "bnb_4bit_quant_type=«args.bnb_4bit_quant_type»")


def test_a_helper_that_loads_without_quantization_states_none(tmp_path: Path):
    utils = dedent('''
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer


        def create_and_prepare_model(args, data_args, training_args):
            model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path, dtype=torch.bfloat16)
            tokenizer = AutoTokenizer.from_pretrained(args.model_name_or_path)
            return model, None, tokenizer


        def create_datasets(tokenizer, data_args, training_args):
            return [], []
    ''')
    settings, project = _project(tmp_path, {"train.py": SFT_TRAIN, "utils.py": utils, "run.sh": QLORA_LAUNCH})
    [run] = project.runs_for(tmp_path / "run.sh", run_context(settings))
    assert run.plan.value("model") == "meta-llama/Llama-2-70b-hf"
    assert run.plan.get("quantization") is None


# DeepSpeed-Chat (BELLE's train/dschat_train_v1): argparse in main.py, the model loaded in a helper
DSCHAT_MAIN = dedent('''
    import argparse

    import deepspeed
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from utils.model.model_utils import create_hf_model


    def parse_args():
        parser = argparse.ArgumentParser(description="Finetune a transformers model on a causal language modeling task")
        parser.add_argument("--model_name_or_path", type=str, required=True)
        parser.add_argument("--per_device_train_batch_size", type=int, default=16)
        parser.add_argument("--max_seq_len", type=int, default=512)
        parser.add_argument("--zero_stage", type=int, default=0)
        parser = deepspeed.add_config_arguments(parser)
        return parser.parse_args()


    def main():
        args = parse_args()
        tokenizer = AutoTokenizer.from_pretrained(args.model_name_or_path)
        ds_config = {"train_micro_batch_size_per_gpu": args.per_device_train_batch_size,
                     "zero_optimization": {"stage": args.zero_stage}, "bf16": {"enabled": True}}
        model = create_hf_model(AutoModelForCausalLM, args.model_name_or_path, tokenizer, ds_config)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
        model, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=ds_config)
        for batch in []:
            loss = model(**batch).loss
            model.backward(loss)
            model.step()


    if __name__ == "__main__":
        main()
''')
DSCHAT_MODEL_UTILS = dedent('''
    from transformers import AutoConfig
    from transformers.integrations import HfDeepSpeedConfig


    def create_hf_model(model_class, model_name_or_path, tokenizer, ds_config=None, rlhf_training=False):
        model_config = AutoConfig.from_pretrained(model_name_or_path)
        if ds_config is not None and ds_config["zero_optimization"]["stage"] == 3:
            dschf = HfDeepSpeedConfig(ds_config)
        else:
            dschf = None
        if rlhf_training:
            model = model_class.from_config(model_config)
        else:
            model = model_class.from_pretrained(model_name_or_path, config=model_config)
        return model
''')
DSCHAT_LAUNCH = dedent('''
    deepspeed --num_gpus 1 main.py \\
       --model_name_or_path Qwen/Qwen2.5-0.5B \\
       --per_device_train_batch_size 8 \\
       --max_seq_len 1024 \\
       --zero_stage 2 \\
       --output_dir out
''')


def test_a_model_loaded_in_a_helper_from_an_option_passed_as_it_is(tmp_path: Path):
    files = {"main.py": DSCHAT_MAIN, "utils/__init__.py": "", "utils/model/__init__.py": "",
             "utils/model/model_utils.py": DSCHAT_MODEL_UTILS, "training_scripts/run_FT.sh": DSCHAT_LAUNCH}
    settings, project = _project(tmp_path, files)
    [run] = project.runs_for(tmp_path / "training_scripts/run_FT.sh", run_context(settings))
    assert run.problem is None
    model = run.plan.get("model")
    assert model.value == "Qwen/Qwen2.5-0.5B" and model.origin.path.endswith("run_FT.sh")
    # the library class the script passes is the loader the helper calls
    assert run.arch is not None


# SimPO: scripts/run_simpo.py builds SimPOTrainer from scripts/simpo_trainer.py
SIMPO_RUN = dedent('''
    import sys

    from transformers import AutoModelForCausalLM, HfArgumentParser, TrainingArguments

    from simpo_trainer import SimPOTrainer


    def main():
        parser = HfArgumentParser((TrainingArguments,))
        (training_args,) = parser.parse_args_into_dataclasses()
        model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-1.5B")
        trainer = SimPOTrainer(model=model, args=training_args, train_dataset=None)
        trainer.train()


    if __name__ == "__main__":
        main()
''')
SIMPO_TRAINER = dedent('''
    import torch
    import torch.nn.functional as F
    from transformers import Trainer


    class SimPOTrainer(Trainer):
        def concatenated_forward(self, model, batch):
            concatenated = torch.cat([batch["chosen_input_ids"], batch["rejected_input_ids"]], dim=0)
            logits = model(concatenated).logits
            return logits.chunk(2)

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            chosen, rejected = self.concatenated_forward(model, inputs)
            loss = -F.logsigmoid(chosen.mean() - rejected.mean())
            return (loss, {}) if return_outputs else loss
''')
SIMPO_LAUNCH = ("accelerate launch --num_processes 4 scripts/run_simpo.py --per_device_train_batch_size 2 "
                "--bf16 True --output_dir out\n")


def test_an_imported_trainer_with_a_concatenated_forward_trains_on_pairs(tmp_path: Path):
    files = {"scripts/run_simpo.py": SIMPO_RUN, "scripts/simpo_trainer.py": SIMPO_TRAINER, "run.sh": SIMPO_LAUNCH}
    settings, project = _project(tmp_path, files)
    [run] = project.runs_for(tmp_path / "run.sh", run_context(settings))
    kind = run.plan.get("trainer_kind")
    assert kind is not None and kind.value == "paired"
    assert where(kind) == span(SIMPO_TRAINER, "def «concatenated_forward»(self")
    # a concatenated forward is modelled: the estimate is no lower bound
    assert run.plan.get("lower_bound") is None


def test_an_imported_trainer_overriding_compute_loss_makes_the_estimate_a_lower_bound(tmp_path: Path):
    trainer = SIMPO_TRAINER.replace("self.concatenated_forward(model, inputs)", "self.pair_forward(model, inputs)") \
        .replace("def concatenated_forward(", "def pair_forward(")
    files = {"scripts/run_simpo.py": SIMPO_RUN, "scripts/simpo_trainer.py": trainer, "run.sh": SIMPO_LAUNCH}
    settings, project = _project(tmp_path, files)
    [run] = project.runs_for(tmp_path / "run.sh", run_context(settings))
    assert run.plan.get("trainer_kind") is None
    lower = run.plan.get("lower_bound")
    assert lower is not None and "SimPOTrainer.compute_loss" in lower.value


def test_an_imported_class_that_is_not_a_trainer_states_nothing(tmp_path: Path):
    collator = dedent('''
        import torch


        class PairCollator:
            def __init__(self, pad_id):
                self.pad_id = pad_id

            def concatenated_forward(self, batch):
                return torch.cat([batch["chosen"], batch["rejected"]], dim=0)

            def compute_loss(self, logits):
                return logits.mean()
    ''')
    run_script = SIMPO_RUN.replace("from simpo_trainer import SimPOTrainer",
                                   "from transformers import Trainer\nfrom collate import PairCollator") \
        .replace("trainer = SimPOTrainer(model=model, args=training_args, train_dataset=None)",
                 "trainer = Trainer(model=model, args=training_args, data_collator=PairCollator(0))")
    files = {"scripts/run_simpo.py": run_script, "scripts/collate.py": collator, "run.sh": SIMPO_LAUNCH}
    settings, project = _project(tmp_path, files)
    [run] = project.runs_for(tmp_path / "run.sh", run_context(settings))
    assert run.plan.get("trainer_kind") is None and run.plan.get("lower_bound") is None
    assert not any(str(d).endswith("collate.py") for d in run.plan.documents)


# LOMO: the script parses TrainingArguments-style options, the project's trainer builds the engine
LOMO_TRAIN = dedent('''
    import sys

    from transformers import AutoModelForCausalLM, HfArgumentParser, Seq2SeqTrainingArguments

    from lomo_trainer import LOMOTrainer


    def train():
        parser = HfArgumentParser((Seq2SeqTrainingArguments,))
        (training_args,) = parser.parse_yaml_file(yaml_file=sys.argv[-1])
        model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-0.5B")
        trainer = LOMOTrainer(model=model, training_args=training_args)
        trainer.train()


    if __name__ == "__main__":
        train()
''')
LOMO_TRAINER = dedent('''
    import deepspeed
    import torch


    class LOMOTrainer:
        def __init__(self, model, training_args):
            self.training_args = training_args
            self.model, _, _, _ = deepspeed.initialize(
                config=training_args.deepspeed,
                model=model,
            )

        def train(self):
            for batch in []:
                loss = self.model(**batch).loss
                self.model.backward(loss)
''')


def test_an_imported_class_that_builds_a_deepspeed_engine_is_the_runs_framework(tmp_path: Path):
    files = {"src/train_lomo.py": LOMO_TRAIN, "src/lomo_trainer.py": LOMO_TRAINER,
             "run.sh": "deepspeed --include localhost:0 src/train_lomo.py config/args.yaml\n",
             "config/args.yaml": "per_device_train_batch_size: 16\noutput_dir: out\n"}
    settings, project = _project(tmp_path, files)
    runs = project.runs_for(tmp_path / "run.sh", run_context(settings))
    assert runs and all(r.plan.value("framework") == "deepspeed" for r in runs)
    framework = runs[0].plan.get("framework")
    assert framework.origin.path.endswith("lomo_trainer.py")


# LOMO's launch, arguments file and DeepSpeed config (micro-batch and fp16 differ from the arguments')
LOMO_LAUNCH = {
    "run.sh": "deepspeed --include localhost:0 src/train_lomo.py config/args.yaml\n",
    "config/args.yaml": "model_name_or_path: Qwen/Qwen2.5-0.5B\nper_device_train_batch_size: 16\n"
                        "deepspeed: config/ds_config.json\noutput_dir: out\n",
    "config/ds_config.json": '{\n  "fp16": {"enabled": true},\n  "train_micro_batch_size_per_gpu": 2,\n'
                             '  "zero_optimization": {"stage": 3}\n}\n'}


def test_the_deepspeed_config_of_a_project_engine_is_not_checked_against_a_trainer(tmp_path: Path):
    # LOMO's config/ds_config.json: its micro-batch and fp16 differ from the arguments file's, which
    # only an HF Trainer would refuse; LOMOTrainer hands the file to deepspeed.initialize itself
    files = {"src/train_lomo.py": LOMO_TRAIN, "src/lomo_trainer.py": LOMO_TRAINER, **LOMO_LAUNCH}
    settings, _ = _project(tmp_path, files)
    found = [d.code for d in Linter(settings).lint_path(tmp_path / "config/ds_config.json")]
    assert "CFG014" not in found


def test_a_trainer_subclass_config_is_still_checked_against_its_trainer(tmp_path: Path):
    # the near miss: the project's class extends the HF Trainer, which does check the config
    trainer = dedent('''
        from transformers import Trainer


        class LOMOTrainer(Trainer):
            pass
    ''')
    train = LOMO_TRAIN.replace("LOMOTrainer(model=model, training_args=training_args)",
                               "LOMOTrainer(model=model, args=training_args)")
    files = {"src/train_lomo.py": train, "src/lomo_trainer.py": trainer, **LOMO_LAUNCH}
    settings, _ = _project(tmp_path, files)
    found = [d.code for d in Linter(settings).lint_path(tmp_path / "config/ds_config.json")]
    assert "CFG014" in found


def test_a_script_subclassing_an_imported_paired_trainer_trains_on_pairs(tmp_path: Path):
    run_script = SIMPO_RUN.replace("from simpo_trainer import SimPOTrainer\n", dedent('''
        from simpo_trainer import SimPOTrainer as BaseSimPOTrainer


        class LoggingSimPOTrainer(BaseSimPOTrainer):
            def log(self, logs, start_time=None):
                print(logs)
    ''')).replace("trainer = SimPOTrainer(", "trainer = LoggingSimPOTrainer(")
    files = {"scripts/run_simpo.py": run_script, "scripts/simpo_trainer.py": SIMPO_TRAINER, "run.sh": SIMPO_LAUNCH}
    settings, project = _project(tmp_path, files)
    [run] = project.runs_for(tmp_path / "run.sh", run_context(settings))
    assert run.plan.value("trainer_kind") == "paired"


WEIGHTED_TRAIN = dedent('''
    from transformers import AutoModelForCausalLM, TrainingArguments

    from weighted_trainer import WeightedLossTrainer

    model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-1.5B")
    args = TrainingArguments(output_dir="out", per_device_train_batch_size=64, bf16=True)
    trainer = WeightedLossTrainer(model=model, args=args, train_dataset=None)
    trainer.train()
''')
WEIGHTED_TRAINER = dedent('''
    from transformers import Trainer


    class WeightedLossTrainer(Trainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            weights = inputs.pop("weights")
            outputs = model(**inputs)
            loss = (outputs.loss * weights).mean()
            return (loss, outputs) if return_outputs else loss
''')


def test_exceeds_holds_on_a_lower_bound_but_the_fix_is_no_verdict(tmp_path: Path):
    settings, _ = _project(tmp_path, {"train.py": WEIGHTED_TRAIN, "weighted_trainer.py": WEIGHTED_TRAINER})
    [finding] = [d for d in Linter(settings).lint_path(tmp_path / "train.py") if d.code == "MEM001"]
    assert "exceeds" in finding.message
    assert "lower bound" in finding.message and "WeightedLossTrainer.compute_loss" in finding.message
    assert "makes it fit" not in finding.message


# SimPO's layout, trimmed: alignment-handbook's package vendored at the root, its parser's
# ``parse()`` returning the dataclasses, and a helper whose branches quantize only when asked
ALIGNMENT_INIT = "from .configs import DataArguments, H4ArgumentParser, ModelArguments\n" \
                 "from .model_utils import get_quantization_config\n"
ALIGNMENT_CONFIGS = dedent('''
    from dataclasses import dataclass, field
    from typing import Optional

    import transformers


    class H4ArgumentParser(transformers.HfArgumentParser):
        def parse(self):
            return self.parse_yaml_file(self.args[0])


    @dataclass
    class ModelArguments:
        model_name_or_path: Optional[str] = field(default=None)
        torch_dtype: Optional[str] = field(default=None)
        load_in_8bit: bool = field(default=False, metadata={"help": "use 8 bit precision"})
        load_in_4bit: bool = field(default=False, metadata={"help": "use 4 bit precision"})
        bnb_4bit_quant_type: Optional[str] = field(default="nf4")


    @dataclass
    class DataArguments:
        dataset_mixer: Optional[dict] = field(default=None)
''')
ALIGNMENT_MODEL_UTILS = dedent('''
    import torch
    from transformers import BitsAndBytesConfig

    from .configs import ModelArguments


    def get_quantization_config(model_args: ModelArguments):
        if model_args.load_in_4bit:
            quantization_config = BitsAndBytesConfig(
                load_in_4bit=True,
                bnb_4bit_compute_dtype=torch.bfloat16,
                bnb_4bit_quant_type=model_args.bnb_4bit_quant_type,
            )
        elif model_args.load_in_8bit:
            quantization_config = BitsAndBytesConfig(load_in_8bit=True)
        else:
            quantization_config = None
        return quantization_config
''')
RUN_SIMPO = dedent('''
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

    from alignment import DataArguments, H4ArgumentParser, ModelArguments, get_quantization_config


    def main():
        parser = H4ArgumentParser((ModelArguments, DataArguments, TrainingArguments))
        model_args, data_args, training_args = parser.parse()
        quantization_config = get_quantization_config(model_args)
        model = AutoModelForCausalLM.from_pretrained(
            model_args.model_name_or_path, torch_dtype=torch.bfloat16, quantization_config=quantization_config)
        trainer = Trainer(model=model, args=training_args)
        trainer.train()


    if __name__ == "__main__":
        main()
''')
SIMPO_CONFIG = "model_name_or_path: meta-llama/Meta-Llama-3-8B-Instruct\ntorch_dtype: null\nbf16: true\n" \
               "per_device_train_batch_size: 2\ngradient_accumulation_steps: 16\ngradient_checkpointing: true\n" \
               "max_length: 2048\noutput_dir: outputs/llama-3-8b-instruct-simpo\n"


def test_a_helpers_branches_on_an_unset_option_of_a_parse_result_load_nothing(tmp_path: Path):
    files = {"alignment/__init__.py": ALIGNMENT_INIT, "alignment/configs.py": ALIGNMENT_CONFIGS,
             "alignment/model_utils.py": ALIGNMENT_MODEL_UTILS, "scripts/run_simpo.py": RUN_SIMPO,
             "training_configs/llama-3-8b-instruct-simpo.yaml": SIMPO_CONFIG,
             "README.md": "```shell\naccelerate launch scripts/run_simpo.py "
                          "training_configs/llama-3-8b-instruct-simpo.yaml\n```\n"}
    settings, project = _project(tmp_path, files)
    [run] = project.runs_for(tmp_path / "training_configs/llama-3-8b-instruct-simpo.yaml", run_context(settings))
    assert run.plan.get("quantization") is None  # neither load_in_4bit nor load_in_8bit is set


def test_an_unsloth_branch_the_launch_does_not_take_states_none_of_unsloths_defaults(tmp_path: Path):
    # peft's utils.py offers Unsloth beside transformers + bitsandbytes, behind ``--use_unsloth``
    loader = "    model = AutoModelForCausalLM.from_pretrained(\n"
    assert loader in SFT_UTILS
    utils = SFT_UTILS.replace(loader, """    if args.use_unsloth:
        from unsloth import FastLanguageModel

        model, _ = FastLanguageModel.from_pretrained(
            model_name=args.model_name_or_path,
            max_seq_length=training_args.max_length,
            load_in_4bit=args.use_4bit_quantization,
        )
        model = FastLanguageModel.get_peft_model(model, r=args.lora_r)
    else:
        model = AutoModelForCausalLM.from_pretrained(\n""")
    utils = utils.replace("""            args.model_name_or_path, quantization_config=bnb_config, dtype=torch.bfloat16
        )""", """            args.model_name_or_path, quantization_config=bnb_config, dtype=torch.bfloat16
            )""")
    field = "use_4bit_quantization: Optional[bool] = field(default=False)"
    assert field in SFT_TRAIN
    train = SFT_TRAIN.replace(field, field + "\n    use_unsloth: Optional[bool] = field(default=False)")
    settings, project = _project(tmp_path, {"train.py": train, "utils.py": utils, "run_qlora.sh": QLORA_LAUNCH})
    [run] = project.runs_for(tmp_path / "run_qlora.sh", run_context(settings))
    assert run.plan.value("quantization") == "nf4"
    assert run.plan.get("fused_loss") is None  # Unsloth's fused cross-entropy is not this run's
    assert run.plan.get("double_quant") is None or run.plan.value("double_quant") is False


def test_the_double_quantization_option_a_helper_hands_bitsandbytes_is_read_from_the_launch(tmp_path: Path):
    launch = QLORA_LAUNCH.replace("--use_4bit_quantization True", "--use_4bit_quantization True --use_nested_quant True")
    settings, project = _project(tmp_path, {"train.py": SFT_TRAIN, "utils.py": SFT_UTILS, "run_qlora.sh": launch})
    [run] = project.runs_for(tmp_path / "run_qlora.sh", run_context(settings))
    assert run.plan.value("double_quant") is True
    assert run.plan.get("double_quant").origin.path.endswith("run_qlora.sh")
