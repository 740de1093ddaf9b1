"""CFG001 on an llm-foundry (Composer) YAML judges top-level keys by the llm-foundry the project
pins: from 0.10 train.py refuses a key its TrainConfig does not define; before, it warned and went
on, and a key the file uses as an OmegaConf variable (``data_local: ...`` then ``${data_local}``,
the layout of llm-foundry's own 0.3 YAMLs and of the projects built on them) is no mistake."""

from __future__ import annotations

from memlint.model.diagnostics import Severity

# the shape of an llm-foundry 0.3-era pretraining YAML (LLM-Shearing's and llm-foundry's own)
PRETRAIN_YAML = """\
data_local: /data/redpajama-dedup
data_remote: # If blank, files must be present in data_local
tokenizer_name: meta-llama/Llama-2-7b-hf
max_seq_len: 4096
global_seed: 17
run_nmae: llama2-1.3b-continued

model:
  name: hf_causal_lm
  pretrained_model_name_or_path: ${tokenizer_name}
  max_seq_len: ${max_seq_len}

train_loader:
  name: text
  dataset:
    local: ${data_local}
    remote: ${data_remote}
    split: train
    max_seq_len: ${max_seq_len}
  drop_last: true

optimizer:
  name: decoupled_adamw
  lr: 1.0e-4

precision: amp_bf16
max_duration: 48000ba
global_train_batch_size: 256
device_train_microbatch_size: 16
seed: ${global_seed}
"""


def _unknown(lint, requirements: str | None):
    files = {"requirements.txt": requirements} if requirements is not None else {}
    return {d.message.split("`")[1]: d for d in lint("CFG001", PRETRAIN_YAML, path="configs/1.3b.yaml", files=files)}


def test_a_pin_before_010_accepts_the_files_variables_and_only_warns_about_the_rest(lint):
    found = _unknown(lint, "composer==0.16.3\nllm-foundry==0.3.0\n")
    assert set(found) == {"run_nmae"}  # data_local, data_remote, tokenizer_name, global_seed are ${...} variables
    finding = found["run_nmae"]
    assert finding.severity == Severity.WARNING
    assert "`llm-foundry==0.3.0` (requirements.txt:2), only warns" in finding.message


def test_a_current_llm_foundry_refuses_every_top_level_variable(lint):
    for requirements in ("llm-foundry>=0.10\n", None):
        found = _unknown(lint, requirements)
        assert {"data_local", "data_remote", "tokenizer_name", "global_seed", "run_nmae"} <= set(found)
        assert all(d.severity == Severity.ERROR and "refuses the file" in d.message for d in found.values())
