"""Facts from the calls that build the model: ``from_pretrained`` (id, dtype, attention,
quantization), ``BitsAndBytesConfig``, ``LoraConfig``, PEFT's k-bit preparation, Liger kernels."""

from __future__ import annotations

import functools
from typing import Any

import libcst as cst

from memlint.facts.script_facts import ANCHOR_MODEL, RANK_CONFIG, RANK_MODEL, ScriptFacts
from memlint.model.vocabulary import ATTENTION, SPREAD_DEVICE_MAPS, dtype_name
from memlint.python.library import (
    INT8_PREPARATION,
    KBIT_PREPARATION,
    LORA_CONFIGS,
    PEFT_WRAPPERS,
    QUANTIZATION_CONFIGS,
    image_model_library,
    is_config_loader,
    is_model_loader,
    is_unsloth_model,
    liger,
    other_framework_model,
)
from memlint.python.conditions import guard, guards
from memlint.python.index import index_for
from memlint.python.training import untrained_by_every_optimizer
from memlint.python.value_types import CallValue
from memlint.python.values import Found, Ref


def dtype_of(value: Any) -> str | None:
    """``torch.bfloat16`` / ``"bfloat16"`` / ``"auto"`` -> memlint dtype name."""
    if isinstance(value, Ref):
        return dtype_name(value.qualname)
    if isinstance(value, str):
        return dtype_name(value)
    return None


def model_id(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _targets(value: Any) -> tuple[str, ...] | None:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (tuple, list)) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    return None


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _positive_int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if value > 0 else None


# what to do with a model another framework trains (transformers' TF and Flax classes)
OTHER_FRAMEWORK_ADVICE = ("memlint sizes PyTorch training only; TensorFlow and JAX allocate GPU memory their own "
                          "way, so measure one step and silence this note with `# memlint: ignore[MEM003]`")

# what to do with a model memlint has no recipe for
IMAGE_MODEL_ADVICE = ("memlint sizes Transformers language and vision-language models only; measure one step "
                      "with `torch.cuda.max_memory_allocated()` and silence this note with `# memlint: ignore[MEM003]`")


@functools.lru_cache(maxsize=1024)
def _roles(names: frozenset[str]) -> tuple[bool, str | None, bool, bool, str | None, str | None, bool, bool]:
    """What a call's qualified names make it here: a model loader, an image model's library, a
    quantization config, a LoRA config, another PEFT method's config, a k-bit preparation (its
    name), a Liger patch, Unsloth's LoRA wrap. Asked of every call of the module after each edit,
    for a few dozen distinct sets of names (most calls have none)."""
    kbit = next((n.rsplit(".", 1)[-1] for n in sorted(names) if n in KBIT_PREPARATION or n in INT8_PREPARATION), None)
    return (any(is_model_loader(n) for n in names), next((lib for n in names if (lib := image_model_library(n))), None),
            bool(names & QUANTIZATION_CONFIGS), bool(names & LORA_CONFIGS),
            next((n for n in names if _other_peft_config(n)), None), kbit,
            any(liger(n) == "patch" for n in names), any(is_unsloth_model(n, "get_peft_model") for n in names))


def recognise(ctx: ScriptFacts, call: cst.Call, names: frozenset[str], method: str | None) -> None:
    loader, library, quantization, lora_config, other_peft, kbit, liger_patch, unsloth_lora = _roles(names)
    if loader:
        model_loader(ctx, call, names)
    elif project_model_class(call, names):
        named = ctx.values.arguments(call).named
        loading_arguments(ctx, {k: v for k, v in named.items() if k in ("torch_dtype", "dtype")}, call, RANK_MODEL)
    if unsloth_lora:
        unsloth_peft_model(ctx, call)
    framework = next((f for n in names if (f := other_framework_model(n))), None)
    if library is not None or framework is not None:
        code = " ".join(ctx.python.code_of(call).split())  # one line, as a message shows it
        code = code.replace("( ", "(").replace(" )", ")")
        shown = code if len(code) <= 60 else code[:57] + "..."
        what, advice = (f"a {library} image model (`{shown}`)", IMAGE_MODEL_ADVICE) if library is not None else \
            (f"a {framework} model (`{shown}`)", OTHER_FRAMEWORK_ADVICE)
        ctx.state("unmodelled", (what, advice), call, f"{library or framework} model", at=call)
    if quantization:
        bits_and_bytes(ctx, call)
    if lora_config:
        lora(ctx, call)
    elif other_peft is not None and _wrap_config(ctx, call):
        method = other_peft.rsplit(".", 1)[-1]
        extra = ctx.value_guards(call)
        if any(g.active is None and not g.options and _picks_by_name(g.node) for g in guards(ctx.values, call) + extra):
            return  # one of several methods a value memlint cannot read picks by name (a subcommand)
        ctx.state("peft_method", method, call.func, f"{method}(...) given to get_peft_model", at=call,
                  extra_guards=extra)
    if kbit == "prepare_model_for_int8_training":
        int8_preparation(ctx, call)
    elif kbit:
        arguments = ctx.values.arguments(call, ("model", "use_gradient_checkpointing"))
        ctx.switch("grad_ckpt", 1, arguments.get("use_gradient_checkpointing"), True, call.func,
                   f"{kbit} enables gradient checkpointing", at=call)
    if liger_patch:
        arguments = ctx.values.arguments(call)
        ctx.switch("fused_loss", True, arguments.get("fused_linear_cross_entropy"), True, call.func,
                   "Liger fused linear cross-entropy", at=call)


def _picks_by_name(test: cst.CSTNode | None) -> bool:
    """``args.adapter == "loha"``: a test that picks one of several branches by a name."""
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return False
    target = test.comparisons[0]
    return isinstance(target.operator, (cst.Equal, cst.NotEqual)) and isinstance(target.comparator, cst.SimpleString)


def int8_preparation(ctx: ScriptFacts, call: cst.Call) -> None:
    """peft's ``prepare_model_for_int8_training(model, output_embedding_layer_name,
    use_gradient_checkpointing=True, ...)`` enables gradient checkpointing only for a model
    loaded in 8 bits (``if loaded_in_8bit and use_gradient_checkpointing``): on when the load
    seen so far is 8-bit, bound to the options that make it 8-bit, off for any other load."""
    arguments = ctx.values.arguments(call, ("model", "output_embedding_layer_name", "use_gradient_checkpointing"))
    note = "prepare_model_for_int8_training enables gradient checkpointing (an 8-bit model)"
    quantization = ctx.facts.quantization
    if quantization is not None:
        if quantization.value == "int8":
            ctx.switch("grad_ckpt", 1, arguments.get("use_gradient_checkpointing"), True, call.func, note, at=call)
        return
    use = arguments.get("use_gradient_checkpointing")
    found = ctx.values.evaluate(use) if use is not None else None
    if use is not None and not (found is not None and found.known and found.value):
        return
    bindings = ctx.facts.cli_bindings
    for option, bound in list(bindings.items()):  # ``load_in_8bit=args.load_8bit``: the option decides both
        extra = tuple(b.replace("quantization=int8", "grad_ckpt=1") for b in bound
                      if b.removeprefix("not:") == "if:quantization=int8")
        bindings[option] = bound + tuple(b for b in extra if b not in bound)




def _other_peft_config(name: str) -> bool:
    """A PEFT adapter config other than LoRA (``peft.DeftConfig``, ``peft.HiraConfig``): the
    base weights are frozen, but what trains and what it keeps is the method's own."""
    parts = name.split(".")
    return parts[0] == "peft" and parts[-1].endswith("Config") and parts[-1] != "PeftConfig" and name not in LORA_CONFIGS


def _wrap_config(ctx: ScriptFacts, call: cst.Call) -> bool:
    """Is the config built by ``call`` the one a PEFT wrap gets (``get_peft_model(model, cfg)``,
    a trainer's ``peft_config=cfg``, or the call written inside either), or the one a helper returns
    to its caller for that? Sub-configs (``EvaConfig`` inside a ``LoraConfig``) are not."""
    values = ctx.values
    parent = values.parent(call)
    uses: list[cst.CSTNode] = [call]
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
        target = parent.targets[0].target
        scope = ctx.python.scopes.get(parent)
        if scope is None:
            return False
        uses = [a.node for assignment in scope.assignments[target.value]
                if getattr(assignment, "node", None) is target for a in assignment.references]
    for use in uses:
        arg = values.parent(use)
        wrap = values.parent(arg) if isinstance(arg, cst.Arg) else None
        if isinstance(wrap, cst.Call) and values.callee_names(wrap) & PEFT_WRAPPERS:
            return True
        if isinstance(arg, cst.Arg) and arg.keyword is not None and arg.keyword.value == "peft_config":
            return True  # ``SFTTrainer(model, peft_config=cfg)``: the trainer wraps the model
        holder = values.parent(arg) if isinstance(arg, cst.Element) else arg  # the returned tuple
        if isinstance(holder, cst.Tuple):
            holder = values.parent(holder)
        if isinstance(holder, cst.Return):
            return True  # ``return model, peft_config, tokenizer``: built for whoever wraps the model
    return False


_FROZEN_NAMES = ("teacher", "ref_model", "ref_policy", "reference", "reward_model", "reward", "frozen", "judge",
                 "value_model", "critic")


def is_frozen_companion(values, call: cst.Call) -> bool:
    """A model loaded beside the one being trained: a distillation teacher, a DPO reference, a
    reward model or a PPO value model (the trainer's keywords say which: script_trainers.py)
    -- ``from_pretrained(...).eval()`` / ``.requires_grad_(False)`` in the same
    chain, or assigned to a name that says so (``teacher = ...``, ``ref_model = ...``)."""
    node: cst.CSTNode = call
    parent = values.parent(node)
    while isinstance(parent, cst.Attribute) or (isinstance(parent, cst.Call) and parent.func is node):
        if isinstance(parent, cst.Attribute):
            method = parent.attr.value
            call_node = values.parent(parent)
            if method == "eval" or (method == "requires_grad_" and isinstance(call_node, cst.Call)
                                    and call_node.args and values.evaluate(call_node.args[0].value) is not None
                                    and values.evaluate(call_node.args[0].value).value is False):
                return True
        node, parent = parent, values.parent(parent)
    if isinstance(parent, cst.Assign):
        for target in parent.targets:
            name = target.target.value if isinstance(target.target, cst.Name) else (
                target.target.attr.value if isinstance(target.target, cst.Attribute) else "")
            if any(word in name.lower() for word in _FROZEN_NAMES):
                return True
    return False


def _left_out_of_the_optimizers(ctx: ScriptFacts, call: cst.Call) -> bool:
    """A model loaded into a name that none of the script's optimizers trains (a caption
    encoder beside the model the script builds and trains: ``training.untrained_by_every_optimizer``)."""
    values = ctx.values
    node: cst.CSTNode = call
    parent = values.parent(node)
    while isinstance(parent, cst.Attribute) or (isinstance(parent, cst.Call) and parent.func is node):
        node, parent = parent, values.parent(parent)
    if not (isinstance(parent, cst.Assign) and len(parent.targets) == 1
            and isinstance(parent.targets[0].target, cst.Name)):
        return False
    index = index_for(ctx.python)
    return index is not None and untrained_by_every_optimizer(index, parent.targets[0].target.value, parent)


def model_loader(ctx: ScriptFacts, call: cst.Call, names: frozenset[str]) -> None:
    values = ctx.values
    if is_frozen_companion(values, call) or _left_out_of_the_optimizers(ctx, call):
        return  # not the model being trained
    ctx.model_loaders += 1
    ctx.anchor(call.func, ANCHOR_MODEL)
    if any(n.endswith(".from_config") for n in names):
        arguments = values.arguments(call, ("config",))
        written = arguments.get("config")
        config = values.definition(written) if written is not None else None
        if isinstance(config, cst.Call) and any(is_config_loader(n) for n in values.callee_names(config)):
            inner = values.arguments(config, ("pretrained_model_name_or_path",))
            ctx.state_found("model", values.evaluate(inner.get("pretrained_model_name_or_path")), model_id,
                            "AutoConfig.from_pretrained(...) then from_config", at=call, binding="model")
    elif any(is_unsloth_model(n, "from_pretrained") for n in names):
        unsloth_loader(ctx, call)
        return
    else:
        arguments = values.arguments(call, ("pretrained_model_name_or_path",))
        ctx.state_found("model", values.evaluate(arguments.get("pretrained_model_name_or_path")), model_id,
                        "from_pretrained(...)", at=call, binding="model")
    # a later loader's model is a companion the trainer does not train (TRL's BCO loads an
    # embedding model with device_map="auto" for its classifier): its spread is not the run's
    loading_arguments(ctx, values.arguments(call).named, call, RANK_MODEL, spread=ctx.model_loaders == 1)
    if ctx.model_loaders == 1 and any(n.rpartition(".")[0].endswith("ForSequenceClassification") for n in names):
        sequence_classifier(ctx, call)  # (only the loader whose model is the run's: the first)
    if any(liger(n) == "loader" for n in names):
        ctx.state("fused_loss", True, call.func, "AutoLigerKernelForCausalLM: Liger fused linear cross-entropy",
                  at=call)


def unsloth_loader(ctx: ScriptFacts, call: cst.Call) -> None:
    """``FastLanguageModel.from_pretrained(model_name=..., load_in_4bit=...)``: Unsloth loads in
    4 bits (NF4, double quantization) unless ``load_in_4bit=False``, ``load_in_8bit`` or
    ``full_finetuning`` says otherwise, and patches the model's loss into a fused, chunked
    cross-entropy and its attention into memory-efficient kernels (Unsloth's ``models/loader.py``,
    ``models/llama.py`` and, for gpt-oss, its flex attention)."""
    if not ctx.runs(call)[0]:
        return  # an optional Unsloth branch (peft's ``if args.use_unsloth:``): its defaults are not the run's
    values = ctx.values
    named = values.arguments(call, ("model_name", "max_seq_length", "dtype", "load_in_4bit")).named
    ctx.state_found("model", values.evaluate(named.get("model_name")), model_id,
                    "FastLanguageModel.from_pretrained(model_name=...)", at=call, binding="model")
    loading_arguments(ctx, {k: v for k, v in named.items() if k != "load_in_4bit"}, call, RANK_MODEL)
    if "load_in_8bit" in named or "full_finetuning" in named:
        if "load_in_4bit" not in named:
            return  # the other switches decide; Unsloth turns 4 bits off for either
    ctx.switch("quantization", "nf4", named.get("load_in_4bit"), True, call.func,
               "Unsloth's from_pretrained loads in 4 bits (NF4) unless load_in_4bit=False", at=call)
    ctx.switch("double_quant", True, named.get("load_in_4bit"), True, call.func,
               "Unsloth's 4-bit loading uses double quantization", at=call)
    ctx.state("fused_loss", True, call.func, "Unsloth's models compute the loss with a fused, chunked "
              "cross-entropy (unsloth_fused_ce_loss: no full logits)", at=call)
    ctx.state("attention", "flash", call.func, "Unsloth's models run its own attention kernels (Flash Attention 2, "
              "xformers, or flex attention for gpt-oss): no sequence-by-sequence scores held", at=call)


def unsloth_peft_model(ctx: ScriptFacts, call: cst.Call) -> None:
    """``FastLanguageModel.get_peft_model(model, r=16, target_modules=[...],
    use_gradient_checkpointing="unsloth")``: LoRA (Unsloth's default rank 16), and gradient
    checkpointing on unless ``use_gradient_checkpointing=False`` ("unsloth" also moves the saved
    activations to the host: counting them on the GPU overstates, never understates)."""
    if not ctx.runs(call)[0]:
        return  # as ``unsloth_loader``: an optional branch's defaults are not the run's
    lora(ctx, call, default_r=16, source="FastLanguageModel.get_peft_model", owner="Unsloth")
    arguments = ctx.values.arguments(call, ("model",))
    ctx.switch("grad_ckpt", 1, arguments.get("use_gradient_checkpointing"), True, call.func,
               'Unsloth\'s get_peft_model checkpoints by default (use_gradient_checkpointing="unsloth")', at=call)


def sequence_classifier(ctx: ScriptFacts, call: cst.Call) -> None:
    """``AutoModelForSequenceClassification.from_pretrained(name, num_labels=1)``: a reward or value
    model trained with a ``score`` layer in place of the vocabulary head (TRL's reward and PPO
    scripts). Without ``num_labels`` transformers keeps the checkpoint's count, 2 by default."""
    named = ctx.values.arguments(call).named
    if "num_labels" in named:
        ctx.state_found("score_head", ctx.values.evaluate(named["num_labels"]),
                        lambda v: v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None,
                        "from_pretrained(num_labels=...) of a sequence classifier", at=call)
    else:
        ctx.state("score_head", 2, call.func, "a sequence classifier without num_labels: transformers' "
                  "default of 2 labels", at=call)


# callables of the libraries memlint reads by name: a project's own class is none of these
_LIBRARY_PREFIXES = ("torch.", "transformers.", "trl.", "peft.", "accelerate.", "deepspeed.", "diffusers.",
                     "vllm.", "sentence_transformers.", "builtins.")


def project_model_class(call: cst.Call, names: frozenset[str]) -> bool:
    """``GritLMTrainModel(model_name_or_path=..., torch_dtype=...)``: a class of the project built
    with a model name and a load dtype as ``from_pretrained`` is, whose constructor hands them to
    it (memlint does not follow the constructor): the dtype is the trained model's."""
    keywords = {a.keyword.value for a in call.args if a.keyword is not None}
    return "torch_dtype" in keywords and bool(keywords & {"model_name_or_path", "pretrained_model_name_or_path"}) \
        and not any(n.startswith(_LIBRARY_PREFIXES) for n in names)


def dtype_by_options(ctx: ScriptFacts, found: Found | None, at: cst.CSTNode, rank: int) -> bool:
    """``torch_dtype=args_to_dtype(training_args)`` with ``def args_to_dtype(args): if args.bf16:
    return torch.bfloat16`` ... ``return torch.float32`` (GritLM's ``run.py``): the function's
    last return is the load dtype, and each earlier ``if <option>: return <dtype>`` binds its
    option to its dtype. False (nothing stated) for any other body."""
    values = ctx.values
    if found is None or not isinstance(found.value, CallValue):
        return False
    function: Any = values.definition(found.value.call.func)
    if isinstance(function, cst.Name):
        defined = values.definitions(function)
        function = defined[0] if len(defined) == 1 else None
    if not isinstance(function, cst.FunctionDef) or not isinstance(function.body, cst.IndentedBlock):
        return False
    chosen: list[tuple[tuple[str, ...], str]] = []
    for statement in function.body.body:
        returned = _returned(statement)
        if isinstance(statement, cst.If) and statement.orelse is None and (inner := _returned(statement.body)) is not None:
            test = guard(values, statement.test, negated=False)
            dtype = _dtype_at(values, inner)
            if not test.options or test.negated or test.equals is not None or dtype is None:
                return False
            chosen.append((test.options, dtype))
        elif returned is not None:
            default = _dtype_at(values, returned)
            if default is None or not chosen:
                return False
            for options, dtype in chosen:
                ctx.bind(options, f"if:load_dtype={dtype}")
            name = function.name.value
            ctx.state("load_dtype", default, returned, f"{name}(...) returns {default} unless "
                      + " or ".join(f"--{o[0]}" for o, _ in chosen) + " is passed", at=at, rank=rank)
            return True
        elif not (isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1
                  and isinstance(statement.body[0], cst.Expr)):  # a docstring
            return False
    return False


def _returned(statement: cst.CSTNode) -> cst.BaseExpression | None:
    """The value of a lone ``return X``: a statement, or the whole body of an ``if`` (indented,
    or on the ``if``'s own line)."""
    if isinstance(statement, cst.IndentedBlock) and len(statement.body) == 1:
        statement = statement.body[0]
    if isinstance(statement, (cst.SimpleStatementLine, cst.SimpleStatementSuite)) and len(statement.body) == 1 \
            and isinstance(statement.body[0], cst.Return):
        return statement.body[0].value
    return None


def _dtype_at(values, expr: cst.BaseExpression | None) -> str | None:
    found = values.evaluate(expr) if expr is not None else None
    return dtype_of(found.value) if found is not None and found.known else None


def loading_arguments(ctx: ScriptFacts, named: dict[str, cst.BaseExpression], at: cst.CSTNode, rank: int,
                      spread: bool = True) -> None:
    """``from_pretrained`` keywords (also ``SFTConfig(model_init_kwargs={...})``); ``spread``
    False: a ``device_map`` there is not the trained model's."""
    values = ctx.values
    for key in ("torch_dtype", "dtype"):
        if key in named:
            found = values.evaluate(named[key])
            if not dtype_by_options(ctx, found, at, rank):
                ctx.state_found("load_dtype", found, dtype_of, f"from_pretrained({key}=...)",
                                at=at, binding="load_dtype", rank=rank)
            ctx.state("load_dtype_written", True, named[key], f"from_pretrained({key}=...)", at=at, rank=rank)
    if "attn_implementation" in named:
        ctx.state_found("attention", values.evaluate(named["attn_implementation"]),
                        lambda v: ATTENTION.get(v) if isinstance(v, str) else None,
                        "from_pretrained(attn_implementation=...)", at=at, binding="hf:attn_implementation", rank=rank)
    if "use_flash_attention_2" in named:
        ctx.switch("attention", "flash", named["use_flash_attention_2"], False, at,
                   "from_pretrained(use_flash_attention_2=True)", at=at, rank=rank)
    placed = values.evaluate(named["device_map"]) if spread and "device_map" in named else None
    if placed is not None and placed.options:  # ``device_map=cfg["model"]["device_map"]``, ``args.device_map``
        ctx.bind(placed.options, "device_map")
    if placed is not None and placed.known and isinstance(placed.value, str) and placed.value in SPREAD_DEVICE_MAPS:
        # the keyword as written: a bare "auto" would read as DeepSpeed's "auto" when runs merge
        ctx.state("device_map", f'device_map="{placed.value}"', placed.node, "from_pretrained(device_map=...)",
                  at=at, rank=rank)
    # transformers' legacy shortcuts build BitsAndBytesConfig(load_in_4bit=True): fp4 by default
    if "load_in_4bit" in named:
        ctx.switch("quantization", "fp4", named["load_in_4bit"], False, at, "from_pretrained(load_in_4bit=True)",
                   at=at, rank=rank)
    if "load_in_8bit" in named:
        ctx.switch("quantization", "int8", named["load_in_8bit"], False, at, "from_pretrained(load_in_8bit=True)",
                   at=at, rank=rank)


def bits_and_bytes(ctx: ScriptFacts, call: cst.Call) -> None:
    values = ctx.values
    arguments = values.arguments(call)
    guards = ctx.value_guards(call)

    def argument(name: str) -> Found | None:
        return values.evaluate(arguments.get(name)) if name in arguments else None

    four, eight = argument("load_in_4bit"), argument("load_in_8bit")
    kind: str | None = "fp4"  # BitsAndBytesConfig's default bnb_4bit_quant_type
    kind_found = argument("bnb_4bit_quant_type")
    if "bnb_4bit_quant_type" in arguments:
        if kind_found is None or not kind_found.known or kind_found.value not in ("nf4", "fp4"):
            kind = None
        else:
            kind = kind_found.value
    if four is not None and kind is not None:
        ctx.bind_switch(four, "quantization", kind)
    if eight is not None:
        ctx.bind_switch(eight, "quantization", "int8")
    double = argument("bnb_4bit_use_double_quant")
    if double is not None and double.options:  # peft's ``bnb_4bit_use_double_quant=args.use_nested_quant``
        ctx.bind(double.options, "if:double_quant=true")
    if four is not None and four.known and four.value is True and four.node is not None:
        if kind is not None:
            where = kind_found.node if kind_found is not None and kind_found.node is not None else four.node
            note = "BitsAndBytesConfig(bnb_4bit_quant_type=...)" if kind_found is not None else (
                "BitsAndBytesConfig(load_in_4bit=True): fp4 by default")
            ctx.state("quantization", kind, where, note, at=call, extra_guards=guards, rank=RANK_CONFIG)
        if "bnb_4bit_use_double_quant" not in arguments:
            ctx.state("double_quant", False, four.node, "bnb_4bit_use_double_quant defaults to False",
                      at=call, extra_guards=guards, rank=RANK_CONFIG)
        elif double is not None and double.known and isinstance(double.value, bool):
            ctx.state("double_quant", double.value, double.node, "BitsAndBytesConfig(bnb_4bit_use_double_quant=...)",
                      at=call, extra_guards=guards, rank=RANK_CONFIG)
    elif eight is not None and eight.known and eight.value is True and eight.node is not None:
        ctx.state("quantization", "int8", eight.node, "BitsAndBytesConfig(load_in_8bit=True)", at=call,
                  extra_guards=guards, rank=RANK_CONFIG)


def _or_fallback(values, expr: cst.BaseExpression | None) -> tuple[Found, Found] | None:
    """``option or 64``: the option's (unknown) value and the known positive number that
    replaces it when it is unset or zero."""
    if not isinstance(expr, cst.BooleanOperation) or not isinstance(expr.operator, cst.Or):
        return None
    option, written = values.evaluate(expr.left), values.evaluate(expr.right)
    if option is None or option.known or not option.options or written is None or not written.known \
            or _positive_int(written.value) is None or written.node is None:
        return None
    return option, written


def lora(ctx: ScriptFacts, call: cst.Call, default_r: int = 8, source: str = "LoraConfig", owner: str = "PEFT") -> None:
    values = ctx.values
    arguments = values.arguments(call)
    guards = ctx.value_guards(call)
    r = values.evaluate(arguments.get("r")) if "r" in arguments else None
    written_r = arguments.get("r")
    fallback = _or_fallback(values, written_r) if r is None and written_r is not None else None
    if r is None and "r" not in arguments:
        ctx.state("lora_r", default_r, call.func, f"{source}: {owner}'s default r={default_r}", at=call, extra_guards=guards)
    elif fallback is not None and written_r is not None:
        # ``r=training_args.lora_r or 64`` over a field of an arguments class another module
        # defines (s1ckrain/Qwen3-VL-finetune): the adapter is there whatever its rank; the rank
        # a launch passes wins, else the fallback written beside it stands for it
        option, written = fallback
        ctx.bind_found(option, "lora_r")
        ctx.state("lora_r", written.value, written.node, f"{source}(r=...): the fallback of `{values.source.code_of(written_r)}`",
                  at=call, extra_guards=guards)
    else:
        ctx.state_found("lora_r", r, _positive_int, f"{source}(r=...)", at=call, binding="lora_r",
                        extra_guards=guards)
    if "target_modules" in arguments:
        ctx.state_found("lora_targets", values.evaluate(arguments.get("target_modules")), _targets,
                        f"{source}(target_modules=...)", at=call, binding="lora_targets", extra_guards=guards)
    if "lora_dropout" in arguments:
        ctx.state_found("lora_dropout", values.evaluate(arguments.get("lora_dropout")), _float,
                        f"{source}(lora_dropout=...)", at=call, binding="lora_dropout", extra_guards=guards)
