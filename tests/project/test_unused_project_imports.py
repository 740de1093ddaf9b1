"""A launched script with no training of its own states a run through its options only when it
hands on to the project's own code (LLaMA-Factory's ``src/train.py`` calls ``run_exp()`` from its
package). An import it never uses hands nothing on: DeepSpeedExamples' ``analyze_data.py``
imports ``AnnealingLR`` from the project's ``learning_rates.py``, never calls it, and runs
DeepSpeed's data analyzer over batches of 1,000 samples -- its ``--per_device_train_batch_size``
names a data-analysis batch, not a training one."""

from __future__ import annotations

from pathlib import Path

from memlint.lint.engine import Linter
from memlint.project.settings import Settings

from tests.facts.facts_testing import dedent, write

LEARNING_RATES = dedent('''
    import math


    class AnnealingLR(object):
        """Anneals the learning rate from start to zero along a cosine curve."""

        def __init__(self, optimizer, start_lr, warmup_iter, total_iters):
            self.optimizer = optimizer
            self.start_lr = start_lr
            self.warmup_iter = warmup_iter
            self.end_iter = total_iters

        def get_lr(self, step):
            if step <= self.warmup_iter:
                return self.start_lr * step / self.warmup_iter
            return self.start_lr / 2.0 * (math.cos(math.pi * (step - self.warmup_iter) / self.end_iter) + 1)
''')

ANALYZE = dedent('''
    import argparse

    import torch
    from datasets import load_dataset
    from transformers import AutoConfig, AutoTokenizer, default_data_collator
    from deepspeed.runtime.data_pipeline.data_sampling.data_analyzer \\
        import DataAnalyzer
    from learning_rates import AnnealingLR


    def parse_args():
        parser = argparse.ArgumentParser(description="Analyze a dataset for curriculum learning")
        parser.add_argument("--dataset_name", type=str, default=None)
        parser.add_argument("--model_name_or_path", type=str, required=True)
        parser.add_argument("--per_device_train_batch_size", type=int, default=8)
        parser.add_argument("--output_dir", type=str, default=None)
        parser.add_argument("--analyzing_task", type=str, required=True, choices=["map", "reduce"])
        parser.add_argument("--analyzing_metric", type=str, nargs="+", default=[])
        return parser.parse_args()


    def main():
        args = parse_args()
        config = AutoConfig.from_pretrained(args.model_name_or_path)
        tokenizer = AutoTokenizer.from_pretrained(args.model_name_or_path)
        train_ds = load_dataset(args.dataset_name)["train"]

        def metric_total_vocab_freq(data):
            return torch.bincount(data["input_ids"].view(-1), minlength=len(tokenizer) + 1)

        analyzer = DataAnalyzer(train_ds, collate_fn=default_data_collator,
                                batch_size=args.per_device_train_batch_size,
                                metric_names=args.analyzing_metric,
                                metric_functions=[metric_total_vocab_freq],
                                metric_types=["accumulate_value_over_samples"],
                                save_path=args.output_dir)
        if args.analyzing_task == "map":
            analyzer.run_map()
        else:
            analyzer.run_reduce()


    if __name__ == "__main__":
        main()
''')

# the launch of the script (ds_analyze_gpt_data_map.sh, shortened)
LAUNCH = dedent('''
    #!/bin/bash
    batch_size=1000
    options=" \\
        --analyzing_task map \\
        --analyzing_metric total_vocab_freq \\
        --dataset_name ptb_text_only \\
        --model_name_or_path gpt2-medium \\
        --per_device_train_batch_size ${batch_size} \\
        --output_dir /data/analysis_ptb_gpt/"

    python {script} ${options} &> analyze.log
''')

# LLaMA-Factory's layout: the entry script only calls into its package, which dispatches the run
TUNER = dedent('''
    from typing import Any, Optional


    def run_exp(args: Optional[dict[str, Any]] = None) -> None:
        from .sft import run_sft

        run_sft(args)
''')

TRAIN = dedent('''
    from {package}.tuner import run_exp


    def main():
        run_exp()


    if __name__ == "__main__":
        main()
''')


def _memory(root: Path, files: dict[str, str]) -> list:
    write(root, files)
    (root / ".git").mkdir(exist_ok=True)
    settings = Settings(root=root).with_overrides(gpu="h100", gpus=8, cache=False)
    return [d for d in Linter(settings).lint_path(root / "run.sh") if d.code in ("MEM001", "MEM002", "MEM003")]


def test_a_script_that_only_imports_an_unused_project_helper_states_no_run(tmp_path: Path):
    found = _memory(tmp_path, {"learning_rates.py": LEARNING_RATES, "analyze_data.py": ANALYZE,
                               "run.sh": LAUNCH.replace("{script}", "analyze_data.py")})
    assert found == []


def test_a_script_that_calls_into_its_package_states_the_run_its_options_describe(tmp_path: Path):
    found = _memory(tmp_path, {"llamafactory/__init__.py": "", "llamafactory/tuner.py": TUNER,
                               "llamafactory/sft.py": "def run_sft(args):\n    return args\n",
                               "train.py": TRAIN.replace("{package}", "llamafactory"),
                               "run.sh": LAUNCH.replace("{script}", "train.py")})
    [verdict] = [d for d in found if d.code == "MEM001"]
    assert "exceeds" in verdict.message


def test_an_aliased_import_that_is_used_counts(tmp_path: Path):
    train = "from llamafactory.tuner import run_exp as launch\n\nlaunch()\n"
    found = _memory(tmp_path, {"llamafactory/__init__.py": "", "llamafactory/tuner.py": TUNER,
                               "llamafactory/sft.py": "def run_sft(args):\n    return args\n",
                               "train.py": train, "run.sh": LAUNCH.replace("{script}", "train.py")})
    assert [d for d in found if d.code == "MEM001"]


# A script whose training sits under a mode the command line chooses (DeepSpeedExamples'
# ``--analyzing_task map|reduce`` pattern, where one of the modes trains)
MODES = dedent('''
    import argparse

    import torch
    from torch.utils.data import DataLoader
    from transformers import AutoModelForCausalLM, default_data_collator


    def parse_args():
        parser = argparse.ArgumentParser()
        parser.add_argument("--model_name_or_path", type=str, default="gpt2-medium")
        parser.add_argument("--per_device_train_batch_size", type=int, default=8)
        parser.add_argument("--task", type=str, default="train", choices=["train", "analyze"])
        return parser.parse_args()


    def train(args, dataset):
        model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path).cuda()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        loader = DataLoader(dataset, batch_size=args.per_device_train_batch_size, collate_fn=default_data_collator)
        for batch in loader:
            loss = model(**batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()


    def analyze(args, dataset):
        lengths = [len(sample["input_ids"]) for sample in dataset]
        print(max(lengths))


    def main():
        args = parse_args()
        dataset = torch.load("data/train.pt")
        if args.task == "train":
            train(args, dataset)
        else:
            analyze(args, dataset)


    if __name__ == "__main__":
        main()
''')

MODE_LAUNCH = dedent('''
    #!/bin/bash
    python run.py --task {task} --model_name_or_path gpt2-medium --per_device_train_batch_size 1000
''')


def _mode_runs(root: Path, task: str) -> list:
    write(root, {"run.py": MODES, "run.sh": MODE_LAUNCH.replace("{task}", task)})
    (root / ".git").mkdir(exist_ok=True)
    settings = Settings(root=root).with_overrides(gpu="h100", gpus=8, cache=False)
    from memlint.lint.engine import run_context
    from memlint.project.project import Project

    return Project(settings).runs_for(root / "run.sh", run_context(settings))


def test_a_launch_that_chooses_a_mode_without_training_is_no_run(tmp_path: Path):
    [run] = _mode_runs(tmp_path, "analyze")
    assert not run.trains
    assert "--task" in (run.problem or "")
    found = _memory(tmp_path, {})
    assert found == []


def test_a_launch_that_chooses_the_training_mode_trains(tmp_path: Path):
    [run] = _mode_runs(tmp_path, "train")
    assert run.trains and run.setup is not None and run.setup.micro_batch == 1000
    assert [d for d in _memory(tmp_path, {}) if d.code == "MEM001"]


# DeepSpeed-Chat's prompt_eval.py: loads two models through the project's helper and generates
MODEL_UTILS = dedent('''
    from transformers import AutoConfig


    def create_hf_model(model_class, model_name_or_path, tokenizer, ds_config=None, dropout=None):
        model_config = AutoConfig.from_pretrained(model_name_or_path)
        model = model_class.from_pretrained(model_name_or_path, config=model_config)
        model.config.end_token_id = tokenizer.eos_token_id
        return model
''')

PROMPT_EVAL = dedent('''
    import argparse

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from dschat.utils.model.model_utils import create_hf_model


    def parse_args():
        parser = argparse.ArgumentParser(description="Eval the finetued SFT model")
        parser.add_argument("--model_name_or_path_baseline", type=str, required=True)
        parser.add_argument("--model_name_or_path_finetune", type=str, required=True)
        parser.add_argument("--max_new_tokens", type=int, default=100)
        return parser.parse_args()


    def main():
        args = parse_args()
        tokenizer = AutoTokenizer.from_pretrained(args.model_name_or_path_baseline)
        model_baseline = create_hf_model(AutoModelForCausalLM, args.model_name_or_path_baseline, tokenizer, None)
        model_fintuned = create_hf_model(AutoModelForCausalLM, args.model_name_or_path_finetune, tokenizer, None)
        device = torch.device("cuda:0")
        for model in (model_baseline, model_fintuned):
            model.to(device)
            inputs = tokenizer("Human: Please tell me about Microsoft. Assistant:", return_tensors="pt").to(device)
            print(tokenizer.decode(model.generate(**inputs, max_new_tokens=args.max_new_tokens)[0]))


    if __name__ == "__main__":
        main()
''')


def test_an_evaluation_script_that_loads_models_through_a_project_helper_is_no_run(tmp_path: Path):
    launch = ("#!/bin/bash\nexport CUDA_VISIBLE_DEVICES=0\npython prompt_eval.py \\\n"
              "    --model_name_or_path_baseline facebook/opt-1.3b \\\n"
              "    --model_name_or_path_finetune facebook/opt-1.3b\n")
    found = _memory(tmp_path, {"dschat/__init__.py": "", "dschat/utils/__init__.py": "",
                               "dschat/utils/model/__init__.py": "", "dschat/utils/model/model_utils.py": MODEL_UTILS,
                               "training/step1_supervised_finetuning/prompt_eval.py": PROMPT_EVAL,
                               "run.sh": launch.replace("prompt_eval.py", "training/step1_supervised_finetuning/prompt_eval.py")})
    assert found == []
    from memlint.lint.engine import run_context
    from memlint.project.project import Project

    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False)
    assert not [run for run in Project(settings).runs_for(tmp_path / "run.sh", run_context(settings)) if run.trains]
