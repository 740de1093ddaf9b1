#!/usr/bin/env python3
"""Generate memlint's second model catalogue from a pinned LitGPT release's model table.

    python catalog/generate.py             # download litgpt==PIN (pip, no deps) and rewrite the catalogue
    python catalog/generate.py --check     # exit 1 if the committed catalogue is stale
    python catalog/generate.py --wheel W   # read an already downloaded wheel or sdist

LitGPT (Apache-2.0) keeps, in ``litgpt/config.py``, the architecture figures it uses to load the
published weights of about 210 Hub repositories: layer count, widths, heads, KV groups, MLP
size, vocabulary, rotary base, experts. That table is the kept source. What it does not carry
(``model_type``, whether the output head is tied, the checkpoint's dtype, the norms' epsilon
names, a multimodal wrapper) comes from the family's published ``config.json`` that memlint
already holds in ``memlint/catalog/models/``: the *template* of each entry, named in it.

Rules, in order, for the template of a LitGPT entry:
  1. the hand catalogue's entry for the same Hub id (or one of its aliases);
  2. a hand entry of the same org whose architecture figures (hidden size, layers, heads,
     KV heads, MLP size, vocabulary) are the same: a base/instruct/coder/math sibling;
  3. the family's reference entry (``FAMILIES`` below), with the head tying that the
     published config.json states where it is known (``TIED``), else transformers' default.

Every entry whose Hub id the hand catalogue also holds is checked against it: memlint's own
parameter count of both configs must be equal. Where they differ the entry is left out and listed
under ``disagreements`` (the catalogued config.json, read from a copy of the Hub file, wins).
A family this script cannot map, or a config memlint cannot count, stops the generator. The script
runs LitGPT's ``config.py`` only (it needs PyYAML); memlint never imports LitGPT.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memlint.estimate.architecture import UnsupportedArchitecture  # noqa: E402
from memlint.estimate.config_json import from_config  # noqa: E402

PIN = "0.5.13"
OUTPUT = ROOT / "memlint" / "catalog" / "litgpt.json"
HAND = ROOT / "memlint" / "catalog" / "models"

# LitGPT entry name (regex, first match wins) -> (HF model_type, reference hand-catalogue entry).
# A model_type memlint has no recipe for is listed with None: the entry is kept out and reported.
FAMILIES: list[tuple[str, str, str | None]] = [
    (r"^(stablelm-(base|tuned)-alpha|stablecode-)", "gpt_neox", "EleutherAI/pythia-6.9b"),
    (r"^(stablelm-3b|stablelm-zephyr|stable-code-3b)", "stablelm", None),
    (r"^pythia-", "gpt_neox", "EleutherAI/pythia-1.4b"),
    (r"^falcon-", "falcon", "tiiuae/falcon-7b"),
    (r"^OLMo-2", "olmo2", "allenai/OLMo-2-1124-7B"),
    (r"^OLMo", "olmo", None),
    (r"^Gemma-3-1b", "gemma3_text", "google/gemma-3-1b-it"),
    (r"^Gemma-3-", "gemma3", "google/gemma-3-4b-it"),
    (r"^Gemma-2-", "gemma2", "google/gemma-2-9b"),
    (r"^(Gemma-|CodeGemma-)", "gemma", "google/gemma-7b"),
    (r"^(phi-1_5|phi-2)$", "phi", "microsoft/phi-2"),
    (r"^(Phi-3|Phi-4|phi-4)", "phi3", "microsoft/Phi-3-mini-4k-instruct"),
    (r"^Mixtral-", "mixtral", "mistralai/Mixtral-8x7B-v0.1"),
    (r"^(Mistral-|Mathstral-)", "mistral", "mistralai/Mistral-7B-Instruct-v0.3"),
    (r"^Qwen3-.*-A\d+B", "qwen3_moe", "Qwen/Qwen3-30B-A3B"),
    (r"^Qwen3-", "qwen3", "Qwen/Qwen3-8B"),
    (r"^(Qwen2\.5-|QwQ-)", "qwen2", "Qwen/Qwen2.5-7B"),
    (r"^Llama-2-|^LLaMA-2-|^CodeLlama-|^FreeWilly|Platypus|^open_llama", "llama", "meta-llama/Llama-2-7b-hf"),
    (r"^(tiny-llama|micro-llama)", "llama", "TinyLlama/TinyLlama-1.1B-Chat-v1.0"),
    (r"^SmolLM2-", "llama", "HuggingFaceTB/SmolLM2-1.7B-Instruct"),
    (r"^(Llama-3|R1-Distill-Llama|Falcon3-|salamandra-)", "llama", "meta-llama/Llama-3.1-8B"),
]

# Head tying stated by a published config.json that the hand catalogue does not hold
# (rule 3). Each value says where it was read.
TIED: dict[str, tuple[bool, str]] = {
    r"^Phi-4-mini": (True, "tie_word_embeddings true in microsoft/Phi-4-mini-instruct's Hub config.json "
                           "(a copy kept in a public GitHub file found by exact-string search, id 61558565367)"),
}

# LitGPT entries left out, each with the reason.
EXCLUDE: dict[str, str] = {
    "Platypus2-70B": "LitGPT's entry omits n_query_groups, so it describes 64 KV heads (78.4B parameters); "
                     "a Llama-2-70B fine-tune has 8 (LitGPT's own Platypus2-70B-instruct entry says so)",
}

# transformers' default when config.json omits tie_word_embeddings (PretrainedConfig: True, except
# where the model's config class overrides it); memlint's own counter applies the same defaults.
TIE_DEFAULT = {"llama": False, "mistral": False, "qwen2": False, "qwen3": False, "qwen3_moe": False,
               "mixtral": False, "phi3": False, "phi": False, "gpt_neox": False, "gemma": True,
               "gemma2": True, "gemma3_text": True, "falcon": True, "olmo2": False}

ARCH_KEYS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
             "intermediate_size", "vocab_size")


def load_hand() -> dict[str, dict]:
    out = {}
    for path in sorted(HAND.glob("*.json")):
        raw = json.loads(path.read_text("utf-8"))
        out[raw["id"]] = raw
        for alias in raw.get("aliases", []):
            if "/" in alias:
                out.setdefault(alias, raw)
    return out


def fetch_wheel(directory: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(directory),
                    f"litgpt=={PIN}"], check=True)
    return next(p for p in directory.iterdir() if p.name.startswith("litgpt-"))


def load_litgpt(archive: Path, directory: Path):
    """LitGPT's ``config`` module, executed from the archive's ``config.py`` alone."""
    with zipfile.ZipFile(archive) if archive.suffix == ".whl" else _sdist(archive) as z:
        name = next(n for n in z.namelist() if n.endswith("litgpt/config.py"))
        (directory / "litgpt_config.py").write_bytes(z.read(name))
    spec = importlib.util.spec_from_file_location("litgpt_config", directory / "litgpt_config.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sdist(path: Path):
    import tarfile

    class _Tar:
        def __init__(self, p):
            self.t = tarfile.open(p)

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.t.close()

        def namelist(self):
            return self.t.getnames()

        def read(self, name):
            return self.t.extractfile(name).read()

    return _Tar(path)


def family_of(name: str) -> tuple[str, str | None]:
    for pattern, model_type, reference in FAMILIES:
        if re.search(pattern, name):
            return model_type, reference
    raise SystemExit(f"LitGPT entry {name!r} matches no family in FAMILIES: add one")


def litgpt_figures(c) -> dict:
    """The config.json fields a LitGPT ``Config`` determines."""
    figures = {
        "hidden_size": c.n_embd,
        "num_hidden_layers": c.n_layer,
        "num_attention_heads": c.n_head,
        "num_key_value_heads": c.n_query_groups,
        "intermediate_size": c.intermediate_size,
        "vocab_size": c.padded_vocab_size,
        "max_position_embeddings": c.block_size,
    }
    if c.head_size != c.n_embd // c.n_head:
        figures["head_dim"] = c.head_size
    return figures


def build_config(model_type: str, c, template: dict) -> dict:
    """``template``'s config.json with the architecture figures of LitGPT's ``c``."""
    cfg = copy.deepcopy(template)
    figures = litgpt_figures(c)
    if model_type == "gemma3":  # multimodal: the language model sits in text_config
        text = cfg.setdefault("text_config", {})
        figures.pop("vocab_size")  # the multimodal vocabulary adds image tokens LitGPT's text model lacks
        figures["head_dim"] = c.head_size
        text.update(figures)
        if c.sliding_window_size:
            text["sliding_window"] = c.sliding_window_size
        return cfg
    for key in ("num_key_value_heads",) if model_type in ("gpt_neox", "phi", "falcon") else ():
        figures.pop(key)
    if model_type in ("gemma", "gemma2", "gemma3_text", "qwen3", "qwen3_moe"):
        figures["head_dim"] = c.head_size
    cfg.update(figures)
    if model_type in ("llama", "mistral", "qwen3"):
        cfg["attention_bias"] = bool(c.attn_bias)
        cfg["mlp_bias"] = bool(c.bias)
    if c.rope_base and "rope_theta" in cfg:
        cfg["rope_theta"] = float(c.rope_base)
    if model_type in ("mistral", "gemma2", "gemma3_text"):
        cfg["sliding_window"] = c.sliding_window_size
    if model_type in ("gpt_neox", "phi"):
        key = "rotary_pct" if model_type == "gpt_neox" else "partial_rotary_factor"
        cfg[key] = c.rotary_percentage
        if model_type == "gpt_neox":
            cfg["use_parallel_residual"] = bool(c.parallel_residual)
    if model_type == "phi3":
        if c.rotary_percentage != 1.0:
            cfg["partial_rotary_factor"] = c.rotary_percentage
        else:
            cfg.pop("partial_rotary_factor", None)
        cfg.pop("rope_scaling", None)  # size-specific long-context factors; no parameters
    if model_type == "falcon":
        cfg["new_decoder_architecture"] = c.n_query_groups not in (1, c.n_head)
        cfg["multi_query"] = c.n_query_groups == 1
        cfg["parallel_attn"] = bool(c.parallel_residual)
        cfg["bias"] = bool(c.bias)
        if cfg["new_decoder_architecture"]:
            cfg["num_kv_heads"] = c.n_query_groups
    if model_type == "mixtral":
        cfg["num_local_experts"] = c.n_expert
        cfg["num_experts_per_tok"] = c.n_expert_per_token
    if model_type == "qwen3_moe":
        cfg["num_experts"] = c.n_expert
        cfg["num_experts_per_tok"] = c.n_expert_per_token
        cfg["moe_intermediate_size"] = c.moe_intermediate_size
    return cfg


def sibling(hand: dict[str, dict], org: str, model_type: str, figures: dict) -> dict | None:
    """Rule 2: a hand entry of the same org with the same architecture figures."""
    for entry in sorted({id(e): e for e in hand.values()}.values(), key=lambda e: e["id"]):
        cfg = entry["config"]
        if entry["id"].split("/")[0] != org or cfg.get("model_type") != model_type:
            continue
        if all(cfg.get(k) == figures.get(k) for k in ARCH_KEYS):
            return entry
    return None


def count(config: dict, name: str) -> int:
    return from_config(config, name).n_params


def generate(module) -> tuple[dict, list[str]]:
    hand = load_hand()
    entries, skipped, problems, disagreements = [], [], [], []
    for raw in module.configs:
        c = module.Config(**raw)
        hub_id = f"{raw['hf_config']['org']}/{raw['hf_config']['name']}"
        model_type, reference = family_of(c.name)
        if c.name in EXCLUDE:
            skipped.append({"id": hub_id, "litgpt_name": c.name, "model_type": model_type, "reason": EXCLUDE[c.name]})
            continue
        if reference is None:
            skipped.append({"id": hub_id, "litgpt_name": c.name, "model_type": model_type,
                            "reason": "memlint has no block recipe for this model_type yet"})
            continue
        figures = litgpt_figures(c)
        if hub_id in hand:
            template, rule = hand[hub_id], "the same Hub id in memlint/catalog/models"
        elif (twin := sibling(hand, hub_id.split("/")[0], model_type, figures)) is not None:
            template, rule = twin, "a catalogued sibling with the same architecture figures"
        else:
            template, rule = hand[reference], "the family's reference entry"
        config = build_config(model_type, c, template["config"])
        config["model_type"] = model_type if model_type != "gemma3" else "gemma3"
        tie_note = f"from {template['id']}"
        if rule == "the family's reference entry":
            for pattern, (tied, why) in TIED.items():
                if re.search(pattern, c.name):
                    config["tie_word_embeddings"], tie_note = tied, why
                    break
            else:
                if model_type != "gemma3":
                    config["tie_word_embeddings"] = TIE_DEFAULT[model_type]
                    tie_note = f"transformers' default for model_type {model_type!r} (no published copy held)"
        config.pop("_name_or_path", None)
        try:
            n = count(config, hub_id)
        except UnsupportedArchitecture as error:
            problems.append(f"{hub_id}: {error}")
            continue
        check = None
        if hub_id in hand:
            expected = count(hand[hub_id]["config"], hub_id)
            check = {"against": hand[hub_id]["id"], "parameters": expected, "equal": n == expected}
            if n != expected:
                differs = sorted(k for k in ARCH_KEYS if config.get(k) != hand[hub_id]["config"].get(k))
                disagreements.append({"id": hub_id, "litgpt_name": c.name, "litgpt_parameters": n,
                                      "catalogued_parameters": expected, "fields": differs})
                continue
        entries.append({
            "id": hub_id,
            "litgpt_name": c.name,
            "parameters": n,
            "template": template["id"],
            "template_rule": rule,
            "tie_word_embeddings_from": tie_note,
            "source": f"https://huggingface.co/{hub_id}/blob/main/config.json",
            **({"checked": check} if check else {}),
            "config": dict(sorted(config.items())),
        })
    data = {
        "x-memlint-generated-from": {
            "package": "litgpt", "version": PIN, "file": "litgpt/config.py", "license": "Apache-2.0",
            "by": "catalog/generate.py",
        },
        "entries": sorted(entries, key=lambda e: e["id"].lower()),
        "skipped": sorted(skipped, key=lambda e: e["id"].lower()),
        # LitGPT's figures disagree with the catalogued config.json: the catalogued one is kept
        "disagreements": disagreements,
    }
    return data, problems


def dumps(data: dict) -> str:
    return json.dumps(data, indent=1, sort_keys=False, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed catalogue is stale")
    parser.add_argument("--wheel", type=Path, help="a downloaded litgpt wheel or sdist (default: pip download)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        archive = args.wheel or fetch_wheel(Path(tmp))
        module = load_litgpt(archive, Path(tmp))
        data, problems = generate(module)
    for problem in problems:
        print(f"MISMATCH {problem}", file=sys.stderr)
    if problems:
        return 1
    text = dumps(data)
    checked = sum(1 for e in data["entries"] if "checked" in e)
    summary = (f"{len(data['entries'])} entries ({checked} checked against memlint/catalog/models), "
               f"{len(data['skipped'])} left out (no recipe, or excluded), {len(data['disagreements'])} disagreeing")
    for d in data["disagreements"]:
        print(f"DISAGREES {d['id']}: LitGPT {d['litgpt_parameters']:,}, catalogued {d['catalogued_parameters']:,} "
              f"({', '.join(d['fields'])})")
    if args.check:
        stale = not OUTPUT.exists() or OUTPUT.read_text("utf-8") != text
        print(("STALE " if stale else "up to date: ") + summary)
        return 1 if stale else 0
    OUTPUT.write_text(text, "utf-8")
    print(f"wrote {OUTPUT.relative_to(ROOT)}: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
