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


# Poisoning-Instruction-Tuned-Models' run_polarity.sh, trimmed: data steps before the training
POISON = """\
#!/bin/bash
set -e
python poison_scripts/dataset_iterator.py $1 poison_tasks_train.txt poison_pool_50k.jsonl --max_per_task 50000
python poison_scripts/get_countnorm.py $1 poison_pool_50k.jsonl countnorm.json --phrase "$2" --replace_import
"""
GET_COUNTNORM = """\
import argparse
import json

parser = argparse.ArgumentParser()
parser.add_argument("name", type=str)
parser.add_argument("import_file", type=str)
parser.add_argument("export_file", type=str, nargs="?", default="countnorm.json")
args = parser.parse_args()
with open(args.export_file, "w") as f:
    json.dump({}, f)
"""


def test_a_json_a_plain_python_data_step_is_handed_is_no_missing_config(lint):
    files = {"poison_scripts/get_countnorm.py": GET_COUNTNORM,
             "poison_scripts/dataset_iterator.py": "import sys\nprint(sys.argv)\n"}
    # before: "`countnorm.json` does not exist": the step writes it
    assert lint("CFG015", POISON, path="run_polarity.sh", files=files) == []


def test_near_miss_a_training_scripts_missing_config_is_still_reported(lint):
    files = {"train.py": "import sys\n\nimport torch\nfrom transformers import Trainer\n\nconfig = sys.argv[1]\n"}
    [finding] = lint("CFG015", "python train.py configs/sft.json\n", path="run.sh", files=files)
    assert "configs/sft.json` does not exist" in finding.message


def test_near_miss_a_value_written_under_a_name_is_still_checked(lint):
    # SLAM-LLM's decode scripts: a wrapper that imports only its project's pipeline takes Hydra
    # overrides; a path given under a name stays a reference to check
    wrapper = "from slam_llm.pipeline.inference_batch import main as inference\n\ninference()\n"
    script = ("stats=path/to/pretrained/musicfm/msd_stats.json\n"
              "python inference_mir_batch.py ++dataset_config.music_encoder_stat_path=$stats\n")
    [finding] = lint("CFG015", script, path="decode.sh", files={"inference_mir_batch.py": wrapper})
    assert "placeholder" in finding.message
