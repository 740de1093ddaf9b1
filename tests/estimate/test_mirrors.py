"""Mirror uploads that Unsloth's own table lists answer with the catalogued original's
architecture, say so in the finding, and a bnb-4bit upload is 4-bit."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest

from memlint.catalog import mirrors
from memlint.catalog.models import find_entry, resolve

ROOT = Path(__file__).resolve().parents[2]
TABLE = json.loads(resources.files("memlint.catalog").joinpath("unsloth.json").read_text("utf-8"))


def test_the_table_names_its_source_and_each_mirror_a_catalogued_original():
    stamp = TABLE["x-memlint-generated-from"]
    assert (stamp["package"], stamp["file"], stamp["by"]) == (
        "unsloth", "unsloth/models/mapper.py", "catalog/generate_mirrors.py")
    assert len(TABLE["mirrors"]) >= 200
    for row in TABLE["mirrors"]:
        assert row["id"].lower().startswith("unsloth/") and find_entry(row["id"]) is None, row["id"]
        entry = find_entry(row["original"])
        assert entry is not None and entry.id == row["entry"], row
        assert row["four_bit"] == ("bnb-4bit" in row["id"].lower())


@pytest.mark.parametrize(("name", "original", "four_bit"), [
    # names the variant rules alone could not place: a bare family name, a renamed base
    ("unsloth/mistral-7b-bnb-4bit", "mistralai/Mistral-7B-v0.1", True),
    ("unsloth/llama-3-8b-Instruct-bnb-4bit", "meta-llama/Meta-Llama-3-8B-Instruct", True),
    ("unsloth/tinyllama-chat-bnb-4bit", "TinyLlama/TinyLlama-1.1B-Chat-v1.0", True),
    ("unsloth/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct", False),
    ("UNSLOTH/QWEN2.5-7B-INSTRUCT", "Qwen/Qwen2.5-7B-Instruct", False),  # Hub ids are matched case-blind
])
def test_a_listed_mirror_resolves_to_its_original_and_says_so(name, original, four_bit):
    found = resolve(name, offline=True)
    assert found.four_bit is four_bit
    assert f"lists it as an upload of {original}" in found.note and "Unsloth" in found.note
    assert found.arch.n_params == resolve(original).arch.n_params


def test_an_unlisted_unsloth_name_still_goes_through_the_variant_rules():
    assert mirrors.find("unsloth/Qwen3-4B-Instruct-2507-some-finetune") is None
    assert mirrors.find("Qwen/Qwen2.5-7B-Instruct") is None  # an original is not a mirror


def test_a_mirror_checked_in_a_script_is_4_bit_and_named_in_the_estimate():
    out = subprocess.run([sys.executable, "-m", "memlint", "estimate", "--model", "unsloth/mistral-7b-bnb-4bit",
                          "--batch", "1", "--seq", "2048", "--format", "json"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    data = json.loads(out.stdout)
    assert int(data["parameters"]) == resolve("mistralai/Mistral-7B-v0.1").arch.n_params
    assert "mistralai/Mistral-7B-v0.1" in out.stdout + out.stderr
