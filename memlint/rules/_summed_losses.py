"""Is a training loss a sum over the batch's samples, not their mean? Then accumulating it over
micro-batches without a division is the design: the sum over the nominal batch.

YOLOv5 and YOLOv7 scale their loss by the batch size (``utils/loss.py``: ``ComputeLoss.__call__``
ends ``return loss * bs, ...``; the script's line says "loss scaled by batch_size") and accumulate
to a nominal batch of 64 (``accumulate = max(round(nbs / total_batch_size), 1)``), with
hyperparameters tuned for that sum. A criterion built with ``reduction="sum"`` is the same. ACC001
asks this before it reports a missing division.

Read, never run: the loss's definitions before the backward, the call that made it, and -- for a
project's own loss function or class (``compute_loss = ComputeLoss(model)``) -- the ``return`` of
that function or of the class's ``__call__`` in the module the script imports it from.
"""

from __future__ import annotations

from pathlib import Path

import libcst as cst

from memlint.lint.context import RuleContext
from memlint.python.index import ModuleIndex
from memlint.python.syntax import iter_nodes, string_value
from memlint.rules._project_code import method, project_definition

# names a loss is multiplied by when it is turned into a sum over the batch's samples
_BATCH_SIZES = frozenset({"bs", "batch_size", "batchsize", "nb", "n_samples", "num_samples"})


def sum_over_samples(ctx: RuleContext, index: ModuleIndex, loss: cst.BaseExpression, at: cst.CSTNode) -> bool:
    """Was ``loss`` (at the backward ``at``) made as a sum over the samples, or weighted by
    weights its caller hands in?"""
    name, key = _taken_from(loss)
    if name is None:
        return False
    for definition in index.reaching(name, at):
        made = definition.whole_value if definition.whole_value is not None else definition.value
        if not isinstance(made, cst.Call):
            continue
        if key is None and _summing_call(ctx, index, made, definition.position):
            return True
        if _project_method_sums(ctx, made, key, definition.position):
            return True
    return False


def _taken_from(loss: cst.BaseExpression) -> tuple[str | None, str | None]:
    """``loss`` -> ("loss", None); ``out["loss"]`` / ``out.loss`` -> ("out", "loss")."""
    if isinstance(loss, cst.Name):
        return loss.value, None
    if isinstance(loss, cst.Subscript) and isinstance(loss.value, cst.Name) and len(loss.slice) == 1:
        element = loss.slice[0].slice
        key = string_value(element.value) if isinstance(element, cst.Index) else None
        return (loss.value.value, key) if key else (None, None)
    if isinstance(loss, cst.Attribute) and isinstance(loss.value, cst.Name):
        return loss.value.value, loss.attr.value
    return None, None


def _project_method_sums(ctx: RuleContext, call: cst.Call, key: str | None, position: int | None) -> bool:
    """A loss a method of the project's own classes returns (``self.model.compute_loss(x, y,
    gamma=w)``; ``out = self.model(batch)`` then ``out["loss"]``, the model's ``forward``), made
    there as a sum over the tokens or samples, or weighted by a parameter this call passes: the
    project scales it on purpose. Every method of that name in the script's folder and the project
    modules it imports must say so; a ``forward`` counts only where it returns ``key``."""
    func = call.func
    names: list[str] = []
    if isinstance(func, cst.Attribute) and not (isinstance(func.value, cst.Name) and func.value.value in _LIBRARIES):
        names.append(func.attr.value)  # ``self.model.compute_loss(...)``, or the object ``self.model``
    if key is not None:
        names.append("forward")  # calling a model object runs its forward
    passed = {arg.keyword.value for arg in call.args if arg.keyword is not None}
    for name in names:
        candidates = [m for m in _project_methods(ctx, name) if _returned(m, key, position) is not None]
        if candidates:
            return all(_scaled_on_purpose(m, _returned(m, key, position), passed, call) for m in candidates)
    return False


# modules whose attributes are functions, not a model's methods (``torch.nn.functional.cross_entropy``)
_LIBRARIES = frozenset({"torch", "F", "nn", "np", "math", "functional"})
_MAX_SIBLINGS = 60  # a folder of more modules is a library, not a project's training code


def _project_methods(ctx: RuleContext, name: str) -> list[cst.FunctionDef]:
    """Methods called ``name`` of the classes of this module, of the modules beside it and of the
    project modules it imports."""
    here = Path(ctx.path)
    paths: list[Path] = []
    try:
        siblings = sorted(here.parent.glob("*.py"))
    except OSError:
        siblings = []
    if len(siblings) <= _MAX_SIBLINGS:
        paths.extend(siblings)
    assert ctx.python is not None
    for statement in iter_nodes(ctx.python.module):
        if isinstance(statement, cst.ImportFrom) and statement.module is not None:
            dotted_name = _module_name(statement.module)
            if dotted_name:
                for written in (dotted_name.replace(".", "/") + ".py", dotted_name.replace(".", "/") + "/__init__.py"):
                    found = ctx.resolve_reference(written, ctx.path) or ctx.resolve_reference(written, None)
                    if found is not None:
                        paths.append(found)
                if not isinstance(statement.names, cst.ImportStar):
                    for alias in statement.names:  # ``from models import voicecraft``
                        written = dotted_name.replace(".", "/") + "/" + _module_name(alias.name) + ".py"
                        found = ctx.resolve_reference(written, ctx.path) or ctx.resolve_reference(written, None)
                        if found is not None:
                            paths.append(found)
    methods: list[cst.FunctionDef] = []
    seen: set[str] = set()
    for path in paths:
        if str(path) in seen:
            continue
        seen.add(str(path))
        try:
            python = ctx.python if Path(path) == here else ctx.imported_module(path).python
        except (OSError, ValueError):
            continue
        if python is None:
            continue
        for statement in python.module.body:
            if isinstance(statement, cst.ClassDef):
                found_method = method(statement, name)
                if found_method is not None:
                    methods.append(found_method)
    return methods


def _module_name(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return f"{_module_name(node.value)}.{node.attr.value}"
    return ""


def _returned(function: cst.FunctionDef, key: str | None, position: int | None) -> cst.BaseExpression | None:
    """What ``function`` returns as its loss: the ``key`` entry of a returned dict literal, the
    ``position`` of a returned tuple, or the value itself."""
    for statement in iter_nodes(function.body):
        if not isinstance(statement, cst.Return) or statement.value is None:
            continue
        value = statement.value
        if key is not None:
            if isinstance(value, cst.Dict):
                for element in value.elements:
                    if isinstance(element, cst.DictElement) and string_value(element.key) == key:
                        return element.value
            continue
        if isinstance(value, cst.Tuple):
            index = position if position is not None else 0
            return value.elements[index].value if index < len(value.elements) else None
        return value
    return None


def _scaled_on_purpose(function: cst.FunctionDef, value: cst.BaseExpression | None, passed: set[str],
                       call: cst.Call) -> bool:
    """Is the returned loss (a name: any of its assignments in ``function``) a sum over counts of
    tokens or samples, or a sum weighted by a parameter the call hands in?"""
    if value is None:
        return False
    made = [value]
    if isinstance(value, cst.Name):
        made = [target_value for node in iter_nodes(function.body) if isinstance(node, cst.Assign)
                for target_value in [node.value] if any(isinstance(t.target, cst.Name) and t.target.value == value.value
                                                        for t in node.targets)]
    parameters = [p.name.value for p in function.params.params if p.name.value != "self"]
    handed = passed | set(parameters[:max(len(call.args) - len(passed), 0)])
    weights = {p for p in parameters if p in handed}
    return any(_weighted_sum(expression, weights) or _token_sum(expression) for expression in made)


def _is_sum(call: cst.BaseExpression) -> cst.BaseExpression | None:
    """The summed expression of ``torch.sum(x)``, ``sum(x)`` or ``x.sum()``; None otherwise."""
    if not isinstance(call, cst.Call):
        return None
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "sum":
        if isinstance(func.value, cst.Name) and func.value.value == "torch":
            return call.args[0].value if call.args else None
        return func.value
    if isinstance(func, cst.Name) and func.value == "sum" and call.args:
        return call.args[0].value
    return None


def _weighted_sum(expression: cst.BaseExpression, weights: set[str]) -> bool:
    """``torch.sum(gamma * losses)``: a sum of a product with a weight the caller passes."""
    summed = _is_sum(expression)
    if summed is None or not weights:
        return False
    return any(isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply)
               and any(isinstance(side, cst.Name) and side.value in weights for side in (node.left, node.right))
               for node in iter_nodes(summed))


# names a per-item loss is multiplied by to make a sum over the tokens it averaged
_COUNTS = frozenset({"nt", "ntoken", "ntokens", "n_tokens", "num_tokens", "n_token", "token_count", "ntok"})


def _token_sum(expression: cst.BaseExpression) -> bool:
    """``sum([l * nt * cw for l, nt, cw in zip(loss, ntokens, weights)])`` (VoiceCraft's forward):
    per-codebook means multiplied back by their token counts and summed."""
    summed = _is_sum(expression)
    if summed is None:
        return False
    return any(isinstance(node, cst.BinaryOperation) and isinstance(node.operator, cst.Multiply)
               and any(isinstance(side, cst.Name) and (side.value.lower() in _COUNTS or side.value.lower() in _BATCH_SIZES)
                       for side in (node.left, node.right))
               for node in iter_nodes(summed))


def _summing_call(ctx: RuleContext, index: ModuleIndex, call: cst.Call, position: int | None) -> bool:
    if _sum_reduction(call):
        return True
    if not isinstance(call.func, cst.Name):
        return False
    # ``criterion(...)``: what the name was built from in this module
    for definition in index.all_definitions(call.func.value, call):
        built = definition.value
        if isinstance(built, cst.Call):
            if _sum_reduction(built):
                return True
            body = project_definition(ctx, index, built.func)
            if isinstance(body, cst.ClassDef):
                return _returns_a_sum(method(body, "__call__") or method(body, "forward"), position)
    body = project_definition(ctx, index, call.func)
    return isinstance(body, cst.FunctionDef) and _returns_a_sum(body, position)


def _sum_reduction(call: cst.Call) -> bool:
    return any(arg.keyword is not None and arg.keyword.value == "reduction" and string_value(arg.value) == "sum"
               for arg in call.args)


def _returns_a_sum(function: cst.FunctionDef | None, position: int | None) -> bool:
    """Does every ``return`` give (at ``position`` of a tuple) a value multiplied by the batch size?"""
    if function is None:
        return False
    returns = [node for node in iter_nodes(function.body) if isinstance(node, cst.Return)]  # not nested functions
    if not returns:
        return False
    for statement in returns:
        value = statement.value
        if isinstance(value, cst.Tuple):
            index = position if position is not None else 0
            if index >= len(value.elements):
                return False
            value = value.elements[index].value
        if not _times_batch_size(value):
            return False
    return True


def _times_batch_size(value: cst.BaseExpression | None) -> bool:
    if not (isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Multiply)):
        return False
    return any(isinstance(side, cst.Name) and side.value.lower() in _BATCH_SIZES for side in (value.left, value.right))
