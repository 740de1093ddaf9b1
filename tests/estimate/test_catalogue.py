"""The bundled catalogues: every model's computed parameter count matches its published count,
and every GPU entry is well-formed and findable by the names nvidia-smi prints."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from memlint.catalog.gpus import UnknownGpu, all_gpus, lookup_gpu
from memlint.catalog.models import UnknownModel, catalog_entries, find_entry, resolve_model
from memlint.catalog.names import normalize
from memlint.estimate import SUPPORTED_MODEL_TYPES, from_config, meta_count, meta_table
from memlint.estimate.architecture import text_config

# the hand-sourced entries (memlint/catalog/models/); the generated ones are tested in
# tests/estimate/test_model_resolution.py
ENTRIES = [e for e in catalog_entries() if e.origin == "memlint/catalog/models"]


def _without_recipe(entry) -> bool:
    return text_config(entry.config)[1] not in SUPPORTED_MODEL_TYPES


def _needs_meta_count(entry) -> bool:
    """An entry with no memlint recipe and no stored count is counted live on the meta device."""
    return _without_recipe(entry) and meta_table.lookup(entry.config, entry.id) is None


def _countable(entry) -> None:
    if _needs_meta_count(entry) and not meta_count.available():
        pytest.skip("counted on the meta device: needs the `trace` extra")


def test_catalogue_size_and_coverage():
    assert len(ENTRIES) >= 40
    families = {from_config(e.config).model_type for e in ENTRIES if not _needs_meta_count(e)}
    required = {"llama", "mistral", "mixtral", "qwen2", "gemma", "gemma2", "gemma3_text", "phi3",
                "gpt2", "gpt_neox", "opt", "falcon", "bert", "t5"}
    assert required <= families, required - families
    assert families & {"qwen2_moe", "qwen3", "qwen3_moe"}


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.id for e in ENTRIES])
def test_computed_count_matches_published_count(entry):
    _countable(entry)
    arch = from_config(entry.config, entry.id)
    assert entry.published_parameters, f"{entry.id}: no published count"
    error = (arch.n_params - entry.published_parameters) / entry.published_parameters
    assert abs(error) <= 0.005, f"{entry.id}: computed {arch.n_params:,} vs published {entry.published_parameters:,}"


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.id for e in ENTRIES])
def test_computed_count_equals_transformers_meta_device_count(entry):
    raw = json.loads(
        resources.files("memlint.catalog").joinpath("models", entry.id.replace("/", "--") + ".json").read_text()
    )
    expected = raw.get("transformers_count")
    if expected is None:
        pytest.skip("no transformers count recorded")
    _countable(entry)
    arch = from_config(entry.config, entry.id)
    untied_t5 = arch.model_type == "t5" and not arch.tie_word_embeddings
    # transformers 5.23's Mistral3Config ties the head when the file sets tie_word_embeddings only
    # in text_config; the Mistral Small 3.1 checkpoint (and memlint) keep a separate output head
    untied_mistral3 = entry.config.get("model_type") == "mistral3" and "tie_word_embeddings" not in entry.config
    if untied_t5:
        # transformers 5.23 forces tied embeddings in T5Config; the checkpoint (and memlint)
        # keep FLAN-T5's separate output head
        assert arch.n_params - expected == arch.vocab_size * arch.hidden_size
    elif untied_mistral3:
        assert not arch.tie_word_embeddings
        assert arch.n_params - expected == arch.vocab_size * arch.hidden_size
    else:
        assert arch.n_params == expected


def test_aliases_are_unique_after_normalising():
    seen: dict[str, str] = {}
    for entry in ENTRIES:
        for name in (entry.id, *entry.aliases):
            key = normalize(name)
            assert seen.setdefault(key, entry.id) == entry.id, f"{name!r} names {seen[key]} and {entry.id}"


def test_lookup_by_id_alias_and_case():
    assert find_entry("meta-llama/Llama-2-7b-hf").id == "meta-llama/Llama-2-7b-hf"
    assert find_entry("LLAMA-2-7B").id == "meta-llama/Llama-2-7b-hf"
    assert find_entry("Llama-2-7b-hf").id == "meta-llama/Llama-2-7b-hf"


def test_unknown_model_is_a_clear_message_with_suggestions():
    with pytest.raises(UnknownModel, match="did you mean|Did you mean"):
        resolve_model("meta-llama/Llama-2-7b-hff")
    with pytest.raises(UnknownModel, match="no such file"):
        resolve_model("./no/such/config.json")


def test_local_config_json_and_directory(tmp_path):
    config = find_entry("Qwen/Qwen2.5-7B").config
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert resolve_model(str(tmp_path)).n_params == resolve_model(str(tmp_path / "config.json")).n_params


def test_hugging_face_cache_is_read_offline(tmp_path, monkeypatch):
    config = find_entry("Qwen/Qwen2.5-7B").config
    snapshot = tmp_path / "hub" / "models--acme--private-7b" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps(config))
    refs = tmp_path / "hub" / "models--acme--private-7b" / "refs"
    refs.mkdir()
    (refs / "main").write_text("abc123")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    assert resolve_model("acme/private-7b").n_params == from_config(config).n_params


def test_malformed_local_config_is_a_message(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(UnknownModel, match="not a readable config.json"):
        resolve_model(str(tmp_path / "config.json"))


def test_every_model_type_of_the_catalogue_is_supported():
    # the exceptions are architectures memlint has no recipe for, answered by the meta-device count;
    # each records the count transformers gave, so the meta path is checked against it
    without_recipe = {entry.id for entry in ENTRIES if _without_recipe(entry)}
    assert "stabilityai/stablelm-2-1_6b-chat" in without_recipe
    for entry in ENTRIES:
        if entry.id in without_recipe:
            raw = json.loads(resources.files("memlint.catalog").joinpath(
                "models", entry.id.replace("/", "--") + ".json").read_text())
            assert raw.get("transformers_count"), f"{entry.id}: counted on the meta device, no count recorded"
        else:
            assert from_config(entry.config).model_type in SUPPORTED_MODEL_TYPES


# ----------------------------------------------------------------- GPUs

GPUS = all_gpus()


def test_gpu_catalogue_coverage():
    assert len(GPUS) >= 20
    ids = {g.id for g in GPUS}
    for needed in ("h100-sxm", "h100-pcie", "h200", "b200", "a100-sxm4-80gb", "a10g", "l4", "l40s",
                   "v100-16gb", "v100-32gb", "t4", "rtx-4090", "rtx-3090", "mi300x"):
        assert needed in ids, needed


@pytest.mark.parametrize("gpu", GPUS, ids=[g.id for g in GPUS])
def test_gpu_capacity_is_below_its_label(gpu):
    label_gb = float(gpu.label.split()[0]) if gpu.label and gpu.label.split()[0].replace(".", "").isdigit() else None
    assert gpu.total_bytes > 1 << 30
    if label_gb:
        # GPU memory labels are binary gigabytes; CUDA reports less (ECC, driver reserve)
        assert gpu.total_bytes <= label_gb * 2**30, "capacity as torch reports it is below the label"
    assert gpu.source, "every capacity has a source"


@pytest.mark.parametrize("name, gpu_id", [
    ("NVIDIA A100-SXM4-80GB", "a100-sxm4-80gb"),
    ("a100", "a100-sxm4-80gb"),
    ("A100-80GB", "a100-sxm4-80gb"),
    ("NVIDIA H100 80GB HBM3", "h100-sxm"),
    ("h100", "h100-sxm"),
    ("Tesla T4", "t4"),
    ("NVIDIA GeForce RTX 4090", "rtx-4090"),
    ("rtx4090", "rtx-4090"),
    ("NVIDIA A10G", "a10g"),
])
def test_gpu_lookup_is_forgiving(name, gpu_id):
    assert lookup_gpu(name).id == gpu_id


def test_unknown_gpu_suggests():
    with pytest.raises(UnknownGpu, match="did you mean"):
        lookup_gpu("a100-80")
