"""Which other models a run holds on the policy's GPUs, as each framework builds them, and how
many sequences a preference pair puts through the policy.

Read from the frameworks' source (the commits are those of ``../shared/realworld/README.md``):

* TRL (trl/trainer/dpo_trainer.py, grpo_trainer.py, rloo_trainer.py, experimental/ppo, gkd, gold):
  DPO, KTO, online DPO and PPO build a reference from the policy's own id unless the policy is a
  PEFT model (the adapter is disabled instead) or ``precompute_ref_log_probs`` is set; GRPO and
  RLOO build one only when ``beta`` is not 0 (defaults 0.0 and 0.05). PPO holds the reward model
  and trains the value model with the policy (``PolicyAndValueWrapper``); GKD and GOLD hold the
  teacher. ``prepare_deepspeed`` shards them under ZeRO-3 and runs them whole otherwise;
  ``prepare_fsdp`` shards them like the policy.
* LLaMA-Factory (train/trainer_utils.py ``create_ref_model``, ``create_reward_model``; hparams
  ``use_ref_model``): DPO (not ORPO/SimPO) and KTO hold a reference, ``ref_model`` or a copy of the
  base for a full fine-tune, none for LoRA; PPO's reward model is an adapter on the policy unless
  ``reward_model_type: full``; its value head sits on the policy.
* OpenRLHF (cli/train_dpo.py, train_ppo_ray.py): DPO holds ``--ref_pretrain`` (default the policy),
  ZeRO-3-sharded when the run is (``get_ds_eval_config``: stage 3 else 0); Ray PPO places each model
  on GPUs of its own unless ``--colocate_actor_ref`` / ``--colocate_all_models``.

DPO, ORPO, SimPO and CPO run a pair's chosen and rejected completions in one forward (TRL's
``DataCollatorForPreference``: "the first half of the batch corresponds to the chosen_ids and the
second half to the rejected_ids"; LLaMA-Factory's ``PairwiseDataCollatorWithPadding``; OpenRLHF's
``concatenated_forward``): twice the micro-batch's sequences.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memlint.catalog.models import UnknownModel
from memlint.catalog.models import resolve as resolve_model_name
from memlint.estimate import Architecture, UnsupportedArchitecture
from memlint.estimate.setup import Companion
from memlint.facts.plan import TrainingPlan

# the algorithms whose trainer builds a reference of its own
_REFERENCE = ("dpo", "kto", "online_dpo", "ppo", "grpo", "rloo", "openrlhf-dpo", "openrlhf-ppo")
# the KL coefficient's default where 0 means no reference (TRL GRPOConfig / RLOOConfig ``beta``,
# OpenRLHF ``--init_kl_coef``)
_KL_DEFAULT = {"grpo": 0.0, "rloo": 0.05, "openrlhf-ppo": 0.01}


# the algorithms that run each preference pair's chosen and rejected sequences in one forward
PAIRED = ("dpo", "orpo", "simpo", "cpo", "openrlhf-dpo", "paired")  # paired: a project's concatenated_forward


@dataclass
class Companions:
    models: tuple[Companion, ...] = ()
    notes: list[str] = field(default_factory=list)
    sequences_per_example: int = 1


def _architecture(name: str, base_dir: Path | None, offline: bool | None) -> Architecture | str:
    try:
        return resolve_model_name(name, base_dir, offline=offline).arch
    except (UnknownModel, UnsupportedArchitecture) as error:
        return str(error)


def companions(plan: TrainingPlan, policy: Architecture, base_dir: Path | None, offline: bool | None) -> Companions:
    """The models besides the policy that the plan's trainer holds on the policy's GPUs."""
    out = Companions()
    kind = str(plan.value("trainer_kind") or "")
    if kind in PAIRED:
        out.sequences_per_example = 2
    framework = plan.value("framework")
    openrlhf_ray = kind == "openrlhf-ppo"
    colocated = str(plan.value("colocated") or "")
    sleeping = colocated == "all-sleep"  # only meaningful with --colocate_all_models (checked below)
    if sleeping:
        colocated = "all"
    half = 2.0 if plan.value("frozen_dtype") in ("bf16", "fp16") else None  # LLaMA-Factory loads frozen models so

    def add(role: str, fact: str, **kind_of: Any) -> None:
        written = plan.get(fact)
        if written is None:
            return
        arch = _architecture(str(written.value), base_dir, offline)
        if isinstance(arch, str):
            out.notes.append(f"the {role} model {written.value} is not counted: {arch}")
            return
        out.models += (Companion(role, arch, weight_bytes=half, **kind_of),)

    copied = bool(plan.value("builds_reference"))  # a project trainer copied from TRL's DPOTrainer
    if kind in _REFERENCE or copied:
        kl = plan.get("kl_coef")
        precompute = plan.get("precompute_ref")
        if kind in _KL_DEFAULT and (float(kl.value) if kl is not None else _KL_DEFAULT[kind]) == 0.0:
            said = f"`{kl.note}` 0" if kl is not None else f"the default KL coefficient ({kind}: beta 0.0)"
            out.notes.append(f"no reference model: {said} loads none")
        elif (kind in ("dpo", "kto") or copied) and precompute is not None and precompute.value:
            out.notes.append("no reference model in training: `precompute_ref_log_probs` computes its log-probs "
                             "before the first step")
        elif openrlhf_ray and colocated not in ("all", "ref"):
            out.notes.append("the reference model runs on GPUs of its own (OpenRLHF Ray without "
                             "`--colocate_actor_ref`)")
        elif plan.get("reference_model") is not None:
            add("reference", "reference_model")
        else:
            # the trainer copies the policy's checkpoint; an adapter disabled stands in for it
            out.models += (Companion("reference", policy, weight_bytes=half,
                                     adapter_replaces=not kind.startswith("openrlhf")),)
    if openrlhf_ray and colocated != "all":
        if plan.get("reward_model") is not None or plan.get("value_model") is not None:
            out.notes.append("the reward model and the critic run on GPUs of their own (OpenRLHF Ray without "
                             "`--colocate_all_models`): the estimate is the actor's GPUs")
        return out
    add("reward", "reward_model", score_head=True)
    if sleeping and plan.get("value_model") is not None:
        out.notes.append("the critic sleeps (DeepSpeed sleep mode moves its states off the GPUs) during the "
                         "actor's step: not counted")
    else:
        add("value", "value_model", trains=True, score_head=True)
    if openrlhf_ray and colocated == "all":
        out.notes.append("vLLM engines share the GPUs (`--vllm_gpu_memory_utilization` of each GPU): not counted")
    if framework != "llamafactory" or kind in ("gkd", "gold"):
        add("teacher", "teacher_model")
    return out
