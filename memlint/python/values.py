"""What a Python expression evaluates to, read statically from the libcst tree.

Training scripts spell a value in many ways: a literal, a module constant, ``BS * 2``, an
f-string, ``args.batch_size`` (an argparse default), ``model_args.model_name_or_path`` (a
dataclass field default), a helper function's parameter default, a ``dict(...)`` unpacked with
``**``. :class:`Values` follows names through libcst's scope analysis and returns a
:class:`Found` -- the value, the node where it is written, and the command-line options that can
replace it -- or ``None`` when the value is not statically known. Nothing is ever guessed: a
name assigned twice, a call to an unknown function, an environment variable are all unknown.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable

import libcst as cst
from libcst.helpers import get_full_name_for_node

from memlint.python.conditions import deciding_options, guards
from memlint.python.instance_attributes import assigned_attribute
from memlint.python.limits import EVALUATION_DEPTH
from memlint.python import file_entries, option_dicts, option_formulas, script_paths
from memlint.python.options import CONSTANT_PREFIX, Options
from memlint.python.parallelism_flags import parallelism_flag
from memlint.python.references import NOT_PASSED, Assigned, Names, Parameter, Unpacked, own_nodes
from memlint.python.unit_scopes import ANYTHING, uses_of
from memlint.python.value_types import (
    MISSING,
    CallerOptions,
    CallValue,
    ClassValue,
    Found,
    FunctionValue,
    Instance,
    Mapping,
    Merged,
    Namespace,
    OptionEntries,
    Parsed,
    Ref,
)

if TYPE_CHECKING:
    from memlint.python.index import ModuleIndex
    from memlint.python.source import PythonSource



# values that hold a ``def`` or ``class`` node, and those nodes' classes (``_keepable``)
_HOLDS_DEFINITIONS = (ClassValue, FunctionValue, Instance, Parsed)
_DEFINITIONS = (cst.FunctionDef, cst.ClassDef)

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    cst.Add: operator.add,
    cst.Subtract: operator.sub,
    cst.Multiply: operator.mul,
    cst.Divide: operator.truediv,
    cst.FloorDivide: operator.floordiv,
    cst.Modulo: operator.mod,
    cst.Power: operator.pow,
}
# the operators a launch redoes over its options (``option_formulas``), by their Python spelling
_FORMULA_OPERATORS: dict[type, str] = {
    cst.Add: "+", cst.Subtract: "-", cst.Multiply: "*", cst.Divide: "/", cst.FloorDivide: "//", cst.Modulo: "%",
    cst.Equal: "==", cst.NotEqual: "!=", cst.LessThan: "<", cst.LessThanEqual: "<=", cst.GreaterThan: ">",
    cst.GreaterThanEqual: ">=",
}
# how scripts read an environment variable: ``os.environ.get("WORLD_SIZE", 1)``, ``os.getenv(...)``
_ENVIRONMENT_READS = ("os.environ.get", "os.getenv")

# the classes whose call builds one object out of keywords and ``**`` unpacked objects
_NAMESPACES = frozenset({"argparse.Namespace", "types.SimpleNamespace"})

_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    cst.Equal: operator.eq,
    cst.NotEqual: operator.ne,
    cst.LessThan: operator.lt,
    cst.LessThanEqual: operator.le,
    cst.GreaterThan: operator.gt,
    cst.GreaterThanEqual: operator.ge,
    cst.Is: lambda a, b: a is b if (a is None or b is None) else a == b,
    cst.IsNot: lambda a, b: a is not b if (a is None or b is None) else a != b,
    cst.In: lambda a, b: a in b,
    cst.NotIn: lambda a, b: a not in b,
}

_SCALAR = (int, float, str, bool, type(None))
_CONVERSIONS: dict[str, Callable[[Any], Any]] = {
    "builtins.int": int,
    "builtins.float": float,
    "builtins.str": str,
    "builtins.bool": bool,
}


def _keepable(found: Found | None) -> bool:
    """Can the answer outlive its version? Not when it holds a ``def`` or ``class`` node: a join
    rebuilds a top-level one whenever the lines above it change, and the answer would hold the
    old node (an answer that only read them, a call's value, is kept)."""
    if found is None:
        return True
    value = found.value
    return (type(value) not in _HOLDS_DEFINITIONS and type(found.node) not in _DEFINITIONS
            and not (type(value) is tuple and any(type(v) in _HOLDS_DEFINITIONS for v in value)))


def _key_chain(expr: cst.BaseExpression) -> tuple[cst.Name, tuple[str, ...]] | None:
    """``cfg["model"]["id"]`` / ``cfg.model.id`` -> (``cfg``, ("model", "id")); None where a key is
    not written out (``cfg[name]``) or the chain does not start at a name."""
    keys: list[str] = []
    while True:
        kind = type(expr)
        if kind is cst.Attribute:
            keys.append(expr.attr.value)  # type: ignore[attr-defined]
            expr = expr.value  # type: ignore[attr-defined]
        elif kind is cst.Subscript and len(expr.slice) == 1 and type(expr.slice[0].slice) is cst.Index:  # type: ignore[attr-defined]
            key = expr.slice[0].slice.value  # type: ignore[attr-defined]
            if type(key) is cst.SimpleString:
                keys.append(str(key.evaluated_value))
            elif type(key) is cst.Integer:
                keys.append(key.value)
            else:
                return None
            expr = expr.value  # type: ignore[attr-defined]
        elif kind is cst.Name:
            return expr, tuple(reversed(keys))  # type: ignore[return-value]
        else:
            return None


def _vars_argument(values: "Values", expr: cst.BaseExpression) -> cst.BaseExpression:
    """``model_args`` of ``**vars(model_args)`` (its ``__dict__``); any other expression as it is."""
    if type(expr) is cst.Call and len(expr.args) == 1 and not expr.args[0].star \
            and "builtins.vars" in values.qualified(expr.func):
        return expr.args[0].value
    return expr


def _truth(value: Any) -> bool | None:
    """A value's truth where it is known: a scalar's, a mapping's with entries (or without any,
    known whole); None otherwise."""
    if value is MISSING:
        return None
    if isinstance(value, _SCALAR):
        return bool(value)
    if isinstance(value, Mapping):
        if value.entries or value.copied is not None:
            return True
        return False if value.complete else None
    return None


def _joined(first: OptionEntries | None, second: OptionEntries) -> OptionEntries:
    """Options copied into one dict by two loops."""
    if first is None:
        return second
    keys = None if first.keys is None or second.keys is None else tuple(dict.fromkeys(first.keys + second.keys))
    return OptionEntries(keys, first.passed_only and second.passed_only)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _formula_of(found: Found) -> tuple | None:
    """``found`` as an operand of arithmetic a launch may redo (``option_formulas.operand``)."""
    return option_formulas.operand(found.value, found.options, found.formula, found.known)


# a module-level constant's name as settings modules write them (``MODEL_CHECKPOINT``, ``LR``)
_CONSTANT = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*")


class Values(Names):
    """Static evaluation over one module; built once per document, results cached per node.

    After an edit most answers are what they were: each is kept with its statement's unit
    (``ScopeMap.kept``) together with what it read outside that statement (``Names.reading``),
    and the next version's join drops those the edit may change. An answer that read the whole
    module (argparse options), met a cycle or a depth limit, or holds a top-level ``def`` or
    ``class`` (a join may rebuild those nodes) is not kept."""

    def __init__(self, source: "PythonSource") -> None:
        super().__init__(source)
        self._cache: dict[int, tuple[Found | None, frozenset[str]]] = {}
        self._kept: Callable[[cst.CSTNode], dict | None] | None = None
        # ``kept_answer``'s answers where no unit keeps them (a module parsed whole)
        self._answers: dict[tuple[cst.CSTNode, str], tuple[Any, frozenset[str]]] = {}
        self._in_progress: set[int] = set()
        self._options: "Options | None" = None
        self._subscript_sets: dict[str, list[tuple[cst.BaseExpression, cst.BaseExpression, cst.CSTNode]]] | None = None
        # (function, parameter) -> what a caller in another module passes it (``bind_callers``)
        self._passed: dict[tuple[str, str], Found] = {}
        self._caller_option: Callable[[str], Found | None] | None = None
        self._overridden: list[file_entries.FileEntry] | None = None  # ``_overridden_entries``
        # id(class) -> (the class, its ``self.<attr> = value`` assignments) (``instance_attributes``)
        self.class_assignments: dict[int, tuple[cst.ClassDef, dict]] = {}

    def bind_callers(self, passed: dict[tuple[str, str], Found],
                     caller_option: Callable[[str], Found | None] | None = None) -> None:
        """Read this module as a helper another module calls: each (function, parameter) named
        is what that caller passes, and ``caller_option`` the caller's value of an option read
        from an options object it passed (``CallerOptions``). Answers are then about that call,
        so none is kept across versions of the module (its own reading must not see them)."""
        self._passed = dict(passed)
        self._caller_option = caller_option
        self._kept = lambda node: None
        self._cache.clear()

    # ------------------------------------------------------------- plumbing

    @property
    def options(self) -> "Options":
        if self._options is None:
            self._options = Options(self)
        return self._options

    # ------------------------------------------------------------- definitions

    # ------------------------------------------------------------- calls

    def callee_names(self, call: cst.Call, depth: int = 0) -> frozenset[str]:
        """Qualified names of what a call calls: through aliases, variables holding a class,
        and user classes (a ``class MyTrainer(Trainer)`` call also names ``transformers.Trainer``).
        The kept answer itself, not a copy: asked of every call of the module after each edit."""
        if depth:
            return frozenset(self._callee_names(call, depth))
        return self.kept_answer(call, "callee", lambda: frozenset(self._callee_names(call, 0)))

    def kept_answer(self, node: cst.CSTNode, question: str, work_out: Callable[[], Any]) -> Any:
        """The answer to ``question`` about ``node``: the one kept from an earlier version when
        nothing it read has changed since, else ``work_out()`` (which must read the module only
        through this object, so what it reads is recorded; an immutable answer)."""
        kept = self._kept_for(node)
        key = (node, question)
        if kept is None:
            # a module parsed whole (``memlint check``): nothing outlives this version, but the
            # same question comes more than once (every call's callee: by the extractor, then by
            # ``is_dataclass_parser``); kept here on the terms a kept answer is
            kept = self._answers
        found = kept.get(key)
        if found is None:
            self.reading.append(set())
            try:
                answer = work_out()
            finally:
                depends = frozenset(self.reading.pop())
            found = (answer, depends)
            if ANYTHING not in depends:
                kept[key] = found
        if self.reading:
            self.reading[-1].update(found[1])
        return found[0]

    def _callee_names(self, call: cst.Call, depth: int) -> set[str]:
        names = set(self.qualified(call.func))
        if names:
            return names
        if depth > 4:
            self.depends(ANYTHING)
            return names
        func = call.func
        if type(func) is cst.Name or type(func) is cst.Attribute:
            # ``optimizer_class = FusedAdam``; ``class MyTrainer(Trainer)``; ``loader.from_pretrained``
            found = self.evaluate(func, depth + 1)
            if found is not None and isinstance(found.value, Ref):
                names.add(found.value.qualname)
            elif found is not None and isinstance(found.value, ClassValue):
                names |= self.class_names(found.value.node)
        if type(func) is cst.Attribute and not names:
            base = self.evaluate(func.value, depth + 1)
            if base is not None and isinstance(base.value, ClassValue):
                for name in self.class_names(base.value.node):
                    names.add(f"{name}.{func.attr.value}")
        return names

    def _kept_for(self, node: cst.CSTNode) -> dict | None:
        """Where this node's answers are kept across versions (None: not kept)."""
        if self._kept is None:
            self._kept = getattr(self.source.scopes, "kept", None) or (lambda node: None)
        return self._kept(node)

    def class_names(self, node: cst.ClassDef, depth: int = 0) -> set[str]:
        """A user class's own name and every qualified name of its bases, transitively."""
        names = {node.name.value}
        if depth > 6:
            self.depends(ANYTHING)
            return names
        for base in node.bases:
            names |= self.qualified(base.value)
            found = self.evaluate(base.value) if isinstance(base.value, (cst.Name, cst.Attribute)) else None
            if found is not None and isinstance(found.value, ClassValue) and found.value.node is not node:
                names |= self.class_names(found.value.node, depth + 1)
        return names

    def arguments(self, call: cst.Call, positional: tuple[str, ...] = ()) -> "Arguments":
        """A call's arguments by name: keywords, positionals named after ``positional``, and the
        entries of ``**mapping`` when the mapping is statically known."""
        named: dict[str, cst.BaseExpression] = {}
        complete = True
        position = 0
        for arg in call.args:
            if arg.star == "**":
                found = self.evaluate(arg.value)
                if found is not None and isinstance(found.value, Mapping):
                    for key, value in found.value.entries:
                        named.setdefault(key, value)
                    complete = complete and found.value.complete
                else:
                    complete = False
            elif arg.star == "*":
                complete = False
                position = len(positional)  # later positionals can no longer be placed
            elif arg.keyword is not None:
                named[arg.keyword.value] = arg.value
            else:
                if position < len(positional):
                    named.setdefault(positional[position], arg.value)
                position += 1
        return Arguments(named, complete)

    # ------------------------------------------------------------- evaluation

    def evaluate(self, expr: cst.CSTNode | None, depth: int = 0) -> Found | None:
        """The value of ``expr``, or None when it is not statically known."""
        if expr is None:
            return None
        if depth > EVALUATION_DEPTH:
            self.depends(ANYTHING)
            return None
        key = id(expr)
        cached = self._cache.get(key)
        if cached is None:
            if key in self._in_progress:
                self.depends(ANYTHING)
                return None  # a cycle (x = x + 1 in a loop, mutual recursion)
            kept = self._kept_for(expr)
            cached = kept.get(expr) if kept is not None else None
            if cached is None:
                cached = self._evaluated(expr, depth)
                if kept is not None and ANYTHING not in cached[1] and _keepable(cached[0]):
                    kept[expr] = cached
            self._cache[key] = cached
        if self.reading and cached[1]:
            self.reading[-1].update(cached[1])
        return cached[0]

    def _evaluated(self, expr: cst.CSTNode, depth: int) -> tuple[Found | None, frozenset[str]]:
        """``expr``'s value worked out, with what it read outside its statement."""
        key = id(expr)
        self._in_progress.add(key)
        self.reading.append(set())
        try:
            result = self._evaluate(expr, depth)
        except (ArithmeticError, ValueError, TypeError, LookupError, RecursionError):
            # code that would fail when run (1 / 0, ("a",)[3]) has no static value either
            result = None
        finally:
            self._in_progress.discard(key)
            depends = frozenset(self.reading.pop())
        return result, depends

    def _evaluate(self, expr: cst.CSTNode, depth: int) -> Found | None:
        # one lookup by the node's class (all of them final): a chain of ``isinstance`` tests is
        # a Python-level call per test for libcst's ABC node classes, on every expression met
        how = _EVALUATORS.get(type(expr))
        return how(self, expr, depth) if how is not None else None

    def _literal(self, expr: cst.Integer | cst.Float | cst.SimpleString, depth: int) -> Found | None:
        return Found(expr.evaluated_value, expr)

    def _inner(self, expr: cst.Lambda | cst.NamedExpr, depth: int) -> Found | None:
        # ``field(default_factory=lambda: [...])``; ``(n := 4)``
        return self.evaluate(expr.body if type(expr) is cst.Lambda else expr.value, depth + 1)

    def _if_expression(self, expr: cst.IfExp, depth: int) -> Found | None:
        """``a if test else b`` with a known test; when an option decides the test, the value the
        other setting of the option gives is kept (``torch.bfloat16 if args.bf16 else "auto"``)."""
        test = self.evaluate(expr.test, depth + 1)
        if test is None or not test.known or not isinstance(test.value, _SCALAR):
            return None
        chosen = self.evaluate(expr.body if test.value else expr.orelse, depth + 1)
        options, flipped = deciding_options(self, expr.test)
        if chosen is None or not options:
            return chosen
        other = self.evaluate(expr.orelse if test.value else expr.body, depth + 1)
        if other is None or not other.known:
            return chosen
        # an option passed on the command line is truthy: does that reach the other branch?
        prefix = "if" if bool(test.value) == flipped else "ifnot"
        return replace(chosen, flip=(options, prefix, other.value), flip_node=other.node)

    def _concatenated(self, expr: cst.ConcatenatedString, depth: int) -> Found | None:
        left = self.evaluate(expr.left, depth + 1)
        right = self.evaluate(expr.right, depth + 1)
        if left is None or right is None or not isinstance(left.value, str) or not isinstance(right.value, str):
            return None
        return Found(left.value + right.value, expr)

    def _fstring(self, expr: cst.FormattedString, depth: int) -> Found | None:
        parts: list[str] = []
        for part in expr.parts:
            if isinstance(part, cst.FormattedStringText):
                parts.append(part.value)
                continue
            if part.format_spec or part.conversion:
                return None
            found = self.evaluate(part.expression, depth + 1)
            if found is None or not found.known or not isinstance(found.value, (*_SCALAR, script_paths.PathValue)):
                return None
            parts.append(str(found.value))
        return Found("".join(parts), expr)

    def _name(self, expr: cst.Name, depth: int) -> Found | None:
        constants = {"True": True, "False": False, "None": None}
        if expr.value in constants:
            return Found(constants[expr.value], expr)
        if expr.value == "__name__" and not self.referents(expr):
            return Found("__main__", None)  # a script runs as __main__
        if expr.value == "__file__" and not self.referents(expr):
            return Found(script_paths.SCRIPT_FILE, expr)  # paths built from it are the script folder's
        definitions = self.definitions(expr)
        if not definitions:
            names = sorted(self.qualified(expr))
            if not names and _CONSTANT.fullmatch(expr.value):
                return self._star_imported(expr)
            return Found(Ref(names[0]), expr) if names else None
        if len(definitions) != 1:
            return self._reassigned_if(definitions, depth) or self._filled_parameter(definitions, depth) \
                or self._same_everywhere(definitions, depth)
        return self._definition_value(definitions[0], expr, depth)

    def _reassigned_if(self, definitions: list[Any], depth: int) -> Found | None:
        """``x = a`` then ``if test: x = b`` where the test rests on options or a launcher's
        variable (alpaca-lora's ``if ddp: gradient_accumulation_steps = gradient_accumulation_steps
        // world_size``): the value the test picks, kept as a formula a launch redoes; None otherwise."""
        if len(definitions) != 2 or not all(type(d) is Assigned for d in definitions):
            return None
        first, second = (self._statement(d.expr) for d in definitions)
        block = self.parent(second) if second is not None else None
        condition = self.parent(block) if block is not None else None
        if first is None or type(condition) is not cst.If or condition.body is not block or \
                condition.orelse is not None or self.parent(condition) is not self.parent(first):
            return None
        test = self.evaluate(condition.test, depth + 1)
        if test is None or test.formula is None:
            return None
        earlier = self.evaluate(definitions[0].expr, depth + 1)
        later = self.evaluate(definitions[1].expr, depth + 1)
        if earlier is None or later is None:
            return None
        formula = option_formulas.combine("if", [test.formula, _formula_of(later), _formula_of(earlier)])
        if formula is None:
            return None
        chosen = (later if test.value else earlier) if test.known else None
        if chosen is None or not chosen.known:
            return Found(MISSING, None, formula=formula)
        # no options of its own: a launch passing one of them redoes the formula, condition and all
        return Found(chosen.value, chosen.node, (), chosen.note, formula=formula)

    def _filled_parameter(self, definitions: list[Any], depth: int) -> Found | None:
        """``overrides = overrides or {}`` over a parameter: what the callers pass, unless it is
        empty (llm-training-pipeline's ``cli_overrides``); None when its truth is unknown."""
        params = [d for d in definitions if type(d) is Parameter]
        assigned = [d for d in definitions if type(d) is Assigned]
        if len(params) != 1 or len(assigned) != 1 or len(definitions) != 2:
            return None
        expr, name = assigned[0].expr, params[0].param.name.value
        if type(expr) is not cst.BooleanOperation or type(expr.operator) is not cst.Or or \
                type(expr.left) is not cst.Name or expr.left.value != name:
            return None
        passed = self._parameter(params[0], depth)
        truth = _truth(passed.value) if passed is not None else None
        if truth is None:
            return None
        return passed if truth else self.evaluate(expr.right, depth + 1)

    def _statement(self, expr: cst.BaseExpression) -> cst.CSTNode | None:
        """The statement line of a plain ``name = expr`` (None for any other assignment)."""
        assign = self.parent(expr)
        line = self.parent(assign) if type(assign) is cst.Assign else None
        return line if type(line) is cst.SimpleStatementLine and len(line.body) == 1 else None

    def _same_everywhere(self, definitions: list[Any], depth: int) -> Found | None:
        """A name assigned in several places is known only if every assignment agrees: the same
        scalar, or the same classes parsed from the command line (the examples' ``if
        len(sys.argv) == 2 and sys.argv[1].endswith(".json"): ... = parser.parse_json_file(...)
        else: ... = parser.parse_args_into_dataclasses()``, whose fields a launch passes either way)."""
        values = [self._definition_value(d, None, depth) for d in definitions]
        if values and all(v is not None and isinstance(v.value, Instance) and v.value.cli and v.value == values[0].value
                          for v in values):
            return values[0]
        if any(v is None or not v.known or not isinstance(v.value, _SCALAR) for v in values):
            return None
        first = values[0]
        if all(v.value == first.value and type(v.value) is type(first.value) for v in values):
            return first
        return None

    def _definition_value(self, definition: Any, use: cst.Name | None, depth: int) -> Found | None:
        if isinstance(definition, Assigned):
            found = self.evaluate(definition.expr, depth + 1)
            if found is not None and use is not None and isinstance(found.value, CallValue):
                # ``cfg = get_config(); cfg["key"] = value``: the keys set here, the rest unknown
                found = Found(Mapping((), complete=False), found.node)
                found = self._with_item_assignments(found, use)
                if not found.value.entries:
                    return self.evaluate(definition.expr, depth + 1)
            elif found is not None and isinstance(found.value, Mapping) and use is not None:
                found = self._with_item_assignments(found, use)
            return found
        if isinstance(definition, Unpacked):
            return self._unpack(definition.expr, definition.index, depth)
        if isinstance(definition, Parameter):
            return self._parameter(definition, depth)
        kind = type(definition)  # libcst's node classes are final; ``isinstance`` on them is slow
        if kind is cst.ClassDef:
            return Found(ClassValue(definition), definition)
        if kind is cst.FunctionDef:
            return Found(FunctionValue(definition), definition)
        if (kind is cst.Import or kind is cst.ImportFrom) and use is not None:
            names = sorted(self.qualified(use))
            if not names:
                return None
            source = self.import_source(use) if kind is cst.ImportFrom and _CONSTANT.fullmatch(use.value) else None
            if source is not None:
                # ``from config import MODEL_CHECKPOINT``: a constant of another module, which the
                # project reads when that module is one of its own (``memlint.facts.imported_arguments``)
                key = CONSTANT_PREFIX + use.value
                self.options.imported.setdefault(key, source)
                return Found(Ref(names[0]), use, options=(key,))
            return Found(Ref(names[0]), use)
        return None

    def _star_imported(self, use: cst.Name) -> Found | None:
        """``from config import *`` then ``MODEL_NAME``: a constant of that module, read as
        ``from config import MODEL_NAME`` is, when the module has one star import."""
        self.depends(ANYTHING)  # any statement of the module may add or remove a star import
        starred = [small for line in self.source.module.body if type(line) is cst.SimpleStatementLine
                   for small in line.body if type(small) is cst.ImportFrom and type(small.names) is cst.ImportStar]
        if len(starred) != 1:
            return None
        statement = starred[0]
        dotted = get_full_name_for_node(statement.module) if statement.module is not None else ""
        module = "." * len(statement.relative) + (dotted or "")
        if not module.strip("."):
            return None
        key = CONSTANT_PREFIX + use.value
        self.options.imported.setdefault(key, (module, use.value))
        return Found(Ref(f"{module}.{use.value}"), use, options=(key,))

    def _imported_module(self, expr: cst.BaseExpression) -> str | None:
        """The module a plain ``import config`` / ``import settings as cfg`` binds to ``expr``
        (a name), as written; None for anything else (a package's submodule, a from-import)."""
        if type(expr) is not cst.Name:
            return None
        definitions = self.definitions(expr)
        if len(definitions) != 1 or type(definitions[0]) is not cst.Import:
            return None
        for alias in definitions[0].names:
            bound = alias.asname.name if alias.asname is not None else alias.name
            if type(bound) is cst.Name and bound.value == expr.value and type(alias.name) is cst.Name:
                return alias.name.value
        return None

    def _with_item_assignments(self, found: Found, use: cst.Name) -> Found:
        """``cfg = {...}; cfg["key"] = value`` -> the dict with ``key`` (same variable name, once)."""
        self.depends(uses_of(use.value))
        extra = self._subscript_assignments().get(use.value, [])
        if not extra:
            return found
        entries = list(found.value.entries)
        copied = found.value.copied
        for target, key_expr, value in extra:
            if self.definitions(target) != self.definitions(use):
                continue
            loop_copied = option_dicts.copied_by_loop(self, key_expr, value)
            if loop_copied is not None:  # ``for key in [...]: overrides[key] = getattr(args, key)``
                copied = _joined(copied, loop_copied)
                continue
            if any(g.blocks for g in guards(self, value)):
                continue  # ``if args.bf16: cfg["bf16"] = {...}`` with the option off
            key = self.evaluate(key_expr)
            if key is None or not isinstance(key.value, str):
                continue
            entries = [(k, v) for k, v in entries if k != key.value] + [(key.value, value)]
        return Found(Mapping(tuple(entries), found.value.complete, copied), found.node, found.options, found.note)

    def _subscript_assignments(self) -> dict[str, list[tuple[cst.Name, cst.BaseExpression, cst.BaseExpression]]]:
        if self._subscript_sets is None:
            sets: dict[str, list] = {}
            for node in self.source.nodes_of(cst.Assign):
                if len(node.targets) != 1:
                    continue
                target = node.targets[0].target
                if (
                    isinstance(target, cst.Subscript)
                    and isinstance(target.value, cst.Name)
                    and len(target.slice) == 1
                    and isinstance(target.slice[0].slice, cst.Index)
                ):
                    sets.setdefault(target.value.value, []).append(
                        (target.value, target.slice[0].slice.value, node.value)
                    )
            self._subscript_sets = sets
        return self._subscript_sets

    def _parameter(self, definition: Parameter, depth: int) -> Found | None:
        """A parameter: the argument every call site in the module passes, else its default."""
        param, function = definition.param, definition.function
        if self._passed and type(function) is cst.FunctionDef:
            bound = self._passed.get((function.name.value, param.name.value))
            if bound is not None:
                return bound
        if type(function) is cst.FunctionDef:
            exposed = self.options.function_option(function, param)
            if exposed is not None:
                return exposed  # ``fire.Fire(train)``: the command line sets it
            config = self.options.wrapped_config(function, param)
            if config is not None:
                return Found(Instance(cls=config, cli=True), param)  # ``@draccus.wrap()``
        if isinstance(function, cst.Lambda) or self.is_method(function):
            return self.evaluate(param.default, depth + 1) if param.default is not None else None
        passed: list[Found | None] = []
        default_used = False
        calls = self.call_sites(function)
        for call in calls:
            argument = self.argument_for(function, param, call)
            if argument is NOT_PASSED:
                default_used = True
            elif isinstance(argument, Unpacked):
                passed.append(self._unpack(argument.expr, argument.index, depth))
            elif argument is None:
                passed.append(self._forwarded(call, param.name.value))
            else:
                passed.append(self.evaluate(argument, depth + 1) if argument is not None else None)
        default = self.evaluate(param.default, depth + 1) if param.default is not None else None
        if default is not None and default.known:
            default = replace(default, note=default.note or f"default of {function.name.value}({param.name.value}=...)")
        if not calls:
            return default
        candidates = passed + ([default] if default_used else [])
        if any(c is None for c in candidates):
            return None
        first = candidates[0]
        if len(candidates) == 1:
            return first
        if all(isinstance(c.value, _SCALAR) and c.known and c.value == first.value for c in candidates):
            return first
        if all(type(c.value) is type(first.value) and c.value == first.value for c in candidates):
            return first  # the same namespace or instance from every call site
        return None


    def _forwarded(self, call: cst.Call, name: str) -> Found | None:
        """A parameter that a click command hands on with its ``**kwargs`` (dolly's
        ``@click.option("--input-model", default=...)`` over ``def main(**kwargs): train(**kwargs)``):
        the caller's option of that name. None when the ``**`` is not the caller's own."""
        caller = self.enclosing_function(call)
        star = caller.params.star_kwarg if caller is not None else None
        if star is None or caller is None or not any(
                a.star == "**" and type(a.value) is cst.Name and a.value.value == star.name.value for a in call.args):
            return None
        return self.options.click_option(caller, name)

    def _unpack(self, expr: cst.BaseExpression, index: int, depth: int) -> Found | None:
        found = self.evaluate(expr, depth + 1)
        if found is None:
            return None
        value = found.value
        if isinstance(value, Parsed):
            if index >= len(value.classes):
                return None
            cls = value.classes[index]
            instance = Instance(cls=cls, cli=True) if isinstance(cls, cst.ClassDef) else Instance(library=cls, cli=True)
            return Found(instance, expr)
        if isinstance(value, tuple) and index < len(value):
            return Found(value[index], found.node)
        if isinstance(value, _KnownArgs):
            return Found(Namespace(), expr) if index == 0 else None
        return None

    def _attribute(self, expr: cst.Attribute, depth: int) -> Found | None:
        base = self.evaluate(expr.value, depth + 1)
        attr = expr.attr.value
        if base is not None:
            value = base.value
            read = file_entries.entry_of(base)
            if read is not None:  # ``cfg.model.name`` of ``cfg = OmegaConf.load(path)``
                entry = read.child(attr)
                return None if self._entry_overridden(entry) else Found(MISSING, None, (entry.name,))
            if isinstance(value, Namespace):
                return self.options.argparse_value(attr)
            if isinstance(value, CallerOptions):
                given = self._caller_option(attr) if self._caller_option is not None else None
                if given is not None and given.known and given.value is not None and isinstance(given.value, _SCALAR):
                    # located where this module reads it; the note says whose default it is
                    return Found(given.value, expr, (attr,), given.note or f"--{attr}")
                return Found(MISSING, None, (attr,), f"--{attr}")
            if isinstance(value, Instance):
                return self.options.field_value(value, attr, depth + 1)
            if isinstance(value, Merged):
                return self._merged_attribute(value.call, attr, depth)
            if isinstance(value, ClassValue):
                return self.options.class_attribute(value.node, attr, depth + 1)
            if isinstance(value, Ref):
                module = self._imported_module(expr.value) if _CONSTANT.fullmatch(attr) else None
                if module is not None:
                    # ``import config as cfg`` then ``cfg.MODEL_NAME``: a constant of that module,
                    # read as ``from config import MODEL_NAME`` is
                    key = f"{CONSTANT_PREFIX}{module}.{attr}"
                    self.options.imported.setdefault(key, (module, attr))
                    return Found(Ref(f"{value.qualname}.{attr}"), expr, options=(key,))
                return Found(Ref(f"{value.qualname}.{attr}"), expr)
            if isinstance(value, script_paths.PathValue):
                parent = script_paths.attribute(value, attr)
                return Found(parent, expr) if parent is not None else None
            if isinstance(value, CallValue):
                flag = parallelism_flag(self, value.call, attr, depth)
                if flag is not None:  # ``parallelism_config.dp_shard_enabled``
                    return flag
        elif type(expr.value) is cst.Name:
            # ``self.model_name`` that ``__init__`` sets once (``instance_attributes``)
            assigned = assigned_attribute(self, expr, depth) if expr.value.value == "self" else None
            if assigned is not None:
                return assigned
            if self._unresolved(expr.value):
                # ``args.batch_size`` where ``args`` comes from nowhere this module can see (a
                # parameter of a function no one here calls): an argparse option of this module
                found = self.options.argparse_value(attr, fallback=True)
                if found is not None:
                    return found
        names = sorted(self.qualified(expr))
        return Found(Ref(names[0]), expr) if names else None

    def _merged_attribute(self, call: cst.Call, attr: str, depth: int) -> Found | None:
        """``args.bits`` of ``args = argparse.Namespace(**vars(model_args), **vars(training_args))``:
        a keyword of that name, else the first unpacked object that states the attribute (a
        field of a user dataclass, an argparse option, a dict key), else a library dataclass's
        default (``TrainingArguments.bf16``). Python refuses a name given twice, so at most one
        object states it."""
        library: Found | None = None
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == attr:
                return self.evaluate(arg.value, depth + 1)
        for arg in call.args:
            if arg.star != "**":
                continue
            unpacked = self.evaluate(_vars_argument(self, arg.value), depth + 1)
            value = unpacked.value if unpacked is not None else None
            if isinstance(value, Instance):
                stated, found = self.options.declared_field(value, attr, depth + 1)
                if stated:
                    return found
                if library is None:
                    library = self.options.field_value(value, attr, depth + 1)
            elif isinstance(value, Namespace):
                found = self.options.argparse_value(attr)
                if found is not None:
                    return found
            elif isinstance(value, Mapping):
                entry = value.get(attr)
                if entry is not None:
                    return self.evaluate(entry, depth + 1)
        return library

    def _unresolved(self, name: cst.Name) -> bool:
        definitions = self.definitions(name)
        return all(isinstance(d, Parameter) for d in definitions) and bool(definitions)

    def _subscript(self, expr: cst.Subscript, depth: int) -> Found | None:
        if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
            return None
        key = self.evaluate(expr.slice[0].slice.value, depth + 1)
        if key is None or not key.known:
            return None
        if isinstance(key.value, int) and not isinstance(key.value, bool):
            unpacked = self._unpack(expr.value, key.value, depth)
            if unpacked is not None:
                return unpacked
        base = self.evaluate(expr.value, depth + 1)
        if base is None:
            return None
        read = file_entries.entry_of(base)
        if read is not None:
            if not isinstance(key.value, (str, int)) or isinstance(key.value, bool):
                return None
            entry = read.child(str(key.value))
            return None if self._entry_overridden(entry) else Found(MISSING, None, (entry.name,))
        if base.value == Ref("os.environ") and key.value in option_formulas.ENVIRONMENT:
            return Found(MISSING, None, formula=("env", key.value, None))  # ``os.environ["WORLD_SIZE"]``
        if isinstance(base.value, Mapping) and isinstance(key.value, str):
            return self._entry(base.value, key.value, None, depth)
        if isinstance(base.value, (tuple, str)) and isinstance(key.value, int) and -len(base.value) <= key.value < len(base.value):
            return Found(base.value[key.value], base.node)
        return None

    def _call(self, expr: cst.Call, depth: int) -> Found | None:
        names = self.qualified(expr.func)
        positional = [a for a in expr.args if a.keyword is None and not a.star]
        for name in names:
            if name in script_paths.FUNCTIONS and positional and len(positional) == len(expr.args):
                parts = [self.evaluate(a.value, depth + 1) for a in positional]
                built = script_paths.call(name, [p.value if p is not None and p.known else None for p in parts])
                # ``Path(args.config)``: a launch's ``--config`` still replaces the path
                options = tuple(dict.fromkeys(o for p in parts if p is not None for o in p.options))
                return Found(built, expr, options) if built is not None else None
            if name == "builtins.str" and len(positional) == 1 == len(expr.args):
                inner = self.evaluate(positional[0].value, depth + 1)
                if inner is not None and isinstance(inner.value, script_paths.PathValue):
                    return Found(inner.value.text, inner.node)
            if name in _CONVERSIONS and len(positional) == 1 and len(expr.args) == 1:
                inner = self.evaluate(positional[0].value, depth + 1)
                # ``int(a // b)`` over options: the launch redoes the conversion too
                formula = (name[9:], inner.formula) if inner is not None and inner.formula is not None and \
                    name in ("builtins.int", "builtins.float") else None
                if inner is None or not inner.known or not isinstance(inner.value, _SCALAR):
                    # (``str(paths.ckpt(args.init_model))``: a call's value is no text to convert)
                    return Found(MISSING, None, inner.options, formula=formula) \
                        if inner is not None and (inner.options or formula) else None
                return Found(_CONVERSIONS[name](inner.value), inner.node, inner.options, inner.note, formula=formula)
            if name in ("builtins.min", "builtins.max") and positional and len(positional) == len(expr.args):
                return self._choice(name[9:], [self.evaluate(a.value, depth + 1) for a in positional])
            if name in _ENVIRONMENT_READS and positional and len(positional) == len(expr.args) <= 2:
                return self._environment(positional[0].value, positional[1].value if len(positional) == 2 else None,
                                         depth)
            if name == "builtins.dict":
                return self._dict_call(expr, depth)
            if name in file_entries.LOADERS and positional:
                return self._file_read(positional[0].value, file_entries.LOADERS[name], depth)
            if name in _DATACLASS_CLIS and positional:
                # ``cfg = tyro.cli(TrainConfig)``: each field is an option of the command line
                target = self.evaluate(positional[0].value, depth + 1)
                if target is not None and isinstance(target.value, ClassValue):
                    return Found(Instance(cls=target.value.node, cli=True), expr)
            if name in _NAMESPACES:
                return Found(Merged(expr), expr)
            if name == "builtins.getattr" and len(positional) == 2 and len(expr.args) == 2:
                base = self.evaluate(positional[0].value, depth + 1)
                attr = self.evaluate(positional[1].value, depth + 1)
                if base is not None and isinstance(base.value, Ref) and attr is not None and isinstance(attr.value, str):
                    return Found(Ref(f"{base.value.qualname}.{attr.value}"), attr.node, attr.options)
                if attr is not None and attr.options:
                    return Found(MISSING, None, attr.options, attr.note)
                return None
        func = expr.func
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method in script_paths.METHODS and len(positional) == len(expr.args):
                receiver = self.evaluate(func.value, depth + 1)
                if receiver is not None and isinstance(receiver.value, script_paths.PathValue):
                    built = script_paths.method(receiver.value, method, [
                        v.value if (v := self.evaluate(a.value, depth + 1)) is not None and v.known else None
                        for a in positional])
                    return Found(built, expr) if built is not None else None
            if method in ("parse_args",):
                return Found(Namespace(), expr)
            if method == "parse_known_args":
                return Found(_KnownArgs(), expr)
            if method in _DATACLASS_PARSES:
                parser = self.definition(func.value)
                if isinstance(parser, cst.Call):
                    classes = self.options.parser_classes(parser)
                    if classes is not None:
                        return Found(Parsed(classes), expr)
                return None
            if method == "get" and 1 <= len(positional) == len(expr.args) <= 2:
                receiver = self.evaluate(func.value, depth + 1)
                key = self.evaluate(positional[0].value, depth + 1)
                read = file_entries.entry_of(receiver)
                if read is not None and key is not None and key.known and isinstance(key.value, str):
                    if self._entry_overridden(read.child(key.value)):
                        return None
                    # ``cfg.get("lr", 1e-4)``: the file's entry where it writes one, else the fallback
                    # (which the project applies where it reads the file: ``script_config_files``)
                    fallback = self.evaluate(positional[1].value, depth + 1) if len(positional) == 2 else None
                    known = fallback.value if fallback is not None and fallback.known else None
                    return Found(MISSING, None, (read.child(key.value, known).name,))
                if receiver is not None and isinstance(receiver.value, Mapping) and key is not None \
                        and isinstance(key.value, str):
                    fallback = self.evaluate(positional[1].value, depth + 1) if len(positional) == 2 \
                        else Found(None, expr)
                    return self._entry(receiver.value, key.value, fallback, depth)
        target = self.evaluate(func, depth + 1) if isinstance(func, (cst.Name, cst.Attribute)) else None
        if target is not None:
            if isinstance(target.value, FunctionValue):
                returned = self._returned(target.value.node, depth)
                if returned is not None:
                    return returned
            elif isinstance(target.value, ClassValue) and self.options.is_dataclass(target.value.node):
                return Found(Instance(cls=target.value.node, call=expr), expr)
        return Found(CallValue(expr), expr)

    def _file_read(self, argument: cst.BaseExpression, takes_file: bool, depth: int) -> Found | None:
        """``yaml.safe_load(f)`` over ``with open(path) as f`` (or ``open(path)`` itself, or
        ``OmegaConf.load(path)``): the whole file as an entry (``memlint.python.file_entries``),
        when the path is written or is an option's value; None otherwise."""
        opened = self._opened_path(argument)
        if opened is None and takes_file:
            return None
        found = self.evaluate(opened if opened is not None else argument, depth + 1)
        if found is None:
            return None
        written = script_paths.text_of(found.value) if found.known else None
        option = found.options[0] if len(found.options) == 1 and not file_entries.is_entry(found.options[0]) else None
        if (written is None and option is None) or found.formula is not None:
            return None
        return Found(MISSING, None, (file_entries.FileEntry(written, option).name,))

    def _entry_overridden(self, read: "file_entries.FileEntry") -> bool:
        """Does the script assign the entry ``read`` stands for (``cfg["training"]["batch_size"] =
        args.batch_size`` after ``cfg = yaml.safe_load(f)``, also through an alias ``train =
        cfg["training"]``), or a mapping above it? Then the file's value is not (or not always)
        what runs: the value is unknown."""
        # any statement of the module may add such an assignment, through any alias: a whole-module
        # scan, never kept across an edit (only answers that read a file's entries pay for it)
        self.depends(ANYTHING)
        return any(o.path == read.path and o.option == read.option and o.keys == read.keys[:len(o.keys)]
                   for o in self._overridden_entries())

    def _overridden_entries(self) -> list["file_entries.FileEntry"]:
        """The config-file entries the module's assignments write (``name[key]...`` or
        ``name.attr`` targets over a name that holds a file's mapping)."""
        if self._overridden is None:
            self._overridden = []  # an alias evaluated below sees none yet
            found: list[file_entries.FileEntry] = []
            for node in self.source.nodes_of(cst.Assign, cst.AugAssign, cst.AnnAssign):
                targets = [t.target for t in node.targets] if type(node) is cst.Assign else [node.target]
                for target in targets:
                    chain = _key_chain(target) if type(target) in (cst.Subscript, cst.Attribute) else None
                    root = file_entries.entry_of(self.evaluate(chain[0])) if chain is not None else None
                    if chain is not None and root is not None:
                        found.append(file_entries.FileEntry(root.path, root.option, root.keys + chain[1]))
            self._overridden = found
        return self._overridden

    def _opened_path(self, expr: cst.BaseExpression) -> cst.BaseExpression | None:
        """The path of ``open(path)`` (or of a ``pathlib.Path``'s ``open()``/``read_text()``), or of
        the file ``f`` of ``with open(path) as f``."""
        if type(expr) is cst.Name:
            referents = self.referents(expr)
            if len(referents) != 1 or type(referents[0].node) is not cst.Name:
                return None
            alias = self.parent(referents[0].node)
            item = self.parent(alias) if type(alias) is cst.AsName else None
            if type(item) is not cst.WithItem:
                return None
            expr = item.item
        if type(expr) is cst.Call and "builtins.open" in self.qualified(expr.func) and expr.args \
                and expr.args[0].keyword is None and not expr.args[0].star:
            return expr.args[0].value
        if type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value in ("open", "read_text"):
            # ``CONFIG.read_text()``, ``with CONFIG.open() as f`` of ``CONFIG = Path(__file__).parent / "x.yaml"``
            receiver = self.evaluate(expr.func.value)
            if receiver is not None and isinstance(receiver.value, script_paths.PathValue):
                return expr.func.value
        return None

    def _entry(self, mapping: Mapping, key: str, fallback: Found | None, depth: int) -> Found | None:
        """``mapping[key]`` (``fallback`` None) or ``mapping.get(key, fallback)``: the entry as
        written, else the option copied under that name, else the fallback where the mapping
        is known whole; None where the entry is unknown."""
        entry = mapping.get(key)
        if entry is not None:
            return self.evaluate(entry, depth + 1)
        if mapping.copied is not None:
            found = option_dicts.copied_entry(self, mapping.copied, key, fallback)
            if found is not None:
                return found
        return fallback if mapping.complete and fallback is not None else None

    def _choice(self, pick: str, items: list[Found | None]) -> Found | None:
        """``min(...)``/``max(...)`` of numbers, redone by a launch when options take part."""
        known = [i for i in items if i is not None]
        if len(known) != len(items):
            return None
        formula = option_formulas.combine(pick, [_formula_of(i) for i in known])
        if any(not _is_number(i.value) for i in known):
            return Found(MISSING, None, formula=formula) if formula is not None else None
        chosen = (min if pick == "min" else max)(known, key=lambda i: i.value)
        return Found(chosen.value, chosen.node, (), chosen.note, formula=formula)

    def _environment(self, name_expr: cst.BaseExpression, fallback: cst.BaseExpression | None,
                     depth: int) -> Found | None:
        """An environment variable that a launcher sets (``WORLD_SIZE``): unknown here, but a
        formula the launch's own process count fills (``batch_size // world_size``); the
        fallback (``os.environ.get("WORLD_SIZE", 1)``) is what a bare ``python`` run reads.
        Any other variable (``os.getenv("QWEN_MODEL", "Qwen/Qwen3-1.7B")``) is its fallback
        unless a launch exports it: the launch's value comes as the option ``$QWEN_MODEL``."""
        name = self.evaluate(name_expr, depth + 1)
        if name is None or not isinstance(name.value, str):
            return None
        default = self.evaluate(fallback, depth + 1) if fallback is not None else None
        if name.value in option_formulas.ENVIRONMENT:
            number = option_formulas.number_in(default.value) if default is not None and default.known else None
            return Found(MISSING, None, formula=("env", name.value, number))
        if default is None or not default.known or not isinstance(default.value, _SCALAR) \
                or default.value in ("", None) or option_formulas.launcher_sets(name.value):
            return None
        return Found(default.value, default.node, (*default.options, f"${name.value}"),
                     default.note or f"the fallback of ${name.value}")

    def _returned(self, function: cst.FunctionDef, depth: int) -> Found | None:
        """A function's value when it has exactly one ``return`` (``def parse_args(): ...``)."""
        returns = [n for n in own_nodes(function) if isinstance(n, cst.Return)]
        if len(returns) != 1 or returns[0].value is None:
            return None
        return self.evaluate(returns[0].value, depth + 1)

    def _dict(self, expr: cst.Dict, depth: int) -> Found | None:
        entries: list[tuple[str, cst.BaseExpression]] = []
        complete = True
        for element in expr.elements:
            if isinstance(element, cst.StarredDictElement):
                inner = self.evaluate(element.value, depth + 1)
                if inner is not None and isinstance(inner.value, Mapping):
                    entries.extend(inner.value.entries)
                    complete = complete and inner.value.complete
                else:
                    complete = False
                continue
            key = self.evaluate(element.key, depth + 1)
            if key is None or not isinstance(key.value, str):
                complete = False
                continue
            entries = [(k, v) for k, v in entries if k != key.value] + [(key.value, element.value)]
        return Found(Mapping(tuple(entries), complete), expr)

    def _dict_comprehension(self, expr: cst.DictComp, depth: int) -> Found | None:
        copied = option_dicts.copied_by_comprehension(self, expr)
        return Found(Mapping((), True, copied), expr) if copied is not None else None

    def _dict_call(self, expr: cst.Call, depth: int) -> Found | None:
        entries: list[tuple[str, cst.BaseExpression]] = []
        complete = True
        for arg in expr.args:
            if arg.keyword is not None:
                entries = [(k, v) for k, v in entries if k != arg.keyword.value] + [(arg.keyword.value, arg.value)]
                continue
            inner = self.evaluate(arg.value, depth + 1)
            if inner is not None and isinstance(inner.value, Mapping):
                entries.extend(inner.value.entries)
                complete = complete and inner.value.complete
            else:
                complete = False
        return Found(Mapping(tuple(entries), complete), expr)

    def _sequence(self, expr: cst.List | cst.Tuple | cst.Set, depth: int) -> Found | None:
        items = []
        for element in expr.elements:
            if isinstance(element, cst.StarredElement):
                return None
            found = self.evaluate(element.value, depth + 1)
            if found is None or not found.known:
                return None
            items.append(found.value)
        return Found(tuple(items), expr)

    def _binary(self, expr: cst.BinaryOperation, depth: int) -> Found | None:
        function = _BINARY.get(type(expr.operator))
        if function is None:
            return None
        left = self.evaluate(expr.left, depth + 1)
        right = self.evaluate(expr.right, depth + 1)
        if left is None or right is None:
            return None
        symbol = _FORMULA_OPERATORS.get(type(expr.operator))
        formula = option_formulas.combine(symbol, [_formula_of(left), _formula_of(right)]) if symbol else None
        if not left.known or not right.known:
            # an option without a default (or a launcher's WORLD_SIZE): only a launch knows it
            return Found(MISSING, None, formula=formula) if formula is not None else None
        a, b = left.value, right.value
        if isinstance(a, script_paths.PathValue) and isinstance(expr.operator, cst.Divide):
            joined = script_paths.divide(a, b)  # ``Path(__file__).parent / "config.yaml"``
            return Found(joined, expr) if joined is not None else None
        if _is_number(a) and _is_number(b):
            if function is operator.pow and (abs(b) > 64 or abs(a) > 1 << 32):
                return None
            return Found(function(a, b), expr, formula=formula)
        if isinstance(a, str) and isinstance(b, str) and function is operator.add:
            return Found(a + b, expr)
        return None

    def _unary(self, expr: cst.UnaryOperation, depth: int) -> Found | None:
        inner = self.evaluate(expr.expression, depth + 1)
        if inner is None or not inner.known:
            return None
        if isinstance(expr.operator, cst.Minus) and _is_number(inner.value):
            formula = option_formulas.combine("neg", [_formula_of(inner)])
            return Found(-inner.value, expr, formula=formula)
        if isinstance(expr.operator, cst.Plus) and _is_number(inner.value):
            return Found(inner.value, expr)
        if isinstance(expr.operator, cst.Not) and isinstance(inner.value, _SCALAR):
            return Found(not inner.value, expr, inner.options)
        return None

    def _boolean(self, expr: cst.BooleanOperation, depth: int) -> Found | None:
        left = self.evaluate(expr.left, depth + 1)
        if left is None or not left.known or not isinstance(left.value, _SCALAR):
            return None
        is_and = isinstance(expr.operator, cst.And)
        if (is_and and not left.value) or (not is_and and left.value):
            return Found(left.value, expr)
        right = self.evaluate(expr.right, depth + 1)
        if right is None or not right.known:
            return None
        return Found(right.value, expr)

    def _comparison(self, expr: cst.Comparison, depth: int) -> Found | None:
        left = self.evaluate(expr.left, depth + 1)
        if left is None:
            return None
        formula = self._compared(expr, left, depth)
        if not left.known:  # ``world_size != 1`` over a launcher's WORLD_SIZE: the launch decides
            return Found(MISSING, None, formula=formula) if formula is not None else None
        result = True
        current = left.value
        options = left.options
        for target in expr.comparisons:
            function = _COMPARE.get(type(target.operator))
            right = self.evaluate(target.comparator, depth + 1)
            if function is None or right is None:
                return None
            if not right.known:
                return Found(MISSING, None, formula=formula) if formula is not None else None
            result = result and bool(function(current, right.value))
            current = right.value
            options = options or right.options
        return Found(result, expr, options if len(expr.comparisons) == 1 else (), formula=formula)

    def _compared(self, expr: cst.Comparison, left: Found, depth: int) -> tuple | None:
        """One numeric comparison as a formula, when options or a launcher's variable take part."""
        symbol = _FORMULA_OPERATORS.get(type(expr.comparisons[0].operator)) if len(expr.comparisons) == 1 else None
        right = self.evaluate(expr.comparisons[0].comparator, depth + 1) if symbol is not None else None
        if symbol is None or right is None:
            return None
        return option_formulas.combine(symbol, [_formula_of(left), _formula_of(right)])

    # ------------------------------------------------------------- conditions


@dataclass(frozen=True)
class _KnownArgs:
    """``parser.parse_known_args()``: (namespace, leftover arguments)."""


# calls that build a dataclass from the command line: its fields are options (``--lr 1e-4``)
_DATACLASS_CLIS = frozenset({"tyro.cli", "simple_parsing.parse", "pyrallis.parse", "draccus.parse"})

_DATACLASS_PARSES = (
    "parse_args_into_dataclasses",
    "parse_args_and_config",
    "parse_dict",
    "parse_json_file",
    "parse_yaml_file",
)


def module_values(index: "ModuleIndex") -> "Values":
    """The one evaluator the rules share for a module (its answers are cached per node)."""
    return index.once("values", lambda: Values(index.py))


@dataclass
class Arguments:
    named: dict[str, cst.BaseExpression] = field(default_factory=dict)
    complete: bool = True  # False when ``*args``/``**kwargs`` hide some of them

    def get(self, name: str) -> cst.BaseExpression | None:
        return self.named.get(name)

    def items(self):
        return self.named.items()

    def __contains__(self, name: str) -> bool:
        return name in self.named


_EVALUATORS = {
    cst.Integer: Values._literal,
    cst.Float: Values._literal,
    cst.SimpleString: Values._literal,
    cst.ConcatenatedString: Values._concatenated,
    cst.FormattedString: Values._fstring,
    cst.Name: Values._name,
    cst.Attribute: Values._attribute,
    cst.Subscript: Values._subscript,
    cst.Call: Values._call,
    cst.Dict: Values._dict,
    cst.DictComp: Values._dict_comprehension,
    cst.List: Values._sequence,
    cst.Tuple: Values._sequence,
    cst.Set: Values._sequence,
    cst.BinaryOperation: Values._binary,
    cst.UnaryOperation: Values._unary,
    cst.BooleanOperation: Values._boolean,
    cst.Comparison: Values._comparison,
    cst.IfExp: Values._if_expression,
    cst.Lambda: Values._inner,
    cst.NamedExpr: Values._inner,
}
