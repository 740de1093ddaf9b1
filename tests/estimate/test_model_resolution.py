"""Every model a user names gets an answer: the generated LitGPT catalogue, the variant rules,
local paths and placeholders, did-you-mean, and the `model-config` / `offline` settings."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from memlint.catalog import variants
from memlint.catalog.models import (
    UnknownModel,
    catalog_entries,
    did_you_mean,
    find_entry,
    find_variant,
    resolve,
)
from memlint.estimate import from_config
from memlint.project.settings import SettingsError, parse

GENERATED = json.loads(resources.files("memlint.catalog").joinpath("litgpt.json").read_text("utf-8"))


def test_generated_catalogue_names_its_source_and_each_entry_its_provenance():
    stamp = GENERATED["x-memlint-generated-from"]
    assert (stamp["package"], stamp["version"], stamp["file"]) == ("litgpt", "0.5.13", "litgpt/config.py")
    ids = {e.id for e in catalog_entries()}
    assert len(ids) >= 220, len(ids)  # 80 hand-sourced + 194 generated, 50 ids in both
    for entry in GENERATED["entries"]:
        assert entry["litgpt_name"] and entry["template"] and entry["source"].startswith("https://huggingface.co/")
        assert entry["tie_word_embeddings_from"]
        # the stored count is what memlint computes from the stored config
        assert from_config(entry["config"], entry["id"]).n_params == entry["parameters"], entry["id"]


def test_generated_entries_that_the_hand_catalogue_holds_agree_with_it():
    checked = [e for e in GENERATED["entries"] if "checked" in e]
    assert len(checked) >= 40
    for entry in checked:
        hand = find_entry(entry["checked"]["against"])
        assert hand.origin == "memlint/catalog/models"
        assert from_config(hand.config).n_params == entry["parameters"], entry["id"]


def test_hand_entries_win_over_generated_ones():
    assert find_entry("Qwen/Qwen2.5-7B").origin == "memlint/catalog/models"
    assert find_entry("Qwen/Qwen2.5-7B-Instruct").origin.startswith("LitGPT 0.5.13")
    # LitGPT's Mixtral-8x22B-v0.1 has the Instruct model's vocabulary: left out, the hand entry answers
    assert "mistralai/Mixtral-8x22B-v0.1" in {d["id"] for d in GENERATED["disagreements"]}
    assert find_entry("mistralai/Mixtral-8x22B-v0.1").config["vocab_size"] == 32000


@pytest.mark.parametrize(("name", "entry_id", "four_bit"), [
    ("unsloth/Meta-Llama-3.1-8B-bnb-4bit", "meta-llama/Llama-3.1-8B", True),
    ("unsloth/Qwen2.5-7B-Instruct-bnb-4bit", "Qwen/Qwen2.5-7B", True),
    ("NousResearch/Llama-2-7b-hf", "meta-llama/Llama-2-7b-hf", False),
    ("unsloth/mistral-7b-v0.3", "mistralai/Mistral-7B-Instruct-v0.3", False),
    ("google/gemma-3-1b-pt", "google/gemma-3-1b-it", False),
    ("Qwen/Qwen2.5-7B-Instruct-2507", "Qwen/Qwen2.5-7B", False),
    # DeepSeek dates its post-training updates MMDD; LLaMA-Factory's KTransformers example trains this copy
    ("deepseek-ai/DeepSeek-V3-0324-BF16", "deepseek-ai/DeepSeek-V3", False),
    ("Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B", False),  # no org
    # a mirror org that is also a catalogued org (pixtral-12b) still answers for its conversions
    ("mistral-community/Mixtral-8x22B-v0.1", "mistralai/Mixtral-8x22B-v0.1", False),
    # Falcon-H1's -Base files differ from the -Instruct ones by one vocabulary row; "Deep" is a size
    # of its own (66 layers of 1280), not the 1.5B's (24 of 2048), though both count about 1.55B
    ("tiiuae/Falcon-H1-3B-Base", "tiiuae/Falcon-H1-3B-Instruct", False),
    ("tiiuae/Falcon-H1-1.5B-Deep-Base", "tiiuae/Falcon-H1-1.5B-Deep-Instruct", False),
    ("tiiuae/Falcon-H1-1.5B-Instruct", "tiiuae/Falcon-H1-1.5B-Base", False),
])
def test_variant_rules(name, entry_id, four_bit):
    entry, asked = find_variant(name)
    assert entry.id == entry_id
    assert asked.four_bit is four_bit


def test_variant_rules_keep_versions_orgs_and_sizes_apart():
    v2, v3 = find_variant("mistralai/Mistral-7B-v0.2")[0], find_variant("mistralai/Mistral-7B-v0.3")[0]
    assert from_config(v2.config).vocab_size == 32000 and from_config(v3.config).vocab_size == 32768
    assert find_variant("acme-labs/Qwen2.5-7B-Instruct") is None  # another org's upload is not assumed
    assert find_variant("Qwen/Qwen2.5-8B-Instruct") is None
    # four digits that are no month and day (a context length, a step) stay part of the name
    assert variants.split("deepseek-ai/DeepSeek-V3-0324").key == "deepseek-v3"
    assert variants.split("acme/Llama-3-8B-2048").key == "llama-3-8b-2048"


def test_a_variant_says_which_entry_it_was_resolved_to_and_a_bnb_upload_is_four_bit():
    found = resolve("unsloth/Qwen2.5-7B-Instruct-bnb-4bit")
    assert found.four_bit
    assert "took the architecture of Qwen/Qwen2.5-7B" in found.note and "4-bit" in found.note
    assert resolve("meta-llama/Llama-3.1-8B").note is None  # an exact name assumes nothing


def test_a_local_model_folder_is_read_and_a_missing_one_is_named_after(tmp_path):
    folder = tmp_path / "checkpoints" / "my-sft-run"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(find_entry("Qwen/Qwen3-4B").config))
    found = resolve(str(folder))
    assert found.note is None and found.arch.n_params == from_config(find_entry("Qwen/Qwen3-4B").config).n_params

    found = resolve("/data/llm/Meta-Llama-3-8B-Instruct")
    assert "assumed the architecture of meta-llama/Meta-Llama-3-8B from the folder name" in found.note
    found = resolve("models/Qwen2.5-7B", base_dir=tmp_path)
    assert "Qwen/Qwen2.5-7B" in found.note and "folder name" in found.note


@pytest.mark.parametrize("name", ["/path/to/model", "/path/to/your/model", "./<your-model>", "${MODEL_DIR}/x/y"])
def test_a_placeholder_path_gets_a_note_not_a_guess(name):
    with pytest.raises(UnknownModel, match="placeholder"):
        resolve(name)


def test_a_snapshot_of_another_machines_hub_cache_names_its_model():
    # `from_pretrained("/home/zahee/.cache/huggingface/hub/models--meta-llama--Llama-3.2-1B/snapshots/<commit>/")`
    # (ZaheedaT/Llama3-Finetuning): the cache folder is the Hub id with "/" written "--"
    name = ("/home/zahee/.cache/huggingface/hub/models--meta-llama--Llama-3.2-1B/snapshots/"
            "4e20de362430cd3b72f300e6b0f18e50e7166e08/")
    found = resolve(name, offline=True)
    assert found.arch.n_params == from_config(find_entry("meta-llama/Llama-3.2-1B").config).n_params
    assert found.note.endswith("the Hugging Face cache's snapshot of meta-llama/Llama-3.2-1B")
    # an uncatalogued model's snapshot is still unknown, named as a path
    with pytest.raises(UnknownModel, match="no such file or directory"):
        resolve("/root/.cache/huggingface/hub/models--acme-labs--secret-13b/snapshots/abc123/", offline=True)


@pytest.mark.parametrize("name", ["model name or path", "path to your model", "your model", "YOUR_MODEL_PATH",
                                  "xxx", "XXX/xxx-7b", "/data/xxx/checkpoints"])
def test_a_placeholder_written_as_words_gets_a_note_not_a_guess(name):
    with pytest.raises(UnknownModel, match="looks like a placeholder") as error:
        resolve(name, offline=True)
    assert "Did you mean" not in str(error.value)


def test_a_real_folder_with_a_space_is_still_read_from_its_name():
    # a model folder may have a space in its path: its folder name still says the model
    found = resolve("/data/my models/Meta-Llama-3-8B-Instruct", offline=True)
    assert "assumed the architecture of meta-llama/Meta-Llama-3-8B from the folder name" in found.note


def test_a_windows_path_is_read_from_its_last_folder():
    # xu-0306/qwen3-finetune's `model_name_or_path = r"G:\_python\Qwen3 1.7B finetune\_Models\Qwen3-1.7B"`:
    # on Windows the backslash separates the folders, so the last one names the model
    found = resolve(r"G:\_python\Qwen3 1.7B finetune\_Models\Qwen3-1.7B", offline=True)
    assert "assumed the architecture of Qwen/Qwen3-1.7B from the folder name" in found.note
    assert found.arch.n_params == from_config(find_entry("Qwen/Qwen3-1.7B").config).n_params


def test_did_you_mean_keeps_the_family():
    # whisper-finetune-pipeline's `openai/whisper-medium` (uncatalogued) was offered
    # openai-community/gpt2-medium and Phi-3-medium: the same org or size, another model
    assert did_you_mean("openai/whisper-medium") == []
    assert did_you_mean("gpt2-meduim") == ["openai-community/gpt2-medium"]
    assert did_you_mean("mistralai/Mistrel-7B-v0.1")[0] == "mistralai/Mistral-7B-v0.1"


def test_did_you_mean_ranks_the_same_family_and_size_first():
    assert did_you_mean("Qwen/Qwen2.5-7B-Chatty")[0] == "Qwen/Qwen2.5-7B"
    with pytest.raises(UnknownModel) as error:
        resolve("Qwen/Qwen2.5-7B-Chatty")
    message = str(error.value)
    assert "Did you mean Qwen/Qwen2.5-7B," in message and "HF_HUB_OFFLINE" in message


def test_model_config_and_offline_settings_are_accepted(tmp_path):
    settings = parse({"model-config": {"train/*.py": "configs/private.json"}, "offline": True},
                     tmp_path / "pyproject.toml")
    assert settings.offline is True
    assert settings.model_config_for(tmp_path / "train" / "sft.py") == tmp_path / "configs" / "private.json"
    assert settings.model_config_for(tmp_path / "eval.py") is None
    assert parse({"model-config": "cfg.json"}, tmp_path / "pyproject.toml").model_config_for(tmp_path / "a.py")
    with pytest.raises(SettingsError, match="model-config"):
        parse({"model-config": 3}, tmp_path / "pyproject.toml")


PRIVATE_SCRIPT = '''\
import argparse

from transformers import AutoModelForCausalLM, Trainer, TrainingArguments


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="acme-internal/chat-7b-v4")
    args = parser.parse_args()
    model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype="bfloat16")
    training_args = TrainingArguments(output_dir="out", per_device_train_batch_size=4, bf16=True)
    Trainer(model=model, args=training_args).train()


if __name__ == "__main__":
    main()
'''


def _check(folder: Path) -> list[dict]:
    out = subprocess.run([sys.executable, "-m", "memlint", "check", ".", "--gpu", "h100", "--output-format",
                          "json", "--no-cache", "--exit-zero"], cwd=folder, capture_output=True, text=True,
                         timeout=120)
    return json.loads(out.stdout)


def test_model_config_setting_answers_for_a_private_model_in_memlint_check(tmp_path):
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "sft.py").write_text(PRIVATE_SCRIPT)
    unknown = [d for d in _check(tmp_path) if d["code"] == "MEM003"]
    assert unknown and "acme-internal/chat-7b-v4" in unknown[0]["message"]

    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "chat-7b.json").write_text(json.dumps(find_entry("mistralai/Mistral-7B-v0.1").config))
    (tmp_path / "pyproject.toml").write_text(
        '[tool.memlint]\nmodel-config = { "train/*.py" = "configs/chat-7b.json" }\n'
    )
    assert not [d for d in _check(tmp_path) if d["code"] == "MEM003"]


def test_memory_findings_say_how_the_model_was_found(tmp_path):
    """A model taken from a folder's name, a variant rule or `model-config` is named in the
    finding itself, not only in the budget sheet."""
    (tmp_path / "train").mkdir()
    script = PRIVATE_SCRIPT.replace("acme-internal/chat-7b-v4", "/data/llm/Meta-Llama-3-8B-Instruct")
    (tmp_path / "train" / "sft.py").write_text(script)
    found = [d for d in _check(tmp_path) if d["code"].startswith("MEM") and d["code"] != "MEM003"]
    assert found and all("assumed the architecture of meta-llama/Meta-Llama-3-8B from the folder name"
                         in d["message"] for d in found)


# Axolotl's archived Qwen v1 example (examples/archived/qwen/lora.yml), as users write these files
QWEN_V1_LORA = """\
base_model: Qwen/Qwen-7B
model_type: AutoModelForCausalLM
tokenizer_type: AutoTokenizer

trust_remote_code: true

load_in_8bit: true
load_in_4bit: false

datasets:
  - path: mhenrichsen/alpaca_2k_test
    type: alpaca
output_dir: ./outputs/lora-out

sequence_len: 2048
sample_packing: false

adapter: lora
lora_r: 8
lora_alpha: 16
lora_dropout: 0.05
lora_target_linear: true

gradient_accumulation_steps: 4
micro_batch_size: 2
num_epochs: 4
optimizer: adamw_bnb_8bit
learning_rate: 0.0002

bf16: auto
gradient_checkpointing: false
"""


@pytest.mark.parametrize(("name", "entry_id"), [
    # llmfit's record of the Hub gives each the entry's safetensors total to the parameter and the same
    # sizes (Qwen v1 states its MLP width doubled); the entry's config_note has the evidence
    ("Qwen/Qwen-7B", "Qwen/Qwen1.5-7B"),
    ("katanemo/Plano-Orchestrator-4B", "Qwen/Qwen3-4B"),
])
def test_a_checkpoint_with_a_catalogued_architecture_answers_as_an_alias(name, entry_id):
    entry = find_entry(name)
    assert entry is not None and entry.id == entry_id


def test_a_remote_code_model_type_with_a_catalogued_shape_is_estimated(tmp_path):
    """Qwen v1's model_type `qwen` is defined only by the checkpoint's own code, which memlint never
    runs; its sizes are Qwen1.5-7B's, so the Axolotl example is estimated instead of 'unknown model'."""
    (tmp_path / "lora.yml").write_text(QWEN_V1_LORA)
    found = _check(tmp_path)
    assert not [d for d in found if d["code"] == "MEM003"], found
    unknown = QWEN_V1_LORA.replace("Qwen/Qwen-7B", "Qwen/Qwen-14B")  # a size no entry has: still a note
    (tmp_path / "lora.yml").write_text(unknown)
    assert [d for d in _check(tmp_path) if d["code"] == "MEM003"]
