"""What documents say about a training run, each value with the place that said it.

A training script, a DeepSpeed JSON, an Axolotl YAML or a launcher each state some facts about
a run (``RunFacts``); none states them all. A run's ``TrainingPlan`` merges the facts of its
entry document with those of the documents it links (``deepspeed="ds.json"``, an accelerate
config, a launcher's ``--nproc_per_node``). Fields are ``None`` when no document says anything;
``facts.resolve`` turns a plan into the estimator's inputs and names what it had to assume.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from memlint.model.diagnostics import Range
from memlint.model.provenance import Location, Sourced
from memlint.python.options import CONSTANT_PREFIX


@dataclass
class RunFacts:
    """Facts one document states about a run. Every field is optional."""

    path: str
    kind: str  # "python", "deepspeed", "hf-args", "accelerate", "axolotl", "shell", ...
    # Where a run's findings go when no fact points somewhere better (a Trainer(...) call,
    # the first key of a config).
    anchor: Location | None = None

    # ---- whether the run trains at all: ``do_train: false`` (a prediction run of a training
    # script) says it does not
    trains: Sourced[bool] | None = None

    # ---- model
    model: Sourced[str] | None = None  # Hub id, alias or path as written
    load_dtype: Sourced[str] | None = None  # "fp32", "bf16", "fp16", "auto"
    quantization: Sourced[str] | None = None  # "nf4", "fp4", "int8"
    double_quant: Sourced[bool] | None = None
    attention: Sourced[str] | None = None  # "eager", "sdpa", "flash"

    # ---- batch and sequence
    micro_batch: Sourced[int] | None = None
    seq_len: Sourced[int] | None = None
    # the key whose value ``seq_len`` is, when it is a truncation limit (``model_max_length``)
    seq_len_limit: Sourced[str] | None = None
    # an encoder-decoder's two lengths when the script tokenizes inputs and labels apart
    # (run_summarization's ``max_source_length`` / ``max_target_length``); ``seq_len`` is the longer
    source_len: Sourced[int] | None = None
    target_len: Sourced[int] | None = None
    # ``GradCache(chunk_sizes=N)``: the batch runs forward and backward N samples at a time
    gradient_cache_chunk: Sourced[int] | None = None
    # only a projector on top of a frozen LLM trains: a vision-language model's alignment stage
    # (LLaVA's ``--tune_mm_mlp_adapter True``, ``--mm_tunable_parts mm_mlp_adapter``,
    # ``--freeze_backbone True``), which trains on image-caption pairs
    projector_only: Sourced[bool] | None = None
    # what makes every sequence as long as that limit: "packing", 'padding="max_length"', ...
    full_length: Sourced[str] | None = None
    grad_accum: Sourced[int] | None = None
    global_batch: Sourced[int] | None = None  # DeepSpeed train_batch_size

    # ---- precision, as each framework states it
    framework: Sourced[str] | None = None  # "hf-trainer", "trl", "accelerate", "lightning", "deepspeed", "plain"
    mixed: Sourced[str] | None = None  # trainer/accelerate/lightning mixed precision: "bf16", "fp16", "no"
    autocast: Sourced[str] | None = None  # torch.autocast dtype used in a hand-written loop
    half_model: Sourced[str] | None = None  # model.half() / model.to(torch.bfloat16): "fp16", "bf16"
    # ``deepspeed --hostfile F`` without --num_nodes: the run spans the machines F lists, which memlint does not read
    unread_hostfile: Sourced[str] | None = None
    # from_pretrained names a dtype, known or not: the pinned release's default load dtype does not apply
    load_dtype_written: Sourced[bool] | None = None
    lightning_precision: Sourced[str] | None = None  # "bf16-mixed", "bf16-true", "16-mixed", "32"
    ds_bf16: Sourced[bool] | None = None  # DeepSpeed "bf16": {"enabled": ...}
    # the legacy "bfloat16": {"enabled": "auto"}, which no Trainer fills in: whether it trains in
    # bf16 is the pinned DeepSpeed's to say (``memlint.facts.pinned_defaults.pinned_auto_bf16``)
    ds_bf16_unfilled: Sourced[bool] | None = None
    # the completion limit of the script's own generation (vLLM ``SamplingParams(max_tokens=...)``,
    # ``generate(max_new_tokens=...)``): a lower bound of what an RL loop of its own trains on
    generation_len: Sourced[int] | None = None
    ds_fp16: Sourced[bool] | None = None

    # ---- optimizer and memory savers
    optimizer: Sourced[str] | None = None  # memlint name ("adamw", "adamw-fused", ...)
    grad_clip: Sourced[float] | None = None  # max_grad_norm / DeepSpeed gradient_clipping
    grad_ckpt: Sourced[int] | None = None  # 0 off, 1 every layer, k every k-th
    fused_loss: Sourced[bool] | None = None
    loss_chunks: Sourced[int] | None = None  # torchtune's CEWithChunkedOutputLoss(num_output_chunks)
    loss_compiled: Sourced[bool] | None = None  # that loss compiled (torchtune's ``compile: True``)
    # a decoder loaded as *ForSequenceClassification (a reward or value model): its label count
    score_head: Sourced[int] | None = None
    keep_logits: Sourced[bool] | None = None

    # the loaded model's weights are all frozen and the script trains modules of its own on top
    # (Medusa's heads, a probe): the code that freezes it (memlint.facts.script_freezing)
    frozen_model: Sourced[str] | None = None
    # the loaded model is frozen whole, then the parameters whose names match a selection read at
    # run time train again (Spectrum's regexes from a file): the selection, at the unfreezing loop
    partly_frozen: Sourced[str] | None = None
    # the regexes that pick the parameters which train, everything else frozen (Axolotl's
    # ``unfrozen_parameters``, a Spectrum file): memlint.estimate.parameter_names
    trained_parameters: Sourced[tuple[str, ...]] | None = None
    trained_parameters_file: Sourced[str] | None = None  # a Spectrum file holding them

    # ---- freeze tuning: only the last N transformer blocks train; embeddings, head and the other
    # blocks are frozen and stay in ``frozen_dtype`` while the trained ones are upcast
    trained_layers: Sourced[int] | None = None
    frozen_dtype: Sourced[str] | None = None  # "bf16", "fp16"

    # ---- adapters
    lora_r: Sourced[int] | None = None
    lora_targets: Sourced[tuple[str, ...]] | None = None
    lora_dropout: Sourced[float] | None = None
    adapter_method: Sourced[str] | None = None  # "oft" (PEFT's orthogonal fine-tuning); None: LoRA
    # the config of a PEFT method the estimate does not model, given to the wrap ("HiraConfig"): a
    # name, so that ``if args.adapter == "dora": DoraConfig(...)`` binds to the option choosing it
    peft_method: Sourced[str] | None = None
    oft_block_size: Sourced[int] | None = None

    # ---- blocks that train when they are not the last ones: LLaMA Pro's expanded blocks
    # (``block_layout`` "interleaved"), BAdam's one active block at a time ("each in turn")
    trained_blocks: Sourced[int] | None = None
    block_layout: Sourced[str] | None = None
    # ---- LISA (layer-wise importance sampling): every few steps N decoder blocks, sampled anew,
    # train beside the embeddings and the head; the others are frozen (LMFlow's ``--use_lisa`` with
    # ``--lisa_activated_layers``, Axolotl's ``lisa_n_layers`` with ``lisa_step_interval``)
    layer_sampling: Sourced[bool] | None = None
    sampled_blocks: Sourced[int] | None = None
    # blocks LLaMA-Factory's scripts/llama_pro.py added to the base model (its --num_expand)
    expanded_blocks: Sourced[int] | None = None
    # GaLore / APOLLO low-rank optimizer states: (name, rank, layer-wise, target modules)
    projection: Sourced[tuple[str, int, bool, tuple[str, ...]]] | None = None
    # KTransformers keeps the routed experts in host memory and runs them on the CPU
    experts_on_host: Sourced[bool] | None = None
    # Megatron's tensor / pipeline / expert parallelism, or FSDP's expert parallelism (estimate.ModelParallel)
    model_parallel: Sourced[Any] | None = None

    # ---- vision-language models: the pixel budget an image is resized into (LLaMA-Factory's
    # ``image_max_pixels``) and whether the vision tower trains
    image_max_pixels: Sourced[int] | None = None
    freeze_vision_tower: Sourced[bool] | None = None

    # ---- other models the run holds: preference and RL training, distillation
    # the trainer's algorithm ("dpo", "kto", "ppo", "grpo", "rloo", "online_dpo", "gkd", "gold"), or
    # an OpenRLHF entry point's ("openrlhf-dpo", "openrlhf-ppo"): which models it builds besides the policy
    trainer_kind: Sourced[str] | None = None
    reference_model: Sourced[str] | None = None  # a reference named apart from the policy
    # a project trainer that builds its own reference from the policy when given none, as TRL's
    # DPOTrainer does (``facts/project_trainers.py``): counted like DPO's
    builds_reference: Sourced[bool] | None = None
    reward_model: Sourced[str] | None = None
    value_model: Sourced[str] | None = None  # trains with the policy (PPO's critic)
    teacher_model: Sourced[str] | None = None
    precompute_ref: Sourced[bool] | None = None  # reference log-probs computed before training
    kl_coef: Sourced[float] | None = None  # GRPO/RLOO ``beta``, OpenRLHF's KL coefficient: 0 holds no reference
    # OpenRLHF's Ray PPO places each model on GPUs of its own unless colocated: "all" (every model on
    # the actor's GPUs), "ref" (the reference beside the actor)
    colocated: Sourced[str] | None = None

    # ---- distribution
    world_size: Sourced[int] | None = None
    # a bare ``python script.py`` launch: one process, whatever GPUs it sees (no DDP)
    single_process: Sourced[bool] | None = None
    gpus_per_node: Sourced[int] | None = None
    zero_stage: Sourced[int] | None = None
    offload_optimizer: Sourced[bool] | None = None
    offload_params: Sourced[bool] | None = None
    fsdp: Sourced[str] | None = None  # "full", "hybrid", "grad-op"
    # the library that shards the run when it offers fewer forms than ZeRO/FSDP ("olmo-core": ddp,
    # fsdp and hsdp, no SHARD_GRAD_OP)
    parallel_library: Sourced[str] | None = None
    # what the run does that the estimate does not model (Megatron's model parallelism, GaLore's
    # projected optimizer states, ...), as the config writes it, or (that, what the user can do)
    unmodelled: Sourced[str | tuple[str, str]] | None = None
    # the GPUs that hold one copy of the model between them, tensor x pipeline parallel as a launch
    # writes them (``--pipe_parallel_size 4 --model_parallel_size 1``): the data-parallel world that
    # DeepSpeed's batch sizes count is the world divided by it
    model_split_degree: Sourced[int] | None = None
    # what the trainer computes that memlint cannot read (a project Trainer overriding
    # ``compute_loss``): the estimate is then a lower bound -- "exceeds" holds, "fits" does not
    lower_bound: Sourced[str] | None = None
    # ``from_pretrained(device_map="auto")`` in the trained script: one process spreads the layers
    # over every GPU it sees (naive model parallelism), which DDP cannot be combined with
    device_map: Sourced[str] | None = None
    reduce_bucket: Sourced[float] | None = None
    allgather_bucket: Sourced[float] | None = None
    prefetch_bucket: Sourced[float] | None = None
    max_live_parameters: Sourced[float] | None = None
    gpu: Sourced[str] | None = None  # target GPU named in a document (rare)
    # a DeepSpeed or Accelerate config the run names that memlint cannot find (the path as
    # written): the run shards at a stage no file memlint can read states
    unread_parallelism: Sourced[str] | None = None
    # arguments classes a launched script parses that memlint cannot read (their names): the
    # TrainingArguments defaults the run falls back to are assumptions
    unread_arguments: Sourced[str] | None = None
    # the micro-batch passed as a value memlint cannot evaluate (a script's
    # ``per_device_train_batch_size=config["training"]["batch_size"]``, a launch's ``$BS``), as
    # written: the run's micro-batch is unknown, neither the script's nor the library's default
    micro_batch_unknown: Sourced[str] | None = None

    # ---- links to other documents and DeepSpeed "auto" placeholders
    references: list[Sourced[str]] = field(default_factory=list)  # paths as written
    # configs a script names only when an option is switched (``deepspeed="ds.json" if
    # args.deepspeed else None``): (the options, "if"/"ifnot" as for an ``if:`` binding, the path)
    switched_references: list[tuple[tuple[str, ...], str, Sourced[str]]] = field(default_factory=list)
    auto_keys: list[Sourced[str]] = field(default_factory=list)  # DeepSpeed keys set to "auto"

    # ---- command lines: a launcher passes options to a script that parses them
    # script side: CLI option (without dashes, "-" as "_") -> the facts it sets, e.g.
    # {"per_device_train_batch_size": ("micro_batch",)} for HfArgumentParser scripts
    cli_bindings: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # options whose default is a constant imported from another module: option -> (module as
    # written, name), e.g. {"input_model": (".consts", "DEFAULT_INPUT_MODEL")}
    option_constants: dict[str, tuple[str, str]] = field(default_factory=dict)
    # launcher side: the options it passes to the script it runs, values as written
    cli_args: dict[str, Sourced[str]] = field(default_factory=dict)
    # options it passes with a value it cannot know (``--per_device_train_batch_size $BS``): the
    # script's default for them is not what runs
    cli_unknown: dict[str, Sourced[str]] = field(default_factory=dict)
    # the environment a launch gives its script (``export MODEL=x``, ``BATCH=2 python train.py``)
    # as ``$NAME`` -> value, which replaces a script's ``os.getenv`` fallback; those it sets to a
    # value it cannot know (``export MODEL=$1``). Kept apart from the options: never a command line
    environment: dict[str, Sourced[str]] = field(default_factory=dict)
    environment_unknown: dict[str, Sourced[str]] = field(default_factory=dict)
    # Hydra/OmegaConf overrides it passes (``actor_rollout_ref.model.path=Qwen/Qwen2-7B``, ``+data.x=1``):
    # the dotted key (without ``+``/``++``) -> the value as written, None where it cannot know it
    overrides: dict[str, Sourced[str | None]] = field(default_factory=dict)
    launches: Sourced[str] | None = None  # the script a launcher runs (path as written)
    # script side: the option whose file the script parses as all its arguments
    # (``HfArgumentParser(...).parse_json_file(json_file=args.train_args_file)``: "train_args_file";
    # "1" for ``parse_yaml_file(sys.argv[1])``), located at the parse, and the option's default path
    arguments_file: Sourced[str] | None = None
    arguments_default: Sourced[str] | None = None
    # the command line wins over that file's keys (xRAG: ``if getattr(args, k) is None: setattr(args, k, v)``)
    arguments_under_cli: bool = False
    # the caller's positional argument (1 for ``$1``) the launcher passes to its script as a
    # config (``accelerate launch ... finetune.py "$2"``): the config is the caller's to name
    positional_config: Sourced[int] | None = None
    # the config a caller named for that argument (a documented ``sh launch.sh 8 cfg.yaml``):
    # its fields are the script's arguments, so they beat the script's defaults
    bound_config: Sourced[str] | None = None
    # what a launcher builds from its caller's arguments (``src/{--task}.py``, ``--config
    # recipes/{--model}/config_{--config}.yaml``, ``--config_file accelerate/{--accelerator}.yaml``):
    # the script, the config it passes the script, the configs it names; each call fills them in
    template_launches: Sourced[str] | None = None
    template_config: Sourced[str] | None = None
    template_references: list[Sourced[str]] = field(default_factory=list)

    def passed(self) -> dict[str, Sourced[str]]:
        """What the launch hands its script, options and environment (``$NAME``) together."""
        return {**self.cli_args, **self.environment}

    def passed_unknown(self) -> dict[str, Sourced[str]]:
        """The options and environment variables the launch sets to values it cannot know."""
        return {**self.cli_unknown, **self.environment_unknown}

    def stated(self) -> dict[str, Sourced[Any]]:
        """The facts this document states (non-None Sourced fields)."""
        out = {}
        for name in FACT_NAMES:
            value = getattr(self, name)
            if isinstance(value, Sourced):
                out[name] = value
        return out


# what to do with a run that trains a PEFT method other than LoRA (``peft_method``)
PEFT_METHOD_ADVICE = ("memlint sizes LoRA adapters only; other PEFT methods train their own parameter sets (and "
                      "some, like OSF, train every weight), so measure one step with `torch.cuda.max_memory_allocated()`")

# what to do with a run that splits each sequence over several GPUs (``unmodelled``): ring or
# Ulysses attention, context parallelism
SEQUENCE_SPLIT_ADVICE = ("memlint's estimate holds each GPU's whole sequence; split over N ranks, each holds about "
                         "1/N of the activations and logits: measure the first steps with "
                         "`torch.cuda.max_memory_allocated()` and silence this note with `# memlint: ignore[MEM003]`")

# what to do with a run memlint cannot size because it splits the model over GPUs (``unmodelled``)
MODEL_PARALLEL_ADVICE = ("memlint sizes data parallelism, ZeRO and FSDP only; size this run with Megatron's own "
                         "report (megatron/training/theoretical_memory_usage.py) and silence this note with "
                         "`# memlint: ignore[MEM003]`")

# what to do with a script that splits its layers with PyTorch's tensor parallelism over a device
# mesh (``parallelize_module``), whose degree is the mesh's, known only when it runs
TENSOR_PARALLEL_ADVICE = ("memlint sizes data parallelism, ZeRO and FSDP only; each GPU of the tensor-parallel mesh "
                          "holds a slice of every parallelized layer's weights, gradients, optimizer states and "
                          "activations: measure the first steps with `torch.cuda.max_memory_allocated()` and silence "
                          "this note with `# memlint: ignore[MEM003]`")


NOT_FACTS = ("path", "kind", "anchor", "references", "switched_references", "auto_keys", "cli_bindings",
             "option_constants", "cli_args", "cli_unknown", "environment", "environment_unknown", "overrides",
             "launches", "arguments_file", "arguments_default", "arguments_under_cli", "positional_config", "bound_config", "template_launches", "template_config",
             "template_references")
FACT_NAMES = tuple(f.name for f in fields(RunFacts) if f.name not in NOT_FACTS)


@dataclass
class TrainingPlan:
    """One run: its entry document's facts merged with those of the documents it links."""

    entry: str  # path of the document that defines the run
    anchor: Location
    facts: dict[str, Sourced[Any]]
    documents: tuple[str, ...]  # every document that contributed (entry first)
    conflicts: list[tuple[str, Sourced[Any], Sourced[Any]]] = field(default_factory=list)
    # Does any document of the run train? A launcher alone trains nothing: a shell script that
    # builds a package, serves a model or prepares data defines no training run.
    trains: bool = True
    # the document the run's verdicts belong to when it is not the entry: a config run through a
    # launcher shared by many configs is judged in the config, not on the launcher's DeepSpeed file
    home: str | None = None
    # the entry script's command-line options that name its model (``--model_name_or_path``):
    # what to pass when no document states the model
    model_options: tuple[str, ...] = ()

    def get(self, name: str) -> Sourced[Any] | None:
        return self.facts.get(name)

    def value(self, name: str, default: Any = None) -> Any:
        fact = self.facts.get(name)
        return default if fact is None else fact.value


# Which document wins when two state the same fact. DeepSpeed's own keys decide what DeepSpeed
# runs (the HF integration raises on a mismatch anyway); launchers decide the world size. A
# DeepSpeed "optimizer" block makes DeepSpeed build its own optimizer: the Trainer's `optim` and
# a script's optimizer class are then unused.
_DEEPSPEED_OWNED = {
    "zero_stage", "offload_optimizer", "offload_params", "ds_bf16", "ds_fp16",
    "reduce_bucket", "allgather_bucket", "prefetch_bucket", "max_live_parameters", "optimizer",
}


# documents that only take part in runs other documents define: a launcher (its script trains,
# or nothing does), a DeepSpeed or Accelerate config
_LINKED_ONLY = ("shell", "deepspeed", "accelerate", "missing")

# facts whose presence says what the run is, beside their value: a launch that passes an unknown
# value hides the value only (the LoRA the script builds stays a LoRA, of a rank the launch chooses)
_KEPT_WHEN_HIDDEN = {"lora_r": "the launch passes the LoRA rank a value memlint cannot read"}


def merge(entry: RunFacts, linked: list[RunFacts], overrides: dict[str, Sourced[Any]] | None = None,
          hidden: frozenset[str] = frozenset()) -> TrainingPlan:
    """Merge the entry's facts with linked documents' facts, recording disagreements.

    ``overrides`` (a launcher's command-line options for its script) beat everything else:
    they replace the defaults the script declares; ``hidden`` facts (an option the launcher passes
    with a value it cannot know) take no value from the script at all. A value some file states beats a tool's
    default (a fact without origin, e.g. Axolotl's default ``micro_batch_size``) whichever
    document it comes from. DeepSpeed's ``"auto"`` is a placeholder the Trainer fills with
    its own value at run time, so an ``"auto"`` fact never enters the plan.
    """
    facts: dict[str, Sourced[Any]] = dict(overrides or {})
    overridden = set(facts)
    conflicts: list[tuple[str, Sourced[Any], Sourced[Any]]] = []
    ordered = [entry] + linked
    for doc in ordered:
        for name, fact in doc.stated().items():
            if name in hidden and doc is not entry and name in _KEPT_WHEN_HIDDEN and name not in facts:
                # ``--lora_r $1``: the rank is unknown, the adapter the script builds is not
                facts[name] = Sourced(fact.value, None, f"{_KEPT_WHEN_HIDDEN[name]}, assumed "
                                                        f"{fact.value} as the script's default ({fact.note})")
                continue
            if name in overridden or fact.value == "auto" or (name in hidden and doc is not entry):
                continue
            current = facts.get(name)
            if current is None or (current.assumed and not fact.assumed):
                if current is not None and current.value != fact.value:
                    conflicts.append((name, current, fact))
                facts[name] = fact
                continue
            if fact.assumed:
                continue
            if name == "grad_ckpt" and doc.kind == "accelerate" and fact.value and not current.value:
                # FSDP's ``activation_checkpointing`` wraps the layers when Accelerate prepares the
                # model, whatever the Trainer's own ``gradient_checkpointing`` (False, as
                # Transformers asks when FSDP checkpoints): both stated, the layers recompute
                facts[name] = fact
                continue
            if current.value != fact.value:
                conflicts.append((name, current, fact))
                if name in _DEEPSPEED_OWNED and doc.kind == "deepspeed":
                    facts[name] = fact
                elif name == "world_size" and doc.kind == "shell":
                    facts[name] = fact
    anchor = entry.anchor or Location(entry.path, Range.file_start())
    stated_off = facts.get("trains") is not None and facts["trains"].value is False
    trains = not stated_off and (
        "framework" in facts or any(doc.kind not in _LINKED_ONLY for doc in ordered)
    )
    return TrainingPlan(
        entry=entry.path,
        anchor=anchor,
        facts=facts,
        documents=tuple(dict.fromkeys(d.path for d in ordered)),
        conflicts=conflicts,
        trains=trains,
        # (an imported constant, ``@MODEL_CHECKPOINT``, is no option the user can pass)
        model_options=tuple(sorted(o for o, names in entry.cli_bindings.items() if "model" in names
                                   and not o.startswith(CONSTANT_PREFIX))),
    )
