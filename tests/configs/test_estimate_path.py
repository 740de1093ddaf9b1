"""`memlint estimate PATH` for configs: the run the path defines or takes part in."""

from __future__ import annotations

import argparse
import json

import pytest

from memlint.cli.estimate import add_arguments
from memlint.cli.errors import EXIT_OK, EXIT_USAGE
from memlint.cli.main import main
from memlint.cli.named_run import plan_for_path

from .helpers import write_files

AXOLOTL_QLORA = """\
base_model: meta-llama/Llama-3.1-8B
load_in_8bit: false
load_in_4bit: true
adapter: qlora
lora_r: 32
lora_alpha: 16
lora_dropout: 0.05
lora_target_linear: true
sequence_len: 4096
sample_packing: true
micro_batch_size: 2
gradient_accumulation_steps: 4
num_epochs: 1
optimizer: paged_adamw_8bit
lr_scheduler: cosine
learning_rate: 0.0002
bf16: auto
tf32: false
gradient_checkpointing: true
flash_attention: true
datasets:
  - path: mhenrichsen/alpaca_2k_test
    type: alpaca
"""

LLAMAFACTORY_FULL = """\
### model
model_name_or_path: Qwen/Qwen2.5-7B
trust_remote_code: true

### method
stage: sft
do_train: true
finetuning_type: full
deepspeed: examples/deepspeed/ds_z3_config.json

### dataset
dataset: identity,alpaca_en_demo
template: qwen
cutoff_len: 2048

### train
per_device_train_batch_size: 1
gradient_accumulation_steps: 2
learning_rate: 1.0e-5
num_train_epochs: 3.0
bf16: true
output_dir: saves/qwen2.5-7b/full/sft
"""

DS_Z3 = """\
{
  "train_batch_size": "auto",
  "train_micro_batch_size_per_gpu": "auto",
  "gradient_accumulation_steps": "auto",
  "gradient_clipping": "auto",
  "bf16": {"enabled": "auto"},
  "zero_optimization": {
    "stage": 3,
    "overlap_comm": false,
    "contiguous_gradients": true,
    "stage3_gather_16bit_weights_on_model_save": true
  }
}
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def estimate(*argv: str) -> tuple[dict, str]:
    """The JSON sheet and what went to stderr."""
    assert main(["estimate", *argv, "--format", "json"]) == EXIT_OK
    captured = _captured.readouterr()
    return json.loads(captured.out), captured.err


@pytest.fixture(autouse=True)
def _capture(capsys):
    global _captured
    _captured = capsys


def test_axolotl_yaml(project):
    write_files(project, {"qlora.yml": AXOLOTL_QLORA})
    sheet, err = estimate("qlora.yml", "--gpu", "a10g")
    setup = sheet["setup"]
    assert setup["micro_batch"] == 2 and setup["seq_len"] == 4096
    assert setup["lora"]["r"] == 32 and setup["lora"]["quantization"] == "nf4"
    assert setup["optimizer"] == "paged-adamw-8bit" and setup["attention"] == "flash"
    assert setup["grad_ckpt"] == 1 and setup["precision"] == "bf16"  # bf16: auto, model loaded in bf16
    assert sheet["capacity"]["gpu"] == "a10g" and sheet["fits"] is False
    assert "memlint: the run of qlora.yml\n" in err


def test_axolotl_text_sheet(project):
    write_files(project, {"qlora.yml": AXOLOTL_QLORA})
    assert main(["estimate", "qlora.yml", "--gpu", "a10g"]) == EXIT_OK
    captured = _captured.readouterr()
    assert "meta-llama/Llama-3.1-8B" in captured.out and "QLoRA r=32" in captured.out
    assert "NVIDIA A10G" in captured.out
    assert "memlint: the run of qlora.yml" in captured.err


def test_flags_override_the_files(project):
    write_files(project, {"qlora.yml": AXOLOTL_QLORA})
    sheet, _ = estimate("qlora.yml", "--batch", "8", "--seq", "1024", "--gpus", "2")
    assert sheet["setup"]["micro_batch"] == 8 and sheet["setup"]["seq_len"] == 1024
    assert sheet["setup"]["world_size"] == 2


def test_deepspeed_json_through_the_yaml_that_links_it(project):
    write_files(project, {"examples/train_full/qwen_full_sft.yaml": LLAMAFACTORY_FULL,
                          "examples/deepspeed/ds_z3_config.json": DS_Z3})
    sheet, err = estimate("examples/deepspeed/ds_z3_config.json", "--gpus", "8", "--gpu", "h100")
    setup = sheet["setup"]
    assert setup["sharding"] == "zero3" and setup["world_size"] == 8
    assert setup["precision"] == "mixed-bf16"  # DeepSpeed bf16 ("auto", filled from bf16: true)
    assert setup["micro_batch"] == 1 and setup["seq_len"] == 2048 and setup["grad_accum"] == 2
    assert setup["grad_ckpt"] == 1  # LLaMA-Factory's default
    assert ("memlint: the run of examples/train_full/qwen_full_sft.yaml with "
            "examples/deepspeed/ds_z3_config.json") in err


def test_llamafactory_yaml(project):
    write_files(project, {"qwen_full_sft.yaml": LLAMAFACTORY_FULL.replace("examples/deepspeed/", ""),
                          "ds_z3_config.json": DS_Z3})
    sheet, _ = estimate("qwen_full_sft.yaml", "--gpus", "8")
    assert sheet["setup"]["sharding"] == "zero3" and "lora" not in sheet["setup"]
    assert sheet["peak_bytes"] > 0


def test_model_flag_replaces_the_model_of_the_files(project):
    """`estimate_cli` calls ``plan_for_path`` only without --model today; given one, the
    files' setup stays and only the model changes."""
    write_files(project, {"qlora.yml": AXOLOTL_QLORA.replace("meta-llama/Llama-3.1-8B", "acme/unknown-13b")})
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["qlora.yml", "--model", "Qwen/Qwen2.5-7B"])
    arch, setup, gpu = plan_for_path(args.path, args)
    assert arch.name == "Qwen/Qwen2.5-7B" and setup.lora.r == 32 and setup.seq_len == 4096 and gpu is None


@pytest.mark.parametrize(
    "files,path,message",
    [
        ({}, "missing.yml", "missing.yml: no such file"),
        ({"qlora.yml": AXOLOTL_QLORA.replace("meta-llama/Llama-3.1-8B", "acme/unknown-13b")}, "qlora.yml",
         "unknown model 'acme/unknown-13b'"),
        ({"ds_config.json": DS_Z3}, "ds_config.json", "no script or YAML in the project uses it"),
        ({"notes.yaml": "title: meeting\nattendees: [a, b]\n"}, "notes.yaml", "not a training config"),
        ({"qlora.yml": "base_model: x\n\tadapter: lora\n"}, "qlora.yml", "qlora.yml:2:1: invalid YAML: a tab"),
    ],
)
def test_usage_errors(project, files, path, message):
    write_files(project, files)
    assert main(["estimate", path]) == EXIT_USAGE
    assert message in _captured.readouterr().err
