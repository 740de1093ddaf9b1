"""The stored meta-device counts: installs without torch answer for the catalogue's models that
memlint has no recipe for, with exactly the architecture transformers counts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from memlint.catalog.models import find_entry
from memlint.estimate import config_json, meta_count, meta_table
from memlint.estimate.architecture import UnsupportedArchitecture

ROOT = Path(__file__).resolve().parents[2]


def _llama_arch():
    entry = find_entry("meta-llama/Llama-3.2-1B")
    assert entry is not None
    return entry.config, config_json.from_config(entry.config, entry.id)


def test_a_row_rebuilds_the_same_shape():
    config, arch = _llama_arch()
    again = meta_table.from_row(meta_table.to_row(arch), "5.23.0", config, arch.name)
    assert again.n_params == arch.n_params
    assert again.blocks == arch.blocks
    assert again.lm_head == arch.lm_head
    assert "transformers 5.23.0 on the meta device" in (again.generic_note or "")


def test_fingerprint_ignores_key_order_only():
    config, _ = _llama_arch()
    shuffled = dict(reversed(list(config.items())))
    assert meta_table.fingerprint(shuffled) == meta_table.fingerprint(config)
    assert meta_table.fingerprint({**config, "num_hidden_layers": 3}) != meta_table.fingerprint(config)


def test_a_stored_config_answers_without_the_trace_extra(monkeypatch):
    # A config.json whose model_type has no recipe, as a catalogue entry of a new family holds it.
    config, arch = _llama_arch()
    unknown = {**config, "model_type": "brand_new_lm", "architectures": ["BrandNewForCausalLM"]}
    row = {**meta_table.to_row(arch), "model_type": "brand_new_lm"}
    table = {"transformers": "5.23.0", "rows": {meta_table.fingerprint(unknown): {"id": "org/new", "architecture": row}}}
    monkeypatch.setattr(meta_table, "_table", lambda: table)
    monkeypatch.setattr(meta_count, "available", lambda: False)
    found = config_json.from_config(unknown, "org/new")
    assert found.n_params == arch.n_params
    assert found.model_type == "brand_new_lm" and found.generic_note
    # one changed figure is another model: not in the table, and without the extra, refused
    with pytest.raises(UnsupportedArchitecture, match="brand_new_lm"):
        config_json.from_config({**unknown, "num_hidden_layers": 3}, "org/new")


@pytest.mark.skipif(not meta_count.available(), reason="counting on the meta device needs the trace extra")
def test_the_stored_table_is_what_the_pinned_transformers_counts():
    done = subprocess.run([sys.executable, str(ROOT / "catalog" / "generate_meta_counts.py"), "--check"],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_stored_row_matches_its_catalogue_entry():
    table = json.loads((ROOT / "memlint" / "estimate" / meta_table.TABLE).read_text("utf-8"))
    for digest, row in table["rows"].items():
        entry = find_entry(row["id"])
        assert entry is not None, row["id"]
        assert meta_table.fingerprint(entry.config) == digest, row["id"]
        assert config_json.from_config(entry.config, entry.id).n_params == row["architecture"]["parameters"]


@pytest.mark.skipif(not meta_count.available(), reason="counting on the meta device needs the trace extra")
def test_a_model_whose_layers_differ_is_counted_live():
    # Gemma 4 mixes sliding and full attention layers with different head shapes; transformers 5.23
    # raises when asked for its global num_key_value_heads, and memlint reads config.json's value.
    entry = find_entry("google/gemma-4-26B-A4B")
    assert entry is not None
    arch = meta_count.from_meta(entry.config, entry.id)
    text = entry.config["text_config"]
    assert arch.num_kv_heads == text["num_key_value_heads"]
    assert arch.hidden_size == text["hidden_size"] and arch.num_layers == text["num_hidden_layers"]
    assert arch.n_params == 25_805_933_872


@pytest.mark.skipif(not meta_count.available(), reason="counting on the meta device needs the trace extra")
def test_counting_leaves_the_config_unchanged():
    # transformers completes a nested rope_scaling in place (it adds rope_theta); counting a config
    # must not change the caller's mapping (a catalogue entry's), or the table stores the fingerprint
    # of the changed one, which the entry never matches
    entry = find_entry("Qwen/Qwen2-VL-7B-Instruct")
    assert entry is not None
    config = json.loads(json.dumps(entry.config))
    config["rope_scaling"].pop("rope_theta", None)
    before = json.dumps(config, sort_keys=True)
    meta_count.from_meta(config, entry.id)
    assert json.dumps(config, sort_keys=True) == before
