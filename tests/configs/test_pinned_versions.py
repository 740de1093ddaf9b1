"""Config keys judged against the release a project pins (schemas/history/, memlint.configs.key_history)."""

from __future__ import annotations

from pathlib import Path

from memlint.facts.pinned_versions import pins
from memlint.model.diagnostics import Severity

from .helpers import write_files

# a run_clm-style TrainingArguments file, as a project on transformers 4.34 wrote it
TRAINING_ARGS_434 = """\
output_dir: outputs/llama-2-7b-sft
overwrite_output_dir: true
per_device_train_batch_size: 4
per_device_eval_batch_size: 4
gradient_accumulation_steps: 8
learning_rate: 2.0e-5
num_train_epochs: 3
evaluation_strategy: steps
eval_steps: 500
save_strategy: steps
save_steps: 500
optim: adamw_hf
lr_scheduler_type: cosine
warmup_ratio: 0.03
bf16: true
gradient_checkpointing: true
logging_steps: 10
report_to: wandb
"""

REQUIREMENTS_434 = """\
# pinned for the A100 cluster image
torch==2.1.0
transformers==4.34.0
datasets==2.14.5
accelerate==0.23.0
peft==0.5.0
"""


def found(diagnostics):
    return [(d.code, d.range.start.line, str(d.severity.name).lower()) for d in diagnostics]


def test_keys_of_the_pinned_transformers_are_not_errors(lint):
    diagnostics = lint({"requirements.txt": REQUIREMENTS_434, "configs/sft.yaml": TRAINING_ARGS_434},
                       "configs/sft.yaml")
    # evaluation_strategy, optim: adamw_hf, gradient_checkpointing: all read by 4.34 as written;
    # three keys a later release removed are infos, not errors
    assert found(diagnostics) == [("CFG004", 2, "info"), ("CFG004", 8, "info"), ("CFG004", 14, "info")]
    overwrite, evaluation, warmup = diagnostics
    assert evaluation.message == (
        "`evaluation_strategy` is read by the Transformers 4.34 you pin (`transformers==4.34.0`, "
        "requirements.txt:3); Transformers 4.51 removed it, so an upgrade drops it")
    assert "Transformers 5.0 removed it" in overwrite.message
    assert "Transformers 5.15 removed it" in warmup.message


def test_a_key_added_after_the_pinned_release_is_unknown_to_it(lint):
    text = TRAINING_ARGS_434.replace("evaluation_strategy: steps", "eval_strategy: steps")
    diagnostics = lint({"requirements.txt": REQUIREMENTS_434, "configs/sft.yaml": text}, "configs/sft.yaml")
    unknown = [d for d in diagnostics if d.code == "CFG001"]
    assert [(d.range.start.line, d.message) for d in unknown] == [(
        8, "`eval_strategy` is unknown to the Transformers 4.34 you pin (`transformers==4.34.0`, "
           "requirements.txt:3): Transformers 4.41 added it (HfArgumentParser refuses the file)")]


def test_keys_removed_before_the_pinned_release(lint):
    pyproject = ('[project]\nname = "sft-recipes"\nversion = "0.1.0"\ndependencies = [\n'
                 '  "torch>=2.4",\n  "transformers[torch]>=4.52,<5",\n  "trl>=0.19",\n]\n')
    diagnostics = lint({"pyproject.toml": pyproject, "configs/sft.yaml": TRAINING_ARGS_434}, "configs/sft.yaml")
    by_line = {d.range.start.line: d for d in diagnostics}
    evaluation = by_line[8]
    assert (evaluation.code, evaluation.severity.name) == ("CFG004", "ERROR")
    assert evaluation.message == (
        "`evaluation_strategy` was removed in Transformers 4.51 (last read by 4.50); you pin "
        "`transformers<5,>=4.52` (pyproject.toml:6) (HfArgumentParser refuses the file)")
    optim = by_line[12]
    assert optim.code == "CFG002"
    assert "`optim: adamw_hf` was removed in Transformers 4.50 (last accepted by 4.49)" in optim.message
    # 4.57 (the newest release <5 admits) still reads overwrite_output_dir: an info
    assert (by_line[2].code, by_line[2].severity.name) == ("CFG004", "INFO")


def test_without_a_pin_a_removed_key_says_when_it_was_removed(lint):
    diagnostics = lint({"configs/sft.yaml": TRAINING_ARGS_434}, "configs/sft.yaml")
    evaluation = next(d for d in diagnostics if d.range.start.line == 8)
    assert evaluation.code == "CFG004"
    assert evaluation.message == ("`evaluation_strategy` was removed in Transformers 4.51 (last read by 4.50) "
                                  "(HfArgumentParser refuses the file)")


def test_a_value_added_after_the_pinned_release(lint):
    text = TRAINING_ARGS_434.replace("optim: adamw_hf", "optim: adamw_torch_fused")
    requirements = REQUIREMENTS_434.replace("transformers==4.34.0", "transformers==4.26.1")
    diagnostics = lint({"requirements.txt": requirements, "configs/sft.yaml": text}, "configs/sft.yaml")
    optim = next(d for d in diagnostics if d.range.start.line == 12)
    assert optim.code == "CFG002"
    assert optim.message == ("`optim: adamw_torch_fused` is not accepted by the Transformers 4.26 you pin "
                             "(`transformers==4.26.1`, requirements.txt:3): Transformers 4.27 added it")


AXOLOTL_FSDP = """\
base_model: meta-llama/Llama-3.1-8B
sequence_len: 4096
micro_batch_size: 1
gradient_accumulation_steps: 8
learning_rate: 0.00002
datasets:
  - path: tatsu-lab/alpaca
    type: alpaca
fsdp:
  - full_shard
  - auto_wrap
fsdp_config:
  fsdp_offload_params: false
  fsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer
unsloth_lora_mlp: true
"""


def test_axolotl_keys_against_the_pinned_axolotl(lint):
    pinned_016 = lint({"requirements.txt": "axolotl[flash-attn,deepspeed]==0.16.1\n", "llama-fsdp.yml": AXOLOTL_FSDP},
                      "llama-fsdp.yml")
    by_line = {(d.code, d.range.start.line): d for d in pinned_016}
    assert by_line[("CFG003", 9)].message.startswith("`fsdp` is deprecated in the Axolotl 0.16 you pin")
    assert by_line[("CFG004", 15)].message == (
        "`unsloth_lora_mlp` is read by the Axolotl 0.16 you pin (`axolotl==0.16.1`, "
        "requirements.txt:1); Axolotl 0.17 removed it, so an upgrade drops it")
    assert by_line[("CFG004", 15)].severity.name == "INFO"


def test_axolotl_key_removed_before_the_pinned_release(lint):
    diagnostics = lint({"requirements.txt": "axolotl==0.19.0\n", "llama-fsdp.yml": AXOLOTL_FSDP}, "llama-fsdp.yml")
    removed = next(d for d in diagnostics if d.range.start.line == 15)
    assert (removed.code, removed.severity.name) == ("CFG004", "ERROR")
    assert removed.message == ("`unsloth_lora_mlp` was removed in Axolotl 0.17 (last read by 0.16); you pin "
                               "`axolotl==0.19.0` (requirements.txt:1) (Axolotl ignores unknown keys silently)")


def test_trl_config_takes_the_transformers_pin(lint):
    recipe = ("model_name_or_path: mistralai/Mistral-7B-v0.1\ndataset_text_field: text\nmax_seq_length: 2048\n"
              "packing: true\nper_device_train_batch_size: 2\ngradient_accumulation_steps: 16\n"
              "evaluation_strategy: epoch\nlearning_rate: 2.0e-05\nbf16: true\noutput_dir: data/mistral-sft\n")
    diagnostics = lint({"requirements.txt": "transformers==4.36.2\ntrl==0.7.4\n", "recipes/sft.yaml": recipe},
                       "recipes/sft.yaml")
    assert not [d for d in diagnostics if d.range.start.line == 7 and d.severity.name != "INFO"]


# examples/llama-4/do-no-use-fa2/scout-qlora-fsdp1.yaml of Axolotl at 067b021c (0.18), trimmed
AXOLOTL_FSDP1 = """\
base_model: meta-llama/Llama-4-Scout-17B-16E
load_in_4bit: true
adapter: qlora
lora_r: 32
sequence_len: 4096
micro_batch_size: 1
gradient_accumulation_steps: 1
learning_rate: 0.0001
datasets:
  - path: mlabonne/FineTome-100k
    type: chat_template
fsdp_config:
  fsdp_transformer_layer_cls_to_wrap: Llama4TextDecoderLayer
  fsdp_limit_all_gathers: true
  fsdp_sync_module_states: true
  fsdp_offload_params: true
  fsdp_use_orig_params: false
  fsdp_sharding_strategy: FULL_SHARD
  fsdp_activation_checkpointing: true
"""


def _fsdp1(diagnostics) -> dict[int, tuple[str, str]]:
    return {d.range.start.line: (d.code, d.message) for d in diagnostics
            if d.code in ("CFG001", "CFG004") and 14 <= d.range.start.line <= 19}


def test_axolotl_fsdp1_keys_in_the_release_that_reads_them(lint):
    """Axolotl 0.13-0.19 read ``sync_module_states`` and ``use_orig_params`` (``FSDPConfig``
    fields, ``fsdp_`` prefix stripped); ``limit_all_gathers`` and ``sharding_strategy`` were never
    fields, so pydantic drops them: those stay unknown."""
    found = _fsdp1(lint({"requirements.txt": "axolotl==0.18.0\n", "scout-qlora-fsdp1.yaml": AXOLOTL_FSDP1},
                        "scout-qlora-fsdp1.yaml"))
    assert sorted(found) == [14, 18]
    assert found[14][0] == "CFG001" and "`fsdp_limit_all_gathers`" in found[14][1]
    assert found[18][0] == "CFG001" and "`fsdp_sharding_strategy`" in found[18][1]


def test_axolotl_fsdp1_keys_after_fsdp1_was_removed(lint):
    """Axolotl 0.20 removed FSDP1: it refuses ``sharding_strategy`` and drops the rest with a warning."""
    found = _fsdp1(lint({"scout-qlora-fsdp1.yaml": AXOLOTL_FSDP1}, "scout-qlora-fsdp1.yaml"))
    assert sorted(found) == [14, 15, 17, 18]
    assert found[15] == ("CFG004", "`fsdp_config.fsdp_sync_module_states` is an FSDP1-only option (read by Axolotl "
                                   "0.13-0.19): Axolotl 0.20 removed FSDP1 and drops it with a warning")
    assert found[14][1].endswith("Axolotl 0.20 removed FSDP1 and drops it with a warning")
    assert found[18] == ("CFG004", "`fsdp_config.fsdp_sharding_strategy` is an FSDP1-only option: Axolotl 0.20 "
                                   "removed FSDP1 and refuses the config; write `reshard_after_forward`")


# ---------------------------------------------------------------------------- reading the pins


def test_lock_file_beats_requirements(tmp_path: Path):
    write_files(tmp_path, {
        "requirements.txt": "transformers>=4.30\n",
        "uv.lock": 'version = 1\n\n[[package]]\nname = "torch"\nversion = "2.5.1"\n\n'
                   '[[package]]\nname = "transformers"\nversion = "4.46.3"\nsource = { registry = "https://pypi.org/simple" }\n',
    })
    pin = pins(tmp_path)["transformers"]
    assert (pin.exact, pin.where) == ("4.46.3", "uv.lock:8")


FSDP_QLORA_README = """\
# fsdp-qlora
llama3 70b training and inference

```
# Install Pytorch for FSDP and FA/SDPA
pip install "torch==2.2.2" tensorboard

# Install Hugging Face libraries
pip install  --upgrade "transformers==4.40.0" "datasets==2.18.0" "accelerate==0.29.3"
pip install  --upgrade "evaluate==0.4.1" "bitsandbytes==0.43.1" "trl==0.8.6"

# train command line 8-GPU
ACCELERATE_USE_FSDP=1 torchrun --nproc_per_node=8 ./run_fsdp_qlora.py --config llama_3_70b_fsdp_qlora.yaml
```
"""


def test_the_readmes_pip_install_commands_pin_what_they_name(tmp_path: Path):
    """A blog-post repository (fsdp-qlora, after philschmid's Llama 3 70B FSDP-QLoRA post) says
    what it runs only in its README: ``pip install --upgrade "transformers==4.40.0"``. A bare
    ``tensorboard`` names no release; a requirements file, where there is one, decides first."""
    write_files(tmp_path, {"README.md": FSDP_QLORA_README})
    found = pins(tmp_path)
    assert {name: (str(pin.specifier), pin.where) for name, pin in found.items()
            if name in ("transformers", "trl", "torch", "tensorboard")} == {
        "transformers": ("==4.40.0", "README.md:9"), "trl": ("==0.8.6", "README.md:10"),
        "torch": ("==2.2.2", "README.md:6")}
    write_files(tmp_path, {"requirements.txt": "transformers==4.46.3\n"})
    assert pins(tmp_path)["transformers"].where == "requirements.txt:1"


def test_a_key_the_readmes_transformers_reads_is_no_error(lint):
    files = {"README.md": FSDP_QLORA_README,
             "llama_3_70b_fsdp_qlora.yaml": "model_id: meta-llama/Meta-Llama-3-70b\noutput_dir: out\n"
                                            "evaluation_strategy: epoch\nwarmup_ratio: 0.03\nbf16: true\n"}
    found = lint(files, "llama_3_70b_fsdp_qlora.yaml")
    assert [(d.code, d.severity) for d in found if d.code == "CFG004"] == [("CFG004", Severity.INFO)] * 2
    assert all("README.md:9" in d.message for d in found if d.code == "CFG004")


def test_setup_py_read_without_running_it(tmp_path: Path):
    setup = ('from setuptools import find_packages, setup\n\n_deps = [\n    "accelerate>=0.20.3",\n'
             '    "transformers==4.31.0",\n    "sentencepiece",\n]\n\n'
             'setup(name="alpaca", packages=find_packages(), install_requires=_deps)\n'
             'raise SystemExit("memlint must never run this")\n')
    write_files(tmp_path, {"setup.py": setup})
    pin = pins(tmp_path)["transformers"]
    assert (pin.exact, pin.where) == ("4.31.0", "setup.py:5")


def test_setup_cfg_poetry_and_conda(tmp_path: Path):
    write_files(tmp_path, {"setup.cfg": "[metadata]\nname = x\n\n[options]\ninstall_requires =\n"
                                        "    torch>=2.0\n    axolotl==0.12.2\n"})
    assert pins(tmp_path)["axolotl"].exact == "0.12.2"
    other = tmp_path / "poetry"
    write_files(other, {"pyproject.toml": '[tool.poetry]\nname = "x"\n\n[tool.poetry.dependencies]\n'
                                          'python = "^3.10"\ntransformers = "^4.34"\n'})
    assert str(pins(other)["transformers"].specifier) == "<5.0,>=4.34"
    conda = tmp_path / "conda"
    write_files(conda, {"environment.yml": "name: llm\nchannels: [conda-forge]\ndependencies:\n"
                                           "  - python=3.10\n  - conda-forge::transformers=4.34\n"
                                           "  - pip:\n    - axolotl==0.8.0\n"})
    found_pins = pins(conda)
    assert str(found_pins["transformers"].specifier) == "==4.34.*"
    assert found_pins["axolotl"].exact == "0.8.0"


def test_broken_dependency_files_pin_nothing(tmp_path: Path):
    write_files(tmp_path, {"pyproject.toml": "[project\ndependencies = [", "setup.py": "def (:\n",
                           "environment.yml": "dependencies: [\n", "requirements.txt": "-e .\ngit+https://x/y\n"})
    assert pins(tmp_path) == {}


# ---------------------------------------------------------------------------- the project's own parser

PARSER_UTILS = '''\
from transformers import HfArgumentParser


class ArgumentParserPlus(HfArgumentParser):
    def parse(self):
        return self.parse_yaml_file(sys.argv[1])
'''

FINETUNE = '''\
from dataclasses import dataclass, field

from open_instruct.utils import ArgumentParserPlus


@dataclass
class FlatArguments:
    model_name_or_path: str = None
    max_seq_length: int = field(default=2048, metadata={"help": "tokens per example"})
    num_train_epochs: int = 2
    warmup_ratio: float = 0.0
    gradient_checkpointing: bool = False
    with_tracking: bool = False


def main():
    parser = ArgumentParserPlus((FlatArguments,))
    args = parser.parse()
'''

FLAT_YAML = """\
model_name_or_path: meta-llama/Llama-2-7b-hf
max_seq_length: 4096
per_device_train_batch_size: 1
gradient_accumulation_steps: 16
learning_rate: 2.0e-05
warmup_ratio: 0.03
num_train_epochs: 3
gradient_checkpointing: true
with_tracking: true
lr_scheduler_typ: linear
output_dir: output/tulu_v2_7b/
"""


def test_fields_of_a_project_parser_subclass_are_known_keys(lint):
    files = {"open_instruct/utils.py": PARSER_UTILS, "open_instruct/finetune.py": FINETUNE,
             "configs/sft/tulu_7b.yaml": FLAT_YAML, "uv.lock": 'version = 1\n\n[[package]]\nname = "transformers"\n'
                                                                'version = "5.4.0"\n'}
    diagnostics = lint(files, "configs/sft/tulu_7b.yaml")
    # max_seq_length, with_tracking, warmup_ratio and gradient_checkpointing are FlatArguments' own
    # fields: neither unknown, nor removed or deprecated upstream; a misspelling still is one
    assert [(d.code, d.range.start.line) for d in diagnostics] == [("CFG001", 10)]
    assert "did you mean `lr_scheduler_type`?" in diagnostics[0].message


ZEPHYR_SFT = """\
# Model arguments
model_name_or_path: mistralai/Mistral-7B-v0.1
model_revision: main
torch_dtype: bfloat16

# Data training arguments
dataset_mixer:
  HuggingFaceH4/ultrachat_200k: 1.0
preprocessing_num_workers: 12

# SFT trainer config
bf16: true
do_eval: true
evaluation_strategy: epoch
gradient_accumulation_steps: 2
gradient_checkpointing: true
learning_rate: 2.0e-05
log_level: info
logging_steps: 5
lr_scheduler_type: cosine
max_seq_length: 2048
max_steps: -1
num_train_epochs: 1
output_dir: data/zephyr-7b-sft-full
per_device_train_batch_size: 16
save_strategy: "no"
warmup_ratio: 0.1
"""


def test_trl_keys_against_the_pinned_trl_and_inherited_keys_against_transformers(lint):
    requirements = "torch==2.1.2\ntransformers==4.39.3\ntrl==0.8.6\npeft==0.10.0\n".replace("trl==0.8.6", "trl==0.12.1")
    diagnostics = lint({"requirements.txt": requirements, "recipes/zephyr-7b/sft/config_full.yaml": ZEPHYR_SFT},
                       "recipes/zephyr-7b/sft/config_full.yaml")
    by_line = {d.range.start.line: d for d in diagnostics}
    # TRL 0.12 reads max_seq_length (TRL 0.20 renamed it max_length): an info, no "did you mean"
    assert (by_line[21].code, by_line[21].severity.name) == ("CFG004", "INFO")
    assert by_line[21].message == ("`max_seq_length` is read by the TRL 0.12 you pin (`trl==0.12.1`, "
                                   "requirements.txt:3); TRL 0.20 removed it, so an upgrade drops it")
    # evaluation_strategy is TrainingArguments', judged against the pinned Transformers 4.39
    assert by_line[14].severity.name == "INFO" and "Transformers 4.39 you pin" in by_line[14].message
    assert not [d for d in diagnostics if d.severity.name == "ERROR"]


def test_trl_key_removed_before_the_pinned_trl(lint):
    pyproject = '[project]\nname = "handbook"\nversion = "0.1"\ndependencies = ["transformers>=4.56", "trl>=0.23"]\n'
    diagnostics = lint({"pyproject.toml": pyproject, "recipes/zephyr-7b/sft/config_full.yaml": ZEPHYR_SFT},
                       "recipes/zephyr-7b/sft/config_full.yaml")
    removed = next(d for d in diagnostics if d.range.start.line == 21)
    assert (removed.code, removed.message) == (
        "CFG004", "`max_seq_length` was removed in TRL 0.20 (last read by 0.19); you pin `trl>=0.23` "
                  "(pyproject.toml:4) (HfArgumentParser refuses the file)")


def test_a_key_read_at_the_floor_of_a_range_pin_is_a_warning_that_says_both(lint):
    """alignment-handbook's setup.py pins `trl>=0.19.1`: TRL 0.19 reads `max_seq_length`, the
    newest release pip installs refuses it. Both are true of the pin, so a warning says so."""
    setup = ('from setuptools import setup\n\n_deps = [\n    "transformers>=4.53.3",\n    "trl>=0.19.1",\n]\n\n'
             'setup(name="alignment-handbook", install_requires=_deps)\n')
    diagnostics = lint({"setup.py": setup, "recipes/zephyr-7b/sft/config_full.yaml": ZEPHYR_SFT},
                       "recipes/zephyr-7b/sft/config_full.yaml")
    removed = next(d for d in diagnostics if d.range.start.line == 21)
    assert (removed.code, removed.severity.name) == ("CFG004", "WARNING")
    assert removed.message.startswith(
        "`max_seq_length` was removed in TRL 0.20 (last read by 0.19); your pin `trl>=0.19.1` (setup.py:5) "
        "allows TRL 0.19, which reads it, but a fresh install gets ")
    assert removed.message.endswith("(HfArgumentParser refuses the file): pin `trl<0.20` to keep it read")


def test_without_a_trl_pin_a_trainingarguments_file_is_not_judged_by_trl(lint):
    diagnostics = lint({"recipes/zephyr-7b/sft/config_full.yaml": ZEPHYR_SFT}, "recipes/zephyr-7b/sft/config_full.yaml")
    unknown = next(d for d in diagnostics if d.range.start.line == 21)
    assert unknown.code == "CFG001" and "did you mean `max_length`?" in unknown.message


def test_a_new_pin_relints_the_config_the_cache_kept(tmp_path: Path):
    """The result cache keeps a config's findings only while the dependency files it was judged
    against are unchanged."""
    import json
    import os
    import subprocess
    import sys
    import time

    write_files(tmp_path, {"requirements.txt": REQUIREMENTS_434, "configs/sft.yaml": TRAINING_ARGS_434})
    old = time.time() - 60  # files changed within two seconds of a run are read again by design
    for name in ("requirements.txt", "configs/sft.yaml"):
        os.utime(tmp_path / name, (old, old))

    def codes() -> list[tuple[str, str]]:
        done = subprocess.run([sys.executable, "-m", "memlint", "check", ".", "--select", "CFG004", "--format", "json"],
                              cwd=tmp_path, capture_output=True, text=True)
        return sorted((d["code"], d["severity"]) for d in json.loads(done.stdout or "[]"))

    assert codes() == [("CFG004", "info")] * 3
    (tmp_path / "requirements.txt").write_text(REQUIREMENTS_434.replace("4.34.0", "5.2.0"), encoding="utf-8")
    os.utime(tmp_path / "requirements.txt", (old + 5, old + 5))
    assert ("CFG004", "error") in codes()
    # a dependency file that appears in the config's own folder is read too
    (tmp_path / "configs/requirements.txt").write_text("transformers==4.34.0\n", encoding="utf-8")
    os.utime(tmp_path / "configs/requirements.txt", (old + 6, old + 6))
    assert codes() == [("CFG004", "info")] * 3


# R1-V's src/r1-v/setup.py, Hugging Face style: the sub-package's own dependency list
SUBPACKAGE_SETUP = '''\
import re
from setuptools import find_packages, setup

_deps = [
    "accelerate>=1.2.1",
    "deepspeed==0.15.4",
    "transformers @ git+https://github.com/huggingface/transformers.git@336dc69d63d56f232a183a3e7f52790429b871ef",
    "trl==0.14.0",
]
deps = {b: a for a, b in (re.findall(r"^(([^!=<>~ \\[\\]]+)(?:\\[[^\\]]+\\])?(?:[!=<>~ ].*)?$)", x)[0] for x in _deps)}

setup(name="r1-v", version="0.1.0.dev0", packages=find_packages("src"),
      install_requires=[deps["accelerate"], deps["transformers"], deps["trl"]])
'''

# src/r1-v/configs/qwen2vl_sft_config.yaml, trimmed
SFT_CONFIG_R1V = """\
model_name_or_path: Qwen/Qwen2-VL-2B-Instruct
model_revision: main
torch_dtype: bfloat16
dataset_name: MMInstruction/Clevr_CoGenT_TrainA_R1
bf16: true
do_eval: true
eval_strategy: "no"
gradient_accumulation_steps: 4
learning_rate: 2.0e-05
max_seq_length: 4096
num_train_epochs: 1
output_dir: data/Qwen2-VL-2B-Instruct-SFT
overwrite_output_dir: true
per_device_train_batch_size: 2
report_to: wandb
save_strategy: "no"
seed: 42
"""


def test_a_sub_package_dependency_file_governs_the_configs_beneath_it(lint, tmp_path: Path):
    diagnostics = lint({"README.md": "# R1-V\n", "requirements.txt": "trl==0.20.0\n",
                        "src/r1-v/setup.py": SUBPACKAGE_SETUP,
                        "src/r1-v/configs/qwen2vl_sft_config.yaml": SFT_CONFIG_R1V},
                       "src/r1-v/configs/qwen2vl_sft_config.yaml")
    # max_seq_length is TRL 0.14's key (the sub-package's pin wins over the root's trl==0.20)
    by_key = {d.range.start.line: d for d in diagnostics}
    assert by_key[10].code == "CFG004" and by_key[10].severity.name == "INFO"
    assert "the TRL 0.14 you pin (`trl==0.14.0`, src/r1-v/setup.py:8)" in by_key[10].message
    # transformers from a commit: no release to judge against, so every verdict is an info saying so
    overwrite = by_key[13]
    assert (overwrite.code, overwrite.severity.name) == ("CFG004", "INFO")
    assert "you install transformers from a commit, src/r1-v/setup.py:7, whose release memlint cannot tell" \
        in overwrite.message
    assert not [d for d in diagnostics if d.severity.name in ("ERROR", "WARNING")]
    # a file outside the sub-package keeps the root's pin
    assert pins(tmp_path, tmp_path / "train.py")["trl"].where == "requirements.txt:1"
    assert pins(tmp_path, tmp_path / "src/r1-v/configs/x.yaml")["trl"].where == "src/r1-v/setup.py:8"


def test_near_miss_a_sibling_folder_pins_nothing_for_its_neighbour(lint):
    diagnostics = lint({"src/r1-v/setup.py": SUBPACKAGE_SETUP, "configs/sft.yaml": SFT_CONFIG_R1V},
                       "configs/sft.yaml")
    # configs/ is not beneath src/r1-v: no pin, the newest releases judge (errors, as before)
    removed = {d.range.start.line: d for d in diagnostics if d.code == "CFG004"}
    assert removed[13].severity.name == "ERROR" and "from a commit" not in removed[13].message


def test_a_git_pin_of_a_commit_names_no_release(tmp_path: Path):
    write_files(tmp_path, {"requirements.txt": "transformers @ git+https://github.com/huggingface/transformers.git@92c5ca9\n"
                                               "clip @ git+https://github.com/openai/CLIP.git@dcba3cb\n"})
    pin = pins(tmp_path)["transformers"]
    assert (pin.url, str(pin.specifier), pin.exact, pin.where) == (True, "", None, "requirements.txt:1")


# LIMO's train/setup.py: the project contains LLaMA-Factory's own source (a vendored copy)
VENDORED_SETUP = '''\
import os
import re

from setuptools import find_packages, setup


def get_version() -> str:
    with open(os.path.join("src", "llamafactory", "extras", "env.py"), encoding="utf-8") as f:
        file_content = f.read()
        pattern = r"{}\\W*=\\W*\\"([^\\"]+)\\"".format("VERSION")
        (version,) = re.findall(pattern, file_content)
        return version


def main():
    setup(
        name="llamafactory",
        version=get_version(),
        package_dir={"": "src"},
        packages=find_packages("src"),
    )


if __name__ == "__main__":
    main()
'''


def test_a_project_that_contains_the_tool_runs_that_copy(tmp_path: Path):
    write_files(tmp_path, {
        "train/setup.py": VENDORED_SETUP,
        "train/requirements.txt": "transformers>=4.41.2,<=4.48.2,!=4.46.*,!=4.47.*,!=4.48.0\n",
        "train/src/llamafactory/extras/env.py": 'import platform\n\nVERSION = "0.9.2.dev0"\n',
        "train/src/llamafactory/__init__.py": '"""LLaMA-Factory."""\n',
    })
    near = tmp_path / "train/examples/train_full/qwen2_full_sft.yaml"
    pin = pins(tmp_path, near)["llamafactory"]
    assert (pin.exact, pin.where) == ("0.9.2.dev0", "train/setup.py:16")
    assert "llamafactory" not in pins(tmp_path)  # the root is not the tool's package


# LLaMA-Factory 0.9.2's examples/train_full/qwen2_full_sft.yaml, as LIMO ships it
LLAMAFACTORY_FULL = """\
### model
model_name_or_path: Qwen/Qwen2.5-32B-Instruct

### method
stage: sft
do_train: true
finetuning_type: full
deepspeed: examples/deepspeed/ds_z3_config.json

### dataset
dataset: limo
template: qwen
cutoff_len: 16384
overwrite_cache: true

### output
output_dir: saves/qwen2.5-32b/full/sft
logging_steps: 10
save_steps: 500
overwrite_output_dir: true

### train
per_device_train_batch_size: 1
gradient_accumulation_steps: 2
learning_rate: 5.0e-6
num_train_epochs: 15
bf16: true
"""


def test_trainingarguments_keys_of_a_llamafactory_config_follow_the_pinned_transformers(lint):
    diagnostics = lint({"requirements.txt": "transformers>=4.41.2,<=4.48.2\n",
                        "examples/train_full/sft.yaml": LLAMAFACTORY_FULL}, "examples/train_full/sft.yaml")
    overwrite = [d for d in diagnostics if d.range.start.line == 20]
    # Transformers 4.48 reads overwrite_output_dir without a deprecation: an info that 5.0 removed it
    assert [(d.code, d.severity.name) for d in overwrite] == [("CFG004", "INFO")]
    assert "Transformers 5.0 removed it" in overwrite[0].message


def test_near_miss_without_a_transformers_pin_the_llamafactory_schema_decides(lint):
    diagnostics = lint({"examples/train_full/sft.yaml": LLAMAFACTORY_FULL}, "examples/train_full/sft.yaml")
    assert [(d.code, d.range.start.line) for d in diagnostics if d.range.start.line == 20] == [("CFG003", 20)]


# trlx's examples/summarize_rlhf/configs/ds_config_trlx_gptj_summarize.json (Apex-era fp16 keys)
DS_TRLX = """\
{
  "train_micro_batch_size_per_gpu": 2,
  "gradient_accumulation_steps": 4,
  "fp16": {
    "enabled": true,
    "min_loss_scale": 0.5,
    "fp16_scale_tolerance": 0.25,
    "opt_level": "O2"
  },
  "zero_optimization": {
    "stage": 2,
    "contiguous_gradients": true
  }
}
"""


def test_deepspeed_before_0_17_1_reads_the_fp16_section_unchecked(lint):
    diagnostics = lint({"requirements.txt": "accelerate==0.21.0\ndeepspeed==0.10.1\ntorch\n",
                        "configs/ds_config.json": DS_TRLX}, "configs/ds_config.json")
    assert [(d.code, d.range.start.line, d.severity.name) for d in diagnostics] == [
        ("CFG002", 6, "INFO"), ("CFG001", 7, "WARNING"), ("CFG001", 8, "WARNING")]
    assert "the DeepSpeed you pin (`deepspeed==0.10.1`, requirements.txt:2) reads `fp16` without checking it " \
           "(ignores the key); DeepSpeed 0.17.1 and later refuse the config" in diagnostics[1].message


def test_near_miss_a_deepspeed_pin_that_admits_a_validating_release(lint):
    for requirement in ("deepspeed>=0.10.1\n", "deepspeed==0.17.1\n", ""):
        diagnostics = lint({"requirements.txt": requirement, "configs/ds_config.json": DS_TRLX},
                           "configs/ds_config.json")
        assert [(d.code, d.severity.name) for d in diagnostics] == [
            ("CFG002", "ERROR"), ("CFG001", "ERROR"), ("CFG001", "ERROR")], requirement
    diagnostics = lint({"requirements.txt": "deepspeed>=0.9,<0.15\n", "configs/ds_config.json": DS_TRLX},
                       "configs/ds_config.json")
    assert [d.severity.name for d in diagnostics] == ["INFO", "WARNING", "WARNING"]


# SafeAILab/EAGLE's eagle/train/ds_config.json, trimmed: booleans written as strings
DS_STRING_BOOLEANS = """\
{
    "fp16": {
        "enabled": "true",
        "auto_cast": "true",
        "loss_scale": 0,
        "initial_scale_power": 16
    },
    "zero_optimization": {
        "stage": 2,
        "overlap_comm": "true"
    },
    "gradient_accumulation_steps": 1,
    "train_micro_batch_size_per_gpu": 4
}
"""


def test_a_boolean_written_as_a_string_is_read_as_the_boolean_it_spells(lint):
    diagnostics = lint({"eagle/train/ds_config.json": DS_STRING_BOOLEANS}, "eagle/train/ds_config.json")
    assert [(d.code, d.range.start.line, d.severity.name) for d in diagnostics] == [
        ("CFG002", 3, "INFO"), ("CFG002", 4, "INFO"), ("CFG002", 10, "INFO")]  # before: three errors
    enabled, auto_cast, overlap = (d.message for d in diagnostics)
    assert enabled.startswith('`fp16.enabled` is the string "true", not a boolean: DeepSpeed 0.17.1 and later read '
                              "it as true; earlier releases test the string, which is true")
    assert "an HF Trainer given this config compares it with its own `--fp16`" in enabled
    assert "HF Trainer" not in auto_cast
    assert overlap == ('`zero_optimization.overlap_comm` is the string "true", not a boolean: DeepSpeed reads it '
                       "as true; write true")


def test_a_false_written_as_a_string_is_on_in_a_deepspeed_that_tests_its_truth(lint):
    config = DS_STRING_BOOLEANS.replace('"enabled": "true"', '"enabled": "false"')
    diagnostics = lint({"requirements.txt": "deepspeed==0.14.4\n", "ds_config.json": config}, "ds_config.json")
    first = diagnostics[0]
    assert (first.code, first.range.start.line, first.severity.name) == ("CFG002", 3, "WARNING")
    assert "the DeepSpeed you pin (`deepspeed==0.14.4`, requirements.txt:1) reads `fp16` as written and tests " \
           "the string, which is true: `fp16.enabled` is on" in first.message
    # a release that validates the section reads "false" as false
    diagnostics = lint({"requirements.txt": "deepspeed==0.17.1\n", "ds_config.json": config}, "ds_config.json")
    assert diagnostics[0].severity.name == "INFO" and "0.17.1 and later read it as false" in diagnostics[0].message


def test_near_miss_a_string_that_spells_no_boolean_is_still_refused(lint):
    config = DS_STRING_BOOLEANS.replace('"overlap_comm": "true"', '"overlap_comm": "sometimes"')
    diagnostics = lint({"ds_config.json": config}, "ds_config.json")
    overlap = [d for d in diagnostics if d.range.start.line == 10]
    assert [(d.code, d.severity.name) for d in overlap] == [("CFG002", "ERROR")]
    assert "must be true, false or null" in overlap[0].message

# LMFlow's src/lmflow/args.py, trimmed: the project's own DPO arguments declare `loss_type`
LMFLOW_ARGS = '''\
from dataclasses import dataclass, field
from typing import Optional

from transformers import HfArgumentParser, TrainingArguments


@dataclass
class FinetunerArguments(TrainingArguments):
    use_lisa: bool = field(default=False, metadata={"help": "whether to use LISA training strategy."})


@dataclass
class DPOv2AlignerArguments(FinetunerArguments):
    beta: float = field(default=0.1, metadata={"help": "the beta parameter for DPO loss"})
    loss_type: Optional[str] = field(default="sigmoid", metadata={"help": "the loss type"})
    margin_scale: Optional[float] = field(default=1.0, metadata={"help": "the margin scale"})


@dataclass
class IterativeDPOAlignerArguments(DPOv2AlignerArguments):
    reward_model_inference_batch_size: int = field(default=1)


def parse():
    return HfArgumentParser((IterativeDPOAlignerArguments,)).parse_yaml_file("configs/iterative_dpo.yaml")
'''

# configs/iterative_dpo.yaml, trimmed
ITERATIVE_DPO = """\
output_dir: output_models/iterative_dpo
run_name: iterative_dpo
num_train_epochs: 2
learning_rate: 5.0e-7
per_device_train_batch_size: 1
gradient_accumulation_steps: 16
gradient_checkpointing: True
loss_type: sigmoid
lr_scheduler_type: cosine
max_seq_length: 2048
margin_scale: 1.0
"""


def test_a_field_the_project_declares_takes_the_values_its_class_takes(lint):
    files = {"src/lmflow/args.py": LMFLOW_ARGS, "configs/iterative_dpo.yaml": ITERATIVE_DPO}
    diagnostics = lint(files, "configs/iterative_dpo.yaml")
    # `loss_type: sigmoid` is DPOv2AlignerArguments' value, not TRL's SFT loss enum
    assert [d for d in diagnostics if d.range.start.line == 8] == []


def test_near_miss_a_wrong_type_of_a_project_field_and_an_upstream_enum_are_still_judged(lint):
    text = ITERATIVE_DPO.replace("lr_scheduler_type: cosine", "lr_scheduler_type: cosin")
    files = {"src/lmflow/args.py": LMFLOW_ARGS, "configs/iterative_dpo.yaml": text}
    assert [(d.code, d.range.start.line) for d in lint(files, "configs/iterative_dpo.yaml")
            if d.code == "CFG002"] == [("CFG002", 9)]  # an enum TrainingArguments owns
    files = {"src/lmflow/args.py": LMFLOW_ARGS.replace("DPOv2AlignerArguments(FinetunerArguments)", "Unused"),
             "configs/iterative_dpo.yaml": ITERATIVE_DPO}
    # without the project's declaration the upstream enum judges it
    assert [d.code for d in lint(files, "configs/iterative_dpo.yaml") if d.range.start.line == 8] == ["CFG002"]


def test_a_project_that_contains_llamafactory_judges_values_by_its_copy(lint):
    model_args = ('from dataclasses import dataclass, field\nfrom typing import Literal, Optional\n\n\n@dataclass\n'
                  'class ModelArguments:\n    model_name_or_path: Optional[str] = field(default=None)\n'
                  '    quantization_method: Literal["bitsandbytes", "hqq", "eetq"] = field(default="bitsandbytes")\n')
    parser = ('from transformers import HfArgumentParser, Seq2SeqTrainingArguments\n\n'
              'from .model_args import ModelArguments\n\n_TRAIN_ARGS = [ModelArguments, Seq2SeqTrainingArguments]\n\n\n'
              'def get_train_args():\n    return HfArgumentParser((ModelArguments, Seq2SeqTrainingArguments))\n')
    config = LLAMAFACTORY_FULL.replace("finetuning_type: full", "finetuning_type: lora\nquantization_bit: 4\n"
                                       "quantization_method: bitsandbytes")
    files = {"train/setup.py": VENDORED_SETUP, "train/src/llamafactory/extras/env.py": 'VERSION = "0.9.2.dev0"\n',
             "train/src/llamafactory/hparams/model_args.py": model_args,
             "train/src/llamafactory/hparams/parser.py": parser,
             "train/examples/train_qlora/sft.yaml": config}
    assert [d for d in lint(files, "train/examples/train_qlora/sft.yaml") if d.code == "CFG002"] == []
    # near miss: the same config in a project that only uses LLaMA-Factory (no copy of its source)
    files["train/setup.py"] = VENDORED_SETUP.replace('name="llamafactory"', 'name="limo"')
    assert [d.code for d in lint(files, "train/examples/train_qlora/sft.yaml") if d.code == "CFG002"] == ["CFG002"]


# alpaca_farm's examples/accelerate_configs/rlhf_ppo_fsdp_llama_8gpu.yaml (accelerate 0.18-0.20 era)
ALPACA_FARM_FSDP = """\
compute_environment: LOCAL_MACHINE
deepspeed_config: { }
distributed_type: FSDP
downcast_bf16: 'yes'
dynamo_backend: 'NO'
fsdp_config:
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_backward_prefetch_policy: BACKWARD_PRE
  fsdp_offload_params: false
  fsdp_sharding_strategy: 1
  fsdp_state_dict_type: FULL_STATE_DICT
  fsdp_transformer_layer_cls_to_wrap: LlamaDecoderLayer
gpu_ids: null
machine_rank: 0
main_training_function: main
mixed_precision: 'bf16'
num_machines: 1
num_processes: 8
rdzv_backend: static
same_network: true
use_cpu: false
"""


def test_accelerate_keys_of_the_pinned_release(lint):
    files = {"requirements.txt": "accelerate>=0.18.0,<=0.20.0\ntransformers<=4.29.2\n",
             "examples/accelerate_configs/fsdp_8gpu.yaml": ALPACA_FARM_FSDP}
    diagnostics = lint(files, "examples/accelerate_configs/fsdp_8gpu.yaml")
    # fsdp_backward_prefetch_policy is 0.20's --fsdp_backward_prefetch_policy: read, an info that a later
    # release dropped it; no error on the file
    assert not [d for d in diagnostics if d.severity.name == "ERROR"], diagnostics
    [prefetch] = [d for d in diagnostics if d.range.start.line == 8]
    assert (prefetch.code, prefetch.severity.name) == ("CFG004", "INFO")
    assert "is read by the Accelerate 0.20 you pin (`accelerate<=0.20.0,>=0.18.0`, requirements.txt:1)" \
        in prefetch.message
    # dynamo_backend is the format before 0.17, which 0.20 converts on load (its `accelerate config`
    # writes dynamo_config): deprecated in the release pinned, and said so in its words
    [dynamo] = [d for d in diagnostics if d.range.start.line == 5]
    assert (dynamo.code, dynamo.message) == ("CFG003", "`dynamo_backend` is deprecated in the Accelerate 0.20 you pin "
                                             "(`accelerate<=0.20.0,>=0.18.0`, requirements.txt:1): use `dynamo_config`")


def test_without_an_accelerate_pin_the_old_fsdp_key_is_removed_in_the_newest_release(lint):
    # as for a top-level key: the newest release decides, and the history says when it stopped
    # reading the key (before: "unknown key", as if it had never been Accelerate's)
    diagnostics = lint({"examples/accelerate_configs/fsdp_8gpu.yaml": ALPACA_FARM_FSDP},
                       "examples/accelerate_configs/fsdp_8gpu.yaml")
    [prefetch] = [d for d in diagnostics if d.range.start.line == 8]
    assert (prefetch.code, prefetch.severity.name) == ("CFG004", "ERROR")
    assert prefetch.message == ("`fsdp_backward_prefetch_policy` was removed in Accelerate 1.0 (last read by 0.34) "
                                "(`accelerate launch` ignores it silently)")
    assert prefetch.fix is not None and prefetch.fix.edits[0].new_text == "fsdp_backward_prefetch"
    # a key no release of the history read stays unknown
    typo = ALPACA_FARM_FSDP.replace("fsdp_offload_params", "fsdp_offload_param")
    [unknown] = [d for d in lint({"examples/accelerate_configs/fsdp_8gpu.yaml": typo},
                                 "examples/accelerate_configs/fsdp_8gpu.yaml") if d.range.start.line == 9]
    assert unknown.code == "CFG001" and "did you mean `fsdp_offload_params`?" in unknown.message


# VILA's scripts/zero3_mics_mini_fixed.json, trimmed, and its pyproject.toml, whose `train` extra
# pins the DeepSpeed that training installs: 0.9.5 reads MiCS sharding, 0.19.7 removed it
VILA_PYPROJECT = """\
[project]
name = "vila"
version = "2.0.0"
dependencies = ["torch==2.3.0", "transformers==4.46.0", "accelerate==0.27.2", "peft>=0.9.0"]

[project.optional-dependencies]
train = ["deepspeed==0.9.5", "ninja", "wandb"]
eval = ["word2number", "Levenshtein", "nltk"]
"""

MICS_CONFIG = """\
{
  "bf16": {"enabled": "auto"},
  "train_micro_batch_size_per_gpu": "auto",
  "zero_optimization": {
    "stage": 3,
    "overlap_comm": true,
    "mics_shard_size": 8,
    "mics_hierarchical_params_gather": false
  }
}
"""


def test_a_removed_deepspeed_key_read_by_the_pinned_release_is_an_info(lint):
    diagnostics = lint({"pyproject.toml": VILA_PYPROJECT, "scripts/zero3_mics.json": MICS_CONFIG},
                       "scripts/zero3_mics.json")
    assert [(d.code, d.range.start.line, d.severity.name) for d in diagnostics] == [
        ("CFG004", 7, "INFO"), ("CFG004", 8, "INFO")]
    assert diagnostics[0].message.startswith(
        "`zero_optimization.mics_shard_size` is read by the DeepSpeed you pin (`deepspeed==0.9.5`, pyproject.toml:")
    assert "DeepSpeed 0.19.7 removed it and refuses a config that sets it" in diagnostics[0].message


def test_near_miss_removed_deepspeed_keys_under_pins_that_reach_the_removal(lint):
    cases = {"deepspeed>=0.14\n": "WARNING", "deepspeed==0.19.8\n": "ERROR", "deepspeed\n": "ERROR", "": "ERROR"}
    for requirement, severity in cases.items():
        diagnostics = lint({"requirements.txt": requirement, "scripts/zero3_mics.json": MICS_CONFIG},
                           "scripts/zero3_mics.json")
        assert [(d.code, d.severity.name) for d in diagnostics] == [("CFG004", severity)] * 2, requirement
        assert "DeepSpeed 0.19.7" in diagnostics[0].message
    [warning, _] = lint({"requirements.txt": "deepspeed>=0.14\n", "scripts/zero3_mics.json": MICS_CONFIG},
                        "scripts/zero3_mics.json")
    assert "a fresh install (the newest release the pin admits) refuses the config" in warning.message


# Online-RLHF sft/llama3-8b-it.yaml (abridged): Axolotl's example layout, the keys it does not use
# left with no value
AXOLOTL_EMPTY_KEYS = """\
base_model: meta-llama/Meta-Llama-3-8B
sequence_len: 8192
micro_batch_size: 1
gradient_accumulation_steps: 16
datasets:
  - path: RLHFlow/RLHFlow-SFT-Dataset-ver2
    type: sharegpt
xformers_attention:
flash_attention: true
deepspeed: #deepspeed/zero1.json # multi-gpu only
fsdp:
fsdp_config:
unsloth_lora_mlp:
"""


def test_an_axolotl_key_written_with_no_value_sets_nothing_to_remove(lint):
    diagnostics = lint({"requirements.txt": "axolotl==0.19.0\n", "sft.yaml": AXOLOTL_EMPTY_KEYS}, "sft.yaml")
    assert not [d for d in diagnostics if d.code in ("CFG003", "CFG004") and d.range.start.line in (8, 11, 13)]
    newest = lint({"sft.yaml": AXOLOTL_EMPTY_KEYS}, "sft.yaml")
    assert not [d for d in newest if d.code in ("CFG003", "CFG004") and d.range.start.line in (8, 11, 13)]
    # with a value, each is reported as before
    valued = AXOLOTL_EMPTY_KEYS.replace("fsdp:\n", "fsdp:\n  - full_shard\n").replace(
        "unsloth_lora_mlp:\n", "unsloth_lora_mlp: true\n")
    codes = {(d.code, d.range.start.line) for d in lint({"sft.yaml": valued}, "sft.yaml")}
    assert {("CFG003", 11), ("CFG004", 14)} <= codes


def test_a_trainer_arguments_key_written_with_no_value_is_still_refused(lint):
    # HfArgumentParser refuses a key its dataclasses lack whatever the value
    text = "output_dir: out\nper_device_train_batch_size: 2\nevaluation_strategy:\n"
    [removed] = [d for d in lint({"requirements.txt": "transformers==4.52.4\n", "args.yaml": text}, "args.yaml")
                 if d.code == "CFG004"]
    assert removed.range.start.line == 3


# ---------------------------------------------------------------------------- "auto" in the legacy `bfloat16` section

# AgentTuning's eval_heldout/science-world/fast_agent: a Seq2SeqTrainer script launched with a
# DeepSpeed config that keeps the legacy `bfloat16` name, and its own requirements file beside it
BFLOAT16_AUTO = """\
{
    "bfloat16": {
        "enabled": "auto"
    },
    "fp16": {
        "enabled": "auto",
        "loss_scale": 0,
        "initial_scale_power": 16
    },
    "zero_optimization": {
        "stage": 2,
        "offload_optimizer": {"device": "cpu", "pin_memory": true},
        "overlap_comm": true
    },
    "gradient_accumulation_steps": "auto",
    "train_micro_batch_size_per_gpu": "auto"
}
"""
SEQ2SEQ_TRAIN = """\
from dataclasses import dataclass, field

from transformers import HfArgumentParser, Seq2SeqTrainer, Seq2SeqTrainingArguments


@dataclass
class DataTrainingArguments:
    train_file: str = field(default=None)
    max_source_length: int = 1024


def main():
    parser = HfArgumentParser((DataTrainingArguments, Seq2SeqTrainingArguments))
    data_args, training_args = parser.parse_args_into_dataclasses()
    print(f"bf16-bits training: {training_args.bf16}")


if __name__ == "__main__":
    main()
"""
DS_TRAIN_SH = """\
deepspeed --master_port 29510 ./ds_train.py \\
    --model_name_or_path google/flan-t5-large \\
    --output_dir model_ckpts/flan_large \\
    --per_device_train_batch_size 8 \\
    --gradient_accumulation_steps 4 \\
    --deepspeed zero_2_bf16.json
"""


def _fast_agent(requirements: dict[str, str]) -> dict[str, str]:
    return {"fast_agent/ds_train.py": SEQ2SEQ_TRAIN, "fast_agent/ds_train.sh": DS_TRAIN_SH,
            "fast_agent/zero_2_bf16.json": BFLOAT16_AUTO, **requirements}


def test_auto_in_the_bfloat16_section_under_a_deepspeed_that_reads_it_unchecked(lint):
    files = _fast_agent({"fast_agent/deepspeed_reqs.txt": "datasets==1.18.3\ndeepspeed==0.5.10\nhjson==3.0.2\n",
                         "requirements.txt": "transformers==4.28.0\n"})
    deprecated, auto = lint(files, "fast_agent/zero_2_bf16.json")
    assert (auto.code, auto.range.start.line, auto.severity.name) == ("CFG002", 3, "WARNING")
    assert "the DeepSpeed you pin (`deepspeed==0.5.10`, fast_agent/deepspeed_reqs.txt:2) reads the string as true, " \
           "so bf16 training is on whatever `--bf16` says; DeepSpeed 0.17.1 and later drop the \"auto\"" in auto.message
    assert "not the legacy `bfloat16` section" in auto.message
    # 0.5.10 has no `bf16`: renaming the section would switch bf16 off
    assert (deprecated.code, deprecated.severity.name, deprecated.fix) == ("CFG003", "INFO", None)
    assert "`bfloat16` is the only spelling the DeepSpeed you pin" in deprecated.message


def test_near_miss_auto_in_the_bfloat16_section_under_a_deepspeed_that_drops_it(lint):
    for requirement in ("deepspeed>=0.17.1\n", "deepspeed\n", ""):
        deprecated, auto = lint(_fast_agent({"fast_agent/deepspeed_reqs.txt": requirement}),
                                "fast_agent/zero_2_bf16.json")
        assert (auto.code, auto.severity.name) == ("CFG002", "ERROR"), requirement
        assert "the HF Trainer and Accelerate fill \"auto\" in `bf16`, not in the legacy `bfloat16` section, and " \
               "DeepSpeed drops the \"auto\" and keeps its default (bf16 off, unless mixed precision adds a `bf16` " \
               "section)" in auto.message
        assert (deprecated.code, deprecated.severity.name) == ("CFG003", "WARNING")
        assert deprecated.fix is not None and "bf16" in deprecated.fix.message


def test_requirements_files_named_for_what_they_install(tmp_path: Path):
    write_files(tmp_path, {"fast_agent/deepspeed_reqs.txt": "deepspeed==0.5.10\n",
                           "dev-requirements.txt": "transformers==4.28.0\n",
                           "fast_agent/notes.txt": "accelerate==0.19.0\n"})
    found_pins = pins(tmp_path, tmp_path / "fast_agent" / "zero_2_bf16.json")
    assert (found_pins["deepspeed"].exact, found_pins["deepspeed"].where) == ("0.5.10", "fast_agent/deepspeed_reqs.txt:1")
    assert found_pins["transformers"].exact == "4.28.0"
    assert "accelerate" not in found_pins  # a text file that is not named a requirements file


def test_a_tool_whose_setup_py_names_it_through_a_constant_is_its_own_source(tmp_path: Path):
    # llm-foundry's setup.py: `_PACKAGE_NAME = 'llm-foundry'`, the version exec'd from llmfoundry/_version.py
    setup = ("from setuptools import find_packages, setup\n\n_PACKAGE_NAME = 'llm-foundry'\n"
             "version_locals = {}\nwith open('llmfoundry/_version.py') as f:\n    exec(f.read(), version_locals)\n"
             "repo_version = str(version_locals['__version__'])\n\n"
             "setup(name=_PACKAGE_NAME, version=repo_version, packages=find_packages())\n")
    write_files(tmp_path, {"setup.py": setup, "llmfoundry/_version.py": "__version__ = '0.22.0.dev0'\n"})
    pin = pins(tmp_path)["llm-foundry"]
    assert (pin.exact, pin.source_tree) == ("0.22.0.dev0", True)


def test_the_run_trains_in_bf16_where_the_pinned_deepspeed_reads_the_auto_as_true(tmp_path: Path):
    """LLM-Blender's gen_fuser (this launcher and config, flan-t5-large at 16 x 1,024 tokens, no
    `--bf16`): under its pinned DeepSpeed the legacy section's "auto" turns bf16 on, so the run is
    estimated in bf16, not fp32 (a 121.8 GiB MEM001 error before)."""
    from memlint.facts.resolve import Precision
    from tests.project.test_config_launchers import _project, _runs

    def run_of(requirement: str):
        root = tmp_path / str(abs(hash(requirement)))
        settings = _project(root, _fast_agent({"fast_agent/deepspeed_reqs.txt": requirement,
                                               "requirements.txt": "transformers==4.28.1\n"}))
        [run] = _runs(settings, "fast_agent/ds_train.sh")
        return run

    read = run_of("deepspeed==0.5.10\n")
    assert read.plan.value("ds_bf16") is True
    assert "deepspeed==0.5.10" in read.plan.get("ds_bf16").note
    assert read.setup.precision == Precision.MIXED_BF16
    for requirement in ("deepspeed>=0.17.1\n", ""):
        dropped = run_of(requirement)
        assert dropped.plan.get("ds_bf16") is None, requirement
        assert dropped.setup.precision != Precision.MIXED_BF16


# Step-DPO's configs/config_full.yaml, parsed as a TRL DPOConfig, with `trl==0.8.5` pinned: TRL's
# key history starts at 0.9.2, so memlint cannot say what 0.8.5 reads; the newest TRL's deprecation
# of gradient_checkpointing_kwargs is then a note for the upgrade, not a warning about the pinned run
STEP_DPO_CONFIG = """\
model_name_or_path: Qwen/Qwen2-7B-Instruct
torch_dtype: bfloat16
beta: 0.05
do_eval: false
gradient_accumulation_steps: 8
gradient_checkpointing: true
gradient_checkpointing_kwargs:
  use_reentrant: False
learning_rate: 5.0e-7
max_length: 1024
max_prompt_length: 512
num_train_epochs: 4
output_dir: outputs/qwen2-7b-step-dpo
per_device_train_batch_size: 2
"""
STEP_DPO_TRAIN = """\
from transformers import AutoModelForCausalLM
from trl import DPOConfig, DPOTrainer
from alignment import H4ArgumentParser, ModelArguments


def main():
    parser = H4ArgumentParser((ModelArguments, DPOConfig))
    model_args, training_args = parser.parse()
    model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path)
    DPOTrainer(model, args=training_args).train()


if __name__ == "__main__":
    main()
"""


def test_a_deprecation_of_the_newest_release_under_a_pin_older_than_the_history_is_an_info(lint):
    files = {"configs/config_full.yaml": STEP_DPO_CONFIG, "train.py": STEP_DPO_TRAIN,
             "requirements.txt": "jsonlines\nnumpy==1.26.4\ntrl==0.8.5\n"}
    [finding] = [d for d in lint(files, "configs/config_full.yaml") if d.code == "CFG003"]
    assert finding.severity.name == "INFO"
    assert "you pin `trl==0.8.5` (requirements.txt:3), older than trl 0.9.2" in finding.message
    # without the pin the newest TRL is what pip installs: the warning stands
    unpinned = {**files, "requirements.txt": "jsonlines\ntrl\n"}
    [finding] = [d for d in lint(unpinned, "configs/config_full.yaml") if d.code == "CFG003"]
    assert finding.severity.name == "WARNING"


def test_the_packaging_metadata_beats_a_requirements_file_of_one_feature(tmp_path: Path):
    # LLaMA-Factory keeps one requirements file per optional feature: the sglang backend's pins
    # transformers==4.51.1, while `pip install .` takes pyproject.toml's range (before: the feature's
    # file decided, and 95 findings said "the Transformers 4.51 you pin")
    write_files(tmp_path, {
        "pyproject.toml": '[project]\nname = "llamafactory"\ndependencies = [\n    "torch>=2.4.0",\n'
                          '    "transformers>=4.51.0,<=5.0.0,!=4.52.0,!=4.57.0",\n    "peft>=0.14.0,<=0.17.1",\n]\n',
        "requirements/sglang.txt": "sglang[srt]>=0.4.5\ntransformers==4.51.1\n",
        "requirements/deepspeed.txt": "deepspeed>=0.10.0,<=0.16.9\n",
        "requirements-dev.txt": "transformers==4.50.0\npytest\n",
    })
    found_pins = pins(tmp_path)
    assert (str(found_pins["transformers"].specifier), found_pins["transformers"].where) == (
        "!=4.52.0,!=4.57.0,<=5.0.0,>=4.51.0", "pyproject.toml:5")
    # what only a feature's file pins is still read from it
    assert found_pins["deepspeed"].where == "requirements/deepspeed.txt:1"


def test_a_bare_name_in_the_metadata_gives_way_to_a_file_that_pins_a_release(tmp_path: Path):
    write_files(tmp_path, {
        "setup.py": 'from setuptools import setup\nsetup(name="x", install_requires=["transformers", "torch"])\n',
        "requirements-train.txt": "transformers==4.36.2\n",
    })
    assert pins(tmp_path)["transformers"].where == "requirements-train.txt:1"
    # the main requirements.txt still comes first
    write_files(tmp_path, {"requirements.txt": "transformers==4.40.0\n"})
    assert pins(tmp_path)["transformers"].exact == "4.40.0"


def test_a_pyproject_of_the_tool_itself_is_the_copy_the_project_runs(tmp_path: Path):
    # LLaMA-Factory builds with hatchling since 0.9.4: no setup.py, a dynamic version read from
    # its source; a checkout of it (or a fork) runs its own argument classes
    write_files(tmp_path, {
        "pyproject.toml": '[build-system]\nrequires = ["hatchling"]\n\n[project]\nname = "llamafactory"\n'
                          'dynamic = ["version"]\ndependencies = ["transformers>=4.51.0,<=5.0.0"]\n',
        "src/llamafactory/extras/env.py": 'VERSION = "0.9.5.dev0"\n',
    })
    pin = pins(tmp_path)["llamafactory"]
    assert (pin.exact, pin.where, pin.source_tree) == ("0.9.5.dev0", "pyproject.toml:5", True)


def test_a_field_a_hatchling_built_llamafactory_copy_declares_is_its_own(lint):
    # LLaMA-Factory keeps `overwrite_output_dir` in its own TrainingArguments after Transformers 5
    # removed it: a fork's examples are not "removed in Transformers 5.0" (48 such findings before)
    training_args = ('from dataclasses import dataclass, field\n\nfrom transformers import Seq2SeqTrainingArguments\n\n\n'
                     '@dataclass\nclass TrainingArguments(Seq2SeqTrainingArguments):\n'
                     '    overwrite_output_dir: bool = field(default=False, metadata={"help": "deprecated"})\n')
    parser = ('from transformers import HfArgumentParser\n\nfrom .training_args import TrainingArguments\n\n\n'
              'def get_train_args():\n    return HfArgumentParser((TrainingArguments,))\n')
    config = LLAMAFACTORY_FULL  # it writes `overwrite_output_dir: true`, as the examples do
    files = {"pyproject.toml": '[project]\nname = "llamafactory"\ndynamic = ["version"]\n'
                               'dependencies = ["transformers>=4.51.0,<=5.0.0"]\n',
             "src/llamafactory/extras/env.py": 'VERSION = "0.9.5.dev0"\n',
             "src/llamafactory/hparams/training_args.py": training_args,
             "src/llamafactory/hparams/parser.py": parser,
             "examples/train_full/sft.yaml": config}
    assert [d.message for d in lint(files, "examples/train_full/sft.yaml") if "overwrite_output_dir" in d.message] == []


# LLaVA-Pool's src/llavapool/hparams, trimmed: LLaMA-Factory's argument classes copied under the
# project's own package, with a stage of its own ("pret") and no `train_mm_proj_only`
FORKED_FINETUNING_ARGS = '''\
from dataclasses import dataclass, field
from typing import Literal, Optional


@dataclass
class DataArguments:
    template: Optional[str] = field(default=None)
    dataset: Optional[str] = field(default=None)
    cutoff_len: int = field(default=2048)


@dataclass
class FinetuningArguments:
    stage: Literal["pret", "sft", "rm", "ppo", "dpo", "kto"] = field(default="sft")
    finetuning_type: Literal["lora", "freeze", "full"] = field(default="lora")
    freeze_vision_tower: bool = field(default=True)
'''

FORKED_PARSER = '''\
from transformers import HfArgumentParser, Seq2SeqTrainingArguments

from llavapool.hparams.args import DataArguments, FinetuningArguments

_TRAIN_ARGS = [DataArguments, Seq2SeqTrainingArguments, FinetuningArguments]


def get_train_args(path):
    parser = HfArgumentParser(_TRAIN_ARGS)
    return parser.parse_yaml_file(path)
'''

FORKED_YAML = """\
model_name_or_path: Qwen/Qwen2-VL-7B-Instruct
stage: {stage}
do_train: true
finetuning_type: full
freeze_vision_tower: true
{extra}dataset: docvqa
template: qwen2_vl
cutoff_len: 8192
per_device_train_batch_size: 1
bf16: true
output_dir: output/qwen2vl
"""


def test_a_project_carrying_its_own_copy_of_llamafactory_arguments_judges_their_keys(lint):
    files = {"src/llavapool/hparams/args.py": FORKED_FINETUNING_ARGS,
             "src/llavapool/hparams/parser.py": FORKED_PARSER,
             "examples/magma_full_pret.yaml": FORKED_YAML.format(stage="pret", extra="")}
    diagnostics = lint(files, "examples/magma_full_pret.yaml")
    assert not [d for d in diagnostics if d.code == "CFG002"]  # its own Literal admits "pret"
    files["examples/magma_full_pret.yaml"] = FORKED_YAML.format(stage="sft", extra="train_mm_proj_only: false\n")
    diagnostics = lint(files, "examples/magma_full_pret.yaml")
    # a key neither its copy nor the Trainer declares is still refused by its HfArgumentParser
    [unknown] = [d for d in diagnostics if d.code == "CFG001"]
    assert unknown.range.start.line == 6
    assert "the project's own copy of its argument classes does not declare it" in unknown.message
    assert "LLaMA-Factory's argument parser" not in unknown.message


def test_near_miss_without_the_copy_the_llamafactory_schema_judges_the_stage(lint):
    diagnostics = lint({"examples/magma_full_pret.yaml": FORKED_YAML.format(stage="pret", extra="")},
                       "examples/magma_full_pret.yaml")
    assert [(d.code, d.range.start.line) for d in diagnostics if d.code == "CFG002"] == [("CFG002", 2)]


OPEN_R1_CODEFORCES = """\
# Model arguments
model_name_or_path: Qwen/Qwen2.5-Coder-7B-Instruct
torch_dtype: bfloat16

# GRPO trainer config
beta: 0.0
loss_type: dr_grpo
scale_rewards: false
bf16: true
use_vllm: true
vllm_device: auto
vllm_gpu_memory_utilization: 0.7
num_generations: 16
max_prompt_length: 2000
max_completion_length: 8192
per_device_train_batch_size: 2
gradient_accumulation_steps: 32
output_dir: data/Qwen2.5-Coder-7B-Instruct-GRPO
"""


def test_a_grpo_recipe_against_the_pinned_trls_grpoconfig(lint):
    """open-r1's ``recipes/Qwen2.5-Coder-7B-Instruct/grpo/config_codeforces.yaml`` under its
    ``trl==0.18.0``: ``scale_rewards: false`` is the ``bool`` that release declares (TRL 0.22 made
    it a ``str``, the schema's type), ``vllm_device`` was dropped by 0.18 itself, and
    ``max_completion_length`` is read by every GRPOConfig."""
    def found(trl: str) -> list[tuple[str, int]]:
        files = {"setup.py": f'from setuptools import setup\n\nsetup(name="open-r1", install_requires=["{trl}"])\n',
                 "recipes/grpo/config_codeforces.yaml": OPEN_R1_CODEFORCES}
        return [(d.code, d.range.start.line) for d in lint(files, "recipes/grpo/config_codeforces.yaml")
                if d.code in ("CFG002", "CFG004") and d.severity != Severity.INFO]

    assert found("trl==0.18.0") == [("CFG004", 11)]  # vllm_device alone
    assert found("trl==0.17.0") == []
    assert ("CFG002", 8) in found("trl==1.16.0")  # scale_rewards must be a string there
