"""CFG015 and the absolute paths of the machine that runs the job: no checkout holds them, so
memlint cannot say they are missing (nor read them); it says so in an info."""

from __future__ import annotations

from memlint.model.diagnostics import Severity

# cywjava/chatglm-6b-fine-tuning's launch, as its docstring gives it (abridged)
LAUNCH = """\
#!/bin/bash
accelerate launch --gpu_ids='all' --config_file /home/train/.cache/huggingface/accelerate/default_config.yaml \\
    ./finetuning/accelerate_fine_tuning.py --model_path /home/train/model/ --train_batch_size 2
"""

FILES = {"finetuning/accelerate_fine_tuning.py": "import torch\nfrom accelerate import Accelerator\n"
                                                  "accelerator = Accelerator()\n"}


def test_accelerates_own_default_config_is_an_info_that_names_it(lint):
    [found] = lint("CFG015", LAUNCH, path="start_train.sh", files=FILES)
    assert found.severity == Severity.INFO
    assert "`accelerate config` saves on the machine that runs the job" in found.message


def test_another_absolute_path_outside_the_project_is_an_info(lint):
    launch = LAUNCH.replace("/home/train/.cache/huggingface/accelerate/default_config.yaml",
                            "/mnt/shared/configs/zero3_offload.yaml")
    [found] = lint("CFG015", launch, path="start_train.sh", files=FILES)
    assert found.severity == Severity.INFO
    assert "an absolute path on the machine that runs the job, outside the project" in found.message


def test_a_relative_path_the_project_lacks_is_still_missing(lint):
    launch = LAUNCH.replace("/home/train/.cache/huggingface/accelerate/default_config.yaml", "configs/zero3.yaml")
    [found] = lint("CFG015", launch, path="start_train.sh", files=FILES)
    assert found.severity == Severity.WARNING and "does not exist" in found.message


# GZbridge-huginn-full-finetune's training launcher (abridged): `python - "$MANIFEST" ... <<'PY'` runs
# the here-document as a program that checks the data manifest; the JSON is its data, not a config
# handed to a script of the project (a CFG015 warning said the run fails when it opens it)
STDIN_PROGRAM = """\
#!/bin/bash
export WDS_MANIFEST="${WDS_MANIFEST:-data/audio_swift/acavcaps_wds/stage_schedule.json}"
python - "$WDS_MANIFEST" 4664169 32 <<'PY'
import json, sys
manifest = json.load(open(sys.argv[1]))
assert sum(stage["samples"] for stage in manifest["stages"]) == int(sys.argv[2])
PY
"""


def test_arguments_of_a_program_read_from_stdin_are_not_a_scripts_config(lint):
    assert lint("CFG015", STDIN_PROGRAM, path="scripts/train.sh", files=FILES) == []
    # the same file handed to a script of the project is that script's config, still missing
    script = STDIN_PROGRAM.replace('python - "$WDS_MANIFEST"', 'python finetuning/accelerate_fine_tuning.py "$WDS_MANIFEST"')
    assert len(lint("CFG015", script, path="scripts/train.sh", files=FILES)) == 1
