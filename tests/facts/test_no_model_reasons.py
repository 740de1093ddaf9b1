"""When memlint cannot find a run's model, the note says why and what to pass; a script that only
builds an ``Accelerator`` (to print the environment, or for inference) is no training run."""

from __future__ import annotations

from pathlib import Path

from facts_testing import dedent, facts_of, write

from memlint.lint.engine import Linter
from memlint.project.settings import Settings

# Accelerate's examples/by_feature/fsdp_with_peak_mem_tracking.py, trimmed: the model is a
# required option, and no launcher of the project passes it
FSDP_SCRIPT = dedent('''
    import argparse

    import torch
    from accelerate import Accelerator
    from transformers import AutoModelForSequenceClassification, get_linear_schedule_with_warmup


    def training_function(config, args):
        accelerator = Accelerator(cpu=args.cpu, mixed_precision=args.mixed_precision)
        model = AutoModelForSequenceClassification.from_pretrained(
            args.model_name_or_path, return_dict=True, low_cpu_mem_usage=True
        )
        optimizer = torch.optim.AdamW(params=model.parameters(), lr=config["lr"])
        model, optimizer = accelerator.prepare(model, optimizer)
        for batch in range(config["num_epochs"]):
            loss = model(**batch).loss
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()


    def main():
        parser = argparse.ArgumentParser(description="Simple example of training script.")
        parser.add_argument("--mixed_precision", type=str, default=None, choices=["no", "fp16", "bf16", "fp8"])
        parser.add_argument("--cpu", action="store_true", help="If passed, will train on the CPU.")
        parser.add_argument(
            "--model_name_or_path",
            type=str,
            help="Path to pretrained model or model identifier from huggingface.co/models.",
            required=True,
        )
        args = parser.parse_args()
        config = {"lr": 2e-5, "num_epochs": 3, "seed": 42, "batch_size": 16}
        training_function(config, args)


    if __name__ == "__main__":
        main()
''')

# Accelerate's examples/config_yaml_templates/run_me.py: prints the environment, trains nothing
RUN_ME = dedent('''
    """
    A base script which outputs the accelerate config for the given environment
    """

    from accelerate import Accelerator


    accelerator = Accelerator()

    accelerator.print(f"Accelerator state from the current environment:\\n{accelerator.state}")
    if accelerator.fp8_recipe_handler is not None:
        accelerator.print(f"FP8 config:\\n{accelerator.fp8_recipe_handler}")
    accelerator.end_training()
''')


def _memory(root: Path, files: dict[str, str], name: str):
    write(root, files)
    (root / ".git").mkdir(exist_ok=True)
    settings = Settings(root=root).with_overrides(gpu="h100", cache=False)
    return [d for d in Linter(settings).lint_path(root / name) if d.code.startswith("MEM")]


def test_a_model_option_nobody_passes_is_named_in_the_note(tmp_path: Path):
    [note] = _memory(tmp_path, {"by_feature/fsdp.py": FSDP_SCRIPT}, "by_feature/fsdp.py")
    assert note.code == "MEM003"
    assert "`--model_name_or_path`" in note.message and "set `model` in [tool.memlint]" in note.message


def test_the_same_option_passed_by_a_launcher_answers(tmp_path: Path):
    launcher = "accelerate launch by_feature/fsdp.py --model_name_or_path Qwen/Qwen2.5-0.5B --mixed_precision bf16\n"
    found = _memory(tmp_path, {"by_feature/fsdp.py": FSDP_SCRIPT, "launch.sh": launcher}, "launch.sh")
    assert not [d for d in found if d.code == "MEM003"]


def test_an_accelerator_alone_trains_nothing():
    assert facts_of(RUN_ME, "config_yaml_templates/run_me.py") == []
    # with an optimizer beside it, it trains
    [script] = facts_of(FSDP_SCRIPT, "by_feature/fsdp.py")
    assert script.framework.value == "accelerate"


def test_a_timm_model_is_named_as_what_the_estimate_does_not_model():
    text = FSDP_SCRIPT.replace(
        "from transformers import AutoModelForSequenceClassification, get_linear_schedule_with_warmup",
        "from timm import create_model as build").replace(
        '''AutoModelForSequenceClassification.from_pretrained(
        args.model_name_or_path, return_dict=True, low_cpu_mem_usage=True
    )''', 'build("resnet50d", pretrained=True, num_classes=37)')
    [script] = facts_of(text, "cv_example.py")
    what, advice = script.unmodelled.value
    assert what == 'a timm image model (`build("resnet50d", pretrained=True, num_classes=37)`)'
    assert "torch.cuda.max_memory_allocated()" in advice and "ignore[MEM003]" in advice


# jiaqianjing/cpt-sft-grpo-med-zh's med_pipeline/train/run_grpo.py, trimmed: the model is the
# config's base id or a checkpoint path a project helper builds, handed to TRL as a string
GRPO_FROM_A_CHECKPOINT = dedent('''
    import argparse

    from trl import GRPOConfig, GRPOTrainer

    from med_pipeline.common import Paths, load_config


    def main():
        ap = argparse.ArgumentParser()
        ap.add_argument("--config", default="configs/grpo.yaml")
        ap.add_argument("--init-model", required=True, help="checkpoints/ subdir to start from")
        args = ap.parse_args()
        cfg = load_config(args.config)
        paths = Paths(cfg.root)
        init = cfg.model.base_model_id if args.init_model == "base" else str(paths.ckpt(args.init_model))
        trainer = GRPOTrainer(model=init, reward_funcs=[exact_match],
                              args=GRPOConfig(output_dir="out", per_device_train_batch_size=4, bf16=True))
        trainer.train()


    if __name__ == "__main__":
        main()
''')


def test_a_call_converted_to_text_is_no_model_name(tmp_path: Path):
    write(tmp_path, {"med_pipeline/train/run_grpo.py": GRPO_FROM_A_CHECKPOINT, "med_pipeline/__init__.py": ""})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False)
    notes = [d.message for d in Linter(settings).lint_path(tmp_path / "med_pipeline/train/run_grpo.py")
             if d.code == "MEM003"]
    assert notes and not any("CallValue" in n for n in notes)  # before: memlint's own record of the call, as text


# TRL's prepare_deepspeed, as reward-modeling-develop copies it into rmood/rm/rrm/rrm/datacollator.py:
# the reference and reward models run under DeepSpeed frozen, in eval mode
PREPARE_DEEPSPEED = dedent('''
    from copy import deepcopy

    import deepspeed
    from accelerate import Accelerator


    def prepare_deepspeed(model, per_device_train_batch_size: int, fp16: bool = False, bf16: bool = False):
        deepspeed_plugin = Accelerator().state.deepspeed_plugin
        config_kwargs = deepcopy(deepspeed_plugin.deepspeed_config)
        if config_kwargs["zero_optimization"]["stage"] != 3:
            config_kwargs["train_micro_batch_size_per_gpu"] = per_device_train_batch_size
            config_kwargs = {"train_micro_batch_size_per_gpu": config_kwargs["train_micro_batch_size_per_gpu"],
                             "prescale_gradients": False, "wall_clock_breakdown": False}
            if bf16:
                config_kwargs["bf16"] = {"enabled": True}
        model, *_ = deepspeed.initialize(model=model, config=config_kwargs)
        model.eval()
        return model
''')


def test_an_engine_built_for_a_frozen_model_trains_nothing():
    # before: a MEM003 "no model found" note on a helper that trains nothing
    assert facts_of(PREPARE_DEEPSPEED, "rmood/rm/utils.py") == []
    # handed an optimizer's parameters, the same engine trains
    trained = PREPARE_DEEPSPEED.replace("deepspeed.initialize(model=model, config=config_kwargs)",
                                        "deepspeed.initialize(model=model, model_parameters=model.parameters(), "
                                        "config=config_kwargs)").replace("        model.eval()\n", "")
    [script] = facts_of(trained, "rmood/rm/utils.py")
    assert script.framework.value == "deepspeed"


# pbressollette/mistral-finetuning's scripts/evaluate.py, trimmed: a Trainer built to evaluate
EVALUATE_ONLY = dedent('''
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments


    def evaluate_model(model_path: str, test_dataset):
        tokenizer = AutoTokenizer.from_pretrained(model_path)
        model = AutoModelForCausalLM.from_pretrained(model_path, torch_dtype=torch.float16, device_map="auto")
        args = TrainingArguments(output_dir="./eval", per_device_eval_batch_size=4, fp16=True, report_to="none")
        trainer = Trainer(model=model, args=args, eval_dataset=test_dataset, tokenizer=tokenizer)
        return trainer.evaluate()


    if __name__ == "__main__":
        print(evaluate_model("outputs/mistral-lora", None))
''')


def test_a_trainer_built_only_to_evaluate_trains_nothing():
    # before: "memory not checked: the run loads its model with device_map='auto'" on an evaluation
    assert facts_of(EVALUATE_ONLY, "scripts/evaluate.py") == []
    # the same trainer trained first is a run
    trained = EVALUATE_ONLY.replace("    return trainer.evaluate()", "    trainer.train()\n    return trainer.evaluate()")
    [script] = facts_of(trained, "scripts/evaluate.py")
    assert script.framework.value == "hf-trainer"
