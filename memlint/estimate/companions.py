"""The other models a run holds beside the one it trains, priced per GPU.

Preference and RL trainers keep more than the policy on each GPU: a frozen reference (DPO, KTO,
PPO, RLOO, GRPO with a KL term), a frozen reward model (PPO, online DPO), a frozen teacher (GKD,
GOLD) and, for PPO, a value model that trains with the policy (TRL wraps both in one module,
``PolicyAndValueWrapper``, and steps one optimizer over them). A frozen model costs its weights,
sharded only when the run shards parameters (ZeRO-3, FSDP full shard); a trained one costs what
the policy costs per parameter, and its activations.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from memlint.estimate.activations import profile
from memlint.estimate.architecture import Architecture
from memlint.estimate.budget import Component
from memlint.estimate.policy import POLICIES
from memlint.estimate.setup import Companion, Sharding, TrainingSetup
from memlint.estimate.states import count_parameters, shard_factor, stage, state_bytes

ROLE_NAMES = {"reference": "Reference model", "reward": "Reward model", "teacher": "Teacher model",
              "value": "Value model"}


@dataclass(frozen=True)
class CompanionParts:
    """What the companions add to each phase: always (weights, a trained one's optimizer
    states), where the policy's activations are alive, and where its gradients are."""

    persistent: tuple[Component, ...] = ()
    activations: tuple[Component, ...] = ()
    gradients: tuple[Component, ...] = ()
    step: tuple[Component, ...] = ()  # a trained one's share of the optimizer step's temporaries
    notes: tuple[str, ...] = ()
    host_bytes: int = 0


def body(companion: Companion) -> Architecture:
    """A sequence-classification model has a one-label score head instead of the vocabulary head."""
    arch = companion.arch
    if companion.score_head and arch.lm_head is not None:
        return replace(arch, lm_head=None, tie_word_embeddings=True)
    return arch


def held(companion: Companion, setup: TrainingSetup) -> bool:
    """Whether the run holds this companion at all: an adapter disabled stands in for a reference
    the trainer would build itself (TRL: ``is_peft_model(model)`` -> ``ref_model = None``)."""
    return not (companion.adapter_replaces and setup.lora is not None)


def _label(companion: Companion) -> str:
    return f"{ROLE_NAMES.get(companion.role, companion.role.title())} {companion.arch.name}"


def _frozen(companion: Companion, setup: TrainingSetup) -> tuple[Component, str, int]:
    arch = body(companion)
    per = companion.weight_bytes if companion.weight_bytes is not None else POLICIES[setup.precision].weight_bytes
    total = arch.n_params * per
    sharded = companion.follows_sharding and stage(setup) >= 3
    where = "whole on each GPU"
    host = 0
    if sharded:
        n = shard_factor(setup)
        total /= n
        where = f"sharded over {n} GPUs"
        if setup.offload_params:
            host, total, where = int(total * n), 0, "offloaded to the CPU with the policy's parameters"
    dtype = {4: "fp32", 2: POLICIES[setup.precision].half_dtype, 1: "8-bit"}.get(int(per), f"{per:g} B/param")
    note = f"{_label(companion)}: {arch.n_params / 1e9:.2f}B frozen parameters in {dtype}, {where}"
    key = f"{companion.role}_model_weights"
    label = f"{_label(companion)} weights (frozen, {dtype})"
    return Component(key, label, int(total), note), note, host


def _trained(companion: Companion, setup: TrainingSetup) -> CompanionParts:
    """A value model trained with the policy, in its precision and sharding; adapters, frozen
    blocks and the vision tower are the policy's business (TRL's peft_config wraps the policy only)."""
    arch = body(companion)
    own = replace(setup, companions=(), lora=None, frozen_layers=0, freeze_embeddings=False, freeze_head=False,
                  trained_blocks=None, trainable_params=None, trains_inputs=False, sampled_blocks=None, projection=None,
                  frozen_weight_bytes=None, image_tokens=0, experts_on_host=False)
    counts = count_parameters(arch, own)
    states = state_bytes(arch, own, counts)
    name = _label(companion)
    persistent = (
        Component(f"{companion.role}_model_weights", f"{name} weights ({states.weights_note})", int(states.weights)),
        Component(f"{companion.role}_model_optimizer_states", f"{name} optimizer states and master weights",
                  int(states.optimizer + states.master)),
    )
    gradients = (Component(f"{companion.role}_model_gradients", f"{name} gradients",
                           int(states.gradients + states.fp32_grads)),)
    activations = (Component(f"{companion.role}_model_activations", f"{name} activations",
                             int(profile(arch, own).stored() * setup.tokens)),)
    step = (Component(f"{companion.role}_model_step_temp", f"{name} optimizer step temporaries",
                      int(states.step_temp)),)
    note = (f"{name}: {arch.n_params / 1e9:.2f}B parameters trained with the policy (weights, gradients, "
            "optimizer states and activations counted)")
    return CompanionParts(persistent, activations, gradients, step, (note,), int(states.host))


def companion_parts(setup: TrainingSetup) -> CompanionParts:
    """The components every held companion adds, and a note naming each."""
    persistent: list[Component] = []
    activations: list[Component] = []
    gradients: list[Component] = []
    step: list[Component] = []
    notes: list[str] = []
    host = 0
    kept = [c for c in setup.companions if held(c, setup)]
    for companion in kept:
        if companion.trains:
            parts = _trained(companion, setup)
            persistent += parts.persistent
            activations += parts.activations
            gradients += parts.gradients
            step += parts.step
            notes += parts.notes
            host += parts.host_bytes
            continue
        component, note, off = _frozen(companion, setup)
        persistent.append(component)
        notes.append(note)
        host += off
    if any(not c.trains for c in kept) and setup.sharding in (Sharding.ZERO1, Sharding.ZERO2):
        notes.append("frozen models are not sharded below ZeRO-3: TRL runs each as a ZeRO stage-0 engine "
                     "(trl/models/utils.py, prepare_deepspeed)")
    return CompanionParts(tuple(persistent), tuple(activations), tuple(gradients), tuple(step), tuple(notes), host)
