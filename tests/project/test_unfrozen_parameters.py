"""Axolotl's ``unfrozen_parameters:``: every parameter frozen but those whose names the regexes
match from their start (``axolotl/utils/freeze.py``). Only they hold gradients and optimizer
states; the count is checked by hand against Qwen2.5-7B's config.json."""

from __future__ import annotations

from memlint.estimate import estimate_training
from memlint.estimate.parameter_names import named_parameters, trained_share
from tests.facts.facts_testing import dedent
from tests.project.test_config_launchers import _project, _runs

SPECTRUM_RECIPE = dedent('''
    base_model: Qwen/Qwen2.5-7B
    model_type: AutoModelForCausalLM

    datasets:
      - path: data/chat.jsonl
        type: chat_template
    sequence_len: 4096
    sample_packing: true
    micro_batch_size: 2
    gradient_accumulation_steps: 8
    optimizer: adamw_torch_fused
    learning_rate: 1e-5
    bf16: true
    gradient_checkpointing: true

    # Spectrum scan at 30 percent (the top-SNR matrices of each kind), pasted from its YAML
    unfrozen_parameters:
      - ^lm_head.weight$
      - model.layers.2.mlp.down_proj
      - model.layers.3.self_attn.o_proj
      - model.layers.27.input_layernorm
''')

# Qwen2.5-7B's config.json: hidden_size 3584, intermediate_size 18944, vocab_size 152064
HAND_COUNT = 3584 * 152064 + 18944 * 3584 + 3584 * 3584 + 3584


def test_the_selected_share_is_what_trains(tmp_path):
    settings = _project(tmp_path, {"sft/qwen7b_spectrum.yml": SPECTRUM_RECIPE})
    [run] = _runs(settings, "sft/qwen7b_spectrum.yml")
    assert run.problem is None and run.setup is not None
    assert run.plan.value("trained_parameters") == ("^lm_head.weight$", "model.layers.2.mlp.down_proj",
                                                    "model.layers.3.self_attn.o_proj", "model.layers.27.input_layernorm")
    assert run.setup.trainable_params == HAND_COUNT == 625_741_312
    assert run.setup.frozen_layers == 2 and run.setup.freeze_embeddings and not run.setup.freeze_head
    partial = estimate_training(run.arch, run.setup)
    full = estimate_training(run.arch, run.setup.but(trainable_params=None, frozen_layers=0, freeze_embeddings=False,
                                                     freeze_head=False))
    assert partial.trainable_parameters == HAND_COUNT and full.trainable_parameters == run.arch.n_params
    states = {c.key: c.bytes for c in partial.components}
    # AdamW's two moments, in bf16 as Axolotl loads the model: 4 bytes per trained parameter only
    assert states["optimizer_states"] == HAND_COUNT * 4
    assert partial.peak_bytes < full.peak_bytes / 2
    assert any("625" in note or "0.63B" in note for note in run.assumptions)


def test_names_follow_the_layout_and_a_dot_is_literal():
    from memlint.catalog.models import resolve_model

    arch = resolve_model("Qwen/Qwen2.5-7B", offline=True)
    names = named_parameters(arch)
    assert names is not None and sum(size for _, size, _ in names) == arch.n_params
    # Axolotl escapes the dot: "layers.2.mlp" is block 2 only, not 20-27
    only_two = trained_share(arch, ("model.layers.2.mlp.down_proj",))
    assert only_two is not None and only_two.tensors == 1 and only_two.first_block == 2
    assert trained_share(arch, ("model.layers.2[0-9]+.mlp.down_proj",)).tensors == 8  # type: ignore[union-attr]
    # a row range is dropped: the whole tensor holds a gradient
    assert trained_share(arch, ("^model.embed_tokens.weight$[:32000]",)).parameters == 152064 * 3584  # type: ignore[union-attr]
