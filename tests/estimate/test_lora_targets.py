"""LoRA targets as PEFT matches them: module names (a name or its suffix), "all-linear", and a
regular expression (PEFT matches a string ``target_modules`` with ``re.fullmatch`` against each
module's full name), as Axolotl's Gemma 4 examples write them."""

from __future__ import annotations

from memlint.catalog.models import resolve
from memlint.estimate import Lora, TrainingSetup
from memlint.estimate.states import count_parameters

# axolotl examples/gemma4/31b-qlora.yaml (lora_target_modules)
GEMMA4_TARGETS = r"model.language_model.layers.[\d]+.(_checkpoint_wrapped_module.)?(mlp|self_attn).(up|down|gate|q|k|v|o)_proj"


def test_a_regex_target_reaches_the_linears_it_names():
    lora = Lora(r=16, targets=(GEMMA4_TARGETS,))
    for name in ("q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj", "gate_proj"):
        assert lora.applies_to(name), name
    assert not lora.applies_to("lm_head")
    attention_only = Lora(r=16, targets=(r"model.language_model.layers.\d+.self_attn.(q|v)_proj",))
    assert [n for n in ("q_proj", "k_proj", "v_proj", "up_proj") if attention_only.applies_to(n)] == ["q_proj", "v_proj"]


def test_names_stay_names_and_a_broken_regex_matches_nothing():
    assert Lora(targets=("self_attn.q_proj",)).applies_to("q_proj") is False  # a name: the leaf differs
    assert Lora(targets=("q_proj",)).applies_to("q_proj")
    assert Lora(targets=("model.layers.[0-9+.q_proj",)).applies_to("q_proj") is False


def test_the_regex_targets_count_adapter_parameters():
    """The same adapters as naming the seven projections: the regex is not "0 trained"."""
    arch = resolve("meta-llama/Meta-Llama-3-8B").arch
    named = Lora(r=16, targets=("q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj", "gate_proj"))
    regex = Lora(r=16, targets=(r"model.layers.\d+.(mlp|self_attn).(up|down|gate|q|k|v|o)_proj",))
    by_names = count_parameters(arch, TrainingSetup(lora=named))
    by_regex = count_parameters(arch, TrainingSetup(lora=regex))
    assert by_regex.lora == by_names.lora > 40_000_000
