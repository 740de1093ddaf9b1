"""Facts from hand-written training code: optimizers, ``DataLoader(batch_size=...)``, tokenizer
lengths, ``torch.autocast``, ``model.half()``/``.to(dtype)``, gradient checkpointing calls, and
the ``outputs = model(**batch); outputs.loss.backward()`` pattern that keeps the logits alive."""

from __future__ import annotations

import functools
import re
import sys

import libcst as cst

from memlint.facts.hf_args import FIELDS as HF_FIELDS
from memlint.facts.hf_args import _int
from memlint.facts.script_facts import RANK_EXPLICIT, RANK_LOOP, RANK_MODEL, ScriptFacts
from memlint.facts.script_models import dtype_of
from memlint.python.library import (
    AUTOCASTS,
    CHECKPOINT_FUNCTIONS,
    DATALOADERS,
    MODEL_WRAPPERS,
    NOT_UPDATER_NAME,
    UPDATER_NAME,
    is_model_class,
    is_model_loader,
    is_tokenizer_loader,
    optimizer_class,
)
from memlint.python.tree import children
from memlint.python.values import Found, Ref, Values

_MODEL_NAMES = {"model", "policy", "actor", "net", "llm", "engine", "model_engine", "ds_engine"}
_MODEL_METHODS = ("half", "to", "cuda", "bfloat16", "float", "train", "to_empty")
_TOKENIZER_METHODS = ("encode", "encode_plus", "batch_encode_plus", "apply_chat_template", "__call__")
_BACKWARD_METHODS = ("backward", "manual_backward")
_NO_GRAD = ("torch.no_grad", "torch.inference_mode", "torch.autograd.grad_mode.no_grad")
_EVAL_WORDS = {"eval", "evaluation", "valid", "validation", "val", "test", "dev", "predict", "inference"}
_TRAIN_WORDS = {"train", "training"}


def _model_name(name: str) -> bool:
    lower = name.lower()
    return lower in _MODEL_NAMES or (lower.endswith("model") and not lower.startswith("auto"))


def loads_model(values: Values, call: cst.Call, depth: int = 0) -> bool:
    """Does this call produce a model (a loader, a PEFT wrapper, ``model.half()``)?"""
    names = values.callee_names(call)
    if any(is_model_loader(n) or is_model_class(n) or n in MODEL_WRAPPERS for n in names):
        return True
    func = call.func
    return (
        depth < 6 and isinstance(func, cst.Attribute) and func.attr.value in _MODEL_METHODS
        and is_model(values, func.value, depth + 1)
    )


def is_model(values: Values, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """Is ``expr`` the model being trained? By data flow (assigned from a loader) or by name
    (``model``, ``self.model``, ``model_engine``)."""
    if isinstance(expr, cst.Name) and _model_name(expr.value):
        return True
    if isinstance(expr, cst.Attribute) and _model_name(expr.attr.value):
        return True
    if isinstance(expr, cst.Call):
        return loads_model(values, expr, depth)
    if isinstance(expr, cst.Name) and depth < 6:
        if depth == 0:  # asked of most calls' receivers: kept across edits
            return values.kept_answer(expr, "model", lambda: _could_be_model(values, expr, 0))
        return _could_be_model(values, expr, depth)
    return False


def _could_be_model(values: Values, name: cst.Name, depth: int) -> bool:
    return values.could_be(name, lambda e: isinstance(e, cst.Call) and loads_model(values, e, depth + 1))


@functools.lru_cache(maxsize=1024)
def _roles(names: frozenset[str]) -> tuple[str | None, bool, bool, bool, bool]:
    """What a call's qualified names make it here: the optimizer it builds, a data loader, an
    autocast, an activation checkpoint, a tokenizer loader. Asked of every call of the module
    after each edit, for a few dozen distinct sets of names (most calls have none)."""
    kinds = {k for n in names if (k := optimizer_class(n)) is not None}
    return (kinds.pop() if kinds else None, bool(names & DATALOADERS), bool(names & AUTOCASTS),
            bool(names & CHECKPOINT_FUNCTIONS), any(is_tokenizer_loader(n) for n in names))


def recognise(ctx: ScriptFacts, call: cst.Call, names: frozenset[str], method: str | None) -> None:
    _pads_to_max_length(ctx, call)
    kind, loader, autocasts, checkpoint, tokenizer_loader = _roles(names)
    if kind is not None:
        optimizer(ctx, call, kind)
    if loader:
        dataloader(ctx, call)
    if autocasts:
        autocast(ctx, call, names)
    if checkpoint and ctx.values.enclosing_function(call) is not None:
        ctx.state("grad_ckpt", 1, call.func, "torch.utils.checkpoint in a custom forward", at=call)
    if tokenizer_loader:
        arguments = ctx.values.arguments(call)
        if "model_max_length" in arguments:
            _length_candidate(ctx, ctx.values.evaluate(arguments.get("model_max_length")), call,
                              "AutoTokenizer.from_pretrained(model_max_length=...)")
    if method is None:
        if isinstance(call.func, cst.Name) and is_model(ctx.values, call.func):
            forward(ctx, call)
        elif isinstance(call.func, cst.Name) and _is_tokenizer(ctx.values, call.func):
            tokenizer_call(ctx, call)
        else:
            data_helper_call(ctx, call)
        return
    assert isinstance(call.func, cst.Attribute)  # ``method`` is the name of the called attribute
    receiver = call.func.value
    if method in _BACKWARD_METHODS:
        ctx.pending.setdefault("backward", []).append(call)
    elif method == "step" and _updates_parameters(receiver):
        ctx.pending.setdefault("steps", []).append(call)
    elif method in ("gradient_checkpointing_enable", "activation_checkpointing_enable"):
        every = ctx.values.arguments(call).get("every_n_layers")
        found = ctx.values.evaluate(every) if every is not None else None
        if found is not None and found.known and isinstance(found.value, int) and found.value >= 1:
            ctx.state("grad_ckpt", found.value, found.node, f"{method}(every_n_layers=...)", at=call)
        elif every is None:
            ctx.state("grad_ckpt", 1, call.func.attr, f"model.{method}()", at=call)
    elif method in ("half", "bfloat16") and not call.args and is_model(ctx.values, receiver):
        dtype = "fp16" if method == "half" else "bf16"
        ctx.state("half_model", dtype, call.func.attr, f"model.{method}()", at=call, rank=RANK_MODEL)
    elif method == "to" and is_model(ctx.values, receiver):
        _model_to(ctx, call)
    elif method == "forward" and is_model(ctx.values, receiver):
        forward(ctx, call)
    elif method in _TOKENIZER_METHODS and _is_tokenizer(ctx.values, receiver):
        tokenizer_call(ctx, call)
    elif _is_tokenizer(ctx.values, call.func):  # a dataset's ``self.tokenizer(text, max_length=...)``
        tokenizer_call(ctx, call)


# ----------------------------------------------------------------- optimizers


def optimizer(ctx: ScriptFacts, call: cst.Call, kind: str) -> None:
    """``torch.optim.AdamW(params, lr, fused=True)`` -> adamw-fused; ``foreach=False`` -> for-loop."""
    ctx.training = True
    ctx.training_at.append(call)
    arguments = ctx.values.arguments(call)
    node: cst.CSTNode = call.func
    note = "optimizer class"
    if kind in ("adamw", "adam"):
        fused = ctx.values.evaluate(arguments.get("fused")) if "fused" in arguments else None
        foreach = ctx.values.evaluate(arguments.get("foreach")) if "foreach" in arguments else None
        if fused is not None and fused.known and fused.value is True and fused.node is not None:
            kind, node, note = "adamw-fused", fused.node, "fused=True"
        elif foreach is not None and foreach.known and foreach.value is False and foreach.node is not None:
            kind, node, note = "adamw-forloop", foreach.node, "foreach=False"
        elif (fused is not None and not fused.known) or (foreach is not None and not foreach.known):
            return  # the implementation depends on a value we cannot see
    ctx.state("optimizer", kind, node, f"optimizer built in the script ({note})", at=call, rank=RANK_EXPLICIT)


# ----------------------------------------------------------------- batch and sequence


def _words(text: str) -> set[str]:
    return set(re.split(r"[^a-z0-9]+", text.lower()))


def _name_words(text: str) -> set[str]:
    """The words of a callee's name, a class's CamelCase too: ``DataCollator`` -> data, collator."""
    return _words(re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", text))


def dataloader(ctx: ScriptFacts, call: cst.Call) -> None:
    values = ctx.values
    arguments = values.arguments(call, ("dataset", "batch_size", "shuffle", "sampler"))
    if "batch_size" not in arguments:
        return
    words: set[str] = set()
    for key in ("dataset", "sampler"):
        written = arguments.get(key)
        if written is not None:
            words |= _words(ctx.python.code_of(written))
    parent = values.parent(call)
    if isinstance(parent, cst.Assign):
        for target in parent.targets:
            words |= _words(ctx.python.code_of(target.target))
    role = "eval" if words & _EVAL_WORDS else ("train" if words & _TRAIN_WORDS else "unknown")
    if role != "eval" and "shuffle" in arguments:
        shuffle = values.evaluate(arguments.get("shuffle"))
        if shuffle is not None and shuffle.known and shuffle.value is True:
            role = "train"
    ctx.pending.setdefault("dataloaders", []).append((role, values.evaluate(arguments.get("batch_size")), call))


def finish_dataloaders(ctx: ScriptFacts) -> None:
    """The training DataLoader's batch size, when the script says which loader trains."""
    loaders = [entry for entry in ctx.pending.get("dataloaders", []) if entry[0] != "eval"]
    if any(role == "train" for role, _, _ in loaders):
        loaders = [entry for entry in loaders if entry[0] == "train"]
    for _, found, _ in loaders:
        if found is not None:
            ctx.bind_found(found, "micro_batch")
    framework = ctx.facts.framework.value if ctx.facts.framework is not None else None
    if not loaders or framework in ("hf-trainer", "trl"):
        return  # Trainers build their own loaders from per_device_train_batch_size
    known = [(found, call) for _, found, call in loaders if found is not None and found.known and found.node]
    if len(known) != len(loaders) or len({f.value for f, _ in known}) != 1:
        return  # several training loaders that disagree, or one we cannot read
    found, call = known[0]
    ctx.state_found("micro_batch", found, _int, "DataLoader(batch_size=...)", at=call, binding="micro_batch",
                    rank=RANK_LOOP)


def _is_tokenizer(values: Values, expr: cst.BaseExpression) -> bool:
    name = expr.value if isinstance(expr, cst.Name) else (expr.attr.value if isinstance(expr, cst.Attribute) else "")
    if name.lower() in ("tokenizer", "tok", "processor", "processing_class") or name.lower().endswith("tokenizer"):
        return True
    if isinstance(expr, cst.Name):
        return values.kept_answer(expr, "tokenizer", lambda: values.could_be(
            expr, lambda e: isinstance(e, cst.Call) and any(is_tokenizer_loader(n) for n in values.callee_names(e))
        ))
    return False


def tokenizer_call(ctx: ScriptFacts, call: cst.Call) -> None:
    arguments = ctx.values.arguments(call)
    if "max_length" in arguments:
        length = arguments.get("max_length")
        found = ctx.values.evaluate(length)
        _length_candidate(ctx, found, call, "tokenizer(max_length=...)")
        if found is not None:
            labels = "text_target" in arguments or _names_labels(length) or _under_target_tokenizer(ctx, call)
            ctx.pending.setdefault("target_lengths" if labels else "source_lengths", []).append((found, call))


# the words a length of the labels is named by (run_summarization's ``max_target_length``,
# ``val_max_target_length``; ``max_tgt_len``, ``max_label_length``)
_LABEL_WORDS = re.compile(r"(^|_)(target|tgt|label|labels|summary|answer|response|output)(_|$)", re.I)


def _names_labels(expr: cst.BaseExpression | None) -> bool:
    name = expr.value if isinstance(expr, cst.Name) else (expr.attr.value if isinstance(expr, cst.Attribute) else "")
    return bool(_LABEL_WORDS.search(name))


def _under_target_tokenizer(ctx: ScriptFacts, call: cst.Call) -> bool:
    """``with tokenizer.as_target_tokenizer(): labels = tokenizer(targets, max_length=...)``."""
    node: cst.CSTNode | None = call
    while node is not None:
        node = ctx.values.parent(node)
        if isinstance(node, cst.With) and any(
                isinstance(item.item, cst.Call) and isinstance(item.item.func, cst.Attribute)
                and item.item.func.attr.value == "as_target_tokenizer" for item in node.items):
            return True
        if isinstance(node, (cst.FunctionDef, cst.Module)):
            return False
    return False


def _pads_to_max_length(ctx: ScriptFacts, call: cst.Call) -> None:
    """``tokenizer(text, truncation=True, max_length=512, padding="max_length")`` (or a collator
    built so): every sequence is as long as the limit."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "padding":
            found = ctx.values.evaluate(arg.value)
            if found is not None and found.known and found.value == "max_length" and found.node is not None:
                ctx.state("full_length", 'padding="max_length"', found.node, 'padding="max_length"', at=call,
                          rank=RANK_LOOP)


# keywords a data helper takes its truncation length by, next to the tokenizer it is given
_LENGTH_KEYWORDS = ("max_length", "max_seq_length", "max_seq_len", "seq_len", "seq_length", "block_size",
                    "context_length", "cutoff_len")
_NOT_TRAINING_DATA = frozenset({"generate", "generation", "sample", "samples", "sampling", "decode", "predict",
                                "inference", "eval", "evaluate", "evaluation", "validate", "validation"})
_DATA_WORDS = frozenset({"loader", "loaders", "dataloader", "data", "dataset", "datasets", "corpus", "batches",
                         "packed", "pack", "tokenize", "tokenized", "encode", "collate", "collator", "split", "splits",
                         "stream", "shards", "examples"})
_BATCH_KEYWORDS = ("batch_size", "micro_batch_size", "per_device_batch_size")
# libraries whose functions are not the project's data code
_LIBRARY_ROOTS = frozenset({
    "torch", "transformers", "datasets", "peft", "trl", "accelerate", "deepspeed", "bitsandbytes", "lightning",
    "pytorch_lightning", "numpy", "pandas", "tokenizers", "evaluate", "sentencepiece", "jax", "flax",
    "tensorflow", "sklearn", "wandb", "mlflow", "huggingface_hub", "safetensors", "vllm", "unsloth", "webdataset",
}) | frozenset(sys.stdlib_module_names)


def _project_code(values: Values, call: cst.Call) -> bool:
    """A function of the project itself: imported from one of its own modules, or defined here."""
    names = values.callee_names(call)
    if names:
        return all(name.split(".")[0] not in _LIBRARY_ROOTS for name in names)
    if not isinstance(call.func, cst.Name):
        return False
    found = values.definitions(call.func)
    return bool(found) and all(isinstance(d, cst.FunctionDef) for d in found)


def data_helper_call(ctx: ScriptFacts, call: cst.Call) -> None:
    """``load_corpus(tokenizer, max_length=args.seq_len)``, ``packed_loader(model_id,
    seq_len=args.seq_len, batch_size=args.micro_batch)``, ``DataCollator(eos_id, max_length=512)``
    (a collator of the project that truncates each batch): the script hands a length (and a batch
    size) to its own data code, often in another module, which tokenizes and batches with them.
    The function must be the project's and say it is data code -- by its name or by taking the
    tokenizer -- so ``build_index(vectors, batch_size=64)`` is not read as training data."""
    keywords = {arg.keyword.value: arg.value for arg in call.args if arg.keyword is not None}
    length = next((keywords[k] for k in _LENGTH_KEYWORDS if k in keywords), None)
    batch = next((keywords[k] for k in _BATCH_KEYWORDS if k in keywords), None)
    if length is None and batch is None:
        return
    words = _name_words(ctx.python.code_of(call.func))
    if words & _NOT_TRAINING_DATA or not _project_code(ctx.values, call):
        return  # print_samples(model, tokenizer, max_length=64): generation, not the training batches
    if not (words & _DATA_WORDS or any(_is_tokenizer(ctx.values, arg.value) for arg in call.args)):
        return
    if length is not None:
        _length_candidate(ctx, ctx.values.evaluate(length), call, "length passed to the project's data code")
    if batch is not None and _iterated(ctx, call):
        ctx.pending.setdefault("dataloaders", []).append(("train", ctx.values.evaluate(batch), call))


def _iterated(ctx: ScriptFacts, call: cst.Call) -> bool:
    """Does a ``for`` loop iterate what the call returns (``for batch in enumerate(loader)``)?"""
    parent = ctx.values.parent(call)
    if isinstance(parent, cst.For):
        return True
    if not isinstance(parent, cst.Assign) or not isinstance(parent.targets[0].target, cst.Name):
        return False
    name = parent.targets[0].target.value
    loops = ctx.pending.get("loop_iterables")
    if loops is None:
        # every ``for`` of the module, from the nodes the source has already listed: a libcst
        # visit rebuilds every node it enters (0.5-0.9 s on a trainer module); the words are a
        # set, so the order does not matter
        loops = ctx.pending["loop_iterables"] = set().union(*(
            _words(ctx.python.code_of(node.iter)) for node in ctx.python.nodes_of(cst.For)
        ))
    return name.lower() in loops


def _length_candidate(ctx: ScriptFacts, found: Found | None, call: cst.CSTNode, note: str) -> None:
    if found is not None:
        ctx.pending.setdefault("lengths", []).append((found, call, note))


def finish_lengths(ctx: ScriptFacts) -> None:
    """The longest sequence the script tokenizes to (the memory peak's length)."""
    candidates = ctx.pending.get("lengths", [])
    for found, _, _ in candidates:
        ctx.bind_found(found, "seq_len")
    known = [(f, c, n) for f, c, n in candidates if f.known and _int(f.value) and f.node is not None]
    if not known:
        return
    found, call, note = max(known, key=lambda entry: _int(entry[0].value) or 0)  # all known are counts
    ctx.state("seq_len", _int(found.value), found.node, note + (f" ({found.note})" if found.note else ""),
              at=call, rank=RANK_LOOP)
    _inputs_and_labels(ctx)


def _inputs_and_labels(ctx: ScriptFacts) -> None:
    """Inputs and labels tokenized to lengths of their own (a seq2seq script): the longest of
    each, which an encoder-decoder runs its encoder and its decoder over."""
    sides = [ctx.pending.get("source_lengths", []), ctx.pending.get("target_lengths", [])]
    if not all(sides):
        return
    for name, side in zip(("source_len", "target_len"), sides):
        for found, _ in side:
            ctx.bind_found(found, name)
        known = [(f, c) for f, c in side if f.known and _int(f.value) and f.node is not None]
        if known:
            found, call = max(known, key=lambda entry: _int(entry[0].value) or 0)
            what = "inputs" if name == "source_len" else "labels"
            ctx.state(name, _int(found.value), found.node, f"the {what}' tokenizer(max_length=...)"
                      + (f" ({found.note})" if found.note else ""), at=call, rank=RANK_LOOP)


# argparse options that name the training sequence length: the TrainingArguments-style spellings
# (max_seq_length, cutoff_len, block_size, model_max_length, max_seq_len, ...) and the plain ones
LENGTH_OPTIONS = frozenset(
    {key for key, (fact, _) in HF_FIELDS.items() if fact == "seq_len"}
    | {"max_len", "seq_len", "seq_length", "sequence_length", "context_length"}
)


def finish_length_option(ctx: ScriptFacts) -> None:
    """A script that tokenizes in code memlint cannot see (a data module in another file, a
    framework's dataset builder) still declares the length on its command line:
    ``parser.add_argument("--max_seq_len", type=int, default=512)``. When nothing else in the
    file states a sequence length, such an option is the length, and a launcher's
    ``--max_seq_len 2048`` overrides it."""
    if ctx.facts.seq_len is not None or ctx.pending.get("lengths"):
        return
    options = ctx.values.options
    best = None
    for dest, declared in options.argparse_options().items():
        if dest not in LENGTH_OPTIONS:
            continue
        found = options.argparse_value(dest)
        if found is None:
            continue
        if found.options:
            ctx.bind(found.options, "seq_len")
        value = _int(found.value) if found.known else None
        if value and found.node is not None and (best is None or value > best[0]):
            best = (value, found, declared[0].call)
    if best is not None:
        value, found, call = best
        ctx.state("seq_len", value, found.node,
                  f"{found.note}: a sequence length by its name (the script hands it to code memlint does not read)",
                  at=call, rank=RANK_LOOP)


# ----------------------------------------------------------------- precision


def autocast(ctx: ScriptFacts, call: cst.Call, names: frozenset[str]) -> None:
    """``torch.autocast("cuda", dtype=torch.bfloat16)``; ``torch.cuda.amp.autocast()`` is fp16."""
    values = ctx.values
    legacy = any(n.startswith("torch.cuda.amp") for n in names)
    arguments = values.arguments(call, ("enabled", "dtype") if legacy else ("device_type", "dtype", "enabled"))
    if not legacy and "device_type" in arguments:
        device = values.evaluate(arguments.get("device_type"))
        if device is not None and device.known and isinstance(device.value, str) and device.value != "cuda":
            return  # CPU/XPU autocast does not run on the GPU
    dtype: str | None
    node: cst.CSTNode | None
    dtype, node, note = "fp16", call.func, "autocast on CUDA defaults to float16"
    if "dtype" in arguments:
        found = values.evaluate(arguments.get("dtype"))
        if found is not None and found.options:
            ctx.bind(found.options, "autocast")
        if found is None or not found.known:
            return
        dtype, node, note = dtype_of(found.value), found.node, "autocast(dtype=...)"
        if dtype not in ("fp16", "bf16") or node is None:
            return
    if "enabled" in arguments:
        enabled = values.evaluate(arguments.get("enabled"))
        if enabled is not None and enabled.options:
            ctx.bind(enabled.options, f"if:autocast={dtype}")
        if enabled is None or not enabled.known or not enabled.value:
            return
    ctx.state("autocast", dtype, node, note, at=call, rank=RANK_LOOP)


def _model_to(ctx: ScriptFacts, call: cst.Call) -> None:
    """``model.to(torch.bfloat16)``, ``model.to(device, dtype=torch.float16)``."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value != "dtype":
            continue
        found = ctx.values.evaluate(arg.value)
        if found is None or not found.known or not isinstance(found.value, (Ref, str)):
            continue
        dtype = dtype_of(found.value) if isinstance(found.value, Ref) or arg.keyword is not None else None
        if dtype in ("fp16", "bf16") and found.node is not None:
            ctx.state("half_model", dtype, found.node, "model.to(dtype)", at=call, rank=RANK_MODEL)
            return


# ----------------------------------------------------------------- logits kept alive


def forward(ctx: ScriptFacts, call: cst.Call) -> None:
    """``outputs = model(**batch)``: remembered to check for ``outputs.loss`` + ``backward()``."""
    parent = ctx.values.parent(call)
    if (
        isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name)
        and not _under_no_grad(ctx.values, call)
    ):
        ctx.pending.setdefault("forwards", []).append((parent.targets[0].target.value, call))


def _under_no_grad(values: Values, node: cst.CSTNode) -> bool:
    current = values.parent(node)
    while current is not None and not isinstance(current, (cst.FunctionDef, cst.Module)):
        if isinstance(current, cst.With):
            for item in current.items:
                target = item.item.func if isinstance(item.item, cst.Call) else item.item
                if values.qualified(target) & set(_NO_GRAD):
                    return True
        current = values.parent(current)
    return False


def finish_keep_logits(ctx: ScriptFacts) -> None:
    """A hand-written loop that holds the model's output object through ``backward()``."""
    backward_functions = {id(ctx.values.enclosing_function(c)) for c in ctx.pending.get("backward", [])}
    for name, call in ctx.pending.get("forwards", []):
        function = ctx.values.enclosing_function(call)
        if function is None or id(function) not in backward_functions:
            continue
        if _reads_loss(function, name) and not _deletes(function, name):
            ctx.state("keep_logits", True, call, f"`{name} = model(...)` is alive during backward(): its logits too",
                      at=call, rank=RANK_LOOP)
            return


def _reads_loss(function: cst.FunctionDef, name: str) -> bool:
    for node in _nodes(function):
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == name:
            if node.attr.value == "loss":
                return True
        if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name) and node.value.value == name:
            index = node.slice[0].slice if len(node.slice) == 1 else None
            if isinstance(index, cst.Index) and (
                (isinstance(index.value, cst.SimpleString) and index.value.evaluated_value == "loss")
                or (isinstance(index.value, cst.Integer) and index.value.value == "0")
            ):
                return True
    return False


def _deletes(function: cst.FunctionDef, name: str) -> bool:
    for node in _nodes(function):
        if isinstance(node, cst.Del):
            targets = [e.value for e in node.target.elements] if isinstance(node.target, cst.Tuple) else [node.target]
            if any(isinstance(t, cst.Name) and t.value == name for t in targets):
                return True
    return False


def _nodes(function: cst.FunctionDef):
    stack: list[cst.CSTNode] = [function.body]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(children(node))


def _updates_parameters(receiver: cst.BaseExpression) -> bool:
    """``optimizer.step()``, ``scaler.step(opt)``, ``engine.step()``: a step that updates weights."""
    name = receiver.attr.value if isinstance(receiver, cst.Attribute) else (
        receiver.value if isinstance(receiver, cst.Name) else "")
    name = name.lower()
    return bool(name) and UPDATER_NAME.search(name) is not None and NOT_UPDATER_NAME.search(name) is None


def finish_training(ctx: ScriptFacts) -> None:
    """A ``backward()`` trains only with a step that updates the parameters (or under an
    ``Accelerator``, whose optimizer may be prepared elsewhere): gradients computed
    to compare two implementations or to probe a norm train nothing (see
    ``memlint.python.loops.updating_backwards`` for the rules' side)."""
    if ctx.pending.get("backward") and (ctx.pending.get("steps") or ctx.pending.get("accelerator")):
        ctx.training = True
        ctx.training_at.extend(ctx.pending["backward"])


def finish(ctx: ScriptFacts) -> None:
    finish_training(ctx)
    finish_dataloaders(ctx)
    finish_lengths(ctx)
    finish_length_option(ctx)
    finish_keep_logits(ctx)

