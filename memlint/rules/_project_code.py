"""The definitions of a project's own code that a linted script uses, read without running it:
the function or class a name the script imports from the project stands for (``from utils.loss
import ComputeLoss`` -> the ``ComputeLoss`` class of ``utils/loss.py``), or one the script defines
itself. Rules ask it where a library's behaviour is not what the project's code does."""

from __future__ import annotations

import libcst as cst

from memlint.lint.context import RuleContext
from memlint.python.index import ModuleIndex
from memlint.python.syntax import dotted


def project_definition(ctx: RuleContext, index: ModuleIndex, func: cst.BaseExpression) -> cst.CSTNode | None:
    """The function or class ``func`` names in the project module the script imports it from
    (``from utils.loss import ComputeLoss``: ``utils/loss.py`` beside the script or under the
    project root)."""
    name = dotted(func)
    if not name or "." in name:
        return None
    for statement in index.py.module.body:  # defined in the script itself
        if isinstance(statement, (cst.ClassDef, cst.FunctionDef)) and statement.name.value == name:
            return statement
    for qualified in index.qualified(func):
        module, _, defined = qualified.rpartition(".")
        if not module or defined != name:
            continue
        written = module.replace(".", "/") + ".py"
        path = ctx.resolve_reference(written, ctx.path) or ctx.resolve_reference(written, None)
        if path is None:
            continue
        try:
            python = ctx.imported_module(path).python
        except (OSError, ValueError):
            continue
        if python is None:
            continue
        for statement in python.module.body:
            if isinstance(statement, (cst.ClassDef, cst.FunctionDef)) and statement.name.value == name:
                return statement
    return None


def method(cls: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    return next((s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == name), None)
