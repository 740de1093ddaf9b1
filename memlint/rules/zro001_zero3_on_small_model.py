"""ZRO001: ZeRO-3 / FSDP full sharding where a lighter stage fits."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Iterator

from memlint.catalog.gpus import lookup_gpu
from memlint.documents.kinds import DocumentKind
from memlint.estimate import Sharding, capacity_for, estimate_training
from memlint.facts.olmo_core_parallel import LIBRARY as OLMO_CORE
from memlint.facts.resolve import ResolvedRun
from memlint.lint.context import RuleContext
from memlint.model.diagnostics import Range, Severity
from memlint.model.units import GiB
from memlint.rules._memory import gib, lower_bound_reason
from memlint.rules.base import Example, Finding, Rule

_DS = """\
{
  "train_micro_batch_size_per_gpu": "auto",
  "gradient_accumulation_steps": "auto",
  "bf16": {"enabled": true},
  "zero_optimization": {
    "stage": 3,
    "overlap_comm": true,
    "contiguous_gradients": true,
    "stage3_gather_16bit_weights_on_model_save": true
  }
}
"""

_ARGS = """\
model_name_or_path: {model}
per_device_train_batch_size: 4
gradient_checkpointing: true
max_length: 2048
bf16: true
deepspeed: ds_zero3.json
output_dir: out
"""


# how much a lighter form still shards: a shared config lightened for every run must keep the most
_SHARDING_NEEDED = {"none": 0, "zero1": 1, "zero2": 2, "fsdp-grad-op": 2, "fsdp-hybrid": 2}

_LIGHTER = {
    Sharding.ZERO3: (Sharding.NONE, Sharding.ZERO1, Sharding.ZERO2),
    Sharding.FSDP_FULL: (Sharding.NONE, Sharding.FSDP_GRAD_OP),
    # HYBRID_SHARD gathers within a node and only all-reduces across nodes: SHARD_GRAD_OP over every
    # GPU sends more across nodes than it saves, so only DDP is lighter (FSDP's node-level ZeRO-2,
    # HYBRID_SHARD_ZERO2, is a form the estimate does not model)
    Sharding.FSDP_HYBRID: (Sharding.NONE,),
}
_NAMES = {
    Sharding.NONE: "plain data parallelism (DDP / ZeRO-0)",
    Sharding.ZERO1: "ZeRO-1",
    Sharding.ZERO2: "ZeRO-2",
    Sharding.FSDP_GRAD_OP: "FSDP SHARD_GRAD_OP",
}

_FSDP = """\
compute_environment: LOCAL_MACHINE
distributed_type: FSDP
fsdp_config:
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_offload_params: false
  fsdp_sharding_strategy: FULL_SHARD
  fsdp_state_dict_type: FULL_STATE_DICT
mixed_precision: bf16
num_machines: 1
num_processes: 8
"""

_QLORA_SH = """\
#!/bin/bash
accelerate launch --config_file examples/accelerate/fsdp_config.yaml \\
    src/train.py examples/extras/fsdp_qlora/llama3_lora_sft.yaml
"""

_LLAMAFACTORY = """\
{comment}### model
model_name_or_path: {model}
{quantization}
### method
stage: sft
do_train: true
finetuning_type: {method}

### dataset
dataset: alpaca_en_demo
template: qwen3
cutoff_len: 1024

### output
output_dir: saves/sft

### train
per_device_train_batch_size: 4
gradient_accumulation_steps: 1
learning_rate: 1.0e-4
bf16: true
"""

_SHARED_FSDP = {
    "src/train.py": "from llamafactory.train.tuner import run_exp\n\nrun_exp()\n",
    "examples/extras/fsdp_qlora/train.sh": _QLORA_SH,
    "examples/extras/fsdp_qlora/llama3_lora_sft.yaml": _LLAMAFACTORY.format(
        comment="", model="meta-llama/Meta-Llama-3-8B-Instruct", quantization="quantization_bit: 4\n", method="lora"),
    "examples/ascend/qwen3moe_full_sft_fsdp.yaml": _LLAMAFACTORY.format(
        comment="# accelerate launch --config_file examples/accelerate/fsdp_config.yaml \\\n"
                "#     src/train.py examples/ascend/qwen3moe_full_sft_fsdp.yaml\n\n",
        model="Qwen/Qwen3-30B-A3B-Instruct-2507", quantization="", method="full"),
}

_OWN_TRAINER_SCRIPT = """\
from transformers import AutoModelForCausalLM, TrainingArguments
from weighted_trainer import WeightedLossTrainer

model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-1.5B")
args = TrainingArguments(output_dir="out", per_device_train_batch_size=4, bf16=True,
                         gradient_checkpointing=True, deepspeed="ds_zero3.json")
trainer = WeightedLossTrainer(model=model, args=args, train_dataset=dataset)
trainer.train()
"""

_OWN_TRAINER = """\
import torch
from transformers import Trainer


class WeightedLossTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        outputs = model(**inputs)
        weights = inputs.pop("weights")
        loss = (outputs.loss * weights).mean()
        return (loss, outputs) if return_outputs else loss
"""

# A LLaMA-Factory checkout's KTransformers LoRA example (routed experts in host memory), launched
# through Accelerate with an FSDP2 file, as its docs do
_KT_FSDP2 = """\
compute_environment: LOCAL_MACHINE
distributed_type: FSDP
fsdp_config:
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_cpu_ram_efficient_loading: true
  fsdp_reshard_after_forward: true
  fsdp_state_dict_type: FULL_STATE_DICT
  fsdp_version: 2
mixed_precision: bf16
num_machines: 1
num_processes: 4 # Adjust based on your GPU count
use_cpu: false
"""

KT_SFT = """\
model_name_or_path: Qwen/Qwen3-30B-A3B-Instruct-2507
stage: sft
do_train: true
finetuning_type: lora
lora_rank: 8
lora_target: all
dataset: identity, alpaca_en_demo
template: qwen3_nothink
cutoff_len: 2048
output_dir: saves/qwen3moe_kt
per_device_train_batch_size: 1
gradient_accumulation_steps: 8
learning_rate: 1.0e-4
bf16: true
use_kt: true
"""

KT_FILES = {
    "src/llamafactory/__init__.py": "",
    "src/train.py": "from llamafactory.train.tuner import run_exp\n\n\ndef main():\n    run_exp()\n\n\n"
                    "if __name__ == \"__main__\":\n    main()\n",
    "docs/ktransformers.md": (
        "# KTransformers LoRA SFT\n\n```bash\nCUDA_VISIBLE_DEVICES=0,1,2,3 accelerate launch \\\n"
        "  --config_file fsdp2_kt_bf16.yaml \\\n  src/train.py examples/qwen3moe_lora_sft_kt.yaml\n```\n"),
    "examples/qwen3moe_lora_sft_kt.yaml": KT_SFT,
}

# With no target GPU set, the run is judged against the smallest of the usual data-centre
# training cards: a lighter stage that fits an A100 40GB fits every A100, H100, H200 and B200.
FLOOR_GPU = "a100-40gb"


class ZeroThreeOnSmallModel(Rule):
    """## What it does
    Reports ZeRO stage 3 (or FSDP ``FULL_SHARD``) on a model whose training state fits each
    GPU with a lighter stage — DDP, ZeRO-1 or ZeRO-2 (FSDP ``SHARD_GRAD_OP``) — and names the
    lightest one that fits, with its estimated per-GPU peak.

    With a target GPU (``gpu`` in ``[tool.memlint]`` or ``--gpu``) the run is judged on it.
    Without one it is judged against a stated floor, the A100 40GB: when the lighter stage fits
    that card, stage 3 is needless on any usual data-centre training GPU, and the message says
    which card it was judged on.

    A config shared by several runs is reported only when none of them needs stage 3 (a run
    of a model memlint cannot size counts as needing it); a config whose own comment launches
    it with this one (``# accelerate launch --config_file fsdp_config.yaml src/train.py
    qwen3moe_full_sft.yaml``) is one of those runs. When the launcher script that runs it
    also runs the same program under lighter stages (a benchmark sweep: DeepSpeed's autotuning
    examples launch ``z0`` ... ``z3`` from one script), stage 3 is one of the settings compared:
    the finding is an info that says so. A run of the project's tests (its script or its config
    under a ``tests/`` folder) is not reported: it uses stage 3 to check that stage 3 works.
    When the run's trainer is a project class that overrides ``compute_loss`` or
    ``training_step`` in a way memlint does not model, or a trainer that generates completions
    between steps (TRL's GRPO, RLOO, online DPO, PPO, GKD; OpenRLHF's hybrid engine: the KV
    cache of the rollouts, or a vLLM engine on the same GPUs, is not in the estimate), the
    estimate is only a lower bound, so "the lighter stage fits" is no verdict: the finding is an
    info that names what is not modelled. A config shared by several runs is judged so when any
    of them is such a run. A QLoRA run is judged like any other: ZeRO-3 with ``zero3_init_flag``
    and ``bnb_4bit_quant_storage`` shards the 4-bit weights so that a 70B model fits 40 GB cards
    (PEFT's ``deepspeed_config_z3_qlora.yaml``, written for 2 x 40 GB); on a card that holds the
    whole 4-bit model and its activations (the QLoRA paper trains a 65B model on one 48 GB GPU),
    the lighter stage fits too, and without a target GPU the 40 GB floor keeps it silent.
    Only forms the run's framework offers are proposed: KTransformers (LLaMA-Factory's ``use_kt``)
    runs as one process or under FSDP2, never under DDP, so its lighter form is FSDP2 without
    resharding after forward (``fsdp_reshard_after_forward: false``); OLMo-core's FSDP always
    reshards after forward, so it is offered no SHARD_GRAD_OP; nor is FSDP ``HYBRID_SHARD``, which
    gathers the parameters within a node and sends less across nodes than ``SHARD_GRAD_OP`` over
    every GPU would: only plain data parallelism is lighter than it.

    ## Why it matters
    Stage 3 shards the parameters themselves, so every forward and every backward all-gathers
    each layer's weights across the GPUs: about 1.5x the communication of ZeRO-2, and slower
    steps, often much slower across nodes. It is the right tool when the states do not fit;
    on a model that fits, the all-gathers only cost speed.
    """

    code = "ZRO001"
    name = "zero3-on-small-model"
    severity = Severity.WARNING
    judges_runs = True
    python_needs = None  # judges runs from their facts

    VALID = (
        Example(_ARGS.format(model="meta-llama/Llama-3.1-70B"), path="train_args.yaml",
                files={"ds_zero3.json": _DS}, settings={"gpu": "h100", "gpus": 8},
                title="A 70B model really needs ZeRO-3 on 8 H100s"),
        Example(_DS, path="ds_zero3.json", files={"train_args.yaml": _ARGS.format(model="meta-llama/Llama-3.1-8B")},
                settings={"gpus": 8},
                title="No target GPU: an 8B model's lighter stages do not fit an A100 40GB, so stage 3 is not needless"),
        Example(_DS, path="ds_zero3.json",
                files={"qwen_1.5b_args.yaml": _ARGS.format(model="Qwen/Qwen2.5-1.5B"),
                       "llama_70b_args.yaml": _ARGS.format(model="meta-llama/Llama-3.1-70B")},
                settings={"gpu": "h100", "gpus": 8},
                title="A config shared by a 1.5B and a 70B run: lightening it would break the 70B run"),
        Example(_DS, path="tests/training/ds_zero3.json",
                files={"tests/training/train_args.yaml": _ARGS.format(model="Qwen/Qwen2.5-1.5B").replace(
                    "deepspeed: ds_zero3.json", "deepspeed: tests/training/ds_zero3.json")},
                settings={"gpu": "h100", "gpus": 8},
                title="A test of the project runs a small model under ZeRO-3 to check that stage 3 works"),
        Example(_FSDP, path="examples/accelerate/fsdp_config.yaml", files=_SHARED_FSDP,
                settings={"gpu": "h100", "gpus": 8},
                title="An FSDP config that a 4-bit 8B demo uses and a 30B MoE config's own comment launches "
                      "with: the full fine-tune needs full sharding"),
    )
    INVALID = (
        Example(_DS, path="ds_zero3.json",
                files={"train_args.yaml": _ARGS.format(model="Qwen/Qwen2.5-1.5B")},
                settings={"gpu": "h100", "gpus": 8}, lines=(6,), message="ZeRO",
                title="ZeRO-3 for a 1.5B model on 8 H100s: DDP alone fits"),
        Example(_DS, path="ds_zero3.json",
                files={"train_args.yaml": _ARGS.format(model="Qwen/Qwen2.5-0.5B")},
                settings={"gpus": 8}, lines=(6,), message="judged against NVIDIA A100",
                title="No target GPU: a 0.5B model fits even an A100 40GB without stage 3"),
        Example(_DS, path="ds_zero3.json",
                files={"train.py": _OWN_TRAINER_SCRIPT, "weighted_trainer.py": _OWN_TRAINER},
                settings={"gpu": "h100", "gpus": 8}, lines=(6,), message="lower bound",
                title="A project Trainer overriding compute_loss: the lighter stage fits only by a lower bound, "
                      "an info"),
        Example(_KT_FSDP2, path="fsdp2_kt_bf16.yaml", files=KT_FILES, settings={"gpu": "h100", "gpus": 8},
                lines=(6,), message="with FSDP SHARD_GRAD_OP",
                title="KTransformers runs under FSDP2, not DDP: its lighter form is FSDP2 without resharding "
                      "after forward"),
    )

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        findings = [(run, finding) for run in ctx.runs for finding in self._per_run(ctx, run)]
        # a sharding config shared by several runs (LLaMA-Factory's ds_z3_config.json) is needless
        # only when no run that uses it needs stage 3: lightening it would break the large ones
        # (a run of an unsized model counts as needing it: nothing shows it fits a lighter stage)
        flagged = {id(run) for run, _ in findings}
        needed = {path for run in ctx.runs if id(run) not in flagged and run.trains for path in run.plan.documents}
        # a config whose own comment launches it with this one (``# accelerate launch --config_file
        # fsdp_config.yaml src/train.py qwen3moe_full_sft_fsdp.yaml``) is a user of it too
        if findings:
            needed |= {path for run in ctx.commented_runs() if run.trains and not any(self._per_run(ctx, run))
                       for path in run.plan.documents}
        # one finding per config line: several runs that use one shared config are one choice to
        # undo; the run with the largest peak under the lighter stage speaks for them all
        by_place: dict[tuple[str | None, Range], list[Finding]] = {}
        for _, finding in findings:
            if finding.path not in needed:
                by_place.setdefault((finding.path, finding.range), []).append(finding)
        for same in by_place.values():
            # a run whose estimate is a lower bound (a project's compute_loss, GRPO's generation)
            # speaks for a shared config: "every one fits it" holds only by the estimate
            bounded = [f for f in same if (f.data or {}).get("lower_bound")]
            # the config is one choice for every run: the run that needs the most sharding (a full
            # fine-tune's ZeRO-1 beside a projector-only stage's DDP, VideoLLaMA2's zero3.json) names
            # the lighter stage, then the largest peak under it
            worst = max(bounded or same, key=lambda f: (_SHARDING_NEEDED.get(str((f.data or {}).get("lighter")), 0),
                                                        (f.data or {}).get("peak_bytes", 0)))
            if len(same) > 1:
                each = "; every one fits it" if not bounded else ", by the estimate"
                worst = replace(worst, message=f"{worst.message} (the run that needs the most of the {len(same)} "
                                               f"runs that use this config{each})")
            yield worst

    def _per_run(self, ctx: RuleContext, run: ResolvedRun) -> Iterator[Finding]:
        cap = ctx.capacity_for(run)
        floor = ""
        if cap is None:
            cap = capacity_for(lookup_gpu(FLOOR_GPU), int(ctx.settings.cuda_context_gib * GiB),
                               ctx.settings.headroom)
            floor = (f"; no target GPU is set, so this is judged against {cap.gpu_name}, the smallest usual "
                     "training card (set `gpu` in [tool.memlint] or pass --gpu to judge against yours)")
        setup, arch = run.setup, run.arch
        if setup is None or arch is None or setup.sharding not in _LIGHTER or setup.world_size < 2:
            return
        if setup.offload_params:
            return  # parameter offload needs stage 3
        if _a_test(ctx, run):
            return  # a test of the sharding form: stage 3 is what it exercises
        fact = run.provenance.get("sharding")
        if fact is None or fact.origin is None:
            return
        for lighter in _lighter_forms(run):
            candidate = estimate_training(arch, setup.but(sharding=lighter, offload_optimizer=False), cap)
            if candidate.comfortable:
                current = estimate_training(arch, setup, cap)
                now = f" ({gib(current.peak_bytes)} now)"
                lower = lower_bound_reason(run)
                if lower is not None:
                    # what the trainer computes is not read: "fits" would be a claim on a lower bound
                    yield Finding(
                        range=fact.origin.range,
                        path=fact.origin.path,
                        message=(
                            f"{setup.sharding.value} on a {arch.n_params / 1e9:.1f}B model: by the estimate "
                            f"{_NAMES[lighter]} would fit each {cap.gpu_name} (~{gib(candidate.peak_bytes)} per "
                            f"GPU{now}), but {lower}, so the estimate is a lower bound: "
                            f"measure a step before lowering the stage{floor}"
                        ),
                        data={"lighter": lighter.value, "peak_bytes": candidate.peak_bytes, "lower_bound": True},
                        severity=Severity.INFO,
                    )
                    break
                swept = _swept_stages(ctx, run, fact.origin.path)
                sweep = ""
                if swept:
                    entry = Path(run.plan.entry).name
                    sweep = (f"; `{entry}` also runs this script with ZeRO stage{'s' if len(swept) > 1 else ''} "
                             f"{', '.join(map(str, swept))}: a sweep that compares the stages, where stage 3 "
                             "is one of the settings measured, not a choice to undo")
                yield Finding(
                    range=fact.origin.range,
                    path=fact.origin.path,
                    message=(
                        f"{setup.sharding.value} shards the parameters of a {arch.n_params / 1e9:.1f}B model "
                        f"that fits each {cap.gpu_name} with {_NAMES[lighter]}: "
                        f"~{gib(candidate.peak_bytes)} per GPU{now}; stage 3's all-gathers only cost speed here"
                        f"{floor}{sweep}"
                    ),
                    data={"lighter": lighter.value, "peak_bytes": candidate.peak_bytes},
                    severity=Severity.INFO if swept else None,
                )
                break


def _lighter_forms(run: ResolvedRun) -> tuple[Sharding, ...]:
    """The lighter forms the run's framework offers. KTransformers (routed experts in host memory)
    runs as one process or under FSDP2, whose Accelerate file carries its settings (LLaMA-Factory's
    docs: "Accelerate YAML contains FSDP2 settings only"; ZeRO-3 is refused): not under DDP, so its
    lighter form is FSDP2 without resharding after forward (``fsdp_reshard_after_forward: false``).
    OLMo-core offers ddp, fsdp and hsdp, and its FSDP always reshards after forward: no
    SHARD_GRAD_OP."""
    assert run.setup is not None
    forms = _LIGHTER[run.setup.sharding]
    if run.setup.experts_on_host:
        forms = tuple(form for form in forms if form != Sharding.NONE)
    if run.plan.value("parallel_library") == OLMO_CORE:
        forms = tuple(form for form in forms if form != Sharding.FSDP_GRAD_OP)
    return forms


_TEST_FOLDERS = frozenset({"tests", "test", "testing"})


def _a_test(ctx: RuleContext, run: ResolvedRun) -> bool:
    """Is the run a test of the project (its entry script or its sharding config under a
    ``tests/`` folder, or a pytest ``test_*.py`` module -- not a ``test_tune.sh`` benchmark: PEFT's ``make tests_training`` launches
    ``tests/training/training.py`` with ``tests/training/deepspeed_config.yaml``)? A test
    runs a tiny model under ZeRO-3 to check that stage 3 works, not to fit it."""
    root = Path(ctx.settings.root).resolve()
    for path in (run.plan.entry, *run.plan.documents):
        if not path:
            continue
        try:
            parts = Path(path).resolve().relative_to(root).parts
        except ValueError:
            continue
        if _TEST_FOLDERS & set(parts[:-1]) or (parts and parts[-1].startswith("test_") and parts[-1].endswith(".py")):
            return True
    return False


def _swept_stages(ctx: RuleContext, run: ResolvedRun, config: str) -> list[int]:
    """The lighter ZeRO stages the run's launcher script runs the same program with (DeepSpeed's
    autotuning examples: ``test_tune.sh z0`` ... ``z3``, one launch per stage under a branch):
    stage 3 is then one point of a comparison."""
    entry = run.plan.entry
    if ctx.kind_of(entry) != DocumentKind.SHELL:
        return []
    target = Path(config).resolve()
    launches = [f for f in ctx.facts_of(entry) if f.launches is not None]

    def configs(facts) -> list[Path]:
        found = (ctx.resolve_reference(str(r.value), entry) for r in facts.references)
        return [p.resolve() for p in found if p is not None]

    mine = next((f.launches.value for f in launches if f.launches is not None and target in configs(f)), None)
    if mine is None:
        return []
    stages: set[int] = set()
    for facts in launches:
        if facts.launches is None or facts.launches.value != mine:
            continue
        for path in configs(facts):
            for config_facts in ctx.facts_of(path):
                stage = config_facts.zero_stage
                if stage is not None and isinstance(stage.value, int) and stage.value < 3:
                    stages.add(stage.value)
    return sorted(stages)
