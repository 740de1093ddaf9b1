"""Small questions about libcst nodes: names, receivers, arguments, literals."""

from __future__ import annotations

from typing import Iterator

import libcst as cst

from memlint.python import tree as python_tree

# nodes whose bodies do not run where they are written
DEFERRED = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
# the same as a set of types, for the walks below: libcst's node classes are ABCs, whose
# ``isinstance`` is a Python-level call; these three have no subclasses
_DEFERRED_TYPES = frozenset(DEFERRED)

# ``node.children`` re-visits the node with libcst's visitor machinery (tens of microseconds
# per node); ``children`` reads the lists built with the module's positions instead.
children = python_tree.children


def iter_nodes(root: cst.CSTNode, *, enter_defs: bool = False) -> Iterator[cst.CSTNode]:
    """``root`` and its descendants in source order, not entering nested functions, classes
    and lambdas (whose bodies do not run where they are written) unless ``enter_defs``."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        if enter_defs:
            stack.extend(reversed(children(node)))
            continue
        for child in reversed(children(node)):
            if type(child) not in _DEFERRED_TYPES:
                stack.append(child)


def calls_in_evaluation_order(root: cst.CSTNode) -> list[cst.Call]:
    """Calls of an expression or simple statement in the order Python evaluates them
    (arguments and receivers before the call itself)."""
    out: list[cst.Call] = []
    stack: list[tuple[cst.CSTNode, bool]] = [(root, False)]  # (node, children already pushed)
    while stack:
        node, expanded = stack.pop()
        if expanded:
            if type(node) is cst.Call:
                out.append(node)
            continue
        if type(node) in _DEFERRED_TYPES:
            continue
        stack.append((node, True))
        stack.extend((child, False) for child in reversed(children(node)))
    return out


def method_name(call: cst.Call) -> str | None:
    """``"step"`` for ``optimizer.step()``; ``"print"`` for ``print()``."""
    func = call.func
    if isinstance(func, cst.Attribute):
        return func.attr.value
    if isinstance(func, cst.Name):
        return func.value
    return None


def receiver(call: cst.Call) -> cst.BaseExpression | None:
    """``optimizer`` in ``optimizer.step()``; None for a plain function call."""
    return call.func.value if isinstance(call.func, cst.Attribute) else None


def dotted(node: cst.CSTNode | None) -> str | None:
    """``"self.optimizer"`` for a chain of names and attributes, else None."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr.value}" if base else None
    return None


def root_name(node: cst.CSTNode | None) -> str | None:
    """The name an expression chain starts from: ``model`` in ``model.cuda().half()``."""
    while node is not None:
        if isinstance(node, cst.Name):
            return node.value
        if isinstance(node, cst.Attribute):
            node = node.value
        elif isinstance(node, cst.Call):
            node = node.func
        elif isinstance(node, cst.Subscript):
            node = node.value
        else:
            return None
    return None


def positional(call: cst.Call) -> list[cst.Arg]:
    return [a for a in call.args if a.keyword is None and a.star == ""]


def keyword(call: cst.Call, name: str) -> cst.Arg | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def argument(call: cst.Call, index: int | None, name: str) -> cst.BaseExpression | None:
    """The value passed as keyword ``name`` or at positional ``index``."""
    found = keyword(call, name)
    if found is not None:
        return found.value
    if index is not None:
        args = positional(call)
        if index < len(args):
            return args[index].value
    return None


def has_star_kwargs(call: cst.Call) -> bool:
    return any(arg.star == "**" for arg in call.args)


def string_value(node: cst.CSTNode | None) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def is_false(node: cst.CSTNode | None) -> bool:
    return isinstance(node, cst.Name) and node.value == "False"


def integer_value(node: cst.CSTNode | None) -> int | None:
    if isinstance(node, cst.Integer):
        try:
            return int(node.value.replace("_", ""), 0)
        except ValueError:
            return None
    return None


def is_string_like(node: cst.CSTNode) -> bool:
    return isinstance(node, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString))


def modulo_divisors(test: cst.CSTNode) -> list[cst.BaseExpression]:
    """The right operands of ``%`` in a condition (``(step + 1) % accum == 0`` -> ``accum``),
    skipping string formatting (``"%d" % x``)."""
    out = []
    for node in iter_nodes(test):
        if (
            isinstance(node, cst.BinaryOperation)
            and isinstance(node.operator, cst.Modulo)
            and not is_string_like(node.left)
        ):
            out.append(node.right)
    return out


def block_statements(block: cst.BaseSuite) -> list[cst.CSTNode]:
    """Statements of a suite (an indented block or ``if x: a; b`` on one line)."""
    if isinstance(block, cst.IndentedBlock):
        return list(block.body)
    if isinstance(block, cst.SimpleStatementSuite):
        return list(block.body)
    return []


def ends_with_continue(block: cst.BaseSuite) -> bool:
    """Does the suite end in ``continue`` (``if step % k: continue``)?"""
    statements = block_statements(block)
    if not statements:
        return False
    last = statements[-1]
    if isinstance(last, cst.SimpleStatementLine):
        return bool(last.body) and isinstance(last.body[-1], cst.Continue)
    return isinstance(last, cst.Continue)


_LOOSE = (
    cst.BinaryOperation,
    cst.BooleanOperation,
    cst.IfExp,
    cst.Comparison,
    cst.UnaryOperation,
    cst.Lambda,
    cst.NamedExpr,
    cst.Await,
)


def as_operand(code: str, node: cst.CSTNode) -> str:
    """``code`` (the text of ``node``) safe to put on either side of ``/``: parenthesised when
    ``node`` binds more loosely than a division and has no parentheses of its own."""
    if isinstance(node, _LOOSE) and not getattr(node, "lpar", ()):
        return f"({code})"
    return code
