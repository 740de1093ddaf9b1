"""What the names of a module refer to, read from libcst's scope analysis.

A use of ``cfg`` is bound by assignments (``cfg = LoraConfig(...)``), by a parameter (whose value
comes from the function's call sites), by a ``def``/``class``, or by an import
(``from transformers import TrainingArguments as TA``). :class:`Names` answers which, for the
evaluator in ``python_values`` and the condition reader in ``python_conditions``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import libcst as cst
from libcst import metadata
from libcst.helpers import get_full_name_for_node

from memlint.python.tree import children
from memlint.python.unit_scopes import in_class, uses_of

if TYPE_CHECKING:
    from memlint.python.source import PythonSource

MAX_CHAIN = 24  # how many ``a = b; b = c`` steps a definition is followed

# exact classes (libcst's are final; ``isinstance`` on its abstract bases is a Python-level call)
_ASSIGNMENTS = (metadata.Assignment, metadata.ImportAssignment)  # not builtins
_DEFINED = (cst.FunctionDef, cst.ClassDef, cst.Import, cst.ImportFrom)  # the node is the definition
_SEQUENCE_PARTS = (cst.Element, cst.Tuple, cst.List)  # what lies between ``a, (b, c) = ...`` and ``b``


@dataclass(frozen=True)
class Assigned:
    """``name = expr``: the expression a name receives."""

    expr: cst.BaseExpression


@dataclass(frozen=True)
class Unpacked:
    """``a, b = expr``: element ``index`` of what ``expr`` evaluates to."""

    expr: cst.BaseExpression
    index: int


@dataclass(frozen=True)
class Parameter:
    param: cst.Param
    function: cst.FunctionDef | cst.Lambda


class _NotPassed:
    """A call site that leaves a parameter at its default."""


NOT_PASSED = _NotPassed()


class Names:
    """Name resolution over one module (scopes are computed on first use).

    While an answer is worked out, what it reads outside its own statement is recorded
    (``reading``): the module-level binding of each name it resolves there, the uses of a
    function whose call sites it reads, and what a class scope binds to a name a class-level
    use resolves (a class's members are kept apart after an edit inside one of them). With those an edited document's next version keeps the
    answers its edit cannot change (``python_values``)."""

    def __init__(self, source: "PythonSource") -> None:
        self.source = source
        self._accesses: dict[int, metadata.Access] | None = None
        self._local: set[int] = set()  # accesses linked to their own statement alone
        self.reading: list[set[str]] = []  # the dependencies of the answers in progress, innermost last

    def depends(self, dependency: str) -> None:
        """The answer in progress depends on ``dependency`` (``python_unit_scopes.uses_of``...)."""
        if self.reading:
            self.reading[-1].add(dependency)

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.source.parents.get(node)

    def qualified(self, node: cst.CSTNode) -> set[str]:
        """What a name, attribute or call refers to through the module's imports
        (``TA`` -> ``transformers.TrainingArguments``, ``nn.Linear`` -> ``torch.nn.Linear``,
        ``int`` -> ``builtins.int``); empty for the module's own names.

        Read from the scope analysis alone: libcst's QualifiedNameProvider would cost as much
        again as the scopes on a large script, and it is not needed for imports.
        """
        # type tests (these classes are final): libcst's are ABCs, whose ``isinstance`` is a
        # Python-level call, and every call of the module is asked about
        if type(node) is cst.Call:
            node = node.func
        if type(node) is cst.Attribute:
            if type(node.value) not in (cst.Name, cst.Attribute):
                return set()  # an attribute of a call's result: ``super().__init__``
            return {f"{base}.{node.attr.value}" for base in self.qualified(node.value)}
        if type(node) is not cst.Name:
            return set()
        access = self._access_index().get(id(node))
        if access is None:
            return set()
        if self.reading:
            self._read(access, node.value)
        out = set()
        for referent in access.referents:
            kind = type(referent)
            if kind is metadata.BuiltinAssignment:
                out.add(f"builtins.{node.value}")
            elif kind is metadata.ImportAssignment:
                name = _imported_name(referent, node.value)
                if name:
                    out.add(name)
        return out

    def _access_index(self) -> dict[int, metadata.Access]:
        if self._accesses is None:
            index: dict[int, metadata.Access] = {}
            for scope in self.source.every_scope():
                for access in scope.accesses:
                    index[id(access.node)] = access
            self._accesses = index
            linked_locally = getattr(self.source.scopes, "linked_locally", None)
            if linked_locally is not None:
                self._local = linked_locally()
        return self._accesses

    def referents(self, name: cst.Name) -> list[metadata.BaseAssignment]:
        """The assignments a name use may refer to (builtins left out)."""
        access = self._access_index().get(id(name))
        if access is None:
            return []
        if self.reading:
            self._read(access, name.value)
        return [r for r in access.referents if type(r) in _ASSIGNMENTS]

    def _read(self, access: metadata.Access, name: str) -> None:
        """Record what resolving ``access`` read outside the answer's own member: the
        module-level binding of ``name`` unless it is linked inside its statement, and, for a
        use outside any function (a class body's, its defaults' and decorators'), what a class
        scope binds to it."""
        reading = self.reading[-1]
        if id(access) not in self._local:
            reading.add(name)
        kind = type(access.scope)
        if kind is not metadata.FunctionScope and kind is not metadata.GlobalScope:
            reading.add(in_class(name))

    def references(self, definition: cst.FunctionDef | cst.ClassDef) -> list[cst.Name]:
        """Uses of a function's or class's name in this module, in source order."""
        scope = self.source.scopes.get(definition)
        if scope is None:
            return []
        if self.reading:
            name = definition.name.value
            self.reading[-1].update((name, uses_of(name), in_class(name)))
        out = []
        for assignment in scope.assignments[definition.name.value]:
            if isinstance(assignment, metadata.Assignment) and assignment.node is definition:
                out.extend(a.node for a in assignment.references if isinstance(a.node, cst.Name))
        if len(out) > 1:
            out.sort(key=self._place)
        return out

    def _place(self, node: cst.CSTNode) -> tuple[int, int]:
        """Where a node starts, to put nodes in source order."""
        return self.source.place(node)  # first for a node of a string annotation

    def import_source(self, name: cst.Name) -> tuple[str, str] | None:
        """The module (as written: ``.consts`` for a relative import) and the name that ``from
        module import NAME`` binds to this use of ``name``; None for anything else."""
        for referent in self.referents(name):
            statement = referent.node if type(referent) is metadata.ImportAssignment else None
            if type(statement) is not cst.ImportFrom or isinstance(statement.names, cst.ImportStar):
                continue
            for alias in statement.names:
                bound = alias.asname.name if alias.asname is not None else alias.name
                if bound is referent.as_name and type(alias.name) is cst.Name:  # type: ignore[attr-defined]
                    module = referent.get_module_name_for_import()  # type: ignore[attr-defined]
                    return (module, alias.name.value) if module else None
        return None

    def enclosing_function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        current = self.parent(node)
        while current is not None and not isinstance(current, cst.Module):
            if isinstance(current, cst.FunctionDef):
                return current
            current = self.parent(current)
        return None

    def definitions(self, name: cst.Name) -> list[Any]:
        """What a name is bound to at a use: expressions, unpackings, parameters, defs; in
        source order (libcst's sets of them have no fixed order)."""
        out: list[Any] = []
        referents = self.referents(name)
        if len(referents) > 1:
            referents.sort(key=lambda assignment: self._place(assignment.node))
        for assignment in referents:
            node = assignment.node
            kind = type(node)  # libcst's node classes are final; ``isinstance`` on them is slow
            if kind is cst.Name:
                parent = self.parent(node)
                if type(parent) is cst.AnnAssign and parent.value is None:
                    continue  # ``model_args: ModelArguments`` after the unpacking: binds nothing
                out.append(self._assigned(node))
            elif kind in _DEFINED:
                out.append(node)
            elif kind is cst.Param:
                function = self._function_of_param(node)
                out.append(Parameter(node, function) if function is not None else None)
            else:
                out.append(None)
        return out

    def _function_of_param(self, param: cst.Param) -> cst.FunctionDef | cst.Lambda | None:
        current = self.parent(param)
        while current is not None and not isinstance(current, (cst.FunctionDef, cst.Lambda)):
            current = self.parent(current)
        return current

    def _assigned(self, target: cst.Name) -> Any:
        """The value a Name target receives: its expression, or (expression, index) for unpacking."""
        path: list[int] = []
        child: cst.CSTNode = target
        parent = self.parent(child)
        while type(parent) in _SEQUENCE_PARTS:
            if type(parent) is not cst.Element:
                elements = list(parent.elements)
                index = next((i for i, e in enumerate(elements) if e is child), None)
                if index is None or any(isinstance(e, cst.StarredElement) for e in elements):
                    return None
                path.append(index)
            child, parent = parent, self.parent(parent)
        if type(parent) is cst.AssignTarget:
            statement = self.parent(parent)
            if type(statement) is not cst.Assign:
                return None
            value: Any = statement.value
        elif type(parent) is cst.AnnAssign and parent.target is child:
            if parent.value is None:
                return None
            value = parent.value
        elif type(parent) is cst.NamedExpr and parent.target is child:
            value = parent.value
        else:
            return None  # for-loop targets, with-items, augmented assignment, except, ...
        for index in reversed(path):
            if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) > index and not any(
                isinstance(e, cst.StarredElement) for e in value.elements
            ):
                value = value.elements[index].value
            elif isinstance(value, Unpacked) or not isinstance(value, cst.BaseExpression):
                return None
            else:
                value = Unpacked(value, index)
        return Assigned(value) if isinstance(value, cst.BaseExpression) else value

    def definition(self, expr: cst.BaseExpression) -> cst.BaseExpression:
        """Follow a name to the unique expression assigned to it (``cfg`` -> ``LoraConfig(...)``)."""
        current = expr
        for _ in range(MAX_CHAIN):
            if not isinstance(current, cst.Name):
                return current
            defs = self.definitions(current)
            if len(defs) != 1 or not isinstance(defs[0], Assigned):
                return current
            current = defs[0].expr
        return current

    def could_be(self, expr: cst.BaseExpression, predicate: Callable[[cst.BaseExpression], bool],
                 depth: int = 0) -> bool:
        """Does any assignment reaching ``expr`` satisfy ``predicate`` (``model = ...`` reassigned)?"""
        if depth > 6:
            return False
        if predicate(expr):
            return True
        if type(expr) is cst.Name:
            for definition in self.definitions(expr):
                if type(definition) is Assigned and self.could_be(definition.expr, predicate, depth + 1):
                    return True
        return False

    def is_method(self, function: cst.FunctionDef) -> bool:
        """A function defined in a class body (called as ``self.f()``: no call sites by name)."""
        parent = self.parent(function)
        return isinstance(parent, cst.IndentedBlock) and isinstance(self.parent(parent), cst.ClassDef)

    def call_sites(self, function: cst.FunctionDef | cst.ClassDef) -> list[cst.Call]:
        """Calls of a module-level or nested function (or a class) by its name, in this module."""
        out = []
        for name in self.references(function):
            parent = self.parent(name)
            if isinstance(parent, cst.Call) and parent.func is name:
                out.append(parent)
        return out

    def argument_for(self, function: cst.FunctionDef, param: cst.Param, call: cst.Call,
                     bound_self: bool = False) -> Any:
        """What ``call`` passes for ``param``: an expression, an element of ``*args``, NOT_PASSED,
        or None when ``**kwargs`` hides it. ``bound_self``: a method called on its object
        (``self.step(batch)``), whose first parameter the call does not pass."""
        params = function.params
        positional = (list(params.posonly_params) + list(params.params))[1 if bound_self else 0:]
        name = param.name.value
        index = next((i for i, p in enumerate(positional) if p is param), None)
        position = 0
        for arg in call.args:
            if arg.star == "*" and index is not None and index >= position:
                return Unpacked(arg.value, index - position)  # main(*parser.parse_args_into_dataclasses())
            if arg.star:
                return None  # **kwargs at the call site: unknown
            if arg.keyword is not None:
                if arg.keyword.value == name:
                    return arg.value
                continue
            if index is not None and position == index:
                return arg.value
            position += 1
        return NOT_PASSED


def _imported_name(assignment: metadata.ImportAssignment, used: str) -> str | None:
    """The dotted name an import binds to ``used`` (None for relative and star imports)."""
    statement = assignment.node
    if not isinstance(statement, (cst.Import, cst.ImportFrom)) or isinstance(statement.names, cst.ImportStar):
        return None
    for alias in statement.names:
        bound = alias.asname.name if alias.asname is not None else alias.name
        if bound is not assignment.as_name:
            continue
        full = get_full_name_for_node(alias.name)
        if full is None:
            return None
        if isinstance(statement, cst.Import):
            # ``import torch.utils.data`` binds ``torch``; ``import torch.nn as nn`` binds the module
            return full if alias.asname is not None else used
        module = assignment.get_module_name_for_import()
        if not module or module.startswith("."):
            return None  # the project's own code
        return f"{module}.{full}"
    return None


def own_nodes(function: cst.FunctionDef):
    """Nodes of a function body, not descending into nested functions, classes or lambdas."""
    stack: list[cst.CSTNode] = list(children(function.body))
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        stack.extend(children(node))
