"""A model frozen whole, then trained again only where parameter names match a selection the
script reads at run time (Spectrum's regex list from a YAML file, "unfreeze the layers named on
the command line"): what trains is a share memlint cannot read, so the run is not judged as full
fine-tuning. A selection of literals (LLaVA-NeXT's ``"vision_tower" in name``) and a model never
frozen are estimated as before."""

from __future__ import annotations

from tests.facts.facts_testing import dedent
from tests.project.test_config_launchers import _memory, _project, _runs
from tests.project.test_frozen_base_heads import _notes

TRAIN_SPECTRUM = dedent('''
    import re
    from dataclasses import dataclass, field
    from typing import Optional

    import torch
    import transformers
    from datasets import load_dataset
    from transformers import AutoModelForCausalLM as CausalLM


    @dataclass
    class ModelArguments:
        model_name_or_path: str = field(default="Qwen/Qwen2.5-7B")
        spectrum_config: Optional[str] = field(
            default="spectrum/snr_results_Qwen-Qwen2.5-7B_unfrozenparameters_30percent.yaml",
            metadata={"help": "Spectrum's unfrozen_parameters file"},
        )


    def read_patterns(path):
        """The regexes Spectrum's scan wrote, one `- pattern` line each."""
        patterns = []
        with open(path) as handle:
            for line in handle.read().splitlines():
                if line.startswith("- "):
                    patterns.append(line[2:].strip())
        return patterns


    def train_only_matching(model, config_path):
        patterns = read_patterns(config_path)
        for param in model.parameters():
            param.requires_grad = False
        for name, param in model.named_parameters():
            if any(re.match(pattern, name) for pattern in patterns):
                param.requires_grad = True
        return model


    def main():
        parser = transformers.HfArgumentParser((ModelArguments, transformers.TrainingArguments))
        model_args, training_args = parser.parse_args_into_dataclasses()
        model = CausalLM.from_pretrained(model_args.model_name_or_path, torch_dtype=torch.bfloat16)
        if model_args.spectrum_config:
            model = train_only_matching(model, model_args.spectrum_config)
        data = load_dataset("json", data_files="data/train.jsonl")["train"]
        trainer = transformers.Trainer(model=model, args=training_args, train_dataset=data)
        trainer.train()


    if __name__ == "__main__":
        main()
''')

README = dedent('''
    # Spectrum fine-tuning

    ```bash
    torchrun --nproc_per_node=8 train.py --model_name_or_path Qwen/Qwen2.5-7B \\
        --spectrum_config spectrum/snr_results_Qwen-Qwen2.5-7B_unfrozenparameters_30percent.yaml \\
        --bf16 True --output_dir out --per_device_train_batch_size 8 --gradient_checkpointing False
    ```
''')

SPECTRUM_FILE = dedent('''
    unfrozen_parameters:
    - ^lm_head.weight$
    - ^model.embed_tokens.weight$
    - model.layers.2.mlp.down_proj
    - model.layers.3.self_attn.o_proj
''')


def _files(script: str) -> dict[str, str]:
    return {"train.py": script, "README.md": README,
            "spectrum/snr_results_Qwen-Qwen2.5-7B_unfrozenparameters_30percent.yaml": SPECTRUM_FILE}


def test_a_freeze_undone_by_names_read_from_a_file_is_not_judged_as_full_fine_tuning(tmp_path):
    settings = _project(tmp_path, _files(TRAIN_SPECTRUM))
    [run] = _runs(settings, "train.py")
    selection = run.plan.get("partly_frozen")
    assert selection is not None and selection.value == "any(re.match(pattern, name) for pattern in patterns)"
    loop = TRAIN_SPECTRUM.splitlines().index("    for name, param in model.named_parameters():")
    assert selection.origin is not None and selection.origin.range.start.line == loop + 1  # the unfreezing loop
    assert run.problem is not None and "trains again only the parameters whose names match" in run.problem
    assert _memory(settings, "train.py") == []
    [note] = _notes(settings, "train.py")
    assert note.code == "MEM003" and "not checked as full fine-tuning" in note.message


def test_without_the_unfreeze_the_same_run_is_estimated_as_full_fine_tuning(tmp_path):
    plain = TRAIN_SPECTRUM.replace("        model = train_only_matching(model, model_args.spectrum_config)\n",
                                   "        print(model_args.spectrum_config)\n")
    assert plain != TRAIN_SPECTRUM
    settings = _project(tmp_path, _files(plain))
    [run] = _runs(settings, "train.py")
    assert run.problem is None and run.plan.get("partly_frozen") is None
    assert run.setup is not None and run.setup.lora is None and run.setup.frozen_layers == 0  # full fine-tuning


def test_a_flag_computed_from_the_name_and_an_option_list(tmp_path):
    """``p.requires_grad = any(key in name for key in args.trainable)``: the loop freezes and
    unfreezes at once."""
    script = TRAIN_SPECTRUM.replace('''    for param in model.parameters():
        param.requires_grad = False
    for name, param in model.named_parameters():
        if any(re.match(pattern, name) for pattern in patterns):
            param.requires_grad = True
''', '''    for name, param in model.named_parameters():
        param.requires_grad = any(key in name for key in patterns)
''')
    assert script != TRAIN_SPECTRUM
    settings = _project(tmp_path, _files(script))
    [run] = _runs(settings, "train.py")
    assert run.plan.value("partly_frozen") == "any(key in name for key in patterns)"
    assert run.problem is not None and _memory(settings, "train.py") == []


def test_each_parameter_turned_off_then_on_where_a_pattern_matches(tmp_path):
    """Axolotl's own loop: ``param.requires_grad = False``, then a loop over the patterns."""
    script = TRAIN_SPECTRUM.replace('''    for param in model.parameters():
        param.requires_grad = False
    for name, param in model.named_parameters():
        if any(re.match(pattern, name) for pattern in patterns):
            param.requires_grad = True
''', '''    for name, param in model.named_parameters():
        param.requires_grad = False
        for pattern in patterns:
            if re.match(pattern, name):
                param.requires_grad = True
''')
    assert script != TRAIN_SPECTRUM
    settings = _project(tmp_path, _files(script))
    [run] = _runs(settings, "train.py")
    assert run.plan.value("partly_frozen") == "re.match(pattern, name)"
    assert run.problem is not None and _memory(settings, "train.py") == []


def test_a_selection_of_literals_is_left_to_the_facts_that_describe_it(tmp_path):
    """LLaVA-NeXT's ``model.requires_grad_(False)`` then ``if "vision_tower" in name:``: a named
    component, not a run-time selection; the freeze is not a whole-model freeze either."""
    script = TRAIN_SPECTRUM.replace('''    for param in model.parameters():
        param.requires_grad = False
    for name, param in model.named_parameters():
        if any(re.match(pattern, name) for pattern in patterns):
            param.requires_grad = True
''', '''    model.requires_grad_(False)
    for name, param in model.named_parameters():
        if "vision_tower" in name or name.startswith("lm_head"):
            param.requires_grad_(True)
''')
    assert script != TRAIN_SPECTRUM
    settings = _project(tmp_path, _files(script))
    [run] = _runs(settings, "train.py")
    assert run.plan.get("partly_frozen") is None and run.plan.get("frozen_model") is None
    assert run.problem is None


def test_the_spectrum_file_a_launch_names_is_read_and_estimated(tmp_path):
    """Spectrum's own option, ``--spectrum_config_path``, names the file of regexes: its
    ``unfrozen_parameters`` are matched against Qwen2.5-7B's parameter names."""
    script = TRAIN_SPECTRUM.replace("spectrum_config", "spectrum_config_path")
    launch = ("#!/bin/bash\nset -e\ntorchrun --nproc_per_node=8 train.py --model_name_or_path Qwen/Qwen2.5-7B \\\n"
              "    --spectrum_config_path spectrum/snr_results_Qwen-Qwen2.5-7B_unfrozenparameters_30percent.yaml \\\n"
              "    --bf16 True --output_dir out --per_device_train_batch_size 4 --gradient_checkpointing True\n")
    settings = _project(tmp_path, {**_files(script), "run_spectrum.sh": launch})
    [run] = _runs(settings, "run_spectrum.sh")
    assert run.plan.value("trained_parameters") == ("^lm_head.weight$", "^model.embed_tokens.weight$",
                                                    "model.layers.2.mlp.down_proj", "model.layers.3.self_attn.o_proj")
    assert run.problem is None and run.setup is not None and run.setup.micro_batch == 4
    # config.json: vocab_size 152064 x hidden_size 3584 (embeddings, head), 18944 x 3584, 3584 x 3584
    assert run.setup.trainable_params == 2 * 152064 * 3584 + 18944 * 3584 + 3584 * 3584
    assert run.setup.frozen_layers == 0 and not run.setup.freeze_embeddings  # the embeddings train
