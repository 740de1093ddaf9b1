"""What a name or expression can hold, read from the assignments before it — never run.

Each question is answered with the set of possibilities the code allows, so a rule can tell
"always float16" from "float16 on one branch" from "cannot tell" (``"unknown"``).
"""

from __future__ import annotations

from functools import partial

import libcst as cst

from memlint.model.vocabulary import dtype_name
from memlint.python.index import Definition, ModuleIndex
from memlint.python.limits import DATAFLOW_STEPS, LOSS_STEPS
from memlint.python.syntax import (
    dotted,
    iter_nodes,
    method_name,
    receiver,
    string_value,
)

# calls that combine a collection of losses into one: the collected losses decide its division
_COMBINING_CALLS = ("torch.stack", "torch.cat", "torch.sum", "torch.mean")

_DTYPE_ATTRIBUTES = {
    "torch.float16": "fp16",
    "torch.half": "fp16",
    "torch.bfloat16": "bf16",
    "torch.float32": "fp32",
    "torch.float": "fp32",
    "torch.float64": "fp32",
    "torch.double": "fp32",
}


def dtype_values(
    index: ModuleIndex, expr: cst.BaseExpression | None, depth: int = 0, on_cuda: bool = False
) -> set[str]:
    """The dtypes ``expr`` can name: subsets of {"fp16", "bf16", "fp32", "auto", "unknown"}.
    ``on_cuda``: only those it names on a CUDA device, where a choice by the device's type
    (``bfloat16 if device.type in ["cuda", "cpu"] else float16``) is decided."""
    if expr is None or depth > DATAFLOW_STEPS:
        return {"unknown"}
    values = partial(dtype_values, on_cuda=on_cuda)
    if isinstance(expr, (cst.Attribute, cst.Name)):
        text = dotted(expr)
        for name in index.qualified(expr) | ({text} if text else set()):
            if name in _DTYPE_ATTRIBUTES:
                return {_DTYPE_ATTRIBUTES[name]}
        if text:
            return _union(index, [d.value for d in index.all_definitions(text, expr)], depth, values) or (
                _default_values(index, text, expr, depth, values)
            )
        return {"unknown"}
    if isinstance(expr, cst.SimpleString):
        named = dtype_name(string_value(expr) or "")
        return {named} if named else {"unknown"}
    if isinstance(expr, cst.IfExp):
        taken = on_a_cuda_device(expr.test) if on_cuda else None
        if taken is None:
            taken = decided_by_the_module(index, expr.test)
        if taken is not None:
            return values(index, expr.body if taken else expr.orelse, depth + 1)
        return values(index, expr.body, depth + 1) | values(index, expr.orelse, depth + 1)
    if isinstance(expr, cst.Subscript) and isinstance(expr.value, cst.Dict):
        entries = [e for e in expr.value.elements if isinstance(e, cst.DictElement)]
        keys = _looked_up(index, expr, depth)
        if keys is not None:  # nanoGPT's ``{...}[dtype]`` with ``dtype = 'bfloat16'``: that entry only
            entries = [e for e in entries if string_value(e.key) in keys] or entries
        return _union(index, [e.value for e in entries], depth, values) or {"unknown"}
    if isinstance(expr, cst.Call) and method_name(expr) == "getattr" and len(expr.args) >= 2:
        named = dtype_name(string_value(expr.args[1].value) or "")
        return {named} if named else {"unknown"}
    return {"unknown"}


def decided_by_the_module(index: ModuleIndex, test: cst.BaseExpression) -> bool | None:
    """The truth of a test the module decides by itself, whatever a launch passes: constants and
    the defaults of a settings object it builds with no argument (GZbridge's ``cfg =
    CLISettings()`` then ``torch.bfloat16 if cfg.precision == "bf16-mixed" else torch.float16``);
    None when an option, the environment or the machine decides it, or it is not known."""
    from memlint.python.values import module_values  # the evaluator reads this module's helpers

    found = module_values(index).evaluate(test)
    if found is None or not found.known or found.options or found.formula is not None:
        return None
    return found.value if isinstance(found.value, bool) else None


def _looked_up(index: ModuleIndex, lookup: cst.Subscript, depth: int) -> set[str] | None:
    """The keys a ``{...}[name]`` lookup can take when ``name`` is a variable of the module whose
    every assignment is a string (Sophia's ``dtype = 'bfloat16'``); None when it is anything else:
    an option (``args.mixed_precision``, which a launch may set to any of its choices), a
    parameter, or a value computed at run time."""
    if len(lookup.slice) != 1 or not isinstance(lookup.slice[0].slice, cst.Index):
        return None
    key = lookup.slice[0].slice.value
    if not isinstance(key, cst.Name):
        return None
    definitions = index.all_definitions(key.value, lookup)
    if not definitions:
        return None
    found = string_values(index, key, depth + 1)
    return None if "unknown" in found else found


_DEVICE_NAMES = ("type", "device", "device_type")  # device.type, args.device, device_type


def on_a_cuda_device(test: cst.BaseExpression) -> bool | None:
    """Is ``test`` true when the code runs on a CUDA device? Decided for tests of the device's
    type (``device.type == "cuda"``, ``device.type in ["cuda", "cpu"]``, ``"cuda" in device``,
    ``args.device != "mps"``) and ``torch.cuda.is_available()``, joined by and/or/not; None for
    anything else (``torch.cuda.is_bf16_supported()`` depends on which GPU)."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = on_a_cuda_device(test.expression)
        return None if inner is None else not inner
    if isinstance(test, cst.BooleanOperation):
        first, second = on_a_cuda_device(test.left), on_a_cuda_device(test.right)
        if isinstance(test.operator, cst.And):
            return False if False in (first, second) else (True if first is second is True else None)
        return True if True in (first, second) else (False if first is second is False else None)
    if isinstance(test, cst.Call):
        return True if dotted(test.func) == "torch.cuda.is_available" else None
    if not isinstance(test, cst.Comparison) or len(test.comparisons) != 1:
        return None
    target = test.comparisons[0]
    operator, left, right = target.operator, test.left, target.comparator
    if isinstance(operator, (cst.In, cst.NotIn)) and string_value(left) == "cuda" and _names_a_device(right):
        return isinstance(operator, cst.In)  # "cuda" in device (a device string such as "cuda:0")
    if not _names_a_device(left):
        left, right = right, left
        if not _names_a_device(left) or isinstance(operator, (cst.In, cst.NotIn)):
            return None
    names = _strings(right)
    if names is None:
        return None
    cuda = any(n == "cuda" or n.startswith("cuda:") for n in names)
    if isinstance(operator, (cst.Equal, cst.In)):
        return cuda
    if isinstance(operator, (cst.NotEqual, cst.NotIn)):
        return not cuda
    return None


def _names_a_device(expr: cst.BaseExpression) -> bool:
    text = dotted(expr)
    return text is not None and text.rsplit(".", 1)[-1] in _DEVICE_NAMES


def _strings(expr: cst.BaseExpression) -> list[str] | None:
    """The string literals of ``expr``: one string, or a list/tuple/set of them."""
    single = string_value(expr)
    if single is not None:
        return [single]
    if isinstance(expr, (cst.List, cst.Tuple, cst.Set)):
        found = [string_value(e.value) for e in expr.elements]
        return None if any(v is None for v in found) else [v for v in found if v is not None]
    return None


def string_values(index: ModuleIndex, expr: cst.BaseExpression | None, depth: int = 0) -> set[str]:
    """The strings ``expr`` can be (``"cuda" if ... else "cpu"`` -> both); ``"unknown"`` else."""
    if expr is None or depth > DATAFLOW_STEPS:
        return {"unknown"}
    value = string_value(expr)
    if value is not None:
        return {value}
    if isinstance(expr, cst.IfExp):
        return string_values(index, expr.body, depth + 1) | string_values(index, expr.orelse, depth + 1)
    if isinstance(expr, (cst.Name, cst.Attribute)):
        text = dotted(expr)
        if text:
            found = _union(index, [d.value for d in index.all_definitions(text, expr)], depth, string_values)
            return found or _default_values(index, text, expr, depth, string_values)
    if isinstance(expr, cst.Attribute) and expr.attr.value == "type":
        return {"unknown"}  # device.type
    return {"unknown"}


def _union(index, values, depth, function) -> set[str]:
    out: set[str] = set()
    for value in values:
        out |= function(index, value, depth + 1) if value is not None else {"unknown"}
    return out


def _default_values(index, name, at, depth, function) -> set[str]:
    """A parameter's values: its default where a call of the module leaves it out (or none is
    found), and what the module's calls pass for it."""
    flow = index.flow_of(at)
    default = index.parameter_default(name, flow)
    if default is None:
        return {"unknown"}
    passed, omitted = index.passed_arguments(name, flow)
    found = function(index, default, depth + 1) if omitted else set()
    for argument in passed:
        found |= function(index, argument, depth + 1)
    return found or {"unknown"}


# ---------------------------------------------------------------------- division of a loss


def divides(expr: cst.BaseExpression | None) -> bool:
    """Is ``expr`` a quotient: ``x / k``, ``x * (1 / k)``, ``x.div(k)``, ``torch.div(x, k)``?"""
    if isinstance(expr, cst.BinaryOperation):
        if isinstance(expr.operator, cst.Divide):
            return True
        if isinstance(expr.operator, cst.Multiply):
            return _is_reciprocal(expr.left) or _is_reciprocal(expr.right)
        return False
    if isinstance(expr, cst.Call):
        name = method_name(expr)
        if name in ("div", "div_", "true_divide", "divide"):
            return True
        if name in ("mul", "mul_") and expr.args and _is_reciprocal(expr.args[0].value):
            return True
    return False


def _is_reciprocal(expr: cst.BaseExpression | None) -> bool:
    return isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.Divide)


def loss_is_divided(
    index: ModuleIndex, expr: cst.BaseExpression | None, at: cst.CSTNode, depth: int = 0, chain: tuple = ()
) -> bool:
    """Is the tensor ``expr`` (evaluated at ``at``) divided on its way there: by the expression
    itself, by the assignments to the name before ``at``, by a local helper that returns it,
    or — for a parameter of a helper reached through the calls in ``chain`` — by the argument
    the caller passed?"""
    if expr is None or depth > LOSS_STEPS:
        return False
    if divides(expr):
        return True
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Subtract, cst.Multiply)):
        # loss + aux, local_scale * loss: the loss term decides
        return loss_is_divided(index, expr.left, at, depth + 1, chain) or loss_is_divided(
            index, expr.right, at, depth + 1, chain
        )
    if isinstance(expr, (cst.List, cst.Tuple)):
        return any(loss_is_divided(index, element.value, at, depth + 1, chain) for element in expr.elements)
    if isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
        return loss_is_divided(index, expr.elt, at, depth + 1, chain)
    if isinstance(expr, cst.Call):
        name = method_name(expr)
        if name in ("float", "mean", "sum", "contiguous", "clone") and receiver(expr) is not None:
            return loss_is_divided(index, receiver(expr), at, depth + 1)
        if expr.args and (index.calls_named(expr, *_COMBINING_CALLS) or _builtin_sum(index, expr)):
            # torch.stack(losses).mean(), sum(losses): the collected losses decide
            return loss_is_divided(index, expr.args[0].value, at, depth + 1, chain)
        helper = index.helper_for(expr)
        if helper is None:
            return False
        if returns_divided(index, helper, depth + 1):
            return True
        # ``self.forward_propagation(batch, model)`` on a base class whose subclasses each return
        # ``loss / self.accumulation_steps`` (TencentPretrain's trainers; the base only raises)
        overrides = index.overrides_of(helper) if isinstance(expr.func, cst.Attribute) else []
        return bool(overrides) and all(returns_divided(index, o, depth + 1) for o in overrides)
    text = dotted(expr)
    if text is None:
        return False
    for definition in sorted(index.reaching(text, at), key=lambda d: index.start(d.statement), reverse=True):
        verdict = _definition_divides(index, definition, depth, chain)
        if verdict is not None:
            return verdict
    caller = _argument_for_parameter(index, text, at, chain)
    if caller is not None:
        argument_value, call = caller
        return loss_is_divided(index, argument_value, call, depth + 1, chain[:-1])
    return False


def _argument_for_parameter(index: ModuleIndex, name: str, at: cst.CSTNode, chain: tuple):
    """``(the argument, the call)`` bound to parameter ``name`` of the function holding ``at``,
    when the innermost call of ``chain`` runs that function."""
    function = index.flow_of(at)
    if not chain or not isinstance(function, cst.FunctionDef) or index.helper_for(chain[-1]) is not function:
        return None
    call = chain[-1]
    params = [*function.params.posonly_params, *function.params.params]
    if params and params[0].name.value in ("self", "cls") and isinstance(call.func, cst.Attribute):
        params = params[1:]
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value, call
    positional_args = [a for a in call.args if a.keyword is None and a.star == ""]
    for position, param in enumerate(params):
        if param.name.value == name and position < len(positional_args):
            return positional_args[position].value, call
    return None


def _definition_divides(index: ModuleIndex, definition: Definition, depth: int, chain: tuple = ()) -> bool | None:
    """True / False for a definition that settles the question, None to look further back."""
    if definition.augmented is not None:
        if isinstance(definition.augmented, cst.DivideAssign):
            return True
        if isinstance(definition.augmented, cst.MultiplyAssign) and _is_reciprocal(definition.value):
            return True
        return None  # ``loss += aux``: the earlier value decides
    if isinstance(definition.statement, cst.Call):  # loss.div_(accum)
        return divides(definition.statement)
    value = definition.value
    if isinstance(value, cst.List) and not value.elements:
        # losses = [] ... losses.append(loss / accumulation_steps): what is appended decides
        return any(loss_is_divided(index, item, call, depth + 1, chain)
                   for item, call in _collected(index, definition.name, definition.statement))
    if value is None:
        whole = definition.whole_value
        if isinstance(whole, cst.Call):
            helper = index.helper_for(whole)
            return helper is not None and returns_divided(index, helper, depth + 1)
        return False
    return loss_is_divided(index, value, definition.statement, depth + 1, chain)


def _builtin_sum(index: ModuleIndex, call: cst.Call) -> bool:
    """``sum(losses)`` with Python's own ``sum`` (not a name the module rebinds)."""
    return (isinstance(call.func, cst.Name) and call.func.value == "sum"
            and "builtins.sum" in index.qualified(call))


def _collected(index: ModuleIndex, name: str, start: cst.CSTNode) -> list[tuple[cst.BaseExpression, cst.Call]]:
    """What the flow holding ``start`` adds to the list ``name``: ``(the item, the call)`` for each
    ``name.append(item)`` and each element of ``name.extend(items)``."""
    found: list[tuple[cst.BaseExpression, cst.Call]] = []
    for node in iter_nodes(index.flow_of(start)):
        if (isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.args
                and node.func.attr.value in ("append", "extend") and dotted(node.func.value) == name):
            found.append((node.args[0].value, node))
    return found


def returns_divided(index: ModuleIndex, helper: cst.FunctionDef, depth: int = 0) -> bool:
    for node in iter_nodes(helper.body):
        if isinstance(node, cst.Return) and node.value is not None:
            values = [e.value for e in node.value.elements] if isinstance(node.value, cst.Tuple) else [node.value]
            if any(loss_is_divided(index, v, node, depth + 1) for v in values):
                return True
    return False


def names_in(expr: cst.CSTNode | None) -> set[str]:
    """Every plain name an expression reads."""
    if expr is None:
        return set()
    return {n.value for n in iter_nodes(expr) if isinstance(n, cst.Name)}


def normalised_over_group(index: ModuleIndex, expr: cst.BaseExpression | None, at: cst.CSTNode,
                          group: cst.BaseExpression, depth: int = 0) -> bool:
    """Is the loss ``expr`` made by a call that is given the accumulation group's size, or a value
    worked out from it (``masked_mean(loss, mask, None, accumulation_token_counts[batch_start])``
    with ``batch_start = (i // accumulation_steps) * accumulation_steps``: the token count of the
    whole group)? The callee is another module's, so memlint cannot see it divide; a loss helper
    handed the group is taken to normalise over it, as open-instruct's and OLMo-core's do."""
    names = {text for node in iter_nodes(group) if (text := dotted(node)) is not None}
    if expr is None or depth > LOSS_STEPS or not names:
        return False
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.Add, cst.Subtract, cst.Multiply)):
        return (normalised_over_group(index, expr.left, at, group, depth + 1)
                or normalised_over_group(index, expr.right, at, group, depth + 1))
    if isinstance(expr, cst.Call):
        return (any(_worked_out_from(index, arg.value, at, names) for arg in expr.args[1:])
                or _built_with_the_group(index, expr.func, at, names))
    text = dotted(expr)
    if text is None:
        return False
    return any(definition.value is not None
               and normalised_over_group(index, definition.value, definition.statement, group, depth + 1)
               for definition in index.reaching(text, at))


def _built_with_the_group(index: ModuleIndex, func: cst.BaseExpression, at: cst.CSTNode, names: set[str]) -> bool:
    """Is the loss function ``func`` the result of a call that was handed the group's size
    (torchtitan's ``loss_fn = rescale_accumulated_loss(cross_entropy, accumulation_steps)``, a
    wrapper whose every loss is divided by the steps)?"""
    text = dotted(func)
    if text is None:
        return False
    return any(isinstance(definition.value, cst.Call)
               and any(_worked_out_from(index, arg.value, definition.statement, names) for arg in definition.value.args)
               for definition in index.reaching(text, at))


def _worked_out_from(index: ModuleIndex, expr: cst.BaseExpression, at: cst.CSTNode, names: set[str],
                     depth: int = 0) -> bool:
    """Does ``expr`` use one of ``names``, itself or through the assignments it reads?"""
    if depth > LOSS_STEPS:
        return False
    used = {text for node in iter_nodes(expr) if isinstance(node, (cst.Name, cst.Attribute))
            and (text := dotted(node)) is not None}
    if used & names:
        return True
    return any(definition.value is not None
               and _worked_out_from(index, definition.value, definition.statement, names, depth + 1)
               for name in used for definition in index.reaching(name, at))
