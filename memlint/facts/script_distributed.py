"""Facts from the engines that distribute a run: ``deepspeed.initialize`` (a config path or an
inline dict), ``Accelerator`` and its DeepSpeed/FSDP plugins, Lightning strategies."""

from __future__ import annotations

import functools
from typing import Any

import libcst as cst

from memlint.facts.deepspeed_keys import auto_paths, deepspeed_facts
from memlint.facts.hf_args import _fsdp, _int
from memlint.facts.plan import MODEL_PARALLEL_ADVICE, SEQUENCE_SPLIT_ADVICE, TENSOR_PARALLEL_ADVICE
from memlint.facts.script_facts import ANCHOR_ENGINE, RANK_CONFIG, RANK_EXPLICIT, ScriptFacts, encode
from memlint.model.vocabulary import LIGHTNING_DEEPSPEED, dtype_name
from memlint.python.library import (
    ACCELERATORS,
    DEEPSPEED_INITIALIZE,
    DEEPSPEED_PLUGINS,
    FSDP_PLUGINS,
    PARALLELISM_CONFIGS,
    TORCH_FSDP_CPU_OFFLOAD,
    TORCH_FSDP_PRECISION,
    TORCH_FSDP_WRAPPERS,
    TORCH_FULLY_SHARD,
    TORCH_TENSOR_PARALLEL,
    lightning_strategy,
)
from memlint.python.index import index_for
from memlint.python.syntax import method_name, receiver
from memlint.python.values import Found, Mapping, Ref

_DEEPSPEED_INITIALIZE_ARGS = (
    "args", "model", "optimizer", "model_parameters", "training_data", "lr_scheduler", "distributed_port", "mpu",
    "dist_init_required", "collate_fn", "config", "mesh_param", "config_params",
)


@functools.lru_cache(maxsize=1024)
def _mentions_an_engine(names: frozenset[str]) -> bool:
    """Could a call of these qualified names build a distributing engine? Asked of every call of
    the module after each edit, for a few dozen distinct sets of names (most calls have none)."""
    return bool(names & _ENGINE_NAMES) or any(lightning_strategy(n) is not None for n in names)


def recognise(ctx: ScriptFacts, call: cst.Call, names: frozenset[str], method: str | None) -> None:
    if not _mentions_an_engine(names):
        return
    if names & DEEPSPEED_INITIALIZE:
        deepspeed_initialize(ctx, call)
    if names & ACCELERATORS:
        accelerator(ctx, call)
    if names & DEEPSPEED_PLUGINS:
        deepspeed_plugin(ctx, call)
    if names & FSDP_PLUGINS:
        fsdp_plugin(ctx, call)
    if names & PARALLELISM_CONFIGS:
        parallelism_config(ctx, call)
    strategies = {s for n in names if (s := lightning_strategy(n)) is not None}
    if strategies:
        lightning_strategy_object(ctx, call, strategies.pop())
    if names & TORCH_FSDP_WRAPPERS:
        torch_fsdp(ctx, call)
    if names & TORCH_FULLY_SHARD:
        torch_fully_shard(ctx, call)
    if names & TORCH_TENSOR_PARALLEL:
        ctx.state("unmodelled", ("PyTorch tensor parallelism (`parallelize_module(...)`)", TENSOR_PARALLEL_ADVICE),
                  call.func, "parallelize_module(...)", at=call, rank=RANK_EXPLICIT)
    if names & TORCH_FSDP_PRECISION:
        torch_fsdp_precision(ctx, call)
    if names & TORCH_FSDP_CPU_OFFLOAD:
        torch_fsdp_offload(ctx, call, policy=any(n.endswith("Policy") for n in names))


_ENGINE_NAMES = frozenset(DEEPSPEED_INITIALIZE | ACCELERATORS | DEEPSPEED_PLUGINS | FSDP_PLUGINS | TORCH_FSDP_WRAPPERS
                 | TORCH_FULLY_SHARD | TORCH_TENSOR_PARALLEL | TORCH_FSDP_PRECISION | TORCH_FSDP_CPU_OFFLOAD | PARALLELISM_CONFIGS)


def fsdp_plugin(ctx: ScriptFacts, call: cst.Call) -> None:
    """``FullyShardedDataParallelPlugin(...)``: its ``sharding_strategy``, else what the plugin
    falls back to, full sharding (accelerate's ``FSDP_SHARDING_STRATEGY`` default ``FULL_SHARD``;
    for ``fsdp_version=2``, ``reshard_after_forward`` is true unless written false). Ranked below a
    written strategy: ``accelerate launch`` hands its config's strategy to the default."""
    arguments = ctx.values.arguments(call, ("sharding_strategy",))
    if "sharding_strategy" in arguments:
        ctx.state_found("fsdp", ctx.values.evaluate(arguments.get("sharding_strategy")), _strategy,
                        "FullyShardedDataParallelPlugin(sharding_strategy=...)", at=call, rank=RANK_CONFIG)
        return
    if not arguments.complete:
        return  # ``**kwargs`` may hold the strategy
    if "reshard_after_forward" in arguments:
        reshard = ctx.values.evaluate(arguments.get("reshard_after_forward"))
        if reshard is None or not reshard.known or not isinstance(reshard.value, bool):
            return
        ctx.state("fsdp", "full" if reshard.value else "grad-op", reshard.node, 
                  "FullyShardedDataParallelPlugin(reshard_after_forward=...)", at=call, rank=RANK_CONFIG)
        return
    ctx.state("fsdp", "full", call.func, "FullyShardedDataParallelPlugin(...) (full sharding, accelerate's default)",
              at=call, rank=RANK_CONFIG - 1)


def parallelism_config(ctx: ScriptFacts, call: cst.Call) -> None:
    """accelerate's ``ParallelismConfig(cp_size=2, tp_size=...)``: context parallelism splits each
    sequence over ``cp_size`` ranks and tensor parallelism each layer over ``tp_size``, which the
    estimate (a whole model and a whole sequence per GPU, or ZeRO/FSDP shards) does not model."""
    arguments = ctx.values.arguments(call)
    for key, what, advice in (("tp_size", "tensor parallelism", MODEL_PARALLEL_ADVICE),
                              ("cp_size", "context parallelism", SEQUENCE_SPLIT_ADVICE)):
        found = ctx.values.evaluate(arguments.get(key)) if key in arguments else None
        if found is None or not found.known or not isinstance(found.value, int) or found.value <= 1:
            continue
        ctx.state("unmodelled", (f"{what} (`ParallelismConfig({key}={found.value})`)", advice), found.node or call,
                  f"ParallelismConfig({key}=...)", at=call, rank=RANK_CONFIG)
        return


def torch_fsdp(ctx: ScriptFacts, call: cst.Call) -> None:
    """``FullyShardedDataParallel(model, sharding_strategy=ShardingStrategy.X, ...)``; FULL_SHARD
    when no strategy is given (FSDP's default)."""
    ctx.anchor(call.func, ANCHOR_ENGINE)
    arguments = ctx.values.arguments(call, ("module", "process_group", "sharding_strategy"))
    if "sharding_strategy" in arguments:
        ctx.state_found("fsdp", ctx.values.evaluate(arguments.get("sharding_strategy")), _strategy,
                        "FullyShardedDataParallel(sharding_strategy=...)", at=call, rank=RANK_EXPLICIT)
    else:
        ctx.state("fsdp", "full", call.func, "FullyShardedDataParallel(...) shards fully by default", at=call,
                  rank=RANK_EXPLICIT)


def torch_fully_shard(ctx: ScriptFacts, call: cst.Call) -> None:
    """FSDP2 ``fully_shard(module)``: parameters resharded after forward (ZeRO-3-like) unless
    ``reshard_after_forward=False`` (ZeRO-2-like)."""
    arguments = ctx.values.arguments(call, ("module",))
    reshard = arguments.get("reshard_after_forward")
    found = ctx.values.evaluate(reshard) if reshard is not None else None
    if found is not None and found.known and found.value is False:
        ctx.state("fsdp", "grad-op", found.node or call.func, "fully_shard(reshard_after_forward=False)", at=call,
                  rank=RANK_EXPLICIT)
    else:
        ctx.state("fsdp", "full", call.func, "fully_shard(...) reshards after forward by default", at=call,
                  rank=RANK_EXPLICIT)


def torch_fsdp_precision(ctx: ScriptFacts, call: cst.Call) -> None:
    """FSDP's ``MixedPrecision(param_dtype=torch.bfloat16)`` (FSDP2: ``MixedPrecisionPolicy``):
    fp32 sharded parameters, the gathered layer computed in the lower dtype -- mixed precision."""
    found = ctx.values.evaluate(ctx.values.arguments(call, ("param_dtype",)).get("param_dtype"))
    if found is None:
        return
    ctx.state_found("mixed", found, lambda v: _low_precision(v), "FSDP MixedPrecision(param_dtype=...)", at=call,
                    binding="mixed", rank=RANK_CONFIG)


def _low_precision(value: Any) -> str | None:
    if isinstance(value, Ref):
        value = value.qualname
    name = dtype_name(str(value)) if value is not None else None
    return name if name in ("bf16", "fp16") else None


def torch_fsdp_offload(ctx: ScriptFacts, call: cst.Call, policy: bool) -> None:
    """``CPUOffload(offload_params=True)``: parameters, gradients and the optimizer step live on
    the CPU. FSDP2's ``CPUOffloadPolicy()`` offloads by being there."""
    node: cst.CSTNode
    if policy:
        node, note = call.func, "FSDP2 CPUOffloadPolicy()"
    else:
        found = ctx.values.evaluate(ctx.values.arguments(call, ("offload_params",)).get("offload_params"))
        if found is None or not found.known or found.value is not True:
            return
        node, note = found.node or call.func, "FSDP CPUOffload(offload_params=True)"
    ctx.state("offload_params", True, node, note, at=call, rank=RANK_CONFIG)
    ctx.state("offload_optimizer", True, node, note, at=call, rank=RANK_CONFIG)


def _strategy(value: Any) -> str | None:
    if isinstance(value, Ref):
        value = value.qualname.rsplit(".", 1)[-1]
    if isinstance(value, (str, int)):
        return _fsdp(str(value))
    return None


def deepspeed_config(ctx: ScriptFacts, found: Found, at: cst.CSTNode, note: str) -> None:
    """A DeepSpeed config written as a dict in the script."""
    materialised = ctx.mapping(found)
    if materialised is None:
        return
    plain, where = materialised
    for path, leaf in where.items():
        if leaf.options or leaf.formula:  # ds_config["train_micro_batch_size_per_gpu"] = args.batch_size
            for probe in (1, True):
                for fact in deepspeed_facts(_nest(path, probe)):
                    ctx.bind_found(leaf, fact.name)
        if leaf.flip is not None:  # "cpu" if args.offload else "none"
            options, prefix, other = leaf.flip
            for fact in deepspeed_facts(_nest(path, other)):
                if isinstance(fact.value, (bool, int, float, str)):
                    ctx.bind(options, f"{prefix}:{fact.name}={encode(fact.value)}")
    for fact in deepspeed_facts(plain):
        placed = where.get(fact.path) or where.get(fact.path[:-1])
        if placed is None or placed.node is None:
            continue
        ctx.state(fact.name, fact.value, placed.node, f"{note}: {'.'.join(fact.path)}", at=at, rank=RANK_EXPLICIT)
    for path in auto_paths(plain):
        placed = where.get(path)
        if placed is not None and placed.node is not None:
            ctx.auto_key(".".join(path), placed.node)


def _nest(path: tuple[str, ...], value: Any) -> dict:
    """``("zero_optimization", "stage")`` -> ``{"zero_optimization": {"stage": value}}``."""
    out: Any = value
    for key in reversed(path):
        out = {key: out}
    return out


def _config_argument(ctx: ScriptFacts, expression: cst.BaseExpression | None, at: cst.CSTNode, note: str) -> None:
    """A DeepSpeed config given as a path (a reference) or a dict (facts)."""
    if expression is None:
        return
    found = ctx.values.evaluate(expression)
    if found is None:
        return
    if isinstance(found.value, str) and found.node is not None:
        ctx.reference(found.value, found.node, note)
    elif isinstance(found.value, Mapping):
        deepspeed_config(ctx, found, at, note)


def deepspeed_initialize(ctx: ScriptFacts, call: cst.Call) -> None:
    ctx.framework("deepspeed", call.func, "deepspeed.initialize(...)", trains=not _inference_engine(ctx, call))
    ctx.anchor(call.func, ANCHOR_ENGINE)
    arguments = ctx.values.arguments(call, _DEEPSPEED_INITIALIZE_ARGS)
    for key in ("config", "config_params"):
        _config_argument(ctx, arguments.get(key), call, f"deepspeed.initialize({key}=...)")


def _inference_engine(ctx: ScriptFacts, call: cst.Call) -> bool:
    """An engine built to run a frozen model: no optimizer and no parameters to optimize are
    handed in, and the engine is put in eval mode (TRL's ``prepare_deepspeed`` for a reference or
    reward model: ``model, *_ = deepspeed.initialize(model=model, config=config_kwargs)`` then
    ``model.eval()``, copied into reward-modeling-develop's ``datacollator.py``). It trains nothing."""
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if len(positional) > 2 or any(a.star for a in call.args) or any(
            a.keyword is not None and a.keyword.value in ("optimizer", "model_parameters") for a in call.args):
        return False
    python = ctx.parsed.python
    index = index_for(python) if python is not None else None
    if index is None:
        return False
    statement = next((n for n in index.ancestors(call) if isinstance(n, cst.Assign)), None)
    if statement is None:
        return False
    names = set()
    for assigned in statement.targets:
        held = assigned.target
        elements = [e.value for e in held.elements] if isinstance(held, (cst.Tuple, cst.List)) else [held]
        if elements and isinstance(elements[0], cst.Name):
            names.add(elements[0].value)
    flow = index.flow_of(call)
    for later in index.calls:
        engine = receiver(later)
        if method_name(later) == "eval" and isinstance(engine, cst.Name) and engine.value in names \
                and index.flow_of(later) is flow and index.start(later) > index.start(call):
            return True
    return False


def accelerator(ctx: ScriptFacts, call: cst.Call) -> None:
    values = ctx.values
    # an Accelerator trains with a backward() beside it (``finish_training``): alone it may only
    # print the environment or run inference
    ctx.framework("accelerate", call.func, "Accelerator(...)", trains=False)
    ctx.pending["accelerator"] = True
    ctx.anchor(call.func, ANCHOR_ENGINE)
    arguments = values.arguments(call)
    if "mixed_precision" in arguments:
        ctx.state_found("mixed", values.evaluate(arguments.get("mixed_precision")), _mixed,
                        "Accelerator(mixed_precision=...)", at=call, binding="mixed", rank=RANK_CONFIG)
    if "gradient_accumulation_steps" in arguments:
        ctx.state_found("grad_accum", values.evaluate(arguments.get("gradient_accumulation_steps")), _int,
                        "Accelerator(gradient_accumulation_steps=...)", at=call, binding="grad_accum", rank=RANK_CONFIG)


def _mixed(value: Any) -> str | None:
    if isinstance(value, Ref):
        value = value.qualname.rsplit(".", 1)[-1]
    if isinstance(value, str) and value.lower() in ("bf16", "fp16", "no", "fp8"):
        return value.lower()
    return None


def deepspeed_plugin(ctx: ScriptFacts, call: cst.Call) -> None:
    """Accelerate's ``DeepSpeedPlugin(zero_stage=, offload_optimizer_device=, hf_ds_config=...)``."""
    values = ctx.values
    arguments = values.arguments(call, ("hf_ds_config", "gradient_accumulation_steps", "gradient_clipping",
                                        "zero_stage"))
    if "zero_stage" in arguments:
        ctx.state_found("zero_stage", values.evaluate(arguments.get("zero_stage")), _int,
                        "DeepSpeedPlugin(zero_stage=...)", at=call, binding="zero_stage", rank=RANK_CONFIG)
    if "gradient_accumulation_steps" in arguments:
        ctx.state_found("grad_accum", values.evaluate(arguments.get("gradient_accumulation_steps")), _int,
                        "DeepSpeedPlugin(gradient_accumulation_steps=...)", at=call, binding="grad_accum",
                        rank=RANK_CONFIG)
    for key, fact in (("offload_optimizer_device", "offload_optimizer"), ("offload_param_device", "offload_params")):
        if key in arguments:
            ctx.state_found(fact, values.evaluate(arguments.get(key)),
                            lambda v: v.lower() in ("cpu", "nvme") if isinstance(v, str) else None,
                            f"DeepSpeedPlugin({key}=...)", at=call, rank=RANK_CONFIG)
    _config_argument(ctx, arguments.get("hf_ds_config"), call, "DeepSpeedPlugin(hf_ds_config=...)")


def lightning_strategy_name(ctx: ScriptFacts, name: str, node: cst.CSTNode, at: cst.CSTNode) -> None:
    """``strategy="deepspeed_stage_3_offload"`` / ``"fsdp"``."""
    key = name.strip().lower()
    if key in LIGHTNING_DEEPSPEED:
        stage, optimizer, params = LIGHTNING_DEEPSPEED[key]
        note = f'Lightning strategy="{name}"'
        ctx.state("zero_stage", stage, node, note, at=at, rank=RANK_CONFIG)
        ctx.state("offload_optimizer", optimizer, node, note, at=at, rank=RANK_CONFIG)
        ctx.state("offload_params", params, node, note, at=at, rank=RANK_CONFIG)
    elif key in ("fsdp", "fsdp_full_shard"):
        ctx.state("fsdp", "full", node, f'Lightning strategy="{name}"', at=at, rank=RANK_CONFIG)


def lightning_strategy_object(ctx: ScriptFacts, call: cst.Call, kind: str) -> None:
    """``DeepSpeedStrategy(stage=3, offload_optimizer=True, config="ds.json")``, ``FSDPStrategy(...)``."""
    values = ctx.values
    arguments = values.arguments(call)
    if kind == "deepspeed":
        stage = values.evaluate(arguments.get("stage")) if "stage" in arguments else None
        if stage is None and "stage" not in arguments and "config" not in arguments:
            ctx.state("zero_stage", 2, call.func, "DeepSpeedStrategy() defaults to stage 2", at=call, rank=RANK_CONFIG)
        ctx.state_found("zero_stage", stage, _int, "DeepSpeedStrategy(stage=...)", at=call, rank=RANK_CONFIG)
        for key, fact in (("offload_optimizer", "offload_optimizer"), ("offload_parameters", "offload_params")):
            if key in arguments:
                ctx.state_found(fact, values.evaluate(arguments.get(key)),
                                lambda v: v if isinstance(v, bool) else None,
                                f"DeepSpeedStrategy({key}=...)", at=call, rank=RANK_CONFIG)
        _config_argument(ctx, arguments.get("config"), call, "DeepSpeedStrategy(config=...)")
    elif kind == "fsdp":
        if "sharding_strategy" in arguments:
            ctx.state_found("fsdp", values.evaluate(arguments.get("sharding_strategy")), _strategy,
                            "FSDPStrategy(sharding_strategy=...)", at=call, rank=RANK_CONFIG)
        else:
            ctx.state("fsdp", "full", call.func, "FSDPStrategy() shards fully by default", at=call, rank=RANK_CONFIG)
