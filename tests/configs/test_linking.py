"""Linking configs into runs: references resolved relative to the file that names them,
DeepSpeed "auto" filled from the Trainer's side, tool defaults never beating stated values."""

from __future__ import annotations

from pathlib import Path

from memlint.documents.parsed import parse_document
from memlint.documents.reading import document_from_text
from memlint.estimate import Optimizer, Precision, Sharding
from memlint.facts.extract import extract
from memlint.facts.plan import RunFacts, merge
from memlint.facts.resolve import RunContext
from memlint.model.diagnostics import Range
from memlint.model.provenance import Location, Sourced
from memlint.project.settings import Settings
from memlint.project.project import Project

from .helpers import spans, write_files

AXOLOTL = """\
base_model: Qwen/Qwen2.5-7B
sequence_len: 4096
micro_batch_size: 2
gradient_accumulation_steps: 8
learning_rate: 0.00001
bf16: true
gradient_checkpointing: true
deepspeed: deepspeed_configs/zero3_bf16.json
datasets:
  - path: tatsu-lab/alpaca
    type: alpaca
"""

ZERO3_AUTO = """\
{
  "zero_optimization": {
    "stage": 3,
    "overlap_comm": true,
    "contiguous_gradients": true,
    "reduce_bucket_size": "auto",
    "stage3_prefetch_bucket_size": "auto",
    "stage3_param_persistence_threshold": "auto",
    "stage3_gather_16bit_weights_on_model_save": true
  },
  "bf16": {"enabled": "auto"},
  "gradient_accumulation_steps": "auto",
  "gradient_clipping": "auto",
  "train_batch_size": "auto",
  "train_micro_batch_size_per_gpu": "auto"
}
"""


def facts_of(path: str, text: str) -> RunFacts:
    [facts] = extract(parse_document(document_from_text(path, text)))
    return facts


def test_auto_values_take_the_trainers_values(tmp_path):
    write_files(tmp_path, {"qwen.yml": AXOLOTL, "deepspeed_configs/zero3_bf16.json": ZERO3_AUTO})
    project = Project(Settings(root=tmp_path))
    [run] = project.runs_for(tmp_path / "deepspeed_configs/zero3_bf16.json", RunContext(world_size=8))
    plan = run.plan
    assert [Path(d).name for d in plan.documents] == ["qwen.yml", "zero3_bf16.json"]
    assert plan.get("micro_batch").value == 2 and plan.get("micro_batch").origin.path.endswith("qwen.yml")
    assert plan.get("grad_accum").value == 8
    assert plan.get("zero_stage").value == 3
    assert plan.conflicts == []
    assert run.setup.precision is Precision.MIXED_BF16  # DeepSpeed's bf16, switched on by the Trainer's bf16
    assert run.setup.sharding is Sharding.ZERO3 and run.setup.world_size == 8
    assert run.setup.micro_batch == 2 and run.setup.seq_len == 4096 and run.setup.grad_accum == 8


def test_the_same_run_from_either_file(tmp_path):
    write_files(tmp_path, {"qwen.yml": AXOLOTL, "deepspeed_configs/zero3_bf16.json": ZERO3_AUTO})
    project = Project(Settings(root=tmp_path))
    [from_yaml] = project.runs_for(tmp_path / "qwen.yml", RunContext())
    [from_json] = project.runs_for(tmp_path / "deepspeed_configs/zero3_bf16.json", RunContext())
    assert from_yaml.setup == from_json.setup


TRAIN_WITH_DS_DEFAULT = """\
import argparse

from transformers import AutoModelForCausalLM, Trainer, TrainingArguments


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--deepspeed_config", default="ds_zero3.json")
    return parser.parse_args()


def main():
    args = parse_args()
    model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-1.5B", torch_dtype="bfloat16")
    training_args = TrainingArguments(
        output_dir="out", per_device_train_batch_size=args.batch_size, bf16=True,
        deepspeed=args.deepspeed_config,
    )
    Trainer(model=model, args=training_args, train_dataset=data).train()


if __name__ == "__main__":
    main()
"""


def test_a_config_named_by_a_launched_script_is_checked_in_the_launchers_run(tmp_path):
    """ds_zero3.json is named by train.py, which launch.sh starts on 8 GPUs with --batch_size 2:
    checking the JSON alone must see 8 GPUs and micro-batch 2, not a one-GPU run of train.py."""
    write_files(tmp_path, {
        "train.py": TRAIN_WITH_DS_DEFAULT,
        "ds_zero3.json": ZERO3_AUTO,
        "launch.sh": "#!/usr/bin/env bash\ntorchrun --nproc_per_node 8 train.py --batch_size 2\n",
    })
    project = Project(Settings(root=tmp_path))
    [from_json] = project.runs_for(tmp_path / "ds_zero3.json", RunContext())
    [from_launcher] = project.runs_for(tmp_path / "launch.sh", RunContext())
    assert from_json.setup.world_size == 8 and from_json.setup.micro_batch == 2
    assert from_json.setup == from_launcher.setup
    assert Path(from_json.plan.entry).name == "launch.sh"


def test_a_config_named_by_a_script_nobody_launches_is_the_scripts_run(tmp_path):
    write_files(tmp_path, {"train.py": TRAIN_WITH_DS_DEFAULT, "ds_zero3.json": ZERO3_AUTO})
    [run] = Project(Settings(root=tmp_path)).runs_for(tmp_path / "ds_zero3.json", RunContext())
    assert run.setup.world_size == 1 and run.setup.micro_batch == 8
    assert Path(run.plan.entry).name == "train.py"


def test_reference_relative_to_the_referencing_file(tmp_path):
    args = '{"output_dir": "out", "per_device_train_batch_size": 4, "bf16": true, "deepspeed": "zero2.json"}'
    zero2 = '{"zero_optimization": {"stage": 2}, "bf16": {"enabled": "auto"}, "train_micro_batch_size_per_gpu": "auto"}'
    write_files(tmp_path, {"configs/training_args.json": args, "configs/zero2.json": zero2})
    project = Project(Settings(root=tmp_path))
    target = project.resolve_reference("zero2.json", tmp_path / "configs/training_args.json")
    assert target == tmp_path / "configs/zero2.json"
    facts = project.facts(tmp_path / "configs/training_args.json")[0]
    plan = project.plan_for(facts)
    assert plan.get("zero_stage").value == 2
    assert plan.get("micro_batch").value == 4


def test_merge_auto_never_overrides():
    trainer = RunFacts("train.py", "python", micro_batch=Sourced(4, Location("train.py", Range.of(9, 4, 9, 5))))
    auto = Sourced("auto", Location("ds.json", Range.of(2, 36, 2, 42)))
    deepspeed = RunFacts("ds.json", "deepspeed", micro_batch=auto)
    plan = merge(trainer, [deepspeed])
    assert plan.get("micro_batch").value == 4 and plan.conflicts == []
    plan = merge(deepspeed, [trainer])  # whichever is the entry
    assert plan.get("micro_batch").value == 4


def test_merge_stated_values_beat_tool_defaults():
    axolotl = facts_of("run.yml", "base_model: Qwen/Qwen2.5-7B\nlearning_rate: 0.00001\n")
    assert axolotl.micro_batch.assumed  # Axolotl's default micro_batch_size 1
    deepspeed = facts_of("ds.json", '{"train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 1}}')
    plan = merge(axolotl, [deepspeed])
    assert plan.get("micro_batch").value == 4 and plan.get("micro_batch").origin.path == "ds.json"
    [(name, default, stated)] = [c for c in plan.conflicts if c[0] == "micro_batch"]
    assert default.assumed and stated.value == 4


def test_merge_accelerate_world_size_and_precision():
    accelerate = facts_of("default_config.yaml", "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\n"
                          "mixed_precision: bf16\nnum_machines: 1\nnum_processes: 4\n")
    script = RunFacts("train.py", "python", framework=Sourced("plain", None, ""),
                      model=Sourced("Qwen/Qwen2.5-0.5B", Location("train.py", Range.of(5, 10, 5, 29))))
    plan = merge(script, [accelerate])
    assert plan.get("world_size").value == 4 and plan.get("mixed").value == "bf16"


def test_missing_reference_is_a_diagnostic_not_a_crash(lint):
    diagnostics = lint({"qwen.yml": AXOLOTL}, "qwen.yml")
    assert spans(diagnostics) == [("CFG015", 8, 11, 8, 44)]
    assert "`deepspeed_configs/zero3_bf16.json` does not exist" in diagnostics[0].message


def test_unreadable_reference(lint, tmp_path):
    (tmp_path / "deepspeed_configs").mkdir()
    (tmp_path / "deepspeed_configs/zero3_bf16.json").write_bytes(b"\x00\x01binary")
    [diagnostic] = lint({"qwen.yml": AXOLOTL}, "qwen.yml")
    assert diagnostic.code == "CFG015" and "binary file" in diagnostic.message


def test_reference_found_from_the_project_root(lint):
    """Axolotl and LLaMA-Factory open the path from where they are launched: the root."""
    files = {"examples/qwen/full.yml": AXOLOTL, "deepspeed_configs/zero3_bf16.json": ZERO3_AUTO}
    assert lint(files, "examples/qwen/full.yml") == []


# DeepSpeedExamples' compression/bert/bash_script/XTC/layer_reduction.sh, trimmed: run from
# compression/bert, where run_glue_no_trainer.py and config/XTC/ live
XTC_LAUNCHER = """\
#!/bin/bash
export CUDA_VISIBLE_DEVICES=7
TASK_NAME=mnli
CONFIG=./config/XTC/ds_config_layer_reduction_fp16.json
SAVE_PATH=./out/XTC/layer_reduction
mkdir -p ${SAVE_PATH}
MODEL=yoshitomo-matsubara/bert-base-uncased-${TASK_NAME}
python -m torch.distributed.launch --nproc_per_node=1 \\
  --master_port 66665 \\
  run_glue_no_trainer.py \\
  --model_name_or_path ${MODEL} \\
  --task_name $TASK_NAME \\
  --per_device_train_batch_size 32 \\
  --deepspeed_config ${CONFIG} \\
  --deepspeed \\
  --output_dir ${SAVE_PATH}
"""


def test_a_shell_scripts_paths_are_found_from_a_folder_above_it(lint):
    files = {"compression/bert/bash_script/XTC/layer_reduction.sh": XTC_LAUNCHER}
    [missing] = [d for d in lint(files, "compression/bert/bash_script/XTC/layer_reduction.sh") if d.code == "CFG015"]
    assert "`./config/XTC/ds_config_layer_reduction_fp16.json` does not exist" in missing.message
    files["compression/bert/config/XTC/ds_config_layer_reduction_fp16.json"] = ZERO3_AUTO
    assert [d for d in lint(files, "compression/bert/bash_script/XTC/layer_reduction.sh") if d.code == "CFG015"] == []


# smollm's vision/experiments/pretraining/vloom/slurm_scripts_templates/accelerate_config_multi_node.yaml,
# trimmed: its slurm scripts run `accelerate launch` from vision/, where the DeepSpeed path starts
SMOLLM_ACCELERATE = """\
compute_environment: LOCAL_MACHINE
deepspeed_config:
  deepspeed_multinode_launcher: standard
  deepspeed_config_file: ./experiments/pretraining/vloom/slurm_scripts_templates/ds_config.json
  zero3_init_flag: false
distributed_type: DEEPSPEED
machine_rank: 0
main_training_function: main
num_machines: 2
num_processes: 16
"""


def test_an_accelerate_configs_paths_are_found_from_a_folder_above_it(lint):
    folder = "vision/experiments/pretraining/vloom/slurm_scripts_templates"
    files = {f"{folder}/accelerate_config_multi_node.yaml": SMOLLM_ACCELERATE}
    [missing] = [d for d in lint(files, f"{folder}/accelerate_config_multi_node.yaml") if d.code == "CFG015"]
    assert "does not exist (looked next to accelerate_config_multi_node.yaml, in the folders above it" in missing.message
    files[f"{folder}/ds_config.json"] = ZERO3_AUTO
    assert [d for d in lint(files, f"{folder}/accelerate_config_multi_node.yaml") if d.code == "CFG015"] == []


# EasyR1's examples/qwen2_5_7b_math_grpo.sh: OmegaConf overrides, one of them naming the config
EASYR1_LAUNCHER = """\
#!/bin/bash

set -x

MODEL_PATH=Qwen/Qwen2.5-7B-Instruct  # replace it with your local file path

python3 -m verl.trainer.main \\
    config=examples/config.yaml \\
    worker.actor.model.model_path=${MODEL_PATH}
"""


def test_a_config_named_by_an_override_is_the_value_of_it(lint):
    files = {"examples/qwen2_5_7b_math_grpo.sh": EASYR1_LAUNCHER}
    [missing] = [d for d in lint(files, "examples/qwen2_5_7b_math_grpo.sh") if d.code == "CFG015"]
    assert missing.message.startswith("`examples/config.yaml` does not exist")
    assert spans([missing]) == [("CFG015", 8, 11, 8, 31)]
    files["examples/config.yaml"] = "data:\n  max_prompt_length: 2048\n"
    assert [d for d in lint(files, "examples/qwen2_5_7b_math_grpo.sh") if d.code == "CFG015"] == []


def test_accelerate_deepspeed_config_file_reference(lint):
    text = ("compute_environment: LOCAL_MACHINE\ndeepspeed_config:\n  deepspeed_config_file: ds_z3.json\n"
            "distributed_type: DEEPSPEED\nmixed_precision: bf16\nnum_processes: 8\n")
    [diagnostic] = lint({"accelerate_configs/zero3.yaml": text}, "accelerate_configs/zero3.yaml")
    assert spans([diagnostic]) == [("CFG015", 3, 25, 3, 35)]


MODULE_LAUNCHER = """\
#!/bin/bash
# SFT through the package's own entry point
deepspeed --num_gpus 1 --module sftkit.cli.train_sft \\
   --pretrain meta-llama/Meta-Llama-3-8B \\
   --micro_train_batch_size 1 \\
   --zero_stage 2 \\
   --bf16
"""

MODULE_SCRIPT = """\
import argparse

import deepspeed
from deepspeed.ops.adam import FusedAdam
from transformers import AutoModelForCausalLM


def train(args):
    model = AutoModelForCausalLM.from_pretrained(args.pretrain)
    optim = FusedAdam(model.parameters(), lr=1e-5)
    config = {
        "zero_optimization": {"stage": args.zero_stage},
        "bf16": {"enabled": args.bf16},
        "train_micro_batch_size_per_gpu": args.micro_train_batch_size,
    }
    engine, *_ = deepspeed.initialize(model=model, optimizer=optim, config=config)
    return engine


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--pretrain", type=str, default=None)
    parser.add_argument("--micro_train_batch_size", type=int, default=8)
    parser.add_argument("--zero_stage", type=int, default=2)
    parser.add_argument("--bf16", action="store_true", default=False)
    train(parser.parse_args())
"""


def test_a_module_run_by_its_launcher_sees_the_launchers_options(tmp_path):
    """``deepspeed --module pkg.cli.train_sft`` names no file, yet linting the module finds the
    launcher that runs it: the module's memory finding (on its optimizer line) needs the model
    and batch the launcher passes."""
    write_files(tmp_path, {"run.sh": MODULE_LAUNCHER, "sftkit/cli/train_sft.py": MODULE_SCRIPT})
    project = Project(Settings(root=tmp_path))
    script = tmp_path / "sftkit/cli/train_sft.py"
    assert project.referrers(script) == [tmp_path / "run.sh"]
    [run] = project.runs_for(script, RunContext())
    assert run.plan.get("model").value == "meta-llama/Meta-Llama-3-8B"
    assert run.plan.get("model").origin.path.endswith("run.sh")
    assert run.setup.micro_batch == 1 and run.setup.precision is Precision.MIXED_BF16



def test_a_deepspeed_optimizer_block_replaces_the_trainers_optimizer(tmp_path):
    """With an "optimizer" block DeepSpeed builds its own (fused) Adam; the Trainer's `optim`
    is unused. Without one, the Trainer's torch AdamW is DeepSpeed's client optimizer."""
    args = ('{"output_dir": "out", "model_name_or_path": "Qwen/Qwen2.5-7B", "optim": "adamw_torch", '
            '"per_device_train_batch_size": 1, "bf16": true, "deepspeed": "zero2.json"}')
    with_block = ('{"zero_optimization": {"stage": 2}, "bf16": {"enabled": "auto"}, '
                  '"optimizer": {"type": "AdamW", "params": {"lr": "auto"}}}')
    write_files(tmp_path, {"args.json": args, "zero2.json": with_block})
    project = Project(Settings(root=tmp_path))
    [run] = project.runs_for(tmp_path / "args.json", RunContext(world_size=8))
    assert run.setup.optimizer is Optimizer.ADAMW_FUSED
    assert run.plan.get("optimizer").origin.path.endswith("zero2.json")

    write_files(tmp_path, {"zero2.json": '{"zero_optimization": {"stage": 2}, "bf16": {"enabled": "auto"}}'})
    project = Project(Settings(root=tmp_path))
    [run] = project.runs_for(tmp_path / "args.json", RunContext(world_size=8))
    assert run.setup.optimizer is Optimizer.ADAMW
