"""Launchers of a training CLI installed with its framework (OpenRLHF's ``deepspeed --module
openrlhf.cli.train_dpo``): the usual flag names state the run, located at the launcher's words;
the command may sit in a here-document read into a variable, as OpenRLHF's scripts write it."""

from __future__ import annotations

from pathlib import Path

from facts_testing import dedent, span

from memlint.lint.engine import run_context
from memlint.project.settings import Settings
from memlint.project.project import Project

# OpenRLHF 0.4-0.9's examples/scripts/train_dpo_llama.sh, as the issue quotes it
FLAT = dedent('''
    set -x

    deepspeed --module openrlhf.cli.train_dpo \\
       --save_path ./checkpoint/llama3-8b-dpo \\
       --save_steps -1 \\
       --logging_steps 1 \\
       --train_batch_size 256 \\
       --micro_train_batch_size 1 \\
       --pretrain meta-llama/Llama-3.1-8B \\
       --bf16 \\
       --max_epochs 1 \\
       --max_len 8192 \\
       --zero_stage 3 \\
       --learning_rate 5e-7 \\
       --beta 0.1 \\
       --dataset OpenRLHF/preference_dataset_mixture2_and_safe_pku \\
       --apply_chat_template \\
       --flash_attn \\
       --gradient_checkpointing
''')

# OpenRLHF's later releases: dotted flags, the command in a here-document
DOTTED = dedent('''
    set -x

    read -r -d '' training_commands <<EOF
    openrlhf.cli.train_sft \\
       --ckpt.output_dir ./checkpoint/llama3-8b-sft \\
       --train.batch_size 256 \\
       --train.micro_batch_size 2 \\
       --model.model_name_or_path meta-llama/Llama-3.1-8B \\
       --ds.param_dtype bf16 \\
       --data.max_len 4096 \\
       --ds.zero_stage 2 \\
       --ds.adam_offload \\
       --ds.lora.rank 64 \\
       --ds.attn_implementation flash_attention_2 \\
       --model.gradient_checkpointing_enable
    EOF

    if [[ ${1} != "slurm" ]]; then
        deepspeed --num_gpus 8 --module $training_commands
    fi
''')


def _runs(tmp_path: Path, text: str):
    (tmp_path / ".git").mkdir()
    path = tmp_path / "examples" / "scripts" / "train.sh"
    path.parent.mkdir(parents=True)
    path.write_text(text, encoding="utf-8")
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", cache=False)
    return Project(settings).runs_for(path, run_context(settings))


def test_openrlhf_flat_flags_state_the_run(tmp_path: Path):
    [run] = _runs(tmp_path, FLAT)
    plan = run.plan
    assert plan.value("model") == "meta-llama/Llama-3.1-8B"
    assert plan.get("model").origin.range.start.line == span(FLAT, "--pretrain «meta-llama/Llama-3.1-8B»")[0]
    assert plan.value("micro_batch") == 1
    assert plan.value("seq_len") == 8192
    assert plan.value("zero_stage") == 3
    assert plan.value("ds_bf16") is True
    assert plan.value("grad_ckpt") == 1
    assert plan.value("attention") == "flash"
    assert run.problem is None and run.setup is not None


def test_openrlhf_dotted_flags_in_a_here_document(tmp_path: Path):
    [run] = _runs(tmp_path, DOTTED)
    plan = run.plan
    assert plan.value("model") == "meta-llama/Llama-3.1-8B"
    line = span(DOTTED, "--model.model_name_or_path «meta-llama/Llama-3.1-8B»")
    origin = plan.get("model").origin.range
    assert (origin.start.line, origin.start.column, origin.end.line, origin.end.column) == line
    assert plan.value("micro_batch") == 2
    assert plan.value("seq_len") == 4096
    assert plan.value("zero_stage") == 2
    assert plan.value("offload_optimizer") is True
    assert plan.value("lora_r") == 64
    assert plan.value("world_size") == 8


def test_a_model_flag_alone_is_no_training_command(tmp_path: Path):
    text = "python -m openrlhf.cli.serve_rm --reward_pretrain OpenRLHF/Llama-3-8b-rm-700k --port 5000\n"
    runs = _runs(tmp_path, text)
    assert all(r.plan.value("model") is None for r in runs)


# OpenRLHF's examples/scripts/train_knowledge_distillation.sh (copied into ZetangForward/MyRLHF):
# the teacher is held beside the student, sharded by the same --zero_stage
DISTILLATION = dedent('''
    set -x

    read -r -d '' training_commands <<EOF
    openrlhf.cli.train_kd \\
       --max_len 2048 \\
       --dataset Open-Orca/OpenOrca \\
       --train_batch_size 256 \\
       --micro_train_batch_size 2 \\
       --pretrain meta-llama/Meta-Llama-3-8B-Instruct \\
       --teacher_model meta-llama/Meta-Llama-3-70B-Instruct \\
       --zero_stage 3 \\
       --bf16 \\
       --flash_attn \\
       --kd_coef 0.4 \\
       --teacher_offload \\
       --gradient_checkpointing
    EOF

    if [[ ${1} != "slurm" ]]; then
        deepspeed --module $training_commands
    fi
''')


def test_the_distillation_teacher_is_held_and_zero_3_is_no_needless_stage(tmp_path: Path):
    from memlint.lint.engine import Linter

    [run] = _runs(tmp_path, DISTILLATION)
    assert run.plan.value("teacher_model") == "meta-llama/Meta-Llama-3-70B-Instruct"
    assert [c.role for c in run.setup.companions] == ["teacher"]
    settings = Settings(root=tmp_path).with_overrides(gpu="h100", gpus=8, cache=False)
    found = [d.code for d in Linter(settings).lint_path(tmp_path / "examples" / "scripts" / "train.sh")]
    assert "ZRO001" not in found  # before: "fits with ZeRO-1", which would hold the whole 70B teacher


# ZetangForward/MyRLHF's long-context SFT: OpenRLHF's ring attention splits each 96k sequence
def _ring(size: int) -> str:
    return FLAT.replace("--max_len 8192", "--max_len 96000").replace(
        "--gradient_checkpointing", f"--gradient_checkpointing \\\n   --ring_attn_size {size} \\\n   --ring_head_stride 2")


def test_a_ring_attention_group_is_sequence_parallelism_memlint_does_not_size(tmp_path: Path):
    [run] = _runs(tmp_path, _ring(4))
    assert run.problem is not None and run.problem.startswith(
        "the run uses sequence parallelism (`--ring_attn_size 4`)")  # before: MEM001 for 96k tokens on one GPU


def test_near_miss_a_ring_of_one_rank_splits_nothing(tmp_path: Path):
    [run] = _runs(tmp_path, _ring(1))
    assert run.problem is None and run.setup is not None
