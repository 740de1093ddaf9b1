"""ZRO001 on an online-RL run: a GRPO trainer generates ``num_generations`` completions per
prompt between optimizer steps (``model.generate`` with its KV cache, or a vLLM engine on the
same GPUs), which the estimate does not model. "ZeRO-2 fits" is then a claim on a lower bound:
the finding is an info that says so (as for a project Trainer overriding ``compute_loss``), and a
config shared by such a run and others is judged so too. VLM-R1's scripts pick the project's
``VLMGRPOTrainer``, re-exported by ``open_r1/trainer/__init__.py``, through
``trainer_cls = VLMGRPOTrainer``."""

from __future__ import annotations

from pathlib import Path

from memlint.lint.engine import Linter
from memlint.project.settings import Settings

from tests.facts.facts_testing import dedent, write

ZERO3 = dedent('''
    {
      "bf16": {"enabled": "auto"},
      "train_micro_batch_size_per_gpu": "auto",
      "gradient_accumulation_steps": "auto",
      "zero_optimization": {"stage": 3, "overlap_comm": true, "contiguous_gradients": true}
    }
''')

TRL_GRPO = dedent('''
    from dataclasses import dataclass, field

    from datasets import load_dataset
    from trl import GRPOConfig, GRPOTrainer, ModelConfig, TrlParser


    @dataclass
    class GRPOScriptArguments:
        dataset_name: str = field(default="AI-MO/NuminaMath-TIR")


    def accuracy_reward(completions, solution, **kwargs):
        return [1.0 if c[0]["content"].strip() == s.strip() else 0.0 for c, s in zip(completions, solution)]


    def main(script_args, training_args, model_args):
        dataset = load_dataset(script_args.dataset_name)
        trainer = GRPOTrainer(
            model=model_args.model_name_or_path,
            reward_funcs=[accuracy_reward],
            args=training_args,
            train_dataset=dataset["train"],
        )
        trainer.train()


    if __name__ == "__main__":
        parser = TrlParser((GRPOScriptArguments, GRPOConfig, ModelConfig))
        main(*parser.parse_args_and_config())
''')

LAUNCH = dedent('''
    #!/bin/bash
    torchrun --nproc_per_node="8" --nnodes="1" \\
        {script} \\
        --deepspeed local_scripts/zero3.json \\
        --model_name_or_path Qwen/Qwen2.5-1.5B-Instruct \\
        --per_device_train_batch_size 8 \\
        --gradient_accumulation_steps 2 \\
        --gradient_checkpointing true \\
        --num_generations 8 \\
        --max_completion_length 1024 \\
        --bf16
''')

PROJECT_TRAINER = dedent('''
    import torch
    from transformers import Trainer
    from trl.models import unwrap_model_for_generation


    class VLMGRPOTrainer(Trainer):
        def _generate_and_score_completions(self, inputs, model):
            with unwrap_model_for_generation(model, self.accelerator) as unwrapped_model:
                return unwrapped_model.generate(**inputs, generation_config=self.generation_config)

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            per_token_logps = self._get_per_token_logps(model, inputs["input_ids"], inputs["attention_mask"])
            return -(per_token_logps * inputs["advantages"].unsqueeze(1)).mean()
''')

PROJECT_SCRIPT = dedent('''
    from dataclasses import dataclass, field

    from open_r1.trainer import VLMGRPOTrainer, GRPOConfig
    from trl import ModelConfig, ScriptArguments, TrlParser


    @dataclass
    class GRPOScriptArguments(ScriptArguments):
        image_root: str = field(default=None)


    def main(script_args, training_args, model_args):
        trainer_cls = VLMGRPOTrainer
        print("using trainer:", trainer_cls.__name__)
        trainer = trainer_cls(
            model=model_args.model_name_or_path,
            args=training_args,
        )
        trainer.train()


    if __name__ == "__main__":
        parser = TrlParser((GRPOScriptArguments, GRPOConfig, ModelConfig))
        main(*parser.parse_args_and_config())
''')


def _zro001(root: Path, files: dict[str, str]) -> list:
    write(root, {"local_scripts/zero3.json": ZERO3, **files})
    (root / ".git").mkdir(exist_ok=True)
    settings = Settings(root=root).with_overrides(gpu="h100", gpus=8, cache=False)
    return [d for d in Linter(settings).lint_path(root / "local_scripts/zero3.json") if d.code == "ZRO001"]


def test_trl_grpo_generation_makes_the_lighter_stage_a_lower_bound(tmp_path: Path):
    [finding] = _zro001(tmp_path, {"grpo.py": TRL_GRPO, "run_grpo.sh": LAUNCH.replace("{script}", "grpo.py")})
    assert finding.severity.name == "INFO"
    assert "lower bound" in finding.message and "GRPO's generation of completions" in finding.message


def test_a_reexported_project_grpo_trainer_chosen_through_a_variable(tmp_path: Path):
    files = {"src/open_r1/__init__.py": "",
             "src/open_r1/trainer/__init__.py": "from .grpo_trainer import VLMGRPOTrainer\n"
                                                "from trl import GRPOConfig\n\n__all__ = [\"VLMGRPOTrainer\"]\n",
             "src/open_r1/trainer/grpo_trainer.py": PROJECT_TRAINER,
             "src/open_r1/grpo_jsonl.py": PROJECT_SCRIPT,
             "run_grpo.sh": LAUNCH.replace("{script}", "src/open_r1/grpo_jsonl.py")}
    [finding] = _zro001(tmp_path, files)
    assert finding.severity.name == "INFO"
    assert "`VLMGRPOTrainer.compute_loss` is not modelled" in finding.message


def test_supervised_fine_tuning_of_the_same_model_is_a_warning(tmp_path: Path):
    sft = TRL_GRPO.replace("GRPOConfig", "SFTConfig").replace("GRPOTrainer(", "SFTTrainer(").replace(
        "GRPOTrainer, ", "SFTTrainer, ").replace("            reward_funcs=[accuracy_reward],\n", "")
    launch = LAUNCH.replace("{script}", "sft.py").replace("        --num_generations 8 \\\n", "").replace(
        "        --max_completion_length 1024 \\\n", "")
    [finding] = _zro001(tmp_path, {"sft.py": sft, "run_sft.sh": launch})
    assert finding.severity.name == "WARNING"
    assert "stage 3's all-gathers only cost speed here" in finding.message
