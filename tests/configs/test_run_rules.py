"""Cross-field checks the tools only make at run time (CFG010-CFG014), on realistic runs."""

from __future__ import annotations

import pytest

from memlint.lint.apply_fixes import apply_edits

from .helpers import spans

ZERO2 = """\
{
  "train_batch_size": 128,
  "train_micro_batch_size_per_gpu": 4,
  "gradient_accumulation_steps": 4,
  "gradient_clipping": 1.0,
  "bf16": {"enabled": true},
  "zero_optimization": {
    "stage": 2,
    "overlap_comm": true,
    "reduce_bucket_size": 5e8
  }
}
"""

TRAINING_ARGS = """\
{
  "output_dir": "checkpoints/llama-3.2-3b",
  "per_device_train_batch_size": 4,
  "gradient_accumulation_steps": 4,
  "learning_rate": 2e-05,
  "num_train_epochs": 2,
  "bf16": true,
  "deepspeed": "ds_config.json"
}
"""


# --------------------------------------------------------------------------- CFG010


def test_batch_sizes_must_multiply_out_on_the_gpu_count(lint):
    assert lint({"ds_config.json": ZERO2}, "ds_config.json", select=("CFG010",), gpus=8) == []
    [diagnostic] = lint({"ds_config.json": ZERO2}, "ds_config.json", select=("CFG010",), gpus=4)
    assert spans([diagnostic]) == [("CFG010", 2, 22, 2, 25)]
    assert diagnostic.message == (
        "train_batch_size 128 ≠ 4 (micro-batch) × 4 (accumulation) × 4 GPUs = 64: deepspeed.initialize stops at "
        "start-up (GPU count from `gpus` in the memlint settings); set it to 64"
    )
    assert diagnostic.fix.applicability == "unsafe"
    assert '"train_batch_size": 64,' in apply_edits(ZERO2, list(diagnostic.fix.edits))


def test_batch_sizes_without_a_gpu_count(lint):
    assert lint({"ds_config.json": ZERO2}, "ds_config.json", select=("CFG010",)) == []  # 8 GPUs would do
    odd = ZERO2.replace('"train_batch_size": 128', '"train_batch_size": 100')
    [diagnostic] = lint({"ds_config.json": odd}, "ds_config.json", select=("CFG010",))
    assert "no GPU count makes" in diagnostic.message


def test_two_of_three_batch_values(lint):
    text = ('{\n  "train_batch_size": 96,\n  "train_micro_batch_size_per_gpu": 8,\n'
            '  "zero_optimization": {"stage": 1}\n}\n')
    assert lint({"ds_config.json": text}, "ds_config.json", select=("CFG010",), gpus=4) == []  # accumulation 3
    [diagnostic] = lint({"ds_config.json": text}, "ds_config.json", select=("CFG010",), gpus=8)
    assert diagnostic.message.startswith("train_batch_size 96 ≠ a multiple of 8 (micro-batch) × 8 GPUs")


PIPELINE_LAUNCH = """\
#!/bin/bash
# train a 7B model with DeepSpeed's pipeline engine: $1 names the run
set -eux
export MASTER_PORT=23857
export WORK_DIR=`pwd`
OUTPUT=${WORK_DIR}/output/$1
deepspeed --num_gpus 8 --master_port ${MASTER_PORT} ${WORK_DIR}/train.py \\
    --output_dir ${OUTPUT} \\
    --max_seq_len 1024 \\
    --pipe_parallel_size 4 \\
    --model_parallel_size 1 \\
    --deepspeed_config ${WORK_DIR}/configs/ds_config_zero1.json
"""

PIPELINE_TRAIN = """\
import argparse

import deepspeed
from deepspeed.pipe import PipelineModule

parser = argparse.ArgumentParser()
parser.add_argument("--output_dir")
parser.add_argument("--max_seq_len", type=int, default=2048)
parser.add_argument("--pipe_parallel_size", type=int, default=1)
parser.add_argument("--model_parallel_size", type=int, default=1)
parser = deepspeed.add_config_arguments(parser)
args = parser.parse_args()

model = PipelineModule(layers=build_layers(), num_stages=args.pipe_parallel_size)
engine, _, _, _ = deepspeed.initialize(args=args, model=model, model_parameters=model.parameters())
for step in range(1000):
    loss = engine.train_batch()
"""


def test_pipeline_stages_share_the_gpus_deepspeeds_batch_counts(lint):
    # DeepSpeed's pipeline engine counts its batch over the data-parallel ranks: 8 GPUs in
    # pipelines of 4 are 2 ranks, and 1 x 4 x 2 = 8 (before: "≠ 1 × 4 × 8 GPUs = 32", an error on a
    # config that starts)
    config = ('{\n  "train_micro_batch_size_per_gpu": 1,\n  "train_batch_size": 8,\n'
              '  "gradient_accumulation_steps": 4,\n  "fp16": {"enabled": true},\n'
              '  "zero_optimization": {"stage": 1}\n}\n')
    files = {"train_llama_deepspeed.sh": PIPELINE_LAUNCH, "train.py": PIPELINE_TRAIN,
             "configs/ds_config_zero1.json": config}
    assert lint(files, "configs/ds_config_zero1.json", select=("CFG010",), gpus=8) == []
    files["configs/ds_config_zero1.json"] = config.replace('"train_batch_size": 8', '"train_batch_size": 32')
    [diagnostic] = lint(files, "configs/ds_config_zero1.json", select=("CFG010",), gpus=8)
    assert diagnostic.message.startswith(
        "train_batch_size 32 ≠ 1 (micro-batch) × 4 (accumulation) × 2 data-parallel ranks = 8")
    assert "4 of them to each copy of the model (`--pipe_parallel_size 4 --model_parallel_size 1`)" \
        in diagnostic.message


def test_a_model_parallel_degree_of_one_is_estimated_as_data_parallelism(lint):
    # `--model_parallel_size 1` splits nothing: the run is estimated (and the degree, a launch's
    # own fact, is not Megatron's layout the estimate reads)
    launch = PIPELINE_LAUNCH.replace("--pipe_parallel_size 4", "--pipe_parallel_size 1").replace(
        "${WORK_DIR}/train.py", "${WORK_DIR}/train.py --model_name_or_path Qwen/Qwen2.5-0.5B")
    script = PIPELINE_TRAIN.replace(
        "model = PipelineModule(layers=build_layers(), num_stages=args.pipe_parallel_size)",
        'parser.add_argument("--model_name_or_path")\nfrom transformers import AutoModelForCausalLM\n'
        "model = AutoModelForCausalLM.from_pretrained(args.model_name_or_path)").replace(
        "    loss = engine.train_batch()", "    loss = engine(**batch).loss\n    engine.backward(loss)\n    engine.step()")
    config = ('{\n  "train_micro_batch_size_per_gpu": 1,\n  "gradient_accumulation_steps": 4,\n'
              '  "bf16": {"enabled": true},\n  "zero_optimization": {"stage": 1}\n}\n')
    files = {"train_llama_deepspeed.sh": launch, "train.py": script, "configs/ds_config_zero1.json": config}
    # the fixture fails on any internal error of a rule
    assert lint(files, "train_llama_deepspeed.sh", select=("MEM",), gpus=8, gpu="h100") == []


def test_a_bare_python_launch_is_a_world_of_one(lint):
    # the troubleshooting guide runs the DeepSpeed engine without a launcher: one process, so
    # 8 = micro-batch 2 x 4 x 1 (before: the 8 GPUs of the settings, "≠ a multiple of 4 × 8")
    config = ('{\n  "train_batch_size": 8,\n  "gradient_accumulation_steps": 4,\n'
              '  "fp16": {"enabled": true},\n  "zero_optimization": {"stage": 2}\n}\n')
    guide = ("# Troubleshooting\n\nOut of memory on one GPU? Try ZeRO-2:\n\n```bash\n"
             "python train_ultrathink.py --deepspeed deepspeed_config_zero2.json --batch_size 2\n```\n")
    script = PIPELINE_TRAIN.replace("model = PipelineModule(layers=build_layers(), num_stages=args.pipe_parallel_size)",
                                    "model = build_model(args)").replace(
        'parser.add_argument("--output_dir")', 'parser.add_argument("--deepspeed")\nparser.add_argument("--batch_size")')
    files = {"docs/TROUBLESHOOTING.md": guide, "train_ultrathink.py": script, "deepspeed_config_zero2.json": config}
    assert lint(files, "deepspeed_config_zero2.json", select=("CFG010",), gpus=8) == []
    files["deepspeed_config_zero2.json"] = config.replace('"train_batch_size": 8', '"train_batch_size": 6')
    [diagnostic] = lint(files, "deepspeed_config_zero2.json", select=("CFG010",), gpus=8)
    assert "train_batch_size 6 ≠ a multiple of 4 (accumulation) × 1 GPUs" in diagnostic.message
    assert "a bare `python` command runs one process at docs/TROUBLESHOOTING.md:6:1" in diagnostic.message


def test_auto_batch_values_are_left_to_the_trainer(lint):
    text = ZERO2.replace('"train_batch_size": 128', '"train_batch_size": "auto"')
    assert lint({"ds_config.json": text}, "ds_config.json", select=("CFG010",), gpus=3) == []


# --------------------------------------------------------------------------- CFG011


def test_both_half_precisions(lint):
    text = ZERO2.replace('"gradient_clipping": 1.0,', '"gradient_clipping": 1.0,\n  "fp16": {"enabled": true},')
    [diagnostic] = lint({"ds_config.json": text}, "ds_config.json", select=("CFG011",))
    assert spans([diagnostic]) == [("CFG011", 6, 22, 6, 26)]
    args = TRAINING_ARGS.replace('"bf16": true,', '"bf16": true,\n  "fp16": true,')
    [diagnostic] = lint({"training_args.json": args}, "training_args.json", select=("CFG011",))
    assert spans([diagnostic]) == [("CFG011", 8, 10, 8, 14)]
    axolotl = "base_model: x/y\nlearning_rate: 0.0001\nbf16: true\nfp16: true\n"
    [diagnostic] = lint({"run.yml": axolotl}, "run.yml", select=("CFG011",))
    assert "Axolotl trains in bf16 and drops fp16" in diagnostic.message


# --------------------------------------------------------------------------- CFG012 / CFG013


def test_stage3_keys_in_a_stage2_config(lint):
    text = ZERO2.replace('"reduce_bucket_size": 5e8', '"reduce_bucket_size": 5e8,\n    "max_live_parameters": 1e9,'
                         '\n    "stage3_prefetch_bucket_size": 5e7')
    diagnostics = lint({"ds_config.json": text}, "ds_config.json", select=("CFG012",))
    assert spans(diagnostics) == [("CFG012", 11, 4, 11, 25), ("CFG012", 12, 4, 12, 33)]
    stage3 = text.replace('"stage": 2', '"stage": 3')
    assert lint({"ds_config.json": stage3}, "ds_config.json", select=("CFG012",)) == []


def test_offload_under_a_stage_that_ignores_it(lint):
    text = ('{\n  "bf16": {"enabled": true},\n  "zero_optimization": {\n    "offload_optimizer": {"device": "cpu"}\n'
            '  }\n}\n')
    [diagnostic] = lint({"ds_config.json": text}, "ds_config.json", select=("CFG013",))
    assert spans([diagnostic]) == [("CFG013", 4, 36, 4, 41)]
    assert diagnostic.message.startswith("`offload_optimizer` works with ZeRO stages 1, 2, 3; under stage 0")
    legacy = '{"zero_optimization": {"stage": 1, "cpu_offload_param": true}}'
    [diagnostic] = lint({"ds_config.json": legacy}, "ds_config.json", select=("CFG013",))
    assert spans([diagnostic]) == [("CFG013", 1, 56, 1, 60)]
    auto_stage = '{"zero_optimization": {"stage": "auto", "offload_param": {"device": "cpu"}}}'
    assert lint({"ds_config.json": auto_stage}, "ds_config.json", select=("CFG013",)) == []


# --------------------------------------------------------------------------- CFG014


def test_trainer_and_deepspeed_agree(lint):
    files = {"training_args.json": TRAINING_ARGS, "ds_config.json": ZERO2}
    assert lint(files, "ds_config.json", select=("CFG014",), gpus=8) == []


def test_trainer_defaults_count(lint):
    """The script does not set the batch size or bf16: the Trainer passes its defaults (8, off)."""
    args = ('{\n  "output_dir": "out",\n  "learning_rate": 2e-05,\n  "num_train_epochs": 2,\n'
            '  "deepspeed": "ds_config.json"\n}\n')
    diagnostics = lint({"training_args.json": args, "ds_config.json": ZERO2}, "ds_config.json", select=("CFG014",))
    assert spans(diagnostics) == [
        ("CFG014", 3, 36, 3, 37),
        ("CFG014", 4, 33, 4, 34),
        ("CFG014", 6, 22, 6, 26),
    ]
    assert diagnostics[0].message == (
        "DeepSpeed `train_micro_batch_size_per_gpu` is 4 but the Trainer's per_device_train_batch_size is 8 "
        "(the Trainer's default): the HF Trainer refuses to start on a mismatch; set it to \"auto\" so the "
        "Trainer fills it in"
    )
    assert "gradient_accumulation_steps is 1" in diagnostics[1].message
    assert "DeepSpeed `bf16.enabled` is true but the Trainer's bf16 is false" in diagnostics[2].message
    fixed = apply_edits(ZERO2, [e for d in diagnostics for e in d.fix.edits])
    assert '"train_micro_batch_size_per_gpu": "auto"' in fixed and '"bf16": {"enabled": "auto"}' in fixed


def test_trainer_values_from_the_referencing_file(lint):
    args = TRAINING_ARGS.replace('"per_device_train_batch_size": 4', '"per_device_train_batch_size": 2')
    total, diagnostic = lint({"training_args.json": args, "ds_config.json": ZERO2}, "ds_config.json",
                             select=("CFG014",), gpus=8)
    assert spans([total, diagnostic]) == [("CFG014", 2, 22, 2, 25), ("CFG014", 3, 36, 3, 37)]
    assert "× 8 GPUs is 64" in total.message
    assert "per_device_train_batch_size is 2 (`per_device_train_batch_size` at training_args.json:3:34)" in \
        diagnostic.message
    [related] = diagnostic.related
    assert related.path.endswith("training_args.json") and related.range.start.line == 3


def test_global_batch_against_the_trainers_values(lint):
    diagnostics = lint({"training_args.json": TRAINING_ARGS, "ds_config.json": ZERO2}, "ds_config.json",
                       select=("CFG014",), gpus=2)
    assert spans(diagnostics) == [("CFG014", 2, 22, 2, 25)]
    assert "× 2 GPUs is 32" in diagnostics[0].message


def test_axolotl_micro_batch_against_deepspeed(lint):
    axolotl = ("base_model: Qwen/Qwen2.5-7B\nsequence_len: 4096\nmicro_batch_size: 1\ngradient_accumulation_steps: 4\n"
               "learning_rate: 0.00001\nbf16: true\ndeepspeed: zero2.json\n")
    diagnostics = lint({"qwen.yml": axolotl, "zero2.json": ZERO2}, "zero2.json", select=("CFG014",))
    assert spans(diagnostics) == [("CFG014", 3, 36, 3, 37)]
    assert "the Trainer's micro_batch_size is 1" in diagnostics[0].message


def test_trl_enables_bf16_by_default(lint):
    recipe = ("model_name_or_path: Qwen/Qwen2.5-0.5B\ndataset_name: trl-lib/Capybara\nmax_length: 2048\n"
              "per_device_train_batch_size: 4\ngradient_accumulation_steps: 4\noutput_dir: out\n"
              "deepspeed: ds_config.json\n")
    no_bf16 = ZERO2.replace('"bf16": {"enabled": true}', '"bf16": {"enabled": false}')
    [diagnostic] = lint({"sft.yaml": recipe, "ds_config.json": no_bf16}, "ds_config.json", select=("CFG014",),
                        gpus=8)
    assert spans([diagnostic]) == [("CFG014", 6, 22, 6, 27)]
    assert "the Trainer's bf16 is true (TRL default: bf16 unless fp16 is set)" in diagnostic.message


def test_deepspeed_without_the_hf_trainer_is_not_compared(lint):
    """A plain DeepSpeed config nobody references (a `deepspeed.initialize` script): no Trainer."""
    assert lint({"ds_config.json": ZERO2}, "ds_config.json", select=("CFG014",)) == []


# BELLE's train/src/entry_point/sft_train.py, trimmed: the project's class takes the name of the
# transformers class it extends, and its launcher passes ``--bf16`` as a bare flag
SHADOWING_SCRIPT = """\
from dataclasses import dataclass, field
from typing import Optional

from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainingArguments


@dataclass
class ModelArguments:
    model_name_or_path: Optional[str] = field(default="Qwen/Qwen2.5-0.5B")


@dataclass
class TrainingArguments(TrainingArguments):
    model_max_length: int = field(default=512, metadata={"help": "Maximum sequence length."})


def main():
    parser = HfArgumentParser((ModelArguments, TrainingArguments))
    model_args, training_args = parser.parse_args_into_dataclasses()
    model = AutoModelForCausalLM.from_pretrained(model_args.model_name_or_path)
    Trainer(model=model, args=training_args).train()


if __name__ == "__main__":
    main()
"""

SHADOWING_LAUNCH = """\
torchrun --nproc_per_node 8 src/entry_point/sft_train.py \\
    --deepspeed configs/deepspeed_config.json \\
    --per_device_train_batch_size 1 \\
    --gradient_accumulation_steps 1 \\
    {precision} \\
    --output_dir out
"""


BF16_ZERO2 = ('{\n  "train_micro_batch_size_per_gpu": "auto",\n  "gradient_accumulation_steps": "auto",\n'
              '  "bf16": {"enabled": true},\n  "zero_optimization": {"stage": 2}\n}\n')


# AnyGPT's stage1_pretrain.py writes the base through the module: `from transformers import ...
# TrainingArguments`, then `class TrainingArguments(transformers.TrainingArguments)`
THROUGH_THE_MODULE = SHADOWING_SCRIPT.replace(
    "from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainingArguments\n",
    "import transformers\nfrom transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainingArguments\n",
).replace("class TrainingArguments(TrainingArguments):", "class TrainingArguments(transformers.TrainingArguments):")


@pytest.mark.parametrize("script", [SHADOWING_SCRIPT, THROUGH_THE_MODULE], ids=["bare-base", "base-through-module"])
def test_a_project_class_named_like_the_one_it_extends_is_parsed(lint, script):
    files = {"src/entry_point/sft_train.py": script, "configs/deepspeed_config.json": BF16_ZERO2,
             "scripts/run_sft.sh": SHADOWING_LAUNCH.format(precision="--bf16")}
    # the launch's --bf16 is the project class's field: the config agrees with the Trainer
    assert lint(files, "configs/deepspeed_config.json", select=("CFG014",), gpus=8) == []
    # the same launch in fp16 (BELLE's README) is the mismatch the Trainer refuses
    files["scripts/run_sft.sh"] = SHADOWING_LAUNCH.format(precision="--fp16 True")
    [finding] = lint(files, "configs/deepspeed_config.json", select=("CFG014",), gpus=8)
    assert "`bf16.enabled` is true but the Trainer's bf16 is false" in finding.message
