"""The children of every syntax node of a libcst tree, read from the nodes' fields.

``memlint.python.tree`` notes children while libcst regenerates a module's code, which also
yields every node's position; a cold ``memlint check`` needs the shape of every module it
keeps (names, calls, parents) but the positions of a few nodes only (those it reports, and the
statements they are in). Reading the fields is a fraction of the regeneration's cost: it
enters syntax nodes only (not the whitespace, commas and brackets, six nodes in ten) and
writes no code.

A node's children come in the order libcst visits them (``node.children``, which
``_visit_and_replace_children`` defines field by field); the field order of each node class is
read once from that method's source, the ``"field"`` names it passes to libcst's
``visit_required``/``visit_sequence``/... helpers. ``tests/python/test_shape.py`` compares the
result with the regeneration's on real modules.
"""

from __future__ import annotations

import inspect
import re

import libcst as cst

from memlint.python.tree import FORMATTING

_FIELD = re.compile(r"visit_\w+\(\s*self\s*,\s*\"(\w+)\"")
_ORDER: dict[type, tuple[str, ...]] = {}


def _fields(kind: type) -> tuple[str, ...]:
    """The fields of a node class that hold its children, in libcst's visiting order."""
    found = _ORDER.get(kind)
    if found is None:
        try:
            code = inspect.getsource(kind._visit_and_replace_children)  # type: ignore[attr-defined]
        except (OSError, TypeError):  # no source (a frozen install): every field, declared order
            code = "".join(f'visit_x(self, "{name}"' for name in getattr(kind, "__dataclass_fields__", ()))
        found = _ORDER[kind] = tuple(dict.fromkeys(_FIELD.findall(code)))
    return found


def shape_of(root: cst.CSTNode) -> dict[cst.CSTNode, list[cst.CSTNode]]:
    """Every syntax node below ``root`` (and ``root``) -> its syntax children, in order: what
    ``memlint.python.tree.record`` notes, without generating code."""
    shape: dict[cst.CSTNode, list[cst.CSTNode]] = {}
    formatting, fields, syntax = FORMATTING, _fields, _SYNTAX
    stack = [root]
    while stack:
        node = stack.pop()
        found: list[cst.CSTNode] = []
        for name in fields(type(node)):
            value = getattr(node, name)
            if isinstance(value, (list, tuple)):
                for item in value:
                    if type(item) not in formatting:
                        found.append(item)
            else:
                # a dict lookup by class, not ``isinstance`` against libcst's ABC (a Python-level
                # call, on every field of every node)
                kind = type(value)
                known = syntax.get(kind)
                if known is None:
                    known = syntax[kind] = issubclass(kind, cst.CSTNode) and kind not in formatting
                if known:
                    found.append(value)
        shape[node] = found
        stack.extend(found)
    return shape


_SYNTAX: dict[type, bool] = {}  # a field value's class -> is it a syntax node (not formatting)?
