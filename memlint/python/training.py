"""What a call does in a training script: backward, optimizer step, zero_grad, loss scaling,
autocast, optimizer and scheduler construction, model wrapping and dtype conversion.

Calls are recognised by their qualified names (through imports and aliases) where the callee
is a library function, and by the method name plus what the receiver was assigned from where
it is a method of a user's object (``optimizer.step()``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import libcst as cst

from memlint.python.dataflow import dtype_values, string_values
from memlint.python.index import ModuleIndex
from memlint.python.prefilter import Called
from memlint.python.library import (
    AUTOCAST_DEVICES,
    OPTIMIZER_CLASS_NAMES,
    OPTIMIZER_MODULES,
    PEFT_WRAPPERS,
    SCALER_CLASSES,
    TORCH_FSDP_WRAPPERS,
    TORCH_FULLY_SHARD,
    is_optimizer_class,
    trainer_framework,
)
from memlint.python.syntax import (
    argument,
    dotted,
    is_false,
    iter_nodes,
    method_name,
    positional,
    receiver,
    root_name,
    string_value,
)

# ---------------------------------------------------------------------- constructors

_OPTIMIZER_BUILDER = re.compile(r"(create|build|get|make|init|setup|configure)_?optimi[sz]ers?(_\w+)?")
FSDP_WRAPPERS = TORCH_FSDP_WRAPPERS | TORCH_FULLY_SHARD
_OPTIMIZER_PACKAGES = frozenset(module.split(".", 1)[0] for module in OPTIMIZER_MODULES)  # what they start with


def is_optimizer_constructor(index: ModuleIndex, call: cst.Call) -> bool:
    if index.could_come_from(call.func, _OPTIMIZER_PACKAGES) and any(
            is_optimizer_class(name) for name in index.qualified(call)):
        return True
    name = method_name(call)
    if name is None:
        return False
    return name in OPTIMIZER_CLASS_NAMES or bool(_OPTIMIZER_BUILDER.fullmatch(name.lower()))


def _calls_an_optimizer() -> Called:
    """What a module must call for ``is_optimizer_constructor`` to find an optimizer built: an
    optimizer class by its own name, a builder (``create_optimizer``), or a name from an optimizer
    module (``torch.optim.``: a qualified name holds the module's parts whole; a prefix that is
    a class, ``transformers.Adafactor``, starts a part)."""
    modules = sorted({rf"{re.escape(m.rstrip('.').rsplit('.', 1)[-1])}{'$' if m.endswith('.') else ''}"
                      for m in OPTIMIZER_MODULES})
    classes = rf"(?:{'|'.join(map(re.escape, sorted(OPTIMIZER_CLASS_NAMES)))})$"
    builder = rf"(?i:{_OPTIMIZER_BUILDER.pattern})$"
    return Called(rf"^(?:{'|'.join([classes, builder, *modules])})")  # anchored first: a line's start or no match


CALLS_AN_OPTIMIZER = _calls_an_optimizer()
# what ``is_peft_wrap`` knows a wrap by, as the call or the import binding it writes it
CALLS_A_PEFT_WRAP = r"^(?:peft|get_peft_model)$"


def is_scheduler_constructor(index: ModuleIndex, call: cst.Call) -> bool:
    for name in index.qualified(call):
        if name.startswith("torch.optim.lr_scheduler.") or (
            name.startswith(("transformers.", "diffusers.optimization.", "timm.scheduler."))
            and "schedul" in name.lower()
        ):
            return True
    name = method_name(call) or ""
    return "schedul" in name.lower() or name.endswith("LR")


def is_scaler_constructor(index: ModuleIndex, call: cst.Call) -> bool:
    return bool(index.qualified(call) & SCALER_CLASSES) or method_name(call) in ("GradScaler", "ShardedGradScaler")


def scaler_disabled(call: cst.Call) -> bool:
    """``GradScaler(enabled=False)`` (a literal False) does nothing."""
    return is_false(argument(call, None, "enabled"))


def is_peft_wrap(index: ModuleIndex, call: cst.Call) -> bool:
    qualified = index.qualified(call)
    if qualified & PEFT_WRAPPERS:
        return True
    if method_name(call) == "from_pretrained" and any(q.startswith("peft.") for q in qualified):
        return True  # PeftModel.from_pretrained(base, adapter_dir)
    return isinstance(call.func, cst.Name) and call.func.value == "get_peft_model"


def is_fsdp_wrap(index: ModuleIndex, call: cst.Call) -> bool:
    return bool(index.qualified(call) & FSDP_WRAPPERS)


# ---------------------------------------------------------------------- names of objects

_FRAMEWORK = re.compile(r"accelerator|engine|fabric|trainer|ds_model|deepspeed")  # a subset of UPDATER_NAME
_FRAMEWORK_MODULES = ("accelerate.", "deepspeed.", "lightning.", "pytorch_lightning.", "lightning_fabric.")
_OPTIMIZER_NAME = re.compile(r"optim|^opt($|_|\d)|_opt($|\d)")


def _last(text: str) -> str:
    """The part of ``self.optimizer`` that names the object (``optimizer``); a subscript
    (``optimizers[0]``) is kept whole."""
    return text.lower() if text.endswith("]") else text.rsplit(".", 1)[-1].lower()


def _assigned_from(index: ModuleIndex, expr: cst.BaseExpression, test) -> bool:
    text = dotted(expr)
    if text is None:
        return False
    for definition in index.all_definitions(text, expr):
        value = definition.value if definition.value is not None else definition.whole_value
        if isinstance(value, cst.Call) and test(value):
            return True
    return False


def is_framework_object(index: ModuleIndex, expr: cst.BaseExpression | None) -> bool:
    """An Accelerator, a DeepSpeed engine, a Lightning Fabric or Trainer: they scale, divide
    and step the loss themselves."""
    if expr is None:
        return False
    text = dotted(expr) or ""
    if text and _FRAMEWORK.search(_last(text)):
        return True
    return _assigned_from(
        index, expr, lambda call: any(q.startswith(_FRAMEWORK_MODULES) for q in index.qualified(call))
    )


def is_optimizer_object(index: ModuleIndex, expr: cst.BaseExpression | None) -> bool:
    if expr is None:
        return False
    if _assigned_from(index, expr, lambda call: is_scheduler_constructor(index, call)):
        return False
    if _assigned_from(index, expr, lambda call: is_optimizer_constructor(index, call)):
        return True
    text = index.py.code_of(expr)
    last = _last(text)
    if "sched" in last or last.startswith("lr") or "scaler" in last or _FRAMEWORK.search(last):
        return False
    return bool(_OPTIMIZER_NAME.search(last))


def is_scaler_object(index: ModuleIndex, expr: cst.BaseExpression | None) -> bool:
    if expr is None:
        return False
    if _assigned_from(index, expr, lambda call: is_scaler_constructor(index, call)):
        return True
    text = dotted(expr) or ""
    if not text and type(expr) is cst.Subscript and len(expr.slice) == 1 and type(expr.slice[0].slice) is cst.Index:
        # a scaler kept in a mapping of the run's state (GZbridge's ``state["scaler"].step(optimizer)``)
        key = string_value(expr.slice[0].slice.value)
        return key is not None and "scaler" in key.lower()
    return "scaler" in _last(text) if text else False


# ---------------------------------------------------------------------- training calls

# What a module must name for a rule that reads its backward() calls to find anything
# (``Rule.python_needs``, ``memlint.python.prefilter``): a call through a ``backward`` attribute
# (``loss.backward()``, ``accelerator.backward(loss)``, ``scaler.scale(loss).backward()``) or
# through ``torch.autograd.backward`` imported by name, which is all ``backward_of`` and the
# loops' ``_could_be_backward`` recognise. A whole name, not a part: DeepSpeed's
# ``backward_timers``, transformers' ``_backward_compatibility_gradient_checkpointing`` hold no
# backward() call; and a called one: an autograd Function's ``def backward(ctx, grad)`` is none.
RUNS_BACKWARD = Called(r"^backward$")


@dataclass(frozen=True)
class Backward:
    call: cst.Call
    # "tensor": loss.backward(); "scaled": scaler.scale(loss).backward(); "framework": an engine
    # that scales and divides itself; "delegated": an object handed the loss and the optimizer
    # (ColossalAI's ``booster.backward(loss=loss, optimizer=optimizer)``), which runs the
    # optimizer's backward on the loss as given
    kind: str
    loss: cst.BaseExpression | None  # the tensor whose gradient is computed (before scaling)
    scale_call: cst.Call | None = None  # scaler.scale(loss) / amp.scale_loss(loss, opt)


def backward_of(index: ModuleIndex, call: cst.Call) -> Backward | None:
    if index.calls_named(call, "torch.autograd.backward"):
        return Backward(call, "tensor", _sole_tensor(argument(call, 0, "tensors")))
    if method_name(call) != "backward" or not isinstance(call.func, cst.Attribute):
        return None
    target = receiver(call)
    if isinstance(target, cst.Call) and method_name(target) == "scale" and target.args:
        return Backward(call, "scaled", target.args[0].value, target)
    if positional(call) and is_framework_object(index, target):
        return Backward(call, "framework", argument(call, 0, "loss"))
    if _hands_over_the_loss(index, call):
        return Backward(call, "delegated", argument(call, 0, "loss"))
    if len(positional(call)) == 1 and is_module_object(index, target):
        return Backward(call, "framework", argument(call, 0, "loss"))
    if isinstance(target, cst.Name):
        for definition in index.reaching(target.value, call):
            item = definition.whole_value
            if isinstance(item, cst.Call) and method_name(item) == "scale_loss" and item.args:
                return Backward(call, "scaled", item.args[0].value, item)  # apex amp
    return Backward(call, "tensor", target)


def _sole_tensor(tensors: cst.BaseExpression | None) -> cst.BaseExpression | None:
    """The loss of ``torch.autograd.backward([scaled_loss])``: a list or tuple of one tensor is
    that tensor (Alpamayo-R1-Distillation's stage 2 hands its divided loss so)."""
    if isinstance(tensors, (cst.List, cst.Tuple)) and len(tensors.elements) == 1 \
            and isinstance(tensors.elements[0], cst.Element):
        return tensors.elements[0].value
    return tensors


def backwards(index: ModuleIndex) -> list[Backward]:
    """Every ``backward()`` of the module (``backward_of`` of each call), in source order; computed
    once per version for the rules that ask (AMP001, AMP003)."""
    def compute() -> list[Backward]:
        return [b for b in (backward_of(index, c) for c in index.calls) if b is not None]

    return index.once("backwards", compute)


# what only a module (or an engine wrapping one) is asked to do; a tensor does none of them
_MODULE_METHODS = frozenset({"forward", "parameters", "named_parameters", "train", "eval", "state_dict"})


def is_module_object(index: ModuleIndex, expr: cst.BaseExpression | None) -> bool:
    """The model the script runs: called (``model(batch)``), or asked for its ``forward``,
    ``parameters()``, ``train()``... in the module. No ``torch.nn.Module`` has a ``backward``
    method, so ``model.backward(loss)`` on such an object is an engine that wraps the model
    (DeepSpeed's ``deepspeed.initialize`` engine, conventionally kept under the model's own
    name, built in a helper of another module): the argument is the loss, not a gradient."""
    text = dotted(expr) if expr is not None else None
    if not text:
        return False

    def compute() -> frozenset[str]:
        used: set[str] = set()
        for c in index.calls:
            if isinstance(c.func, cst.Attribute) and c.func.attr.value in _MODULE_METHODS:
                used.add(dotted(c.func.value) or "")
            elif isinstance(c.func, (cst.Name, cst.Attribute)):
                used.add(dotted(c.func) or "")
        used.discard("")
        return frozenset(used)

    return text in index.once("objects used as modules", compute)


# what ``torch.Tensor.backward`` takes: any other keyword makes the call some object's own backward
_TENSOR_BACKWARD_KEYWORDS = frozenset({"gradient", "retain_graph", "create_graph", "inputs"})


def _hands_over_the_loss(index: ModuleIndex, call: cst.Call) -> bool:
    """``x.backward(loss=...)``, ``x.backward(loss, optimizer)`` or ``x.backward(loss, ..., k=v)``
    with a keyword no tensor's ``backward`` takes: the receiver is not the loss (a tensor's
    ``backward`` takes a gradient, never a ``loss`` or an optimizer) but an object that runs the
    backward of the loss it is given."""
    if argument(call, None, "loss") is not None or argument(call, None, "optimizer") is not None:
        return True
    args = positional(call)
    if args and any(a.keyword is not None and a.keyword.value not in _TENSOR_BACKWARD_KEYWORDS for a in call.args):
        return True  # FastVideo's ``self.student.backward(loss, ctx, grad_accum_rounds=n)``
    return len(args) >= 2 and is_optimizer_object(index, args[1].value)


@dataclass(frozen=True)
class Step:
    call: cst.Call
    kind: str  # "direct": optimizer.step(); "scaled": scaler.step(optimizer); "framework"
    optimizer: str  # the optimizer's expression as written


def step_of(index: ModuleIndex, call: cst.Call) -> Step | None:
    if method_name(call) != "step" or not isinstance(call.func, cst.Attribute):
        return None
    target = call.func.value  # the receiver: ``optimizer`` of ``optimizer.step()``
    args = positional(call)
    if args and is_scaler_object(index, target):
        return Step(call, "scaled", index.py.code_of(args[0].value))
    if is_framework_object(index, target) or _engine_with_its_backward(index, target):
        return Step(call, "framework", index.py.code_of(target))
    takes_closure = bool(args) and _is_closure(index, args[0].value)  # LBFGS: optimizer.step(closure)
    if (not args or takes_closure) and is_optimizer_object(index, target):
        return Step(call, "direct", index.py.code_of(target))
    return None


def _engine_with_its_backward(index: ModuleIndex, target: cst.BaseExpression) -> bool:
    """The object whose ``backward(loss)`` the module calls as an engine's (``is_module_object``):
    its ``step()`` is the engine's too, which steps and zeroes the gradients (HunyuanDiT's
    ``model.backward(loss)`` then ``model.step(lr_kwargs=...)``, the engine built in a helper)."""
    text = dotted(target)
    if not text:
        return False

    def compute() -> frozenset[str]:
        return frozenset(dotted(receiver(b.call)) or "" for b in backwards(index) if b.kind == "framework") - {""}

    return text in index.once("engines with a backward", compute)


def _is_closure(index: ModuleIndex, expr: cst.BaseExpression) -> bool:
    return isinstance(expr, (cst.Name, cst.Lambda)) and (isinstance(expr, cst.Lambda) or expr.value in index.functions)


def is_scheduler_step(index: ModuleIndex, call: cst.Call) -> bool:
    if method_name(call) != "step" or not isinstance(call.func, cst.Attribute) or positional(call):
        return False
    target = call.func.value  # the receiver: ``scheduler`` of ``scheduler.step()``
    if _assigned_from(index, target, lambda c: is_scheduler_constructor(index, c)):
        return True
    last = _last(index.py.code_of(target))
    return "sched" in last or last.startswith("lr")


def zero_grad_target(index: ModuleIndex, node: cst.CSTNode) -> str | None:
    """What a statement zeroes: the receiver of ``.zero_grad()``, ``"<grads>"`` for
    ``p.grad = None`` / ``p.grad.zero_()``; None when it zeroes nothing."""
    if isinstance(node, cst.Call):
        name = method_name(node)
        if name == "zero_grad":
            target = receiver(node)
            return index.py.code_of(target) if target is not None else ""
        if name in ("zero_", "fill_") and _mentions_grad(receiver(node)):
            return "<grads>"
        return None
    if isinstance(node, cst.Assign) and isinstance(node.value, cst.Name) and node.value.value == "None":
        if any(isinstance(t.target, cst.Attribute) and t.target.attr.value == "grad" for t in node.targets):
            return "<grads>"
    return None


def _mentions_grad(expr: cst.CSTNode | None) -> bool:
    return expr is not None and any(isinstance(n, cst.Attribute) and n.attr.value == "grad" for n in iter_nodes(expr))


def is_clip_grad(index: ModuleIndex, call: cst.Call) -> bool:
    names = index.qualified(call)
    if any(
        n.startswith("torch.nn.utils")
        and n.rsplit(".", 1)[-1] in ("clip_grad_norm_", "clip_grad_value_", "clip_grad_norm", "clip_grads_with_norm_")
        for n in names
    ):
        return True
    return method_name(call) in ("clip_grad_norm_", "clip_grad_value_") and not is_framework_object(
        index, receiver(call)
    )


# ---------------------------------------------------------------------- autocast

_AUTOCAST = AUTOCAST_DEVICES


@dataclass(frozen=True)
class Autocast:
    call: cst.Call
    on_cuda: bool  # can it run on a CUDA device?
    cuda_dtypes: frozenset[str]  # the dtypes it can use on CUDA ("fp16", "bf16", "unknown", ...)
    dtype: cst.BaseExpression | None  # the dtype argument, when given
    enabled: cst.BaseExpression | None

    @property
    def disabled(self) -> bool:
        return is_false(self.enabled)


def autocast_of(index: ModuleIndex, call: cst.Call) -> Autocast | None:
    kinds = {_AUTOCAST[q] for q in index.qualified(call) if q in _AUTOCAST}
    if not kinds:
        return None
    kind = kinds.pop()
    if kind == "any":
        devices = string_values(index, argument(call, 0, "device_type"))
        dtype, enabled = argument(call, 1, "dtype"), argument(call, 2, "enabled")
        on_cuda = "unknown" in devices or any(d.startswith("cuda") for d in devices)
    else:
        dtype, enabled = argument(call, 1, "dtype"), argument(call, 0, "enabled")
        on_cuda = kind == "cuda"
    if not on_cuda:
        dtypes: frozenset[str] = frozenset()
    elif dtype is None:
        dtypes = frozenset({"fp16"})  # torch.get_autocast_dtype("cuda") is float16
    else:
        dtypes = frozenset(dtype_values(index, dtype, on_cuda=True))
    return Autocast(call, on_cuda, dtypes, dtype, enabled)


@dataclass(frozen=True)
class AutocastRegion:
    """Where autocast is in force: a ``with`` statement or a decorated function."""

    node: cst.With | cst.FunctionDef
    autocast: Autocast


def autocast_regions(index: ModuleIndex) -> list[AutocastRegion]:
    """Every autocast region of the module: ``with`` statements (also through a variable) and
    decorated functions."""
    return index.once("autocast_regions", lambda: _autocast_regions(index))


def _autocast_regions(index: ModuleIndex) -> list[AutocastRegion]:
    out = []
    for node in index.nodes_of(cst.With, cst.FunctionDef):
        if isinstance(node, cst.With):
            for item in node.items:
                for found in _autocasts_behind(index, item.item):
                    out.append(AutocastRegion(node, found))
        elif isinstance(node, cst.FunctionDef):
            for decorator in node.decorators:
                if isinstance(decorator.decorator, cst.Call):
                    decorating = autocast_of(index, decorator.decorator)
                    if decorating is not None:
                        out.append(AutocastRegion(node, decorating))
    return out


def _autocasts_behind(index: ModuleIndex, expr: cst.BaseExpression, depth: int = 0) -> list[Autocast]:
    """Autocast calls an expression in a ``with`` evaluates to: the call itself, or what a
    name (``ctx = torch.autocast(...) if cuda else nullcontext()``) was assigned."""
    if depth > 3:
        return []
    if isinstance(expr, cst.Call):
        found = autocast_of(index, expr)
        return [found] if found is not None else []
    if isinstance(expr, cst.IfExp):
        return _autocasts_behind(index, expr.body, depth + 1) + _autocasts_behind(index, expr.orelse, depth + 1)
    text = dotted(expr)
    if text is None:
        return []
    out = []
    for definition in index.all_definitions(text, expr):
        if definition.value is not None:
            out.extend(_autocasts_behind(index, definition.value, depth + 1))
    return out


# ---------------------------------------------------------------------- models


@dataclass(frozen=True)
class DtypeChoice:
    """A place that puts weights or compute in a dtype: ``model.half()``,
    ``from_pretrained(torch_dtype=...)``, FSDP ``MixedPrecision(param_dtype=...)``."""

    node: cst.Call
    dtypes: frozenset[str]
    model: str | None  # the name that holds the model afterwards (None: not a model)
    what: str  # how the code says it, for messages


def model_holder(index: ModuleIndex, call: cst.Call) -> str | None:
    """The name a model call's result ends up in: ``model`` for ``model = X.from_pretrained(...)``,
    ``model = model.cuda().half()`` and for ``model.half()`` alone."""
    node: cst.CSTNode = call
    while True:
        parent = index.parent(node)
        if isinstance(parent, (cst.Attribute, cst.Call)) and (
            (isinstance(parent, cst.Attribute) and parent.value is node)
            or (isinstance(parent, cst.Call) and parent.func is node)
        ):
            node = parent
            continue
        break
    parent = index.parent(node)
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1:
        return dotted(parent.targets[0].target)
    if isinstance(parent, cst.AnnAssign):
        return dotted(parent.target)
    target = receiver(call)
    return dotted(target) if isinstance(target, (cst.Name, cst.Attribute)) else root_name(target)


def dtype_choices(index: ModuleIndex) -> list[DtypeChoice]:
    """Every place the module puts weights or compute in float16 / bfloat16."""
    return index.once("dtype_choices", lambda: _dtype_choices(index))


def _dtype_choices(index: ModuleIndex) -> list[DtypeChoice]:
    out = []
    for node in index.calls:
        name = method_name(node)
        if name in ("half", "bfloat16") and receiver(node) is not None and not node.args:
            dtypes = frozenset({"fp16" if name == "half" else "bf16"})
            out.append(DtypeChoice(node, dtypes, model_holder(index, node), f".{name}()"))
        elif name == "to" and receiver(node) is not None:
            for arg in node.args:
                if arg.keyword is not None and arg.keyword.value != "dtype":
                    continue
                values = dtype_values(index, arg.value)
                if values and "unknown" not in values and values & {"fp16", "bf16"}:
                    out.append(DtypeChoice(node, frozenset(values), model_holder(index, node), ".to(dtype)"))
                    break
        elif name == "from_pretrained":
            value = argument(node, None, "torch_dtype") or argument(node, None, "dtype")
            if value is not None:
                values = dtype_values(index, value)
                if values & {"fp16", "bf16"}:
                    out.append(
                        DtypeChoice(
                            node, frozenset(values), model_holder(index, node), "from_pretrained(torch_dtype=...)"
                        )
                    )
        elif name == "MixedPrecision":
            value = argument(node, 0, "param_dtype")
            if value is not None:
                out.append(
                    DtypeChoice(node, frozenset(dtype_values(index, value)), None, "MixedPrecision(param_dtype=...)")
                )
        elif name == "BitsAndBytesConfig":
            value = argument(node, None, "bnb_4bit_compute_dtype")
            if value is not None:
                out.append(DtypeChoice(node, frozenset(dtype_values(index, value)), None, "bnb_4bit_compute_dtype"))
        elif index.calls_named(node, "torch.set_default_dtype"):
            out.append(
                DtypeChoice(
                    node, frozenset(dtype_values(index, argument(node, 0, "d"))), None, "torch.set_default_dtype"
                )
            )
    return out


def parameter_owners(index: ModuleIndex, expr: cst.CSTNode, at: cst.CSTNode, depth: int = 0) -> set[str]:
    """Models whose parameters an optimizer argument holds: ``model`` for
    ``model.parameters()``, ``[p for p in model.parameters() if p.requires_grad]``, a name
    assigned from those, or a model passed to a builder (``create_optimizer(model, args)``)."""
    owners: set[str] = set()
    for node in iter_nodes(expr):
        if isinstance(node, cst.Call):
            name = method_name(node)
            if name in ("parameters", "named_parameters") and receiver(node) is not None:
                owner = dotted(receiver(node)) or root_name(receiver(node))
                if owner:
                    owners.add(owner)
        elif isinstance(node, cst.Name) and depth < 2:
            for definition in index.reaching(node.value, at):
                value = definition.value if definition.value is not None else definition.whole_value
                if value is not None:
                    owners |= parameter_owners(index, value, definition.statement, depth + 1)
    if depth == 0 and isinstance(expr, cst.Call) and not owners:
        owners |= {arg.value.value for arg in positional(expr) if isinstance(arg.value, cst.Name)}
    return owners


@dataclass(frozen=True)
class OptimizerCreation:
    call: cst.Call
    target: str | None  # the name it is assigned to
    models: frozenset[str]  # the models whose parameters it updates


def optimizer_creations(index: ModuleIndex) -> list[OptimizerCreation]:
    """Every optimizer the module constructs, with the models whose parameters it takes."""
    return index.once("optimizer_creations", lambda: _optimizer_creations(index))


def _optimizer_creations(index: ModuleIndex) -> list[OptimizerCreation]:
    out = []
    for node in index.calls:
        if is_optimizer_constructor(index, node):
            owners = parameter_owners(index, node, node)
            out.append(OptimizerCreation(node, model_holder(index, node), frozenset(owners)))
    return out


_WRAPPING_METHODS = {"to", "cuda", "half", "bfloat16", "float", "train", "requires_grad_"}


def trained_models(index: ModuleIndex) -> set[str]:
    """Names of models an optimizer (or DeepSpeed) updates, and the names they were wrapped
    from (``model = get_peft_model(base, cfg)`` makes ``base`` trained too)."""
    return index.once("trained_models", lambda: _trained_models(index))


def _trained_models(index: ModuleIndex) -> set[str]:
    trained: set[str] = set()
    for creation in optimizer_creations(index):
        for model in creation.models:
            trained.add(model)
            if not model.startswith("self."):
                trained.add(model.split(".")[0])  # model.module.parameters() trains ``model``
    for node in index.calls:
        if index.calls_named(node, "deepspeed.initialize"):
            engine_model = argument(node, None, "model")
            if isinstance(engine_model, cst.Name):
                trained.add(engine_model.value)
    changed = True
    while changed:
        changed = False
        for flow in index.flows:
            for name, definitions in index.definitions.get(id(flow), {}).items():
                if name not in trained:
                    continue
                for definition in definitions:
                    source = _wrapped_model(index, definition)
                    if source and source not in trained:
                        trained.add(source)
                        changed = True
    return trained


def untrained_by_every_optimizer(index: ModuleIndex, name: str, at: cst.CSTNode) -> bool:
    """Is the model held in ``name`` (assigned at ``at``) left out of every optimizer the module
    builds? Large-DiT-T2I loads ``model_lm = AutoModelForCausalLM.from_pretrained(args.lm)`` to
    encode captions under ``no_grad`` and trains ``model = models.DiT_Llama_3B(...)`` with
    ``AdamW(model.parameters())``: the pretrained LM is a frozen companion, not the trained model.

    Said only when it is certain: the module builds an optimizer, every optimizer names the
    models it takes (no function parameter, no ``self.`` attribute whose origin lies elsewhere),
    no trainer builds one of its own, and ``name`` reaches none of those models through any
    assignment (``model = MultiModal(llm=name)`` trains ``name`` inside it) nor leaves its function
    by ``return`` to a caller that hands it on (llm-finetune-study's ``load_hf_reference_model``
    returns ``tokenizer, model`` to ``tokenizer, reference_model = ...``, and the optimizer trains
    a ``torch.nn.Linear`` of another function)."""
    creations = optimizer_creations(index)
    if not creations or index.once("builds a trainer", lambda: any(
            trainer_framework(q) for call in index.calls for q in index.qualified(call))):
        return False
    flow = index.flow_of(at)
    holders = {id(d.statement) for d in index.all_definitions(name, at)}  # every value of ``name`` there
    if not isinstance(flow, cst.Module) and any(
            isinstance(node, cst.Return) and node.value is not None
            and any(isinstance(n, cst.Name) and n.value == name for n in iter_nodes(node.value))
            for node in iter_nodes(flow)):
        bound = _assignments_of_callers(index, flow)
        if bound is None:
            return False
        holders |= {id(statement) for statement in bound}
    seen: set[tuple[str, int]] = set()
    reached: set[int] = set()  # the assignments the optimizers' models come from
    pending: list[tuple[str, cst.CSTNode]] = []
    for creation in creations:
        models = creation.models or _tensors_optimized(creation.call)
        if not models:
            return False
        for model in models:
            root = model.split(".")[0]
            owner = index.flow_of(creation.call)
            if root == "self" or (not isinstance(owner, cst.Module) and index.is_parameter(root, owner)):
                return False
            pending.append((root, creation.call))
    while pending:
        model, where = pending.pop()
        if (model, id(index.flow_of(where))) in seen:
            continue
        seen.add((model, id(index.flow_of(where))))
        for definition in index.all_definitions(model, where):
            reached.add(id(definition.statement))
            value = definition.value if definition.value is not None else definition.whole_value
            described = {id(node.value) for node in iter_nodes(value) if isinstance(node, cst.Attribute)
                         and (node.attr.value in _DESCRIPTIONS or node.attr.value == "detach")} \
                if value is not None else set()
            for node in iter_nodes(value) if value is not None else ():
                if isinstance(node, cst.Name) and id(node) not in described:
                    pending.append((node.value, definition.statement))
    return not reached & holders


def _tensors_optimized(call: cst.Call) -> frozenset[str]:
    """``AdamW([policy_logits], lr=lr)``: the names of the tensors an optimizer is given in a
    list (empty for anything else), followed like a model's name to what they hold."""
    params = argument(call, 0, "params")
    if not isinstance(params, (cst.List, cst.Tuple)) or not params.elements:
        return frozenset()
    names = [e.value for e in params.elements]
    if not all(isinstance(n, cst.Name) for n in names):
        return frozenset()
    return frozenset(n.value for n in names if isinstance(n, cst.Name))


def _assignments_of_callers(index: ModuleIndex, function: cst.FunctionDef) -> list[cst.Assign] | None:
    """The assignments that take this module's calls of ``function`` (``tokenizer, model =
    load(...)``); None when a call hands the result on otherwise (an argument, a ``return``, an
    attribute) or the module never calls it (another module may)."""
    calls = index.calls_of(function)
    if not calls:
        return None
    assignments: list[cst.Assign] = []
    for call in calls:
        parent = index.parent(call)
        if not isinstance(parent, cst.Assign) or parent.value is not call or len(parent.targets) != 1:
            return None
        target = parent.targets[0].target
        elements = [e.value for e in target.elements] if isinstance(target, (cst.Tuple, cst.List)) else [target]
        if not all(isinstance(e, cst.Name) for e in elements):
            return None
        assignments.append(parent)
    return assignments


# what a model's attribute says about it without handing the model over: the DiT built with
# ``cap_feat_dim=model_lm.config.hidden_size`` does not hold ``model_lm`` (nor does a tensor's
# ``.detach()``: ``nn.Parameter(ref_log_probs.detach().clone())`` trains a copy, not the model)
_DESCRIPTIONS = frozenset({"config", "dtype", "device", "name_or_path", "generation_config"})


# calls that return (or are) the model they are given, wrapped: the wrapped model trains too
_MODEL_WRAPPERS = {
    "get_peft_model",
    "prepare_model_for_kbit_training",
    "prepare_model_for_int8_training",
    "PeftModel",
    "PeftModelForCausalLM",
    "DistributedDataParallel",
    "DDP",
    "DataParallel",
    "FullyShardedDataParallel",
    "FSDP",
    "fully_shard",
    "compile",
    "prepare",
    "prepare_model",
    "wrap",
    "from_pretrained",
}


def _wrapped_model(index: ModuleIndex, definition) -> str | None:
    """``base`` for ``get_peft_model(base, cfg)``, ``DDP(base)``, ``base.to(device)``,
    ``torch.compile(base)``, and for ``model, opt = accelerator.prepare(base, opt)``."""
    value = definition.value
    if value is None and isinstance(definition.whole_value, cst.Call) and definition.position is not None:
        call = definition.whole_value
        args = positional(call)
        if method_name(call) == "prepare" and definition.position < len(args):
            return dotted(args[definition.position].value)
        return None
    if not isinstance(value, cst.Call):
        return dotted(value) if isinstance(value, cst.Name) else None
    if method_name(value) in _WRAPPING_METHODS and receiver(value) is not None:
        inner = receiver(value)
        while isinstance(inner, cst.Call) and method_name(inner) in _WRAPPING_METHODS and receiver(inner) is not None:
            inner = receiver(inner)
        return dotted(inner)  # None for X.from_pretrained(...).cuda(): a new model, not a wrapped one
    if method_name(value) not in _MODEL_WRAPPERS or (
        method_name(value) == "from_pretrained" and not is_peft_wrap(index, value)
    ):
        return None  # AutoModel.from_pretrained(name): a new model, not a wrapped one
    model = argument(value, None, "model") or argument(value, None, "module")
    args = positional(value)
    first = model if model is not None else (args[0].value if args else None)
    return dotted(first) if isinstance(first, (cst.Name, cst.Attribute)) else None


def bf16_support_choice(index: ModuleIndex, dtype: cst.BaseExpression | None) -> tuple[cst.IfExp, cst.Call] | None:
    """The conditional expression that picks ``dtype`` by asking the GPU
    (``'bfloat16' if torch.cuda.is_bf16_supported() else 'float16'``, followed through names and
    a lookup table such as nanoGPT's ``{'bfloat16': torch.bfloat16, ...}[dtype]``), and the
    ``is_bf16_supported()`` call it asks; None when something else decides."""
    for expr in _dtype_expressions(index, dtype):
        if isinstance(expr, cst.IfExp):
            for node in iter_nodes(expr.test):
                if isinstance(node, cst.Call) and method_name(node) == "is_bf16_supported":
                    return expr, node
    return None


def _dtype_expressions(index: ModuleIndex, dtype: cst.BaseExpression | None, depth: int = 0) -> list[cst.BaseExpression]:
    if dtype is None or depth > 3:
        return []
    out = [dtype]
    text = dotted(dtype)
    if text is not None:
        for definition in index.all_definitions(text, dtype):
            out.extend(_dtype_expressions(index, definition.value, depth + 1))
    if isinstance(dtype, cst.Subscript) and isinstance(dtype.slice[0].slice, cst.Index):
        out.extend(_dtype_expressions(index, dtype.slice[0].slice.value, depth + 1))
    return out
