"""Runs with more than one model: the reference, reward, value and teacher models that TRL,
OpenRLHF and LLaMA-Factory hold beside the policy are counted on the policy's GPUs, each named in
the budget, sharded as the framework shards it (frozen ones) or trained with the policy (PPO's
value model). Scripts and configs are written as those frameworks' examples write them."""

from __future__ import annotations

from pathlib import Path

from facts_testing import dedent

from memlint.estimate import estimate_training
from memlint.lint.engine import run_context
from memlint.project.project import Project
from memlint.project.settings import Settings

GiB = 2**30

# trl examples/scripts/ppo/ppo.py, as TRL writes it (trl.experimental.ppo)
PPO = dedent('''
    import shutil

    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer, HfArgumentParser

    from trl import ModelConfig, ScriptArguments, get_peft_config
    from trl.experimental.ppo import PPOConfig, PPOTrainer


    if __name__ == "__main__":
        parser = HfArgumentParser((ScriptArguments, PPOConfig, ModelConfig))
        script_args, training_args, model_args = parser.parse_args_into_dataclasses()
        shutil.rmtree(training_args.output_dir, ignore_errors=True)
        model_kwargs = dict(revision=model_args.model_revision, attn_implementation=model_args.attn_implementation)
        tokenizer = AutoTokenizer.from_pretrained(model_args.model_name_or_path, padding_side="left")
        value_model = AutoModelForSequenceClassification.from_pretrained(
            training_args.reward_model_path, num_labels=1, **model_kwargs
        )
        reward_model = AutoModelForSequenceClassification.from_pretrained(
            training_args.reward_model_path, num_labels=1, **model_kwargs
        )
        policy = AutoModelForCausalLM.from_pretrained(training_args.sft_model_path, **model_kwargs)
        peft_config = get_peft_config(model_args)
        if peft_config is None:
            ref_policy = AutoModelForCausalLM.from_pretrained(training_args.sft_model_path, **model_kwargs)
        else:
            ref_policy = None
        trainer = PPOTrainer(
            args=training_args,
            processing_class=tokenizer,
            model=policy,
            ref_model=ref_policy,
            reward_model=reward_model,
            value_model=value_model,
            train_dataset=None,
            peft_config=peft_config,
        )
        trainer.train()
''')

PPO_LAUNCH = dedent('''
    accelerate launch --config_file zero3.yaml \\
        train_ppo.py \\
        --dataset_name trl-internal-testing/descriptiveness-sentiment-trl-style \\
        --output_dir pythia-ppo \\
        --per_device_train_batch_size 1 \\
        --gradient_accumulation_steps 16 \\
        --model_name_or_path Qwen/Qwen2.5-7B-Instruct \\
        --sft_model_path Qwen/Qwen2.5-7B-Instruct \\
        --reward_model_path Qwen/Qwen2.5-1.5B-Instruct \\
        --max_length 1024
''')

ZERO3 = dedent('''
    compute_environment: LOCAL_MACHINE
    distributed_type: DEEPSPEED
    deepspeed_config:
      offload_optimizer_device: none
      offload_param_device: none
      zero3_init_flag: true
      zero_stage: 3
    mixed_precision: bf16
    num_machines: 1
    num_processes: 8
''')

ZERO2 = ZERO3.replace("zero_stage: 3", "zero_stage: 2").replace("  zero3_init_flag: true\n", "")

# trl/scripts/dpo.py's shape: a script of the user's with argparse and a helper
DPO = dedent('''
    import argparse

    from datasets import load_dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import DPOConfig, DPOTrainer


    def parse_args():
        parser = argparse.ArgumentParser()
        parser.add_argument("--model", default="Qwen/Qwen2.5-1.5B-Instruct")
        parser.add_argument("--batch_size", type=int, default=2)
        return parser.parse_args()


    def main():
        args = parse_args()
        model = AutoModelForCausalLM.from_pretrained(args.model, dtype="bfloat16")
        tokenizer = AutoTokenizer.from_pretrained(args.model)
        training_args = DPOConfig(
            output_dir="dpo-out",
            per_device_train_batch_size=args.batch_size,
            max_length=1024,
            gradient_checkpointing=True,
            bf16=True,
        )
        trainer = DPOTrainer(
            model=model,
            ref_model=None,
            args=training_args,
            train_dataset=load_dataset("trl-lib/ultrafeedback_binarized", split="train"),
            processing_class=tokenizer,
        )
        trainer.train()


    if __name__ == "__main__":
        main()
''')

# trl examples/scripts/gkd.py's launch, written in the project's README
GKD = dedent('''
    from datasets import load_dataset
    from transformers import AutoTokenizer
    from trl import ModelConfig, ScriptArguments, TrlParser
    from trl.experimental.gkd import GKDConfig, GKDTrainer

    if __name__ == "__main__":
        parser = TrlParser((ScriptArguments, GKDConfig, ModelConfig))
        script_args, training_args, model_args = parser.parse_args_and_config()
        tokenizer = AutoTokenizer.from_pretrained(model_args.model_name_or_path)
        dataset = load_dataset(script_args.dataset_name)
        trainer = GKDTrainer(
            model=model_args.model_name_or_path,
            teacher_model=training_args.teacher_model_name_or_path,
            args=training_args,
            train_dataset=dataset[script_args.dataset_train_split],
            processing_class=tokenizer,
        )
        trainer.train()
''')

GKD_README = dedent('''
    # Distillation

    ```bash
    python gkd.py \\
        --model_name_or_path Qwen/Qwen2-0.5B-Instruct \\
        --teacher_model_name_or_path Qwen/Qwen2.5-7B-Instruct \\
        --dataset_name trl-lib/chatbot_arena_completions \\
        --per_device_train_batch_size 4 \\
        --gradient_accumulation_steps 8 \\
        --output_dir gkd-model
    ```
''')

# OpenRLHF examples/scripts/train_ppo_ray_hybrid_engine.sh (dotted flags), trimmed
OPENRLHF_PPO = dedent('''
    set -x

    python3 -m openrlhf.cli.train_ppo_ray \\
       --actor.num_nodes 1 \\
       --actor.num_gpus_per_node 8 \\
       --vllm.num_engines 4 \\
       --vllm.tensor_parallel_size 2 \\
       --train.colocate_all \\
       --vllm.gpu_memory_utilization 0.5 \\
       --actor.model_name_or_path meta-llama/Meta-Llama-3-8B \\
       --reward.model_name_or_path meta-llama/Llama-3.2-1B \\
       --critic.model_name_or_path meta-llama/Llama-3.2-1B \\
       --train.batch_size 128 \\
       --train.micro_batch_size 1 \\
       --data.max_len 2048 \\
       --ds.zero_stage 3 \\
       --ds.param_dtype bf16 \\
       --algo.kl.init_coef 0.01 \\
       --actor.gradient_checkpointing_enable
''')

# LLaMA-Factory examples/train_lora/qwen3_lora_dpo.yaml, trimmed
LF_DPO = dedent('''
    ### model
    model_name_or_path: Qwen/Qwen2.5-7B-Instruct

    ### method
    stage: dpo
    do_train: true
    finetuning_type: lora
    lora_rank: 8
    lora_target: all
    pref_beta: 0.1
    pref_loss: sigmoid  # choices: [sigmoid (dpo), orpo, simpo]

    ### dataset
    dataset: dpo_en_demo
    template: qwen
    cutoff_len: 2048

    ### train
    output_dir: saves/qwen2.5-7b/lora/dpo
    per_device_train_batch_size: 1
    gradient_accumulation_steps: 8
    learning_rate: 5.0e-6
    bf16: true
''')


def _project(tmp_path: Path, files: dict[str, str]):
    (tmp_path / ".git").mkdir(parents=True)
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", cache=False, offline=True)
    return Project(settings), run_context(settings)


def _run(tmp_path: Path, files: dict[str, str], entry: str):
    project, context = _project(tmp_path, files)
    runs = [r for r in project.runs_for(tmp_path / entry, context) if r.setup is not None]
    assert runs, [r.problem for r in project.runs_for(tmp_path / entry, context)]
    return runs[0]


def _components(run) -> dict[str, int]:
    budget = estimate_training(run.arch, run.setup)
    out: dict[str, int] = {}
    for phase in budget.phases:
        for component in phase.components:
            out[component.key] = max(out.get(component.key, 0), component.bytes)
    return out


def _labels(run) -> list[str]:
    return [c.label for c in estimate_training(run.arch, run.setup).components]


def test_trl_ppo_holds_reference_reward_and_a_trained_value_model(tmp_path: Path):
    run = _run(tmp_path, {"train_ppo.py": PPO, "launch.sh": PPO_LAUNCH, "zero3.yaml": ZERO3}, "train_ppo.py")
    roles = {c.role: c for c in run.setup.companions}
    assert set(roles) == {"reference", "reward", "value"}
    assert roles["reference"].arch.name == "Qwen/Qwen2.5-7B-Instruct"
    assert roles["reward"].arch.name == roles["value"].arch.name == "Qwen/Qwen2.5-1.5B-Instruct"
    assert roles["value"].trains and not roles["reward"].trains
    parts = _components(run)
    policy = run.arch.n_params
    # ZeRO-3 over 8 GPUs: TRL's prepare_deepspeed shards the reference like the policy, in bf16
    assert parts["reference_model_weights"] == int(policy * 2 / 8)
    assert parts["reward_model_weights"] > 0
    assert parts["value_model_optimizer_states"] > parts["value_model_weights"] > 0
    assert parts["value_model_gradients"] > 0 and parts["value_model_activations"] > 0
    labels = " ".join(_labels(run))
    assert "Qwen/Qwen2.5-1.5B-Instruct" in labels


def test_reference_is_whole_on_each_gpu_below_zero3(tmp_path: Path):
    run = _run(tmp_path, {"train_ppo.py": PPO, "launch.sh": PPO_LAUNCH, "zero3.yaml": ZERO2}, "train_ppo.py")
    assert _components(run)["reference_model_weights"] == run.arch.n_params * 2
    assert any("stage-0 engine" in note for note in estimate_training(run.arch, run.setup).assumptions)


def test_dpo_with_ref_model_none_copies_the_policy(tmp_path: Path):
    run = _run(tmp_path, {"dpo.py": DPO}, "dpo.py")
    [reference] = run.setup.companions
    assert reference.role == "reference" and reference.arch.name == "Qwen/Qwen2.5-1.5B-Instruct"
    with_ref = estimate_training(run.arch, run.setup)
    without = estimate_training(run.arch, run.setup.but(companions=()))
    assert with_ref.peak_bytes - without.peak_bytes == run.arch.n_params * 2


def test_a_preference_pair_runs_two_sequences_per_example(tmp_path: Path):
    run = _run(tmp_path, {"dpo.py": DPO}, "dpo.py")
    assert run.setup.micro_batch == 2 and run.setup.sequences_per_example == 2
    budget = estimate_training(run.arch, run.setup)
    single = estimate_training(run.arch, run.setup.but(sequences_per_example=1, micro_batch=4))
    assert budget.peak_bytes == single.peak_bytes  # 2 pairs = 4 sequences
    assert any("chosen and a rejected sequence: 4 sequences" in a for a in budget.assumptions)
    # supervised fine-tuning of the same model runs one sequence per example
    sft = DPO.replace("DPOConfig", "SFTConfig").replace("DPOTrainer", "SFTTrainer").replace("        ref_model=None,\n", "")
    run = _run(tmp_path / "sft", {"sft.py": sft}, "sft.py")
    assert run.setup.sequences_per_example == 1 and run.setup.companions == ()


def test_dpo_near_misses_hold_no_reference(tmp_path: Path):
    precomputed = DPO.replace("bf16=True,", "bf16=True,\n        precompute_ref_log_probs=True,")
    run = _run(tmp_path / "a", {"dpo.py": precomputed}, "dpo.py")
    assert run.setup.companions == ()
    assert any("precompute_ref_log_probs" in note for note in run.assumptions)
    # a PEFT policy: the trainer disables the adapter instead of copying the model
    peft = DPO.replace("    trainer = DPOTrainer(\n", "    peft_config = LoraConfig(r=16, target_modules=\"all-linear\")\n"
                                                       "    trainer = DPOTrainer(\n        peft_config=peft_config,\n")
    assert peft != DPO
    run = _run(tmp_path / "b", {"dpo.py": peft}, "dpo.py")
    assert run.setup.lora is not None
    assert "reference_model_weights" not in _components(run)


def test_gkd_teacher_from_a_readme_command(tmp_path: Path):
    run = _run(tmp_path, {"gkd.py": GKD, "README.md": GKD_README}, "gkd.py")
    [teacher] = run.setup.companions
    assert teacher.role == "teacher" and teacher.arch.name == "Qwen/Qwen2.5-7B-Instruct"
    assert _components(run)["teacher_model_weights"] == teacher.arch.n_params * 2


def test_grpo_loads_no_reference_unless_beta_is_set(tmp_path: Path):
    grpo = dedent('''
        from trl import GRPOConfig, GRPOTrainer

        def reward_len(completions, **kwargs):
            return [-abs(20 - len(c)) for c in completions]

        args = GRPOConfig(output_dir="grpo", per_device_train_batch_size=8, max_completion_length=256,
                          max_prompt_length=256, bf16=True{beta})
        trainer = GRPOTrainer(model="Qwen/Qwen2.5-0.5B-Instruct", reward_funcs=reward_len, args=args,
                              train_dataset=None)
        trainer.train()
    ''')
    run = _run(tmp_path / "a", {"grpo.py": grpo.format(beta="")}, "grpo.py")
    assert run.setup.companions == ()
    assert any("no reference model" in note for note in run.assumptions)
    run = _run(tmp_path / "b", {"grpo.py": grpo.format(beta=", beta=0.04")}, "grpo.py")
    assert [c.role for c in run.setup.companions] == ["reference"]


def test_openrlhf_ray_ppo_colocated_counts_reference_reward_and_critic(tmp_path: Path):
    run = _run(tmp_path, {"examples/scripts/train_ppo.sh": OPENRLHF_PPO}, "examples/scripts/train_ppo.sh")
    roles = {c.role: c.arch.name for c in run.setup.companions}
    assert roles == {"reference": "meta-llama/Meta-Llama-3-8B", "reward": "meta-llama/Llama-3.2-1B",
                     "value": "meta-llama/Llama-3.2-1B"}
    # without colocation each model has GPUs of its own: the actor's hold the actor alone
    apart = OPENRLHF_PPO.replace("   --train.colocate_all \\\n", "")
    run = _run(tmp_path / "apart", {"examples/scripts/train_ppo.sh": apart}, "examples/scripts/train_ppo.sh")
    assert run.setup.companions == ()
    assert any("GPUs of their own" in note for note in run.assumptions)


def test_llamafactory_dpo_reference_only_for_a_full_fine_tune(tmp_path: Path):
    run = _run(tmp_path / "lora", {"dpo.yaml": LF_DPO}, "dpo.yaml")
    assert "reference_model_weights" not in _components(run)
    full = LF_DPO.replace("finetuning_type: lora", "finetuning_type: full").replace("lora_rank: 8\n", "")
    run = _run(tmp_path / "full", {"dpo.yaml": full}, "dpo.yaml")
    assert [c.role for c in run.setup.companions] == ["reference"]
    assert _components(run)["reference_model_weights"] == run.arch.n_params * 2
    # ORPO needs no reference, but still runs both sequences of each pair
    orpo = full.replace("pref_loss: sigmoid", "pref_loss: orpo")
    run = _run(tmp_path / "orpo", {"dpo.yaml": orpo}, "dpo.yaml")
    assert run.setup.companions == () and run.setup.sequences_per_example == 2


def test_llamafactory_ppo_full_reward_model(tmp_path: Path):
    ppo = LF_DPO.replace("stage: dpo", "stage: ppo").replace(
        "pref_beta: 0.1\n", "reward_model: Qwen/Qwen2.5-1.5B-Instruct\nreward_model_type: full\n")
    run = _run(tmp_path / "full", {"ppo.yaml": ppo}, "ppo.yaml")
    assert [c.role for c in run.setup.companions] == ["reference", "reward"]
    assert "reference_model_weights" not in _components(run)  # LoRA: the adapter is disabled instead
    assert _components(run)["reward_model_weights"] > 0
    lora_reward = ppo.replace("reward_model_type: full", "reward_model_type: lora")
    run = _run(tmp_path / "lora", {"ppo.yaml": lora_reward}, "ppo.yaml")
    assert "reward_model_weights" not in _components(run)


# a project's own preference trainer (princeton-nlp/SimPO's SimPOTrainer, trimmed, in one file):
# a transformers Trainer subclass whose concatenated_forward runs chosen and rejected together
OWN_PAIRED_TRAINER = '''\
import argparse

import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments


class PreferenceTrainer(Trainer):
    def concatenated_forward(self, model, batch):
        inputs = torch.cat([batch["chosen_input_ids"], batch["rejected_input_ids"]], dim=0)
        logits = model(inputs).logits
        return logits.split(batch["chosen_input_ids"].shape[0])

    def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
        chosen, rejected = self.concatenated_forward(model, inputs)
        loss = -F.logsigmoid(chosen.mean() - rejected.mean())
        return (loss, {}) if return_outputs else loss


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="Qwen/Qwen2.5-1.5B-Instruct")
    args = parser.parse_args()
    model = AutoModelForCausalLM.from_pretrained(args.model)
    training_args = TrainingArguments(output_dir="out", per_device_train_batch_size=2, bf16=True)
    trainer = PreferenceTrainer(model=model, args=training_args, train_dataset=load_pairs())
    trainer.train()


if __name__ == "__main__":
    main()
'''


def test_a_project_trainer_with_a_concatenated_forward_runs_pairs(tmp_path: Path):
    run = _run(tmp_path, {"train_pref.py": OWN_PAIRED_TRAINER}, "train_pref.py")
    assert run.setup.micro_batch == 2 and run.setup.sequences_per_example == 2
    assert run.setup.companions == ()  # a reference is another fact: none is passed here
    # the same trainer without the paired forward trains one sequence per example
    plain = OWN_PAIRED_TRAINER.replace("def concatenated_forward", "def forward_pair")
    plain = plain.replace("self.concatenated_forward", "self.forward_pair")
    run = _run(tmp_path / "plain", {"train_pref.py": plain}, "train_pref.py")
    assert run.setup.sequences_per_example == 1


# SPPO / SPIN's shape: TRL 0.9.6's DPOTrainer copied into the project's own trainer module
# (a transformers Trainer subclass), imported by the training script and launched with
# accelerate's ZeRO-3 config; the trainer builds its reference when the script passes none
COPIED_DPO_TRAINER = '''\
from copy import deepcopy
from typing import Optional, Union

import torch
import torch.nn as nn
import torch.nn.functional as F
from peft import PeftModel, get_peft_model
from transformers import AutoModelForCausalLM, PreTrainedModel, Trainer
from trl.models import create_reference_model


class PairwiseTrainer(Trainer):
    def __init__(
        self,
        model: Union[PreTrainedModel, nn.Module, str] = None,
        ref_model: Optional[Union[PreTrainedModel, nn.Module, str]] = None,
        beta: float = 0.1,
        args=None,
        train_dataset=None,
        tokenizer=None,
        peft_config: Optional[dict] = None,
        precompute_ref_log_probs: bool = False,
        model_init_kwargs: Optional[dict] = None,
    ):
        if isinstance(model, str):
            model = AutoModelForCausalLM.from_pretrained(model, **(model_init_kwargs or {}))
        if isinstance(ref_model, str):
            ref_model = AutoModelForCausalLM.from_pretrained(ref_model)
        if peft_config is not None:
            model = get_peft_model(model, peft_config)
        self.is_peft_model = isinstance(model, PeftModel)
        if ref_model:
            self.ref_model = ref_model
        elif self.is_peft_model or precompute_ref_log_probs:
            # The `model` with adapters turned off will be used as the reference model
            self.ref_model = None
        else:
            self.ref_model = create_reference_model(model)
        self.beta = beta
        super().__init__(model=model, args=args, train_dataset=train_dataset, tokenizer=tokenizer)

    def concatenated_forward(self, model, batch):
        inputs = torch.cat([batch["chosen_input_ids"], batch["rejected_input_ids"]], dim=0)
        logps = model(inputs).logits.log_softmax(-1).mean(-1).sum(-1)
        return logps.split(batch["chosen_input_ids"].shape[0])

    def compute_loss(self, model, inputs, return_outputs=False):
        chosen, rejected = self.concatenated_forward(model, inputs)
        with torch.no_grad():
            ref_chosen, ref_rejected = self.concatenated_forward(self.ref_model, inputs)
        logits = (chosen - ref_chosen) - (rejected - ref_rejected)
        loss = -F.logsigmoid(self.beta * logits).mean()
        return (loss, {}) if return_outputs else loss
'''

COPIED_DPO_SCRIPT = dedent('''
    from dataclasses import dataclass, field

    from datasets import load_dataset
    from transformers import AutoTokenizer, HfArgumentParser, TrainingArguments

    from pairwise import PairwiseTrainer as Trainer


    @dataclass
    class ModelArguments:
        model_name_or_path: str = field(default=None)
        use_peft: bool = field(default=False)


    def main():
        parser = HfArgumentParser((ModelArguments, TrainingArguments))
        model_args, training_args = parser.parse_args_into_dataclasses()
        tokenizer = AutoTokenizer.from_pretrained(model_args.model_name_or_path)
        pairs = load_dataset("HuggingFaceH4/ultrafeedback_binarized", split="train_prefs")
        trainer = Trainer(model=model_args.model_name_or_path, ref_model=None, args=training_args,
                          beta=0.01, train_dataset=pairs, tokenizer=tokenizer)
        trainer.train()
        trainer.save_model(training_args.output_dir)


    if __name__ == "__main__":
        main()
''')

COPIED_DPO_LAUNCH = dedent('''
    accelerate launch --config_file zero3.yaml run_pairwise.py \\
        --model_name_or_path Qwen/Qwen2.5-7B-Instruct \\
        --output_dir checkpoints/pairwise \\
        --per_device_train_batch_size 2 \\
        --gradient_checkpointing True \\
        --bf16 True
''')


def test_a_project_trainer_copied_from_dpo_builds_its_reference(tmp_path: Path):
    files = {"pairwise.py": COPIED_DPO_TRAINER, "run_pairwise.py": COPIED_DPO_SCRIPT,
             "launch.sh": COPIED_DPO_LAUNCH, "zero3.yaml": ZERO3}
    run = _run(tmp_path, files, "run_pairwise.py")
    assert run.setup.sequences_per_example == 2
    [reference] = run.setup.companions
    assert reference.role == "reference" and reference.arch.name == "Qwen/Qwen2.5-7B-Instruct"
    assert reference.adapter_replaces  # a PEFT policy: the adapter disabled stands in for it
    # ZeRO-3 over 8 GPUs: the copy is sharded like the policy, in bf16
    assert _components(run)["reference_model_weights"] == int(run.arch.n_params * 2 / 8)
    # below ZeRO-3 the reference is whole on each GPU
    run = _run(tmp_path / "zero2", {**files, "zero3.yaml": ZERO2}, "run_pairwise.py")
    assert _components(run)["reference_model_weights"] == run.arch.n_params * 2


def test_a_project_trainer_in_the_script_that_copies_dpo_builds_its_reference(tmp_path: Path):
    own = COPIED_DPO_TRAINER + "\n\n" + COPIED_DPO_SCRIPT.replace("from pairwise import PairwiseTrainer as Trainer\n", "")
    own = own.replace("trainer = Trainer(", "trainer = PairwiseTrainer(")
    run = _run(tmp_path, {"run_pairwise.py": own, "launch.sh": COPIED_DPO_LAUNCH, "zero3.yaml": ZERO2},
               "run_pairwise.py")
    assert [(c.role, c.arch.name) for c in run.setup.companions] == [("reference", "Qwen/Qwen2.5-7B-Instruct")]


def test_a_project_pair_trainer_that_only_keeps_the_reference_it_is_given_builds_none(tmp_path: Path):
    keeps = COPIED_DPO_TRAINER.replace("self.ref_model = create_reference_model(model)", "self.ref_model = None")
    run = _run(tmp_path, {"pairwise.py": keeps, "run_pairwise.py": COPIED_DPO_SCRIPT,
                          "launch.sh": COPIED_DPO_LAUNCH, "zero3.yaml": ZERO3}, "run_pairwise.py")
    assert run.setup.sequences_per_example == 2 and run.setup.companions == ()


def test_a_project_subclass_of_trls_dpo_trainer_holds_trls_reference(tmp_path: Path):
    subclass = dedent('''
        from trl import DPOTrainer


        class PairwiseTrainer(DPOTrainer):
            def log(self, logs, start_time=None):
                logs["chosen_minus_rejected"] = logs.get("rewards/margins", 0.0)
                super().log(logs, start_time)
    ''')
    run = _run(tmp_path, {"pairwise.py": subclass, "run_pairwise.py": COPIED_DPO_SCRIPT,
                          "launch.sh": COPIED_DPO_LAUNCH, "zero3.yaml": ZERO2}, "run_pairwise.py")
    assert run.setup.sequences_per_example == 2
    assert [(c.role, c.arch.name) for c in run.setup.companions] == [("reference", "Qwen/Qwen2.5-7B-Instruct")]
    # CPO runs pairs without a reference
    cpo = subclass.replace("DPOTrainer", "CPOTrainer")
    run = _run(tmp_path / "cpo", {"pairwise.py": cpo, "run_pairwise.py": COPIED_DPO_SCRIPT,
                                  "launch.sh": COPIED_DPO_LAUNCH, "zero3.yaml": ZERO2}, "run_pairwise.py")
    assert run.setup.sequences_per_example == 2 and run.setup.companions == ()
