"""A config that states its global batch in a comment on its batch keys sizes its run: open-instruct's
``gradient_accumulation_steps: 4 # effective batch size 128 with 4 nodes`` beside
``per_device_train_batch_size: 1 # note, this is set up for 8 GPUs`` is a run on 128 / (1 x 4) = 32
GPUs, 8 on each of the 4 nodes; judged on the 8 GPUs ``--gpus`` names, its optimizer states
were counted four times over. A comment that does not add up says nothing, and a launch that names
its GPU count wins."""

from __future__ import annotations

import pytest

from memlint.configs.batch_comments import stated_gpus
from tests.facts.facts_testing import dedent
from tests.project.test_config_launchers import FILES, _memory, _project, _runs

CONFIG = "configs/train_configs/sft/tulu3_8b_preview_mix_v3.8.yaml"


def _tulu(accumulation: str) -> str:
    # an 8B full fine-tune at 8,192 tokens without checkpointing, laid out for 4 nodes
    return dedent(f'''
        model_name_or_path: meta-llama/Llama-3.1-8B
        model_revision: main
        max_seq_length: 8192
        preprocessing_num_workers: 128
        per_device_train_batch_size: 1 # note, this is set up for 8 GPUs
        gradient_accumulation_steps: {accumulation}
        learning_rate: 5.0e-06
        lr_scheduler_type: linear
        num_train_epochs: 2
        gradient_checkpointing: false
        output_dir: /output/
    ''')


def test_the_comment_s_global_batch_gives_the_gpu_count(tmp_path):
    settings = _project(tmp_path, {**FILES, CONFIG: _tulu("4 # effective batch size 128 with 4 nodes")})
    [run] = _runs(settings, CONFIG)
    assert run.setup.world_size == 32 and run.setup.gpus_per_node == 8
    world = run.plan.get("world_size")
    assert world.origin.range.start.line == 6 and "effective batch size 128" in world.note
    # ZeRO-3 (the folder's launch) over 32 GPUs: 8,192-token batches fit; over 8 they did not
    assert _memory(settings, CONFIG) == []


def test_on_the_gpus_the_check_names_it_would_not_fit(tmp_path):
    settings = _project(tmp_path, {**FILES, CONFIG: _tulu("4")})
    [run] = _runs(settings, CONFIG)
    assert run.setup.world_size == 8
    [finding] = _memory(settings, CONFIG)
    assert finding.code == "MEM001"


@pytest.mark.parametrize("comment", [
    "# effective batch size 100 with 4 nodes",  # 100 / (1 x 4) is not a GPU count
    "# effective batch size 128 with 3 nodes",  # 32 GPUs do not split over 3 nodes
    "# designed for 8 GPUs, so batch size 128",  # no global batch named as such
])
def test_a_comment_that_does_not_add_up_says_nothing(comment):
    text = f"per_device_train_batch_size: 1\ngradient_accumulation_steps: 4 {comment}\n"
    assert stated_gpus(text, "c.yaml", [1, 2], 1, 4) is None


def test_the_global_batch_alone_gives_the_world_size():
    text = "per_device_train_batch_size: 2\ngradient_accumulation_steps: 4  # global batch size = 256\n"
    world, per_node = stated_gpus(text, "c.yaml", [1, 2], 2, 4)
    assert world.value == 32 and per_node is None


def test_a_launch_that_names_its_gpus_wins(tmp_path):
    readme = FILES["scripts/README.md"] + dedent(f'''

        On one node:

        ```bash
        accelerate launch --mixed_precision bf16 --num_machines 1 --num_processes 8 --use_deepspeed \\
            --deepspeed_config_file configs/ds_configs/stage3_no_offloading_accelerate.conf \\
            open_instruct/finetune.py {CONFIG}
        ```
    ''')
    files = {**FILES, "scripts/README.md": readme, CONFIG: _tulu("4 # effective batch size 128 with 4 nodes")}
    settings = _project(tmp_path, files)
    [run] = _runs(settings, CONFIG)
    assert run.setup.world_size == 8
