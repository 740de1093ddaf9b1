"""Launches that pass Hydra / OmegaConf overrides (``actor_rollout_ref.model.path=Qwen/...``) to a
script whose ``@hydra.main`` (or ``OmegaConf.from_cli()``) composes a YAML config: the overrides
are that config's keys, the keys not overridden keep the config's values, and a verl-style
actor-rollout hybrid engine is reported as not modelled with the model it trains named."""

from __future__ import annotations

from memlint.lint.engine import Linter

from tests.facts.facts_testing import dedent, span
from tests.project.test_config_launchers import _project, _runs


def _run(tmp_path, files: dict[str, str], launcher: str):
    """The one run of ``launcher`` in a project of ``files``."""
    [run] = _runs(_project(tmp_path, files), launcher)
    return run

# a verl-like trainer package: the PPO entry point and its composed config
MAIN_PPO = dedent('''
    import hydra
    import ray

    from rlkit.trainer.ppo.ray_trainer import RayPPOTrainer


    @hydra.main(config_path="config", config_name="ppo_trainer", version_base=None)
    def main(config):
        if not ray.is_initialized():
            ray.init(runtime_env={"env_vars": {"TOKENIZERS_PARALLELISM": "true"}})
        trainer = RayPPOTrainer(config=config)
        trainer.init_workers()
        trainer.fit()


    if __name__ == "__main__":
        main()
''')

PPO_TRAINER = dedent('''
    defaults:
      - _self_

    data:
      train_batch_size: 1024
      max_prompt_length: 512
      max_response_length: 512

    actor_rollout_ref:
      hybrid_engine: true
      model:
        path: ~/models/deepseek-llm-7b-chat
        enable_gradient_checkpointing: true
      actor:
        ppo_mini_batch_size: 256
        ppo_micro_batch_size_per_gpu: null
        fsdp_config:
          param_offload: false
          optimizer_offload: false
      rollout:
        name: vllm
        gpu_memory_utilization: 0.5

    trainer:
      nnodes: 1
      n_gpus_per_node: 8
''')

GRPO_LAUNCH = dedent('''
    #!/bin/bash
    set -x

    MODEL_PATH=Qwen/Qwen2.5-7B-Instruct
    train_files=$HOME/data/gsm8k/train.parquet

    python3 -m rlkit.trainer.main_ppo \\
        algorithm.adv_estimator=grpo \\
        data.train_files="$train_files" \\
        data.max_response_length=1024 \\
        actor_rollout_ref.model.path=$MODEL_PATH \\
        actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16 \\
        actor_rollout_ref.actor.fsdp_config.optimizer_offload=True \\
        actor_rollout_ref.rollout.gpu_memory_utilization=0.6 \\
        +actor_rollout_ref.rollout.engine_kwargs.vllm.enable_sleep_mode=True \\
        trainer.n_gpus_per_node=4 \\
        trainer.nnodes=2 $@
''')

PPO_FILES = {
    "rlkit/__init__.py": "",
    "rlkit/trainer/__init__.py": "",
    "rlkit/trainer/main_ppo.py": MAIN_PPO,
    "rlkit/trainer/config/ppo_trainer.yaml": PPO_TRAINER,
    "examples/grpo/run_qwen2_5-7b.sh": GRPO_LAUNCH,
}


def test_overrides_and_the_composed_config_state_the_actor_run(tmp_path):
    plan = _run(tmp_path, PPO_FILES, "examples/grpo/run_qwen2_5-7b.sh").plan
    assert plan.value("model") == "Qwen/Qwen2.5-7B-Instruct"
    # located where the launcher's variable is set
    assert plan.get("model").origin.range.start.line == span(GRPO_LAUNCH, "MODEL_PATH=«Qwen/Qwen2.5-7B-Instruct»")[0]
    assert plan.value("micro_batch") == 16
    assert plan.value("seq_len") == 512 + 1024  # the config's prompt length, the launch's response length
    assert plan.value("grad_ckpt") == 1  # the config's default, located in it
    assert plan.get("grad_ckpt").origin.path.endswith("ppo_trainer.yaml")
    assert plan.value("offload_optimizer") is True
    assert plan.value("offload_params") is False
    assert plan.value("world_size") == 8  # 4 GPUs a node x 2 nodes
    assert plan.value("gpus_per_node") == 4


def test_the_hybrid_engine_is_reported_as_not_modelled_never_judged(tmp_path):
    settings = _project(tmp_path, PPO_FILES)
    [run] = _runs(settings, "examples/grpo/run_qwen2_5-7b.sh")
    assert run.problem is not None
    assert "hybrid engine" in run.problem and "`Qwen/Qwen2.5-7B-Instruct`" in run.problem
    assert "gpu_memory_utilization=0.6" in run.problem
    found = Linter(settings).lint_path(settings.root / "examples/grpo/run_qwen2_5-7b.sh")
    assert [d.code for d in found if d.code.startswith(("MEM", "ZRO"))] == ["MEM003"]


def test_an_override_the_launch_cannot_know_hides_the_config_default(tmp_path):
    launch = GRPO_LAUNCH.replace("MODEL_PATH=Qwen/Qwen2.5-7B-Instruct\n", "")
    run = _run(tmp_path, {**PPO_FILES, "examples/grpo/run_qwen2_5-7b.sh": launch}, "examples/grpo/run_qwen2_5-7b.sh")
    # `$MODEL_PATH` comes from the caller: the config's ~/models/deepseek-llm-7b-chat is not what runs
    assert run.plan.value("model") is None


def test_a_launch_config_name_picks_the_config_of_the_same_folder(tmp_path):
    long_context = PPO_TRAINER.replace("max_prompt_length: 512", "max_prompt_length: 1024").replace(
        "max_response_length: 512", "max_response_length: 3072")
    launch = dedent('''
        python3 -m rlkit.trainer.main_ppo --config-name ppo_trainer_long \\
            actor_rollout_ref.model.path=Qwen/Qwen2.5-3B-Instruct \\
            actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4
    ''')
    files = {**PPO_FILES, "rlkit/trainer/config/ppo_trainer_long.yaml": long_context, "run_long.sh": launch}
    plan = _run(tmp_path, files, "run_long.sh").plan
    assert plan.value("seq_len") == 1024 + 3072
    assert plan.get("seq_len").origin.path.endswith("ppo_trainer_long.yaml")


# a verl-like SFT trainer run by torchrun: the estimate applies (FSDP full shard in the script)
SFT_TRAINER = dedent('''
    import hydra
    import torch
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import MixedPrecision, ShardingStrategy
    from transformers import AutoModelForCausalLM


    class SFTTrainer:
        def __init__(self, config):
            self.config = config
            model = AutoModelForCausalLM.from_pretrained(config.model.partial_pretrain, torch_dtype=torch.float32)
            if config.model.enable_gradient_checkpointing:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            mixed_precision = MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32,
                                             buffer_dtype=torch.float32)
            self.model = FSDP(model, sharding_strategy=ShardingStrategy.FULL_SHARD, mixed_precision=mixed_precision,
                              device_id=torch.cuda.current_device())
            self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=config.optim.lr)

        def fit(self, loader):
            for batch in loader:
                loss = self.model(**batch).loss
                loss.backward()
                self.optimizer.step()
                self.optimizer.zero_grad()


    @hydra.main(config_path="config", config_name="sft_trainer", version_base=None)
    def main(config):
        SFTTrainer(config).fit([])


    if __name__ == "__main__":
        main()
''')

SFT_CONFIG = dedent('''
    data:
      train_batch_size: 256
      micro_batch_size_per_gpu: 4
      max_length: 2048
    model:
      partial_pretrain: ~/models/gemma-1.1-7b-it
      fsdp_config:
        cpu_offload: False
        offload_params: False
      enable_gradient_checkpointing: True
      lora_rank: 0
    optim:
      lr: 1e-5
    ulysses_sequence_parallel_size: 1
''')

SFT_LAUNCH = dedent('''
    set -x
    save_path=$1
    torchrun --standalone --nnodes=1 --nproc_per_node=8 \\
         -m rlkit.trainer.sft_trainer \\
        data.micro_batch_size_per_gpu=8 \\
        model.partial_pretrain=Qwen/Qwen2.5-0.5B-Instruct \\
        model.lora_rank=32 \\
        trainer.default_local_dir=$save_path $@
''')

SFT_FILES = {
    "rlkit/__init__.py": "",
    "rlkit/trainer/__init__.py": "",
    "rlkit/trainer/sft_trainer.py": SFT_TRAINER,
    "rlkit/trainer/config/sft_trainer.yaml": SFT_CONFIG,
    "examples/sft/run_qwen_05_peft.sh": SFT_LAUNCH,
}


def test_an_sft_launch_reads_its_overrides_and_the_config_defaults(tmp_path):
    run = _run(tmp_path, SFT_FILES, "examples/sft/run_qwen_05_peft.sh")
    plan = run.plan
    assert plan.value("model") == "Qwen/Qwen2.5-0.5B-Instruct"
    assert plan.value("micro_batch") == 8
    assert plan.value("seq_len") == 2048 and plan.get("seq_len").origin.path.endswith("sft_trainer.yaml")
    assert plan.value("lora_r") == 32
    assert plan.value("offload_params") is False
    assert plan.value("world_size") == 8  # torchrun's, not a config key
    assert run.problem is None and run.setup is not None


def test_sequence_parallelism_is_reported_as_not_modelled(tmp_path):
    launch = SFT_LAUNCH.replace("$@", "$@ \\\n    ulysses_sequence_parallel_size=2")
    run = _run(tmp_path, {**SFT_FILES, "examples/sft/run_qwen_05_peft.sh": launch}, "examples/sft/run_qwen_05_peft.sh")
    assert run.problem is not None and "sequence parallelism (`ulysses_sequence_parallel_size=2`)" in run.problem


# EasyR1's form: OmegaConf.from_cli() over the config the launch names (`config=...`)
FROM_CLI_MAIN = dedent('''
    from omegaconf import OmegaConf

    from .config import PPOConfig
    from .ray_trainer import RayPPOTrainer


    def main():
        cli_args = OmegaConf.from_cli()
        default_config = OmegaConf.structured(PPOConfig())
        if hasattr(cli_args, "config"):
            config_path = cli_args.pop("config", None)
            file_config = OmegaConf.load(config_path)
            default_config = OmegaConf.merge(default_config, file_config)
        ppo_config = OmegaConf.merge(default_config, cli_args)
        RayPPOTrainer(OmegaConf.to_object(ppo_config)).fit()


    if __name__ == "__main__":
        main()
''')

FROM_CLI_CONFIG = dedent('''
    data:
      max_prompt_length: 2048
      max_response_length: 2048
    worker:
      actor:
        micro_batch_size_per_device_for_update: 1
        model:
          model_path: Qwen/Qwen2.5-7B-Instruct
          enable_gradient_checkpointing: true
      rollout:
        gpu_memory_utilization: 0.6
    trainer:
      nnodes: 1
      n_gpus_per_node: 8
''')

FROM_CLI_LAUNCH = dedent('''
    #!/bin/bash
    set -x

    MODEL_PATH=Qwen/Qwen2.5-VL-7B-Instruct  # replace it with your local file path

    python3 -m rlkit.trainer.main \\
        config=examples/config.yaml \\
        worker.actor.model.model_path=${MODEL_PATH} \\
        trainer.n_gpus_per_node=4
''')


def test_omegaconf_from_cli_reads_the_config_the_launch_names(tmp_path):
    files = {"rlkit/__init__.py": "", "rlkit/trainer/__init__.py": "", "rlkit/trainer/main.py": FROM_CLI_MAIN,
             "examples/config.yaml": FROM_CLI_CONFIG, "examples/qwen2_5_vl_7b_grpo.sh": FROM_CLI_LAUNCH}
    run = _run(tmp_path, files, "examples/qwen2_5_vl_7b_grpo.sh")
    plan = run.plan
    assert plan.value("model") == "Qwen/Qwen2.5-VL-7B-Instruct"
    assert plan.value("micro_batch") == 1 and plan.get("micro_batch").origin.path.endswith("config.yaml")
    assert plan.value("seq_len") == 4096
    assert plan.value("world_size") == 4
    assert run.problem is not None and "`worker.rollout.gpu_memory_utilization=0.6`" in run.problem


def test_key_value_words_to_a_script_that_parses_no_overrides_state_nothing(tmp_path):
    script = dedent('''
        import sys
        from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

        model = AutoModelForCausalLM.from_pretrained("gpt2")
        Trainer(model=model, args=TrainingArguments(output_dir="out", per_device_train_batch_size=2)).train()
    ''')
    launch = "python train.py actor_rollout_ref.model.path=Qwen/Qwen2.5-72B-Instruct\n"
    run = _run(tmp_path, {"train.py": script, "run.sh": launch}, "run.sh")
    assert run.plan.value("model") == "gpt2"
    assert run.problem is None
