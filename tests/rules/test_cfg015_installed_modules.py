"""CFG015 and Hydra configs of a module the project does not hold (``python3 -m verl.trainer.main_ppo
--config-path=./config``): the folder is the installed package's."""

from __future__ import annotations

# reward-modeling-develop's rmood/rl/ppo/rm.sh, trimmed: verl is installed with pip
PPO = """\
set -x
train_files=$RMOOD_HOME/datasets/alpacafarm/rl/rl_prompts.parquet
policy_model_path=Hahmdong/RMOOD-qwen3-4b-alpacafarm-sft

python3 -m verl.trainer.main_ppo --config-path=./config --config-name='ppo_megatron_trainer'\\
    algorithm.adv_estimator=gae \\
    data.train_files="$train_files" \\
    data.train_batch_size=128 \\
    actor_rollout_ref.model.path=$policy_model_path \\
    trainer.n_gpus_per_node=8
"""


def test_the_config_folder_of_an_installed_module_is_not_looked_for_in_the_project(lint):
    # before: "`verl/trainer/config/ppo_megatron_trainer.yaml` does not exist"
    assert lint("CFG015", PPO, path="rmood/rl/ppo/rm.sh") == []


def test_near_miss_a_vendored_module_without_the_config_keeps_the_finding(lint):
    files = {"verl/__init__.py": "", "verl/trainer/__init__.py": "",
             "verl/trainer/main_ppo.py": "import hydra\n\n\n@hydra.main(config_path='config')\ndef main(config):\n    pass\n"}
    [finding] = lint("CFG015", PPO, path="rmood/rl/ppo/rm.sh", files=files)
    assert "ppo_megatron_trainer.yaml` does not exist" in finding.message
