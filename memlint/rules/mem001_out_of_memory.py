"""MEM001: the run's estimated per-GPU peak exceeds the target GPU's usable memory."""

from __future__ import annotations

from typing import Iterator

from memlint.lint.context import RuleContext
from memlint.model.diagnostics import Severity
from memlint.rules._memory import (
    alternative_clause,
    assumption_clause,
    describe_dominant,
    fitting_alternative,
    fix_hint,
    gib,
    longest_fitting,
    memory_finding,
    resting_assumptions,
    rests_on_data,
    rests_on_unread_config,
    short_data,
    unread_config_clause,
)
from memlint.rules.base import Example, Finding, Rule

_SFT = """\
from datasets import load_dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainingArguments
from trl import SFTConfig, SFTTrainer

MODEL_ID = "meta-llama/Llama-3.1-8B"

model = AutoModelForCausalLM.from_pretrained(MODEL_ID, torch_dtype="bfloat16")
tokenizer = AutoTokenizer.from_pretrained(MODEL_ID)

args = SFTConfig(
    output_dir="out/llama-sft",
    per_device_train_batch_size={batch},
    gradient_accumulation_steps={accum},
    gradient_checkpointing={ckpt},
    max_length=4096,
    bf16=True,
    learning_rate=2e-5,
)
trainer = SFTTrainer(model=model, args=args, train_dataset=load_dataset("trl-lib/Capybara", split="train"),
                     processing_class=tokenizer)
trainer.train()
"""


def _llama_args(body: str, gpu: str, line: int, message: str, title: str) -> Example:
    """A TrainingArguments YAML fully fine-tuning Llama-3.1-8B, reported on ``line``."""
    return Example(f"model_name_or_path: meta-llama/Llama-3.1-8B\n{body}output_dir: out\n", path="args.yaml",
                   settings={"gpu": gpu}, lines=(line,), message=message, title=title)


class OutOfMemory(Rule):
    """## What it does
    Estimates the peak GPU memory of each training run defined by a script or config —
    weights, gradients, optimizer states, master weights, activations, logits and loss
    buffers, sharding buffers — and reports the run when the peak exceeds what the target
    GPU can give its tensors: its capacity as ``torch.cuda.mem_get_info`` reports it, minus
    the CUDA context (1 GiB) and minus what the caching allocator loses to fragmentation
    (3.5 % of the rest), both measured on a real GPU (``docs/accuracy.md``).

    The finding sits on the line that sets the largest part of the peak (the micro-batch when
    activations dominate, the optimizer when its states do) and lists the cheapest changes
    that make the run fit, each with the GiB it saves. When the run's trainer is a project class
    whose ``compute_loss`` or ``training_step`` memlint does not model, the estimate is a lower
    bound: "exceeds" still holds, but a change is said to fit only "by the estimate".

    ## Why it matters
    "CUDA out of memory" is the most common failure in deep learning, and it is found late:
    after the job queued, loaded a 15 GB checkpoint and crashed on step one. Adam allocates its
    states at the first ``optimizer.step()``, so a run can survive its first forward and
    backward and still die.

    A verdict that rests on a fact no file states — plain data parallelism where nothing names
    a ZeRO or FSDP config (and sharding would make the run fit), a sequence length, micro-batch
    or GPU count memlint had to assume — is a warning, not an error, and its message names the
    assumption and where to state the truth. A length that is only a truncation limit above
    2048 tokens (``model_max_length``, ``max_length`` without packing or
    ``padding="max_length"``, LLaMA-Factory's ``cutoff_len`` outside pretraining and packing:
    each batch is padded to its longest sample) is such an
    assumption when batches of short samples (512 tokens) would fit: the verdict then holds
    only if the data has samples that long, which memlint cannot read: the message says the
    length at which a batch stops fitting ("a batch whose longest sample is at most ~N tokens
    fits"), to compare with the data. Over an epoch the longest batch is about the longest
    sample, and instruction and chat sets usually reach a limit of a few thousand tokens, so the
    verdict stays a warning; when only a projector trains on top of a frozen language model (a
    vision-language model's alignment stage: ``--tune_mm_mlp_adapter True``,
    ``--mm_tunable_parts mm_mlp_adapter``, ``--freeze_backbone True``), the data are image
    captions (LLaVA's BLIP-558k: ~600 tokens with the image) and the verdict is an info. A
    micro-batch the launch passes as a value memlint
    cannot evaluate (``--per_device_train_batch_size $PER_DEVICE_TRAIN_BATCH_SIZE``, computed in a
    sourced script) is unknown, never the default it replaces: the run is estimated at
    micro-batch 1, a lower bound, and reported only when that overflows, said as "at least". Shell
    arithmetic over variables the environment fills (``NNODES=${SLURM_JOB_NUM_NODES:-1}``) is not
    evaluated: its fallbacks describe one developer's node, not the job that runs. A run that names a DeepSpeed or Accelerate config
    memlint cannot find shards at a stage no readable file states: it gets no verdict that
    would change under ZeRO-3 (CFG015 names the missing file); one that overflows even sharded keeps
    its verdict, and the message says what ZeRO-3 would leave. Assumptions are weighed alone and together:
    two that each leave the verdict standing may overturn it together (a missing ZeRO-3 config and batches
    at a truncation limit), and then it rests on both. A config the project documents
    with several launches that differ only in their parallelism (a README's ``torchrun ... -m
    axolotl.cli.train x.yaml``, then the same with ``--deepspeed zero3.json``) is judged per
    launch: one that overflows while another fits is a warning that names both.

    bitsandbytes' paged optimizers (``optim: paged_adamw_32bit``, ``paged_adamw_8bit``,
    ``paged_lion_32bit``, ``bnb.optim.PagedAdamW``) keep the states of every tensor of at least
    100,000 values in CUDA managed memory, which the driver evicts to host memory when the GPU runs
    out and the step pages back: a run that overflows by no more than those states does not fail,
    it pages. That is an info saying how many GiB are paged each step (their 32-bit kernels keep
    fp32 states, also for bf16 weights: 8 bytes a parameter for AdamW).

    ## Settings
    The target GPU comes from ``gpu`` in ``[tool.memlint]`` or ``--gpu``; when neither names one,
    from the infrastructure file the project commits to ask for it — a slurm script's
    ``#SBATCH --gres=gpu:a100:8``, a SkyPilot task's ``accelerators: A100:8``, a Kubernetes
    manifest's ``nvidia.com/gpu`` limit with a node selector naming the product, a Modal app's
    ``gpu="H100:8"`` — and the finding names that file and line. ``gpus`` gives the GPU
    count when no launcher (or infrastructure file) states it; ``seq-len`` the sequence length when the code has none;
    ``cuda-context-gib`` and ``fragmentation`` what the usable memory leaves out.
    """

    code = "MEM001"
    name = "out-of-memory"
    severity = Severity.ERROR
    judges_runs = True
    python_needs = None  # judges runs from their facts

    VALID = (
        Example(
            _SFT.format(batch=2, accum=8, ckpt=True),
            settings={"gpu": "h100"},
            title="Llama-3.1-8B SFT on an H100 with checkpointing and micro-batch 2 (~75 GiB)",
        ),
        Example(
            "per_device_train_batch_size: 1\ngradient_checkpointing: true\nbf16: true\n"
            "model_name_or_path: Qwen/Qwen2.5-0.5B\nmax_length: 2048\noutput_dir: out\n",
            path="args.yaml",
            settings={"gpu": "l4"},
            title="A TrainingArguments YAML for a small model on an L4",
        ),
    )
    INVALID = (
        Example(
            _SFT.format(batch=8, accum=2, ckpt=False),
            settings={"gpu": "h100"},
            lines=(12,),
            message="exceeds",
            title="Micro-batch 8 of 4096 tokens without checkpointing: activations alone exceed 80 GB",
        ),
        _llama_args(
            "per_device_train_batch_size: 4\nmax_length: 2048\nbf16: true\ngradient_checkpointing: false\n",
            "a10g", 2, "A10G",
            "Full fine-tuning of an 8B model on a 24 GB A10G: activations of micro-batch 4 dominate",
        ),
        _llama_args(
            "per_device_train_batch_size: 1\nmax_length: 2048\nbf16: true\ngradient_checkpointing: true\n"
            "optim: paged_adamw_32bit\n",
            "h100", 6, "fits only by paging",
            "An 8B model on one H100 with bitsandbytes' paged AdamW: an info, the fp32 states page to host",
        ),
    )

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        for run in ctx.runs:
            cap = ctx.capacity_for(run)
            budget = ctx.budget(run) if cap is not None else None
            if cap is None or budget is None or budget.fits is not False:
                continue
            assumed = resting_assumptions(ctx, run)
            if rests_on_unread_config(assumed):
                continue
            alternative = fitting_alternative(ctx, run)
            also = ""
            if alternative is not None:  # the documented launches disagree on the form: no assumption
                assumed = [a for a in assumed if a.fact != "parallelism"]
                also = alternative_clause(ctx, run, alternative)
            if budget.fits_by_paging and run.lower_bound is None:
                yield memory_finding(ctx, run, budget, _paging_message(ctx, run, budget, also, assumed),
                                     assumed, Severity.INFO)
                continue
            severity = Severity.WARNING if assumed or alternative is not None else None
            if any(a.fact == "hostfile" for a in assumed):
                severity = Severity.INFO  # the machines of a hostfile it cannot read decide, and two would do
            condition = shorter = ""
            if rests_on_data(assumed) and run.setup is not None:  # the data decides
                condition = f" if a batch holds a sample of {run.setup.seq_len} tokens"
                longest = longest_fitting(ctx, run)
                shorter = f"; a batch whose longest sample is at most ~{longest} tokens fits" if longest else ""
                short = short_data(run)
                if short is not None:  # data known to be short: the condition is unlikely to be met
                    severity = Severity.INFO
                    shorter += f" ({short.note}: only the projector trains, on image-caption pairs)"
            at_least = f"at least {gib(budget.peak_bytes)} per GPU (a lower bound: {run.lower_bound})" \
                if run.lower_bound is not None else f"{gib(budget.peak_bytes)} per GPU"
            message = (
                f"estimated peak {at_least} exceeds the {gib(cap.usable_bytes)} "
                f"usable on {cap.gpu_name}{ctx.gpu_origin(run)}{condition}{also} (largest part: {describe_dominant(budget, run)})"
                f"{unread_config_clause(ctx, run, assumed)}{shorter}{fix_hint(ctx, run)}{assumption_clause(assumed)}"
            )
            yield memory_finding(ctx, run, budget, message, assumed, severity)


def _paging_message(ctx: RuleContext, run, budget, also: str, assumed: list) -> str:
    """A run that overflows only into its paged optimizer states: bitsandbytes keeps them in CUDA
    managed memory, which the driver evicts to host memory instead of failing an allocation."""
    cap = budget.capacity
    assert cap is not None and budget.margin_bytes is not None
    paged = budget.peak_phase.component("paged_optimizer_states")
    assert paged is not None
    optimizer = paged.label.split(": ", 1)[-1]
    return (
        f"estimated peak {gib(budget.peak_bytes)} per GPU exceeds the {gib(cap.usable_bytes)} usable on "
        f"{cap.gpu_name}{ctx.gpu_origin(run)}{also}, but {gib(paged.bytes)} of it are the states {optimizer} "
        f"keeps in CUDA managed memory: the run fits only by paging ~{gib(-budget.margin_bytes)} of optimizer "
        "state to host memory, moved back over PCIe at every optimizer step (a slowdown, not an out-of-memory "
        f"error){fix_hint(ctx, run, 'avoids the paging')}{assumption_clause(assumed)}"
    )
