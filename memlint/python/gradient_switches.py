"""Where code turns gradients off or on: ``for p in X.parameters(): p.requires_grad = False``,
``X.requires_grad_(False)``, ``X.weight.requires_grad = True``.

Shared by the facts that read what a script freezes and by the rules that ask whether a module
of a model class trains.
"""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from memlint.python.syntax import dotted, is_false, iter_nodes


def sets_requires_grad(call: cst.Call) -> bool | None:
    """``x.requires_grad_(False)``: False; ``x.requires_grad_()`` / ``(True)``: True; else None."""
    if not (isinstance(call.func, cst.Attribute) and call.func.attr.value == "requires_grad_"):
        return None
    if not call.args:
        return True
    return not is_false(call.args[0].value)


def assigned_gradient(small: cst.BaseSmallStatement, param: str) -> cst.BaseExpression | None:
    """The value ``param``'s gradient flag gets (``p.requires_grad = v``, ``p.requires_grad_(v)``)."""
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        target = small.targets[0].target
        if isinstance(target, cst.Attribute) and target.attr.value == "requires_grad" \
                and isinstance(target.value, cst.Name) and target.value.value == param:
            return small.value
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        call = small.value
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "requires_grad_" \
                and isinstance(call.func.value, cst.Name) and call.func.value.value == param:
            return call.args[0].value if call.args else cst.Name("True")
    return None


def switches(nodes: list[cst.CSTNode]) -> Iterator[tuple[str, bool]]:
    """``(what, turned on)`` for each gradient switch among ``nodes`` (a module's nodes): ``what``
    is the dotted expression whose parameters it reaches (``self.llama_proj`` for a loop over
    ``self.llama_proj.parameters()`` setting ``p.requires_grad = False``, for
    ``self.llama_proj.requires_grad_(False)`` and for ``self.llama_proj.weight.requires_grad =
    False``). A loop's switch counts wherever it sits in the loop's body (under an ``if``)."""
    for node in nodes:
        if type(node) is cst.For:
            yield from _loop_switches(node)
        elif type(node) is cst.Call:
            turned = sets_requires_grad(node)
            what = dotted(node.func.value) if isinstance(node.func, cst.Attribute) else None
            if turned is not None and what is not None:
                yield what, turned
        elif type(node) is cst.Assign and len(node.targets) == 1:
            target = node.targets[0].target
            if isinstance(target, cst.Attribute) and target.attr.value == "requires_grad":
                what = dotted(target.value)
                if what is not None:
                    yield what, not is_false(node.value)


def _loop_switches(loop: cst.For) -> Iterator[tuple[str, bool]]:
    source = loop.iter
    if not (isinstance(source, cst.Call) and isinstance(source.func, cst.Attribute)
            and source.func.attr.value in ("parameters", "named_parameters")):
        return
    what = dotted(source.func.value)
    target: cst.BaseExpression = loop.target
    if isinstance(target, cst.Tuple) and len(target.elements) == 2:
        target = target.elements[1].value
    if what is None or not isinstance(target, cst.Name):
        return
    for node in iter_nodes(loop.body):
        if isinstance(node, cst.BaseSmallStatement):
            value = assigned_gradient(node, target.value)
            if value is not None:
                yield what, not is_false(value)
