"""A PEFT method other than LoRA (PEFT's examples: DEFT, HiRA, GLoRA, RandLoRA, OSF) is named as
what the estimate does not model, instead of being estimated as a full fine-tune; a sub-config
of a LoRA config (``EvaConfig`` inside ``LoraConfig``) leaves the run a LoRA run."""

from __future__ import annotations

from pathlib import Path

from facts_testing import dedent, facts_of, write

from memlint.lint.engine import Linter
from memlint.project.settings import Settings

# peft's examples/hira_finetuning/hira_finetuning.py, trimmed: argparse, a helper, an aliased import
HIRA = dedent('''
    import argparse

    import torch
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments
    from peft import HiraConfig as AdapterConfig, get_peft_model


    def train(base_model, rank, target_modules, batch_size):
        model = AutoModelForCausalLM.from_pretrained(base_model, dtype=torch.bfloat16)
        config = AdapterConfig(r=rank, target_modules=target_modules.split(","), hira_dropout=0.05)
        model = get_peft_model(model, config)
        args = TrainingArguments(output_dir="out", per_device_train_batch_size=batch_size, bf16=True)
        Trainer(model=model, args=args, train_dataset=dataset).train()


    if __name__ == "__main__":
        parser = argparse.ArgumentParser()
        parser.add_argument("--base_model", default="meta-llama/Meta-Llama-3-8B")
        parser.add_argument("--rank", type=int, default=32)
        parser.add_argument("--target_modules", default="q_proj,k_proj,v_proj,up_proj,down_proj")
        parser.add_argument("--batch_size", type=int, default=16)
        args = parser.parse_args()
        train(args.base_model, args.rank, args.target_modules, args.batch_size)
''')

# peft's examples/eva_finetuning/eva_finetuning.py, trimmed: EVA initialises a LoRA adapter
EVA = dedent('''
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments
    from peft import EvaConfig, LoraConfig, get_peft_model

    model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B")
    eva_config = EvaConfig(rho=2.0)
    peft_config = LoraConfig(r=16, target_modules=["q_proj", "v_proj"], init_lora_weights="eva", eva_config=eva_config)
    peft_model = get_peft_model(model, peft_config, low_cpu_mem_usage=True)
    args = TrainingArguments(output_dir="out", per_device_train_batch_size=4, bf16=True)
    Trainer(model=peft_model, args=args, train_dataset=dataset).train()
''')


def test_a_peft_method_other_than_lora_is_named_not_estimated_as_a_full_fine_tune(tmp_path: Path):
    [script] = facts_of(HIRA, "hira_finetuning.py")
    assert script.peft_method.value == "HiraConfig"
    write(tmp_path, {"hira_finetuning.py": HIRA})
    (tmp_path / ".git").mkdir()
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False)
    found = [d for d in Linter(settings).lint_path(tmp_path / "hira_finetuning.py") if d.code.startswith("MEM")]
    assert [d.code for d in found] == ["MEM003"]  # before: MEM001, 89.7 GiB as a full fine-tune
    assert "`HiraConfig`" in found[0].message


def test_a_lora_sub_config_leaves_the_run_a_lora_run():
    [script] = facts_of(EVA, "eva_finetuning.py")
    assert script.peft_method is None
    assert script.lora_r.value == 16


# peft's examples/orthogonal_subspace_learning/osf_continual_learning.py --run_baseline, trimmed:
# one process, the model spread over every visible GPU by accelerate
SPREAD = dedent('''
    import argparse

    import torch
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

    parser = argparse.ArgumentParser()
    parser.add_argument("--model_name", default="meta-llama/Llama-3.1-8B")
    parser.add_argument("--batch_size", type=int, default=32)
    args = parser.parse_args()

    placement = "auto"
    model = AutoModelForCausalLM.from_pretrained(args.model_name, torch_dtype=torch.bfloat16, device_map=placement)
    training_args = TrainingArguments(output_dir="out", per_device_train_batch_size=args.batch_size, bf16=True)
    Trainer(model=model, args=training_args, train_dataset=dataset).train()
''')


def _memory(tmp_path: Path, text: str, gpus: int):
    write(tmp_path, {"baseline.py": text})
    (tmp_path / ".git").mkdir(exist_ok=True)
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=gpus, cache=False)
    return [d for d in Linter(settings).lint_path(tmp_path / "baseline.py") if d.code.startswith("MEM")]


def test_a_model_spread_over_several_gpus_by_device_map_is_not_judged_on_one(tmp_path: Path):
    [script] = facts_of(SPREAD, "baseline.py")
    assert script.device_map.value == 'device_map="auto"'
    [note] = _memory(tmp_path, SPREAD, gpus=8)  # before: MEM001 error, the whole 8B model and its states on one GPU
    assert note.code == "MEM003"
    assert '`device_map="auto"` in one process' in note.message and "8 GPUs" in note.message
    # on one GPU the whole model is on it: judged as before
    assert [d.code for d in _memory(tmp_path, SPREAD, gpus=1)] == ["MEM001"]
    # a device map that pins the model to one GPU (alpaca-lora's DDP branch) states nothing
    pinned = SPREAD.replace('placement = "auto"', 'placement = {"": 0}')
    assert facts_of(pinned, "baseline.py")[0].device_map is None


# TRL's examples/scripts/bco.py, trimmed: the trained model first, then an embedding model for
# BCO's prompt classifier, spread with device_map="auto" and handed on through a function
COMPANION_SPREAD = dedent('''
    from functools import partial

    import torch
    from accelerate import Accelerator
    from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer, HfArgumentParser
    from trl import BCOConfig, BCOTrainer, ModelConfig, ScriptArguments

    parser = HfArgumentParser((ScriptArguments, BCOConfig, ModelConfig))
    script_args, training_args, model_args = parser.parse_args_into_dataclasses()

    model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path)
    ref_model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path)
    tokenizer = AutoTokenizer.from_pretrained(model_args.model_name_or_path)

    accelerator = Accelerator()
    embedding_model = AutoModel.from_pretrained(
        "nomic-ai/nomic-embed-text-v1.5", dtype=torch.bfloat16, device_map="auto"
    )
    embedding_model = accelerator.prepare_model(embedding_model)
    embedding_func = partial(embed_prompt, model=embedding_model)

    trainer = BCOTrainer(model, ref_model, args=training_args, train_dataset=dataset["train"],
                         processing_class=tokenizer, embedding_func=embedding_func)
    trainer.train()
''')


def test_a_companion_models_device_map_is_not_the_trained_models():
    [script] = facts_of(COMPANION_SPREAD, "bco.py")
    assert script.device_map is None
    # the same keyword on the trained model's own loader spreads the run
    spread = COMPANION_SPREAD.replace(
        "AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path)\nref_model",
        "AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path, device_map=\"auto\")\nref_model")
    assert facts_of(spread, "bco.py")[0].device_map.value == 'device_map="auto"'
