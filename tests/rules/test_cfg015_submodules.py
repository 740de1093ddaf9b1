"""CFG015 and the files a git submodule of the project brings."""

from __future__ import annotations

# An RL project whose recipes live in a submodule (verl's `recipe/`, cloned only with
# `git clone --recursive`); its launcher names the recipe's tool config
LAUNCHER = """\
#!/usr/bin/env bash
set -xeuo pipefail

model_path=${MODEL_PATH:-Qwen/Qwen2.5-7B-Instruct}
train_files="['$HOME/data/dapo-math-17k.parquet']"

accelerate launch --config_file recipe/retool/accelerate_zero2.yaml \\
    recipe/retool/train_retool.py \\
    --model_name_or_path "$model_path" \\
    --per_device_train_batch_size 1 \\
    --output_dir checkpoints/retool
"""

GITMODULES = """\
[submodule "recipe"]
\tpath = recipe
\turl = https://github.com/example-org/rl-recipes.git
"""

ACCELERATE = "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 2\n"


def test_a_config_in_a_submodule_the_checkout_has_not_fetched_is_not_missing(lint):
    assert lint("CFG015", LAUNCHER, path="examples/run_retool.sh", files={".gitmodules": GITMODULES}) == []


def test_without_the_submodule_the_config_is_missing(lint):
    diagnostics = lint("CFG015", LAUNCHER, path="examples/run_retool.sh")
    assert len(diagnostics) == 1 and "recipe/retool/accelerate_zero2.yaml" in diagnostics[0].message


def test_a_file_the_fetched_submodule_lacks_is_missing(lint):
    files = {".gitmodules": GITMODULES, "recipe/retool/train_retool.py": "from trl import GRPOTrainer\n",
             "recipe/retool/accelerate_zero3.yaml": ACCELERATE}
    diagnostics = lint("CFG015", LAUNCHER, path="examples/run_retool.sh", files=files)
    assert len(diagnostics) == 1 and "recipe/retool/accelerate_zero2.yaml" in diagnostics[0].message
