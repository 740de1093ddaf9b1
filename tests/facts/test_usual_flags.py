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
