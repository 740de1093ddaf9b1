"""A DeepSpeed config a training script names behind its own flag (Chinese-Vicuna's
``finetune_fp16.py``: ``TrainingArguments(..., deepspeed="sample/zero_config.json" if
args.deepspeed else None)``, ``--deepspeed`` an argparse ``store_true``). A launch that passes
the flag runs with the config (its ZeRO stage and offload are the run's); a launch without it
runs plain DDP. Either way the script names the config: it is not "used by no launcher,
script or recipe"; when no launch passes the flag, the config's note says which script and
option would use it."""

from __future__ import annotations

from memlint.lint.engine import Linter
from tests.facts.facts_testing import dedent, facts_of, span, where
from tests.project.test_config_launchers import _project, _runs

FINETUNE = dedent('''
    import argparse
    import os

    import torch
    import transformers
    from datasets import load_dataset
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaForCausalLM, LlamaTokenizer

    parser = argparse.ArgumentParser()
    parser.add_argument("--data_path", type=str, default="data/merge.json")
    parser.add_argument("--output_path", type=str, default="lora-out")
    parser.add_argument("--model_path", type=str, default="meta-llama/Llama-2-7b-hf")
    parser.add_argument("--micro_batch_size", type=int, default=4)
    parser.add_argument("--local_rank", type=int, default=-1)
    parser.add_argument("--deepspeed", action="store_true", default=False)
    args = parser.parse_args()

    MICRO_BATCH_SIZE = args.micro_batch_size
    BATCH_SIZE = 128
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    GRADIENT_ACCUMULATION_STEPS = BATCH_SIZE // MICRO_BATCH_SIZE // world_size

    model = LlamaForCausalLM.from_pretrained(args.model_path, torch_dtype=torch.float16)
    tokenizer = LlamaTokenizer.from_pretrained(args.model_path)
    model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"],
                                             task_type="CAUSAL_LM"))
    data = load_dataset("json", data_files=args.data_path)

    trainer = transformers.Trainer(
        model=model,
        train_dataset=data["train"],
        args=transformers.TrainingArguments(
            per_device_train_batch_size=MICRO_BATCH_SIZE,
            gradient_accumulation_steps=GRADIENT_ACCUMULATION_STEPS,
            num_train_epochs=3,
            learning_rate=3e-4,
            fp16=True,
            output_dir=args.output_path,
            deepspeed="configs/zero3_offload.json" if args.deepspeed else None,
        ),
        data_collator=transformers.DataCollatorForLanguageModeling(tokenizer, mlm=False),
    )
    trainer.train()
''')

LAUNCHER = dedent('''
    #!/bin/bash
    # LoRA fine-tuning; set use_zero_offload=0 to run plain DDP
    MODEL_PATH="meta-llama/Llama-2-7b-hf"
    use_zero_offload=1
    if [ ${use_zero_offload} == "1" ]
    then
        deepspeed --num_gpus 8 --master_port=29500 finetune.py \\
        --model_path $MODEL_PATH \\
        --micro_batch_size 4 \\
        --deepspeed
    else
        torchrun --nproc_per_node=8 --master_port=29500 finetune.py \\
        --model_path $MODEL_PATH \\
        --micro_batch_size 4
    fi
''')

ZERO3_OFFLOAD = dedent('''
    {
      "fp16": {"enabled": true, "loss_scale": 0},
      "zero_optimization": {
        "stage": 3,
        "offload_optimizer": {"device": "cpu", "pin_memory": true},
        "offload_param": {"device": "cpu", "pin_memory": true},
        "overlap_comm": true
      },
      "train_micro_batch_size_per_gpu": "auto",
      "gradient_accumulation_steps": "auto"
    }
''')


def test_the_script_names_the_config_behind_its_flag():
    [facts] = facts_of(FINETUNE, "finetune.py")
    assert facts.references == []  # not by default: --deepspeed is off unless passed
    [(options, prefix, reference)] = facts.switched_references
    assert options == ("deepspeed",) and prefix == "if"
    assert reference.value == "configs/zero3_offload.json"
    assert where(reference) == span(FINETUNE, 'deepspeed=«"configs/zero3_offload.json"» if args')


def test_a_config_chosen_through_a_variable_is_switched_too():
    chosen = FINETUNE.replace('deepspeed="configs/zero3_offload.json" if args.deepspeed else None',
                              "deepspeed=ds_config").replace(
        "MICRO_BATCH_SIZE = args.micro_batch_size",
        'MICRO_BATCH_SIZE = args.micro_batch_size\nds_config = "configs/zero3_offload.json" if args.deepspeed else None')
    [facts] = facts_of(chosen, "finetune.py")
    assert [r.value for _, _, r in facts.switched_references] == ["configs/zero3_offload.json"]


def test_the_launch_that_passes_the_flag_runs_with_the_config(tmp_path):
    settings = _project(tmp_path, {
        "finetune.py": FINETUNE,
        "scripts/finetune.sh": LAUNCHER,
        "configs/zero3_offload.json": ZERO3_OFFLOAD,
    })
    with_flag, without = _runs(settings, "scripts/finetune.sh")
    assert with_flag.plan.value("zero_stage") == 3
    assert with_flag.plan.value("offload_optimizer") and with_flag.plan.value("offload_params")
    assert any(d.endswith("configs/zero3_offload.json") for d in with_flag.plan.documents)
    assert without.plan.value("zero_stage") is None  # torchrun without --deepspeed: plain DDP
    [config_run] = _runs(settings, "configs/zero3_offload.json")
    assert config_run.plan.value("model") == "meta-llama/Llama-2-7b-hf"
    assert config_run.plan.value("micro_batch") == 4


def test_a_config_no_launch_switches_on_is_still_the_scripts(tmp_path):
    settings = _project(tmp_path, {
        "finetune.py": FINETUNE,
        "scripts/finetune.sh": LAUNCHER.replace(" \\\n    --deepspeed\n", "\n"),
        "configs/zero3_offload.json": ZERO3_OFFLOAD,
    })
    runs = _runs(settings, "scripts/finetune.sh")
    assert len(runs) == 2 and all(r.plan.value("zero_stage") is None for r in runs)
    from memlint.project.project import Project

    assert Project(settings).runs.unused_configs() == []  # finetune.py names it
    [note] = _runs(settings, "configs/zero3_offload.json")
    line = span(FINETUNE, 'deepspeed=«"configs/zero3_offload.json"»')[0]
    assert note.problem == (f"finetune.py:{line} uses this config only when `--deepspeed` is passed, and no launch "
                            "of the project passes it, so no run of it is known: pass `--deepspeed` in a launch of "
                            "finetune.py")
    memory = [d for d in Linter(settings).lint_path(tmp_path / "configs/zero3_offload.json") if d.code == "MEM003"]
    assert [d.message.split(":", 1)[1].strip()[:40] for d in memory] == [note.problem[:40]]
