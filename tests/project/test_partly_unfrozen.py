"""A model frozen whole, then trained again only where parameter names match a selection the
script reads at run time (Spectrum's regex list from a YAML file, "unfreeze the layers named on
the command line"): what trains is a share memlint cannot read, so the run is not judged as full
fine-tuning. A selection of literals (LLaVA-NeXT's ``"vision_tower" in name``) and a model never
frozen are estimated as before."""

from __future__ import annotations

import pytest

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


UNFREEZE = '''    for param in model.parameters():
        param.requires_grad = False
    for name, param in model.named_parameters():
        if any(re.match(pattern, name) for pattern in patterns):
            param.requires_grad = True
'''

# ``p.requires_grad = any(key in name for key in args.trainable)``: the loop freezes and unfreezes at once
FLAG_FROM_NAME = '''    for name, param in model.named_parameters():
        param.requires_grad = any(key in name for key in patterns)
'''

# Axolotl's own loop: ``param.requires_grad = False``, then a loop over the patterns
OFF_THEN_ON = '''    for name, param in model.named_parameters():
        param.requires_grad = False
        for pattern in patterns:
            if re.match(pattern, name):
                param.requires_grad = True
'''


@pytest.mark.parametrize(("loop", "selection"), [(FLAG_FROM_NAME, "any(key in name for key in patterns)"),
                                                 (OFF_THEN_ON, "re.match(pattern, name)")])
def test_other_shapes_of_the_same_selection(tmp_path, loop: str, selection: str):
    script = TRAIN_SPECTRUM.replace(UNFREEZE, loop)
    assert script != TRAIN_SPECTRUM
    settings = _project(tmp_path, _files(script))
    [run] = _runs(settings, "train.py")
    assert run.plan.value("partly_frozen") == selection
    assert run.problem is not None and _memory(settings, "train.py") == []


def test_a_selection_of_literals_is_left_to_the_facts_that_describe_it(tmp_path):
    """LLaVA-NeXT's ``model.requires_grad_(False)`` then ``if "vision_tower" in name:``: a named
    component, not a run-time selection; the freeze is not a whole-model freeze either."""
    script = TRAIN_SPECTRUM.replace(UNFREEZE, '''    model.requires_grad_(False)
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


TRL_SFT = dedent('''
    import re
    from dataclasses import dataclass, field
    from typing import Optional

    from datasets import load_dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import ModelConfig, ScriptArguments, SFTConfig, SFTTrainer, TrlParser


    @dataclass
    class SFTScriptArguments(ScriptArguments):
        spectrum_config_path: Optional[str] = field(default=None, metadata={"help": "Spectrum unfrozen parameters"})


    def setup_model_for_spectrum(model, spectrum_config_path):
        unfrozen = []
        with open(spectrum_config_path) as fin:
            for line in fin.read().splitlines():
                if line.startswith("- "):
                    unfrozen.append(line.split("- ")[1])
        model.requires_grad_(False)
        for name, param in model.named_parameters():
            if any(re.match(p, name) for p in unfrozen):
                param.requires_grad_(True)
        return model


    def main(script_args, training_args, model_args):
        model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path, torch_dtype="bfloat16")
        tokenizer = AutoTokenizer.from_pretrained(model_args.model_name_or_path)
        if script_args.spectrum_config_path:
            model = setup_model_for_spectrum(model, script_args.spectrum_config_path)
        dataset = load_dataset(script_args.dataset_name)
        trainer = SFTTrainer(model=model, args=training_args, train_dataset=dataset["train"], processing_class=tokenizer)
        trainer.train()


    if __name__ == "__main__":
        parser = TrlParser((SFTScriptArguments, SFTConfig, ModelConfig))
        main(*parser.parse_args_and_config())
''')

RECIPE = dedent('''
    model_name_or_path: meta-llama/Llama-3.1-8B
    torch_dtype: bfloat16
    dataset_name: HuggingFaceH4/ultrachat_200k
    bf16: true
    per_device_train_batch_size: 4
    gradient_accumulation_steps: 4
    gradient_checkpointing: true
    max_length: 4096
    learning_rate: 1.0e-05
    output_dir: data/llama3-8b-spectrum
    spectrum_config_path: configs/spectrum/snr_results_meta-llama-Meta-Llama-3.1-8B_unfrozenparameters_30percent.yaml
''')

RECIPE_README = dedent('''
    # SFT with Spectrum

    ```bash
    ACCELERATE_LOG_LEVEL=info accelerate launch --num_processes 8 scripts/sft.py --config recipes/llama3-8b/sft_spectrum.yaml
    ```
''')


def _spectrum_scan() -> str:
    """A Spectrum scan of Llama-3.1-8B: the head, the embeddings, the norms of every third block
    and each matrix kind in ten blocks."""
    lines = ["unfrozen_parameters:", "- ^lm_head.weight$", "- ^model.embed_tokens.weight$"]
    for kind in ("input_layernorm", "post_attention_layernorm"):
        lines += [f"- model.layers.{i}.{kind}" for i in range(0, 32, 3)]
    for kind in ("mlp.down_proj", "mlp.gate_proj", "mlp.up_proj", "self_attn.k_proj", "self_attn.o_proj",
                 "self_attn.q_proj", "self_attn.v_proj"):
        lines += [f"- model.layers.{i}.{kind}" for i in (1, 4, 5, 7, 9, 12, 17, 21, 25, 30)]
    return "\n".join(lines) + "\n"


def test_a_recipe_s_spectrum_file_is_estimated_where_full_fine_tuning_did_not_fit(tmp_path):
    """The TRL recipe sets ``spectrum_config_path`` (the script unfreezes under ``if
    script_args.spectrum_config_path:``): 94 tensors of Llama-3.1-8B train, not all 8B."""
    settings = _project(tmp_path, {
        "scripts/sft.py": TRL_SFT, "recipes/llama3-8b/sft_spectrum.yaml": RECIPE, "README.md": RECIPE_README,
        "configs/spectrum/snr_results_meta-llama-Meta-Llama-3.1-8B_unfrozenparameters_30percent.yaml": _spectrum_scan(),
    })
    [run] = _runs(settings, "recipes/llama3-8b/sft_spectrum.yaml")
    assert run.problem is None and run.setup is not None
    # config.json: vocab 128256, hidden 4096, intermediate 14336, 8 key/value heads of 128
    matrices = 3 * 14336 * 4096 + 2 * 4096 * 4096 + 2 * 4096 * 1024
    assert run.setup.trainable_params == 2 * 128256 * 4096 + 10 * matrices + 2 * 11 * 4096 == 3_231_801_344
    # full fine-tuning (8.03B trained, 87.8 GiB) was over an H100's 75.5 GiB; 3.23B trained fits
    assert _memory(settings, "recipes/llama3-8b/sft_spectrum.yaml") == []
