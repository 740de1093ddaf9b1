"""Hydra / OmegaConf overrides a launch passes to its script, read where their keys' meaning is known.

``python3 -m verl.trainer.main_ppo actor_rollout_ref.model.path=Qwen/Qwen2-7B-Instruct
actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16 trainer.n_gpus_per_node=8`` runs a script
whose ``@hydra.main(config_path="config", config_name="ppo_trainer")`` composes a YAML config; each
``dotted.key=value`` word (``+key``/``++key`` adds one) replaces that key of it. The same form
serves ``OmegaConf.from_cli()`` scripts (EasyR1's ``python3 -m verl.trainer.main
config=examples/config.yaml worker.actor.model.model_path=...``, lingua's ``config=x.yaml``). A
key not overridden keeps the value of the config the script names.

Only keys whose meaning is documented in the framework's own config are read (``KEYS``, with
the file each comes from). verl's PPO trainers (and its forks') run the trained actor, its
reference model and a vLLM/SGLang rollout engine on the same GPUs, handing memory between them
phase by phase; memlint's estimate sizes one trained model, so such a run is reported as not
modelled -- with the model it trains named -- rather than judged with a number that is wrong.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any, Callable, Mapping

from memlint.configs.usual_flags import count, flag, flag_count
from memlint.facts.plan import RunFacts
from memlint.model.provenance import Sourced

# the script parses its command line as overrides of a config (Hydra, NeMo's hydra_runner, OmegaConf)
_ENTRY = re.compile(r"@\s*(?:hydra\.main|hydra_runner)\s*\(|\bOmegaConf\.from_cli\s*\(")
_HYDRA_MAIN = re.compile(r"@\s*(?:hydra\.main|hydra_runner)\s*\((?P<arguments>[^)]*)\)")
_ARGUMENT = re.compile(r"\b(config_path|config_name)\s*=\s*(?:[rRuU]?)(['\"])(?P<value>[^'\"]*)\2")
# framework entry points that are Hydra scripts, for a launch of one installed outside the project
ENTRY_MODULES = frozenset({"verl/trainer/main_ppo.py", "verl/trainer/fsdp_sft_trainer.py",
                           "verl/trainer/sft_trainer.py"})


def _text(text: str) -> str | None:
    return None if text.strip().lower() in ("null", "none", "~") else (text.strip() or None)


# key -> (fact, conversion of the written text). Sources, each the framework's own config:
#   verl PPO: verl/trainer/config/_generated_ppo_trainer.yaml (volcengine/verl b178a3cd56f5):
#     actor_rollout_ref.model.path "Huggingface model path"; actor.ppo_micro_batch_size_per_gpu the
#     actor's per-GPU micro-batch; model.enable_gradient_checkpointing; actor.fsdp_config.param_offload
#     / optimizer_offload the actor's FSDP CPU offloads
#   verl SFT: verl/trainer/config/sft_trainer.yaml (same commit), read by fsdp_sft_trainer.py:
#     model.partial_pretrain (the model loaded), data.micro_batch_size_per_gpu, data.max_length (the
#     padded sequence), model.enable_gradient_checkpointing, model.lora_rank (0: full fine-tuning)
#   EasyR1: examples/config.yaml (hiyouga/EasyR1 b44b311b669b): worker.actor.model.model_path,
#     worker.actor.micro_batch_size_per_device_for_update ("verl's actor.ppo_micro_batch_size_per_gpu")
KEYS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "actor_rollout_ref.model.path": ("model", _text),
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": ("micro_batch", count),
    "actor_rollout_ref.model.enable_gradient_checkpointing": ("grad_ckpt", flag_count),
    "actor_rollout_ref.actor.fsdp_config.param_offload": ("offload_params", flag),
    "actor_rollout_ref.actor.fsdp_config.optimizer_offload": ("offload_optimizer", flag),
    "model.partial_pretrain": ("model", _text),
    "data.micro_batch_size_per_gpu": ("micro_batch", count),
    "data.max_length": ("seq_len", count),
    "model.enable_gradient_checkpointing": ("grad_ckpt", flag_count),
    "model.lora_rank": ("lora_r", count),
    "worker.actor.model.model_path": ("model", _text),
    "worker.actor.micro_batch_size_per_device_for_update": ("micro_batch", count),
    "worker.actor.model.enable_gradient_checkpointing": ("grad_ckpt", flag_count),
}
# a PPO-style run's sequence: the prompt plus the generated response (verl's and EasyR1's ``data``)
PROMPT_AND_RESPONSE = ("data.max_prompt_length", "data.max_response_length")
# verl SFT's FSDP CPU offload (sft_trainer.yaml ``model.fsdp_config``): on, and of the parameters
SFT_CPU_OFFLOAD = ("model.fsdp_config.cpu_offload", "model.fsdp_config.offload_params")
# the GPUs a Ray trainer places its workers on: per node x nodes (verl's and EasyR1's ``trainer``);
# verl's SFT trainer runs on the GPUs torchrun starts instead
GPUS = ("trainer.n_gpus_per_node", "trainer.nnodes")
# the model of an actor that shares its GPUs with a rollout engine (verl's hybrid engine), and the
# share of each GPU that engine reserves
HYBRID_ENGINE = {"actor_rollout_ref.model.path": "actor_rollout_ref.rollout.gpu_memory_utilization",
                 "worker.actor.model.model_path": "worker.rollout.gpu_memory_utilization"}
# sequence parallelism (DeepSpeed Ulysses) splits each sequence over GPUs: not modelled
# (verl SFT's top-level key; a PPO actor's is moot, the hybrid engine being unmodelled already)
SEQUENCE_PARALLEL = ("ulysses_sequence_parallel_size",)
HYBRID_ENGINE_ADVICE = ("memlint sizes one trained model; size this run with the framework's own guidance (verl's "
                        "docs/perf/perf_tuning.rst: micro-batches, offloads, gpu_memory_utilization) and silence "
                        "this note with `# memlint: ignore[MEM003]`")
SEQUENCE_PARALLEL_ADVICE = ("memlint sizes data parallelism, ZeRO and FSDP only; silence this note with "
                            "`# memlint: ignore[MEM003]`")


def is_entry(script_text: str | None, script_path: str) -> bool:
    """Does the launched script parse its command line as config overrides?"""
    if script_text is not None:
        return _ENTRY.search(script_text) is not None
    return posixpath.normpath(script_path.replace("\\", "/")).lstrip("./") in ENTRY_MODULES


def config_named(script_text: str, launched_name: str | None = None) -> str | None:
    """The config file ``@hydra.main(config_path="config", config_name="ppo_trainer")`` names,
    relative to the script's folder (None when not written as plain strings); a launch's
    ``--config-name X`` replaces the name, in the same folder."""
    found = _HYDRA_MAIN.search(script_text)
    if found is None:
        return None
    written = {m.group(1): m.group("value") for m in _ARGUMENT.finditer(found.group("arguments"))}
    name = launched_name or written.get("config_name")
    if not name:
        return None
    name = name if name.endswith((".yaml", ".yml")) else name + ".yaml"
    return posixpath.join(written.get("config_path") or ".", name)


def hydra_facts(launcher: RunFacts, defaults: Mapping[str, Sourced[Any]]) -> RunFacts | None:
    """The facts a launch's overrides state, over ``defaults`` (the values the script's config
    gives the same dotted keys); None when they state no model of a known key."""
    written: dict[str, Sourced[Any]] = {**defaults, **{k: v for k, v in launcher.overrides.items()}}
    facts = RunFacts(launcher.path, "shell", anchor=launcher.anchor)
    for key, (name, convert) in KEYS.items():
        fact = written.get(key)
        if fact is None or fact.value is None or getattr(facts, name) is not None:
            continue
        value = convert(str(fact.value))
        if value is not None and not (name == "lora_r" and value == 0):
            setattr(facts, name, Sourced(value, fact.origin, f"{key}={fact.value}"))
    model = facts.model
    if model is None:
        return None
    facts.framework = Sourced("plain", model.origin, f"the script's config key {model.note}")
    prompt, response = (written.get(k) for k in PROMPT_AND_RESPONSE)
    if facts.seq_len is None and prompt is not None and response is not None:
        lengths = [count(str(f.value)) for f in (prompt, response) if f.value is not None]
        if len(lengths) == 2 and None not in lengths:
            facts.seq_len = Sourced(sum(int(n) for n in lengths if n is not None), response.origin,
                                    f"{PROMPT_AND_RESPONSE[0]} + {PROMPT_AND_RESPONSE[1]}")
    offload, params = (written.get(k) for k in SFT_CPU_OFFLOAD)
    if facts.offload_params is None and offload is not None and params is not None \
            and flag(str(offload.value)) is not None and flag(str(params.value)) is not None:
        # fsdp_sft_trainer.py: ``CPUOffload(offload_params=...)`` only when ``cpu_offload`` is on; with
        # the parameters on the CPU their gradients and the optimizer step are there too
        on = bool(flag(str(offload.value))) and bool(flag(str(params.value)))
        where = params if flag(str(offload.value)) else offload
        facts.offload_params = Sourced(on, where.origin, " and ".join(SFT_CPU_OFFLOAD))
        facts.offload_optimizer = Sourced(on, where.origin, " and ".join(SFT_CPU_OFFLOAD))
    per_node, nodes = (written.get(k) for k in GPUS)
    hybrid = _hybrid_engine(model)
    if hybrid is not None and launcher.world_size is None and per_node is not None and per_node.value is not None:
        per_node_count = count(str(per_node.value))
        node_count = count(str(nodes.value)) if nodes and nodes.value else 1
        if per_node_count is not None and node_count is not None:
            facts.gpus_per_node = Sourced(per_node_count, per_node.origin, GPUS[0])
            facts.world_size = Sourced(per_node_count * node_count, per_node.origin, " x ".join(GPUS))
            # a bare ``python3 -m ...main_ppo`` is Ray's driver: the workers it places are the run
            facts.single_process = Sourced(False, per_node.origin, "Ray places one worker per GPU")
    _unmodelled(facts, written, hybrid)
    return facts


def _hybrid_engine(model: Sourced[Any]) -> str | None:
    """The hybrid-engine key that named the model (None for a model trained on its own)."""
    return next((key for key in HYBRID_ENGINE if model.note is not None and model.note.startswith(key + "=")), None)


def _unmodelled(facts: RunFacts, written: Mapping[str, Sourced[Any]], hybrid: str | None) -> None:
    """What the estimate does not model: the hybrid engine's shared GPUs, sequence parallelism."""
    model = facts.model
    assert model is not None
    if hybrid is not None:
        reserved = written.get(HYBRID_ENGINE[hybrid])
        held = f" (`{HYBRID_ENGINE[hybrid]}={reserved.value}`)" if reserved and reserved.value else ""
        what = (f"verl's actor-rollout hybrid engine: the trained actor `{model.value}` shares each GPU with "
                f"the rollout engine{held} and, when a KL term is used, the reference model")
        facts.unmodelled = Sourced((what, HYBRID_ENGINE_ADVICE), model.origin, hybrid)
        return
    for key in SEQUENCE_PARALLEL:
        degree = written.get(key)
        size = count(str(degree.value)) if degree is not None and degree.value is not None else None
        if size is not None and size > 1:
            facts.unmodelled = Sourced((f"sequence parallelism (`{key}={size}`)", SEQUENCE_PARALLEL_ADVICE),
                                       degree.origin if degree else None, key)
            return


# every key read, from the overrides or from the config
READ_KEYS = (*KEYS, *PROMPT_AND_RESPONSE, *SFT_CPU_OFFLOAD, *GPUS, *HYBRID_ENGINE.values(), *SEQUENCE_PARALLEL)


def config_values(value: Any, located: Callable[[tuple[str, ...]], Any], name: str) -> dict[str, Sourced[Any]]:
    """The values a loaded config (``value``, its nested mappings) gives the keys read, each
    located by ``located(path)`` in the file called ``name``."""
    out: dict[str, Sourced[Any]] = {}
    for key in READ_KEYS:
        path = tuple(key.split("."))
        current = value
        for part in path:
            current = current.get(part) if isinstance(current, dict) else None
        if isinstance(current, bool):
            current = "true" if current else "false"
        if isinstance(current, (int, float, str)):
            out[key] = Sourced(str(current), located(path), f"{key} in {name}")
    return out
