"""Facts from trainers and their arguments: ``TrainingArguments``/TRL configs (every field through
``hf_args.facts_for``), ``Trainer``/``SFTTrainer``/``DPOTrainer``, ``HfArgumentParser``/``TrlParser``
(whose dataclass fields become command-line options), and the Lightning ``Trainer``/``Fabric``."""

from __future__ import annotations

import functools
import re
from typing import Any

import libcst as cst
from libcst.metadata import GlobalScope

from memlint.facts import hf_args, project_trainers
from memlint.facts.script_distributed import deepspeed_config, lightning_strategy_name
from memlint.facts.script_facts import ANCHOR_CONFIG, ANCHOR_TRAINER, RANK_CONFIG, ScriptFacts
from memlint.facts.script_models import loading_arguments, model_id
from memlint.python.library import (
    config_framework,
    is_argument_parser,
    is_library_dataclass,
    is_model_loader,
    trainer_framework,
)
from memlint.python.values import ClassValue, Found, Mapping


@functools.lru_cache(maxsize=1024)
def _roles(names: frozenset[str]) -> tuple[frozenset[str | None], frozenset[str | None], bool]:
    """What a call's qualified names make it here: the trainers' and the configs' frameworks it
    builds, an argument parser of dataclasses. Asked of every call of the module after each
    edit, for a few dozen distinct sets of names (most calls have none)."""
    return (frozenset(trainer_framework(n) for n in names) - {None},
            frozenset(config_framework(n) for n in names) - {None}, any(is_argument_parser(n) for n in names))


def recognise(ctx: ScriptFacts, call: cst.Call, names: frozenset[str], method: str | None) -> None:
    frameworks, configs, argument_parser = _roles(names)
    if "lightning" in frameworks:
        lightning(ctx, call, names)
    elif frameworks:
        trainer(ctx, call, "trl" if "trl" in frameworks else "hf-trainer", names)
    if configs:
        config(ctx, call, "trl" if "trl" in configs else "hf-trainer", names)
    if argument_parser or ctx.values.options.is_dataclass_parser(call, names):
        parser(ctx, call)


def _short(names: frozenset[str]) -> str:
    dotted = sorted(n for n in names if "." in n)
    return (dotted[0] if dotted else sorted(names)[0]).rsplit(".", 1)[-1]


def hf_field(ctx: ScriptFacts, key: str, found: Found | None, owner: str, at: cst.CSTNode,
             node: cst.CSTNode | None = None) -> None:
    """One TrainingArguments-style field, as every config spells it."""
    if found is None:
        return
    if key in hf_args.FIELDS or key in ("bf16", "fp16"):
        ctx.bind_found(found, f"hf:{key}")
    if found.flip is not None and found.flip_node is not None and key == "deepspeed":
        # ``deepspeed="ds.json" if args.deepspeed else None``: the config of a launch that passes --deepspeed
        options, prefix, other = found.flip
        path = hf_args.facts_for(key, other).get("__reference__")
        if path is not None:
            ctx.switched_reference(options, prefix, path, found.flip_node, f"{owner}(deepspeed=...)")
    if not found.known or found.node is None:
        return
    for name, value in hf_args.facts_for(key, found.value).items():
        if name == "__reference__":
            ctx.reference(value, found.node, f"{owner}(deepspeed=...)")
            continue
        note = f"{owner}({key}=...)" + (f" ({found.note})" if found.note else "")
        ctx.state(name, value, found.node, note, at=at, rank=RANK_CONFIG)


def config(ctx: ScriptFacts, call: cst.Call, framework: str, names: frozenset[str]) -> None:
    """``TrainingArguments(...)``, ``SFTConfig(...)``, a user subclass called directly."""
    values = ctx.values
    owner = _short(names)
    arguments = values.arguments(call, ("output_dir",))
    # ``Seq2SeqTrainingArguments(output_dir="dummy_dir")``, which a library's data loader asks
    # for in an inference script, states nothing about training: alone it trains nothing
    placeholder = set(arguments.named) <= {"output_dir"} and arguments.complete
    ctx.framework(framework, call.func, f"{owner}(...)", trains=not placeholder and not _never_used(ctx, call))
    ctx.anchor(call.func, ANCHOR_CONFIG)
    trainer_kind(ctx, call, names)
    every_n = None
    for key, expression in arguments.items():
        found = values.evaluate(expression)
        if key == "deepspeed" and found is not None and isinstance(found.value, Mapping):
            deepspeed_config(ctx, found, call, f"{owner}(deepspeed={{...}})")
        elif key == "model_init_kwargs" and found is not None and isinstance(found.value, Mapping):
            loading_arguments(ctx, dict(found.value.entries), call, RANK_CONFIG)
        elif key in ("activation_checkpointing_kwargs", "gradient_checkpointing_kwargs"):
            if found is not None and isinstance(found.value, Mapping) and found.value.get("every_n_layers") is not None:
                every_n = values.evaluate(found.value.get("every_n_layers"))
        else:
            hf_field(ctx, key, found, owner, call)
            if key == "per_device_train_batch_size" and _unread_number(key, found):
                _unread_micro_batch(ctx, expression, owner, call)
    _own_defaults(ctx, call, names, arguments.named, owner)
    if framework == "trl":
        _completion_length(ctx, call, arguments.named, owner)
    stated = ctx.facts.grad_ckpt
    if every_n is not None and every_n.known and isinstance(every_n.value, int) and every_n.value > 1 and (
        stated is not None and stated.value == 1
    ):
        ctx.state("grad_ckpt", every_n.value, every_n.node, f"{owner}(activation_checkpointing_kwargs=...)",
                  at=call, rank=RANK_CONFIG + 1)


def _unread_number(key: str, found: Found | None) -> bool:
    """A field written with a value memlint cannot read as its number (``cfg.batch_size`` of a
    YAML file, a ``.get`` on a dict it cannot see, an option without a known default)."""
    return found is None or not found.known or not hf_args.facts_for(key, found.value)


def _unread_micro_batch(ctx: ScriptFacts, expression: cst.BaseExpression, owner: str, call: cst.Call) -> None:
    """The micro-batch is written but unknown: not the TrainingArguments default of 8, which a
    run only trains with where nothing sets the field (``memlint.facts.resolve``)."""
    text = " ".join(ctx.python.code_of(expression).split())
    text = text if len(text) <= 60 else text[:59] + "…"
    ctx.state("micro_batch_unknown", text, expression, text, at=call, rank=RANK_CONFIG)


def _never_used(ctx: ScriptFacts, call: cst.Call) -> bool:
    """``training_args = TrainingArguments(...)`` that nothing reads (a notebook turned script, its
    ``Trainer`` left in a string): arguments no trainer gets train nothing."""
    parent = ctx.values.parent(call)
    if not (isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name)):
        return False
    target = parent.targets[0].target
    scope = ctx.python.scopes.get(parent)
    if scope is None:
        return False
    mine = [a for a in scope.assignments[target.value] if getattr(a, "node", None) is target]
    if not mine or any(a.references for a in mine):
        return False
    # a module-level name another module may import, unless the module is a script: one that runs
    # calls of its own at the top level (importing it would run them)
    return not isinstance(scope, GlobalScope) or any(
        isinstance(statement, cst.SimpleStatementLine) and any(
            isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) for small in statement.body)
        for statement in ctx.python.module.body)


def _adapter_skipped(fields: dict[str, Any]) -> frozenset[str]:
    """The adapter parameters whose defaults are not the choice of an adapter in this class."""
    written = {key: default.value for key, default in fields.items() if isinstance(default, cst.Name)}
    return hf_args.ADAPTER_PARAMETERS if hf_args.has_adapter_switch(written) else frozenset()


def _own_defaults(ctx: ScriptFacts, call: cst.Call, names: frozenset[str], given: dict, owner: str) -> None:
    """A user subclass of TrainingArguments: its own field defaults are TrainingArguments values."""
    found = ctx.values.evaluate(call.func)
    if found is None or not isinstance(found.value, ClassValue):
        return
    fields = _all_fields(ctx, found.value.node)
    skipped = _adapter_skipped(fields)
    for key, default in fields.items():
        if key in given or default is None or key in skipped:
            continue
        hf_field(ctx, key, ctx.values.evaluate(default), owner, call)


def _completion_length(ctx: ScriptFacts, call: cst.Call, named: dict, owner: str) -> None:
    """GRPO-style configs: a training sequence is the prompt plus the completion."""
    if "max_prompt_length" not in named or "max_completion_length" not in named:
        return
    prompt = ctx.values.evaluate(named["max_prompt_length"])
    completion = ctx.values.evaluate(named["max_completion_length"])
    if prompt is None or completion is None or not (prompt.known and completion.known):
        return
    if isinstance(prompt.value, int) and isinstance(completion.value, int) and completion.node is not None:
        ctx.state("seq_len", prompt.value + completion.value, completion.node,
                  f"{owner}: max_prompt_length + max_completion_length", at=call, rank=RANK_CONFIG)


# TRL's trainers and configs -> the algorithm, which decides the models it holds besides the policy
# (XPO and Nash-MD extend online DPO: a reference copy and a reward model)
TRL_KINDS = {"DPO": "dpo", "KTO": "kto", "PPO": "ppo", "GRPO": "grpo", "RLOO": "rloo", "OnlineDPO": "online_dpo",
             "XPO": "online_dpo", "NashMD": "online_dpo", "GKD": "gkd", "GOLD": "gold", "ORPO": "orpo",
             "CPO": "cpo"}
# the trainers' keywords that take another model (a model, or a Hub id for GKD's teacher / GRPO's rewards)
OTHER_MODELS = {"ref_model": "reference_model", "reward_model": "reward_model", "value_model": "value_model",
                "teacher_model": "teacher_model", "reward_funcs": "reward_model"}


def trainer_kind(ctx: ScriptFacts, call: cst.Call, names: frozenset[str]) -> None:
    """``DPOTrainer`` / ``DPOConfig`` -> "dpo" (a user subclass names its TRL base)."""
    for name in sorted(names):
        short = name.rsplit(".", 1)[-1]
        for prefix, kind in TRL_KINDS.items():
            if short in (f"{prefix}Trainer", f"{prefix}Config"):
                ctx.state("trainer_kind", kind, call.func, f"{short}(...)", at=call, rank=RANK_CONFIG)
                return


def _paired_forward(ctx: ScriptFacts, call: cst.Call) -> None:
    """A project's own Trainer subclass with a ``concatenated_forward`` (the name TRL's DPO, CPO
    and OpenRLHF give the method that runs a pair's chosen and rejected sequences as one batch;
    princeton-nlp/SimPO's ``SimPOTrainer(Trainer)`` copies it) trains on pairs: twice the
    micro-batch's sequences per forward. One whose ``__init__`` builds a reference when given
    none (TRL's DPOTrainer copied: SPPO, SPIN) holds that reference too."""
    found = ctx.values.evaluate(call.func)
    if found is None or not isinstance(found.value, ClassValue):
        return
    cls = found.value.node
    paired = project_trainers.method(cls, "concatenated_forward")
    if paired is None:
        return
    owner = cls.name.value
    ctx.state("trainer_kind", "paired", call.func, f"{owner}.concatenated_forward (chosen and rejected "
              "sequences in one forward)", at=call, rank=RANK_CONFIG)
    if project_trainers.reference_built(cls) is not None:
        ctx.state("builds_reference", True, call.func, f"{owner}.__init__ builds a reference model when "
                  "given none (as TRL's DPOTrainer)", at=call, rank=RANK_CONFIG)


def other_models(ctx: ScriptFacts, call: cst.Call, arguments: Any, owner: str) -> None:
    """``DPOTrainer(ref_model=ref)``, ``PPOTrainer(reward_model=rm, value_model=vm)``,
    ``GKDTrainer(teacher_model="Qwen/Qwen2-1.5B-Instruct")``: each model's id, read from the string
    or from the ``from_pretrained`` call that built it; an option that holds the id is bound to it."""
    values = ctx.values
    for key, fact in OTHER_MODELS.items():
        if key not in arguments:
            continue
        written = arguments.get(key)
        if key == "reward_funcs" and isinstance(written, cst.List) and written.elements:
            written = written.elements[0].value  # GRPO: the first reward function that is a model
        found = values.evaluate(written)
        if found is not None and found.known and isinstance(found.value, str):
            ctx.state_found(fact, found, model_id, f"{owner}({key}=...)", at=call, binding=fact)
            continue
        built = values.definition(written) if written is not None else None
        if isinstance(built, cst.Call) and any(is_model_loader(n) for n in values.callee_names(built)):
            inner = values.arguments(built, ("pretrained_model_name_or_path",))
            ctx.state_found(fact, values.evaluate(inner.get("pretrained_model_name_or_path")), model_id,
                            f"{owner}({key}=...) from_pretrained(...)", at=call, binding=fact)


def trainer(ctx: ScriptFacts, call: cst.Call, framework: str, names: frozenset[str]) -> None:
    values = ctx.values
    owner = _short(names)
    ctx.framework(framework, call.func, f"{owner}(...)")
    ctx.anchor(call.func, ANCHOR_TRAINER)
    trainer_kind(ctx, call, names)
    if ctx.facts.trainer_kind is None:
        _paired_forward(ctx, call)
    arguments = values.arguments(call, ("model",))
    other_models(ctx, call, arguments, owner)
    if "model" in arguments:
        found = values.evaluate(arguments.get("model"))
        if found is not None and (found.value is None or not found.known or isinstance(found.value, str)):
            ctx.state_found("model", found, model_id, f"{owner}(model=...)", at=call, binding="model")
    for key in ("max_seq_length", "max_length"):  # TRL < 0.12 took these on the trainer
        if key in arguments:
            hf_field(ctx, key, values.evaluate(arguments.get(key)), owner, call)
    if "model_init_kwargs" in arguments:
        found = values.evaluate(arguments.get("model_init_kwargs"))
        if found is not None and isinstance(found.value, Mapping):
            loading_arguments(ctx, dict(found.value.entries), call, RANK_CONFIG)


def parser(ctx: ScriptFacts, call: cst.Call) -> None:
    """``HfArgumentParser((ModelArguments, TrainingArguments))``: every field is an option."""
    classes = ctx.values.options.parser_classes(call)
    if not classes:
        return
    for cls in classes:
        if isinstance(cls, str):
            _library_class(ctx, call, cls)
        elif isinstance(cls, cst.ClassDef):
            _user_class(ctx, call, cls)


def _library_class(ctx: ScriptFacts, call: cst.Call, qualname: str) -> None:
    framework = config_framework(qualname)
    if framework is not None:
        ctx.framework(framework, call.func, f"{qualname.rsplit('.', 1)[-1]} parsed from the command line")
        ctx.anchor(call.func, ANCHOR_CONFIG)
        trainer_kind(ctx, call, frozenset({qualname}))
    if is_library_dataclass(qualname):
        for key in hf_args.OPTIONS:
            ctx.bind((key,), f"hf:{key}")


def _user_class(ctx: ScriptFacts, call: cst.Call, cls: cst.ClassDef) -> None:
    options = ctx.values.options
    library = options.library_base(cls)
    fields = _all_fields(ctx, cls)
    limits = _handed_to_truncation_limits(ctx, fields)
    for key in fields:
        if key in hf_args.FIELDS or key in ("bf16", "fp16"):
            ctx.bind((key,), f"hf:{key}")
        if key in limits:
            ctx.bind((key,), f"hf:{limits[key]}")
    if library is None:
        return
    _library_class(ctx, call, library)
    owner = cls.name.value
    skipped = _adapter_skipped(fields)
    for key, default in fields.items():
        if default is not None and key not in skipped:
            hf_field(ctx, key, ctx.values.evaluate(default), owner, call)


def _handed_to_truncation_limits(ctx: ScriptFacts, fields: dict[str, Any]) -> dict[str, str]:
    """The project's length fields the script hands to a trainer's truncation limit -> that limit:
    s1's ``args.max_seq_length = config.block_size`` (or ``SFTConfig(max_seq_length=data_args.block_size)``)
    makes ``--block_size`` the longest a sample is cut to, not the length of every batch as
    ``run_clm``'s grouped ``block_size`` is."""
    lengths = {key for key in fields if hf_args.FIELDS.get(key, ("",))[0] == "seq_len"
               and key not in hf_args.TRUNCATION_LIMITS}
    if not lengths:
        return {}
    found: dict[str, str] = {}

    def hand(target: str, value: cst.BaseExpression) -> None:
        if target in hf_args.TRUNCATION_LIMITS and isinstance(value, cst.Attribute) and value.attr.value in lengths:
            found.setdefault(value.attr.value, target)

    for node in ctx.python.nodes_of(cst.Assign, cst.Call):
        if isinstance(node, cst.Assign):
            if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Attribute):
                hand(node.targets[0].target.attr.value, node.value)
        else:
            for arg in node.args:
                if arg.keyword is not None:
                    hand(arg.keyword.value, arg.value)
    return found


def _all_fields(ctx: ScriptFacts, cls: cst.ClassDef, depth: int = 0) -> dict[str, Any]:
    """Fields of a dataclass and of the script's own dataclasses it extends (own first)."""
    options = ctx.values.options
    fields = dict(options.fields(cls))
    if depth < 6:
        own, _ = options.bases(cls)
        for base in own:
            for key, value in _all_fields(ctx, base, depth + 1).items():
                fields.setdefault(key, value)
    return fields


# ----------------------------------------------------------------- Lightning


def _devices(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, (list, tuple)):
        return len(value) or None
    if isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            return int(text) or None
        ids = [p for p in text.split(",") if p.strip()]
        if len(ids) > 1 and all(p.strip().isdigit() for p in ids):
            return len(ids)
    return None


def _precision(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, str)):
        return str(value).strip()
    return None


_FIT_CALL = re.compile(r"\.fit\s*\(")


def lightning(ctx: ScriptFacts, call: cst.Call, names: frozenset[str]) -> None:
    """Lightning ``Trainer(precision=, accumulate_grad_batches=, devices=, num_nodes=, strategy=)``
    and ``Fabric(...)``. A ``Trainer`` trains when the script fits something: one built only to
    serve, test or predict (NeMo's inference servers build one for the model's strategy) or
    whose ``.fit`` the script never calls runs no training step."""
    values = ctx.values
    owner = _short(names)
    fits = owner != "Trainer" or bool(_FIT_CALL.search(ctx.parsed.text))
    ctx.framework("lightning", call.func, f"Lightning {owner}(...)", trains=fits)
    ctx.anchor(call.func, ANCHOR_TRAINER)
    arguments = values.arguments(call)
    if "precision" in arguments:
        ctx.state_found("lightning_precision", values.evaluate(arguments.get("precision")), _precision,
                        f"{owner}(precision=...)", at=call, binding="lightning_precision", rank=RANK_CONFIG)
    if "accumulate_grad_batches" in arguments:
        ctx.state_found("grad_accum", values.evaluate(arguments.get("accumulate_grad_batches")), hf_args._int,
                        f"{owner}(accumulate_grad_batches=...)", at=call, binding="grad_accum", rank=RANK_CONFIG)
    devices_key = "devices" if "devices" in arguments else ("gpus" if "gpus" in arguments else None)
    if devices_key is not None:
        devices = values.evaluate(arguments.get(devices_key))
        nodes = values.evaluate(arguments.get("num_nodes")) if "num_nodes" in arguments else Found(1, None)
        count = _devices(devices.value) if devices is not None and devices.known else None
        node_count = nodes.value if nodes is not None and nodes.known and isinstance(nodes.value, int) else None
        if count is not None and node_count is not None and node_count > 0 and devices is not None \
                and devices.node is not None:
            note = f"{owner}({devices_key}=...)" + (f" x num_nodes={node_count}" if node_count > 1 else "")
            ctx.state("world_size", count * node_count, devices.node, note, at=call, rank=RANK_CONFIG)
            ctx.state("gpus_per_node", count, devices.node, f"{owner}({devices_key}=...)", at=call, rank=RANK_CONFIG)
    if "strategy" in arguments:
        found = values.evaluate(arguments.get("strategy"))
        if found is not None and found.known and isinstance(found.value, str) and found.node is not None:
            lightning_strategy_name(ctx, found.value, found.node, call)
