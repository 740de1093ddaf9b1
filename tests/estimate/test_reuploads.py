"""Re-uploads in another storage format (GPTQ, AWQ, AQLM, NVFP4, bnb-nf4, BF16/fp16/dequantized):
they answer with the base model's entry, say which, and their format becomes the run's weights."""

from __future__ import annotations

import json

import pytest

from memlint.catalog import variants
from memlint.catalog.models import find_entry, find_variant, resolve
from memlint.cli.errors import EXIT_OK
from memlint.cli.main import main
from memlint.estimate import TrainingSetup, estimate_training
from memlint.estimate.setup import Lora
from memlint.estimate.states import GROUP_INT4_BYTES, NVFP4_BYTES, quantized_weight_bytes


@pytest.mark.parametrize(("name", "entry_id", "storage"), [
    ("TheBloke/Llama-2-7B-GPTQ", "meta-llama/Llama-2-7b-hf", "int4"),
    ("TechxGenus/Meta-Llama-3-8B-Instruct-AWQ", "meta-llama/Meta-Llama-3-8B", "int4"),
    ("Qwen/Qwen2.5-7B-Instruct-GPTQ-Int8", "Qwen/Qwen2.5-7B", "int8"),
    ("ISTA-DASLab/Meta-Llama-3-8B-Instruct-AQLM-2Bit-1x16", "meta-llama/Meta-Llama-3-8B", "aqlm-2bit-1x16"),
    ("nvidia/Qwen3-30B-A3B-NVFP4", "Qwen/Qwen3-30B-A3B", "nvfp4"),
    ("hugging-quants/Meta-Llama-3.1-405B-BNB-NF4-BF16", "meta-llama/Llama-3.1-405B", "nf4"),
    ("axolotl-quants/DeepSeek-V2.5-bnb-nf4-bf16", "deepseek-ai/DeepSeek-V2.5", "nf4"),  # Axolotl's DeepSeek example
    ("casperhansen/llama-3-70b-fp16", "meta-llama/Meta-Llama-3-70B", None),
    ("axolotl-ai-co/gpt-oss-120b-dequantized", "openai/gpt-oss-120b", None),
])
def test_a_reupload_resolves_to_its_base_and_says_which_and_how_it_is_stored(name, entry_id, storage):
    found = resolve(name, offline=True)
    assert found.quantization == storage
    assert f"took the architecture of {entry_id}" in found.note
    assert found.arch.n_params == resolve(entry_id).arch.n_params
    word = {"int4": "GPTQ/AWQ", "int8": "int8", "aqlm-2bit-1x16": "AQLM", "nvfp4": "NVFP4", "nf4": "NF4",
            None: "unquantized"}[storage]
    assert word in found.note


def test_the_storage_words_are_a_tail_and_other_orgs_need_them():
    assert variants.split("axolotl-quants/Llama-4-Scout-17B-16E-Linearized-bnb-nf4-bf16").key == "llama-4-scout-17b-16e"
    assert variants.split("axolotl-quants/Llama-4-Scout-17B-16E-Linearized-bnb-nf4-bf16").storage == "nf4"
    # a third party's upload under the original name, without a storage word, is not assumed
    assert find_variant("acme-labs/Llama-2-7B") is None
    # a fine-tune that is then quantized keeps its own words: no match
    assert find_variant("TheBloke/Llama-2-7B-Chat-Uncensored-GPTQ") is None
    # an AQLM name without its scheme states no format memlint can size: no guess at the storage
    assert variants.split("ISTA-DASLab/Llama-2-7b-AQLM").storage is None


def test_storage_bytes_follow_the_formats():
    assert quantized_weight_bytes("int4") == (GROUP_INT4_BYTES, 0)
    assert GROUP_INT4_BYTES == pytest.approx(0.5195, abs=1e-4)
    assert quantized_weight_bytes("nvfp4") == (NVFP4_BYTES, 0) and NVFP4_BYTES == 0.5625
    # AQLM 2-bit, one 16-bit codebook: groups of 8 weights, a 2^16 x 8 fp16 codebook per Linear
    assert quantized_weight_bytes("aqlm-2bit-1x16") == (0.25, 2**16 * 8 * 2)


def _weights_gib(name: str, quantization: str | None) -> float:
    arch = resolve(name).arch
    setup = TrainingSetup(micro_batch=1, seq_len=512, lora=Lora(r=16, quantization=quantization))
    budget = estimate_training(arch, setup)
    return budget.peak_phase.component("weights").bytes / 2**30


def test_quantized_formats_order_the_weights():
    llama = "meta-llama/Meta-Llama-3-8B"
    bf16, nf4, int4, nvfp4, aqlm = (_weights_gib(llama, q) for q in (None, "nf4", "int4", "nvfp4", "aqlm-2bit-1x16"))
    # double-quantised NF4 (0.516 B) < GPTQ/AWQ int4 (0.520 B) < NVFP4 (0.5625 B); the rest in fp32
    assert aqlm < nf4 < int4 < nvfp4 < bf16
    # 32 layers x 7 Linears, 1 MiB of codebook each
    linears = sum(g.count * len(g.linears) for g in resolve(llama).arch.blocks)
    assert linears == 224


LLAMAFACTORY_AQLM = """\
### model
model_name_or_path: ISTA-DASLab/Meta-Llama-3-8B-Instruct-AQLM-2Bit-1x16
trust_remote_code: true

### method
stage: sft
do_train: true
finetuning_type: lora
lora_rank: 8
lora_target: all

### dataset
dataset: identity,alpaca_en_demo
template: llama3
cutoff_len: 2048

### train
per_device_train_batch_size: 1
gradient_accumulation_steps: 8
learning_rate: 1.0e-4
num_train_epochs: 3.0
bf16: true
output_dir: saves/llama3-8b/lora/sft
"""

AXOLOTL_GPTQ = """\
base_model: TheBloke/Llama-2-7B-GPTQ
model_type: AutoModelForCausalLM
tokenizer_type: LlamaTokenizer
gptq: true
gptq_disable_exllama: true
adapter: lora
sequence_len: 4096
lora_r: 8
lora_alpha: 32
lora_dropout: 0.05
lora_target_modules:
  - k_proj
  - o_proj
  - q_proj
  - v_proj
micro_batch_size: 1
gradient_accumulation_steps: 1
optimizer: adamw_torch
fp16: false
bf16: true
gradient_checkpointing: true
datasets:
  - path: mhenrichsen/alpaca_2k_test
    type: alpaca
"""


@pytest.mark.parametrize(("name", "text", "quantization", "entry"), [
    ("llama3_lora_sft_aqlm.yaml", LLAMAFACTORY_AQLM, "aqlm-2bit-1x16", "meta-llama/Meta-Llama-3-8B"),
    ("gptq-lora.yml", AXOLOTL_GPTQ, "int4", "meta-llama/Llama-2-7b-hf"),
])
def test_a_config_that_trains_over_a_quantized_upload_is_estimated(tmp_path, monkeypatch, capsys, name, text,
                                                                     quantization, entry):
    (tmp_path / ".git").mkdir()
    (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["estimate", name, "--gpu", "h100", "--format", "json"]) == EXIT_OK
    captured = capsys.readouterr()
    sheet = json.loads(captured.out)
    assert sheet["setup"]["lora"]["quantization"] == quantization
    assert sheet["model"] == entry == find_entry(entry).id
    assert f"took the architecture of {entry}" in captured.err
