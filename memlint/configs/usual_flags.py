"""The usual argparse flags of training CLIs outside the project, read as the run they state.

``deepspeed --module openrlhf.cli.train_dpo --pretrain meta-llama/Meta-Llama-3-8B --zero_stage 3
--micro_train_batch_size 1 --max_len 4096 --bf16 --gradient_checkpointing`` runs an entry point
installed with its framework: memlint cannot read its parser, but the flag names are the
framework's own, documented ones. The table below is OpenRLHF's (``openrlhf/cli/train_sft.py``,
``train_dpo.py``, ``train_rm.py``): the flat names of its releases up to 0.9 and the dotted ones of
its later releases (``--model.model_name_or_path``, ``--train.micro_batch_size``, ``--ds.zero_stage``).
OpenRLHF trains with DeepSpeed, so ``--bf16`` (``--ds.param_dtype bf16``) is DeepSpeed's bf16 (fp32
master weights). Each fact is located at the launcher's word that wrote it.
"""

from __future__ import annotations

from typing import Any, Callable

from memlint.facts.hf_args import lora_target_names
from memlint.facts.plan import RunFacts
from memlint.model.provenance import Sourced
from memlint.model.vocabulary import ATTENTION


def count(text: str) -> int | None:
    return int(text) if text.isdigit() and int(text) >= 1 else None


def _stage(text: str) -> int | None:
    return int(text) if text in ("0", "1", "2", "3") else None


def flag(text: str) -> bool | None:
    return {"true": True, "false": False}.get(text.lower())


def flag_count(text: str) -> int | None:
    """A switch read as the 0/1 the fact holds (gradient checkpointing)."""
    on = flag(text)
    return int(on) if on is not None else None


# flag (as ``option_key`` spells it) -> (fact, conversion of the written text)
FLAGS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "pretrain": ("model", str),
    "model.model_name_or_path": ("model", str),
    "actor.model_name_or_path": ("model", str),
    "micro_train_batch_size": ("micro_batch", count),
    "train.micro_batch_size": ("micro_batch", count),
    "max_len": ("seq_len", count),
    "data.max_len": ("seq_len", count),
    "zero_stage": ("zero_stage", _stage),
    "ds.zero_stage": ("zero_stage", _stage),
    "gradient_checkpointing": ("grad_ckpt", flag_count),
    "model.gradient_checkpointing_enable": ("grad_ckpt", flag_count),
    "adam_offload": ("offload_optimizer", flag),
    "ds.adam_offload": ("offload_optimizer", flag),
    "lora_rank": ("lora_r", count),
    "ds.lora.rank": ("lora_r", count),
    "target_modules": ("lora_targets", lora_target_names),
    "ds.lora.target_modules": ("lora_targets", lora_target_names),
    "load_in_4bit": ("quantization", lambda t: "nf4" if flag(t) else None),
    "ds.load_in_4bit": ("quantization", lambda t: "nf4" if flag(t) else None),
    "bf16": ("ds_bf16", flag),
    "ds.param_dtype": ("ds_bf16", lambda t: True if t == "bf16" else None),
    "flash_attn": ("attention", lambda t: "flash" if flag(t) else None),
    "attn_implementation": ("attention", lambda t: ATTENTION.get(t)),
    "ds.attn_implementation": ("attention", lambda t: ATTENTION.get(t)),
    "max_norm": ("grad_clip", lambda t: float(t) if t.replace(".", "", 1).isdigit() else None),
    "use_liger_kernel": ("fused_loss", flag),
    "ds.use_liger_kernel": ("fused_loss", flag),
    # the other models of DPO, PPO and distillation runs (train_dpo.py ``--ref_pretrain``, train_ppo_ray.py
    # ``--reward_pretrain`` / ``--critic_pretrain`` and their placement on the actor's GPUs, train_kd.py
    # ``--teacher_model``)
    "ref_pretrain": ("reference_model", str),
    "ref.model_name_or_path": ("reference_model", str),
    "reward_pretrain": ("reward_model", str),
    "reward.model_name_or_path": ("reward_model", str),
    "critic_pretrain": ("value_model", str),
    "critic.model_name_or_path": ("value_model", str),
    "teacher_model": ("teacher_model", str),  # train_kd.py: the distillation teacher, sharded like the student
    "init_kl_coef": ("kl_coef", lambda t: float(t) if t.replace(".", "", 1).isdigit() else None),
    "algo.kl.init_coef": ("kl_coef", lambda t: float(t) if t.replace(".", "", 1).isdigit() else None),
    "colocate_all_models": ("colocated", lambda t: "all" if flag(t) else None),
    "train.colocate_all": ("colocated", lambda t: "all" if flag(t) else None),
    "colocate_actor_ref": ("colocated", lambda t: "ref" if flag(t) else None),
    "train.colocate_actor_ref": ("colocated", lambda t: "ref" if flag(t) else None),
}
# OpenRLHF's entry points whose trainers hold a reference (and, for PPO, reward and critic models)
ENTRY_KINDS = {"train_dpo": "openrlhf-dpo", "train_ppo_ray": "openrlhf-ppo", "train_ppo": "openrlhf-ppo"}
MODEL_FLAGS = ("pretrain", "model.model_name_or_path", "actor.model_name_or_path")
RUN_FLAGS = ("micro_train_batch_size", "train.micro_batch_size", "zero_stage", "ds.zero_stage", "max_len",
             "data.max_len")


def usual_flags_facts(launcher: RunFacts) -> RunFacts | None:
    """The run a launcher's options state in the usual flag names (None unless they name a model
    and some of the run: a model flag alone is no training command)."""
    args = launcher.cli_args
    if not any(k in args for k in MODEL_FLAGS) or not any(k in args for k in RUN_FLAGS):
        return None
    facts = RunFacts(launcher.path, "shell", anchor=launcher.anchor)
    script = launcher.launches.value if launcher.launches is not None else "the script"
    facts.framework = Sourced("deepspeed", None, f"the usual training flags passed to {script} (not in the project)")
    entry = str(script).replace("/", ".").removesuffix(".py").rsplit(".", 1)[-1]
    if entry in ENTRY_KINDS and launcher.launches is not None:
        facts.trainer_kind = Sourced(ENTRY_KINDS[entry], launcher.launches.origin, f"OpenRLHF {entry}")
    for key, (name, convert) in FLAGS.items():
        written = args.get(key)
        if written is None or getattr(facts, name) is not None:
            continue
        try:
            value = convert(str(written.value))
        except (TypeError, ValueError):
            value = None
        if value is None or (name == "lora_r" and value == 0):
            continue
        setattr(facts, name, Sourced(value, written.origin, f"--{key}"))
    # DeepSpeed sleep mode offloads a training model's states while it does not train: with every
    # model colocated, the critic is off the GPUs during the actor's step (``--ds.enable_sleep``)
    sleep = args.get("ds.enable_sleep") or args.get("deepspeed_enable_sleep")
    if facts.colocated is not None and facts.colocated.value == "all" and sleep is not None and flag(str(sleep.value)):
        facts.colocated = facts.colocated.with_value("all-sleep")
    return facts
