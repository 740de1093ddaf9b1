"""The defaults of argument dataclasses a script imports from its own project.

``from myproj.arguments import ModelArguments, DataArguments`` then
``HfArgumentParser((ModelArguments, DataArguments, TrainingArguments))``: the script states
nothing about ``model_args.model_name_or_path`` or ``data_args.max_seq_length`` itself -- their
defaults are written in another module. Those defaults are what a launch without the option
gets, so they are read as the command line the script would get by default: each field's literal
default, keyed by its option name and located in the module that writes it. The caller applies
them through the script's own bindings, below anything a launcher or a config states.

The modules are read with ``ast`` (never imported); only literal defaults count
(``= 4096``, ``= field(default="Qwen/Qwen2.5-0.5B")``), and a field's own class wins over its
bases defined in the same module.
"""

from __future__ import annotations

import ast
import re
from dataclasses import replace
from typing import Callable

from memlint.facts import hf_args
from memlint.facts.plan import RunFacts
from memlint.facts.stamped_files import python_module
from memlint.model.diagnostics import Range
from memlint.python.library import config_framework, is_library_dataclass
from memlint.model.provenance import Location, Sourced

# ``from pkg.mod import A, B as C`` / ``from pkg.mod import (A, B)``
_IMPORT = re.compile(r"^[ \t]*from[ \t]+([A-Za-z_][\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)", re.M)
_SCALARS = (bool, int, float, str)

# a module name -> (its path, its text), or None when it is not a file of the project
ModuleSource = Callable[[str], "tuple[str, str] | None"]


def imported_names(text: str) -> list[tuple[str, str, str]]:
    """Every ``from module import name as alias`` of a module's text: (module, name, alias)."""
    out: list[tuple[str, str, str]] = []
    for module, names in _IMPORT.findall(text):
        for written in names.strip().strip("()").split(","):
            words = written.split("#")[0].split()
            if words and words[0].isidentifier():
                alias = words[2] if len(words) == 3 and words[1] == "as" and words[2].isidentifier() else words[0]
                out.append((module, words[0], alias))
    return out


def imported_defaults(text: str, module_source: ModuleSource) -> dict[str, Sourced[str]]:
    """Option name -> the default an imported project dataclass gives it, as command-line text
    (a class chosen by a literal key from a dict of classes of the project counts too:
    ``chosen_classes``)."""
    out: dict[str, Sourced[str]] = {}
    chosen = chosen_classes(text, module_source)
    by_module: dict[str, list[str]] = {}
    for module, name, _ in imported_names(text):
        by_module.setdefault(module, []).append(name)
    for module, imported in by_module.items():
        classes = [n for n in imported if n[:1].isupper()]
        if not classes:
            continue
        found = module_source(module)
        if found is None:
            continue
        path, source = found
        wanted = set(classes) | {name for where, name in chosen.values() if where == module}
        for name, fact in _field_defaults(path, source, wanted).items():
            out.setdefault(name, fact)
    return out


def _imported_names(names: str) -> list[str]:
    """``A, B as C`` / ``(A,\n B)`` -> the names as imported (``A``, ``B``)."""
    return [n.split()[0] for n in names.strip().strip("()").split(",") if n.split() and not n.strip().startswith("#")]


def chosen_classes(text: str, module_source: ModuleSource) -> dict[str, tuple[str, str]]:
    """Variables of the script that hold a class chosen by a literal key from a dict of classes
    in a project module, through a one-line function or static method (LMFlow's
    ``PipelineArguments = AutoArguments.get_pipeline_args_class("dpo_aligner")``, which returns
    ``PIPELINE_ARGUMENT_MAPPING[pipeline_name]``, a dict in ``lmflow/args.py``): variable ->
    (the module as imported, the class's name there)."""
    tree = python_module(text)
    if tree is None:
        return {}
    imported = {name: module for module, names in _IMPORT.findall(text) for name in _imported_names(names)}
    strings = _string_constants(tree)
    out: dict[str, tuple[str, str]] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Call) and len(node.value.args) == 1 and not node.value.keywords):
            continue
        call = node.value
        key = call.args[0]
        literal = key.value if isinstance(key, ast.Constant) else strings.get(key.id) if isinstance(key, ast.Name) \
            else None
        if not isinstance(literal, str):
            continue
        owner, method = (call.func.value, call.func.attr) if isinstance(call.func, ast.Attribute) else (None, None)
        if isinstance(call.func, ast.Name):
            owner, method = call.func, None
        if not isinstance(owner, ast.Name) or owner.id not in imported:
            continue
        found = module_source(imported[owner.id])
        module_tree = python_module(found[1]) if found is not None else None
        if module_tree is None:
            continue
        chosen = _dispatched(module_tree, owner.id, method, literal)
        if chosen is not None:
            out[node.targets[0].id] = (imported[owner.id], chosen)
    return out


def _string_constants(tree: ast.Module) -> dict[str, str]:
    """Names the script assigns exactly once, to a string literal (``pipeline_name = "dpo_aligner"``)."""
    values: dict[str, list[object]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    values.setdefault(target.id, []).append(
                        node.value.value if isinstance(node.value, ast.Constant) else None)
    return {name: found[0] for name, found in values.items() if len(found) == 1 and isinstance(found[0], str)}


def _dispatched(tree: ast.Module, owner: str, method: str | None, key: str) -> str | None:
    """The class ``owner.method(key)`` (or ``owner(key)`` for a function) returns, when its body
    is ``return MAPPING[parameter]`` and ``MAPPING`` is a module-level dict of classes."""
    function = None
    for statement in tree.body:
        if method is None and isinstance(statement, ast.FunctionDef) and statement.name == owner:
            function = statement
        elif method is not None and isinstance(statement, ast.ClassDef) and statement.name == owner:
            function = next((f for f in statement.body if isinstance(f, ast.FunctionDef) and f.name == method), None)
    if function is None:
        return None
    body = [s for s in function.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    parameters = [a.arg for a in function.args.args if a.arg not in ("self", "cls")]
    if len(body) != 1 or not isinstance(body[0], ast.Return) or len(parameters) != 1:
        return None
    returned = body[0].value
    if not (isinstance(returned, ast.Subscript) and isinstance(returned.value, ast.Name)
            and isinstance(returned.slice, ast.Name) and returned.slice.id == parameters[0]):
        return None
    mapping: ast.expr | None = None
    targets: list[ast.expr]
    value: ast.expr | None
    for statement in tree.body:
        if isinstance(statement, ast.Assign):
            targets, value = statement.targets, statement.value
        elif isinstance(statement, ast.AnnAssign):
            targets, value = [statement.target], statement.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == returned.value.id for t in targets):
            mapping = value  # the last assignment wins
    if not isinstance(mapping, ast.Dict):
        return None
    for written, value in zip(mapping.keys, mapping.values):
        if isinstance(written, ast.Constant) and written.value == key and isinstance(value, ast.Name):
            return value.id
    return None


_PARSERS = ("HfArgumentParser", "TrlParser")


def unread_parser_classes(text: str, module_source: ModuleSource) -> list[str]:
    """The arguments classes a script's ``HfArgumentParser((A, B, C))`` names that memlint cannot
    read: not defined in the script, not imported from a library (a module outside the project),
    not a dataclass of the project module it is imported from, not chosen from a dict of classes
    there. Their defaults are unknown: the run's TrainingArguments defaults are assumptions."""
    tree = python_module(text)
    if tree is None:
        return []
    imported = _script_imports(text, tree)
    local = {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    chosen = chosen_classes(text, module_source)
    unread: list[str] = []
    for name in _parsed_names(tree):
        if name in local or name in chosen:
            continue
        module = imported.get(name)
        found = module_source(module) if module is not None else None
        if module is not None and found is None:
            continue  # a library's class
        tree_found = python_module(found[1]) if found is not None else None
        if tree_found is not None and any(isinstance(c, ast.ClassDef) and c.name == name and _is_dataclass(c)
                                          for c in tree_found.body):
            continue
        unread.append(name)
    return list(dict.fromkeys(unread))


def library_argument_bases(text: str, module_source: ModuleSource) -> dict[str, str]:
    """The arguments classes a script's parser names that it imports from a project module and
    that extend a library's arguments class there (ToolBench's ``from toolbench.train.train import
    TrainingArguments``, defined as ``class TrainingArguments(transformers.TrainingArguments)``):
    name as parsed -> the library class's qualified name. The class's module is read (its own
    classes, and one more hop for a base it imports from another project module)."""
    tree = python_module(text) if any(parser in text for parser in _PARSERS) else None
    if tree is None:
        return {}
    imported = _script_imports(text, tree)
    local = {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    out: dict[str, str] = {}
    for name in _parsed_names(tree):
        module = imported.get(name)
        if name in local or module is None:
            continue
        base = _library_base(module, name, module_source, hops=1)
        if base is not None:
            out[name] = base
    return out


def bind_library_arguments(script: RunFacts, bases: dict[str, str]) -> RunFacts:
    """``script`` with the options of the library arguments classes its parser gets through a
    project subclass (``library_argument_bases``) bound as a parsed library class binds them: a
    launch's ``--per_device_train_batch_size 4`` is the run's micro-batch."""
    if not bases:
        return script
    bindings = dict(script.cli_bindings)
    for key in hf_args.OPTIONS:
        bound = bindings.get(key, ())
        if f"hf:{key}" not in bound:
            bindings[key] = bound + (f"hf:{key}",)
    framework = script.framework
    name, base = next(iter(bases.items()))
    found = config_framework(base)
    if framework is None and found is not None and script.anchor is not None:
        framework = Sourced(found, script.anchor, f"{name} ({base} subclass) parsed from the command line")
    return replace(script, cli_bindings=bindings, framework=framework)


def _library_base(module: str, name: str, module_source: ModuleSource, hops: int) -> str | None:
    """The qualified name of the first library arguments class ``module.name`` extends (through
    the module's own classes, and ``hops`` more project modules), or None."""
    found = module_source(module)
    tree = python_module(found[1]) if found is not None else None
    if found is None or tree is None:
        return None
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    imports = _module_imports(tree)
    todo, seen = [name], set()
    while todo:
        current = todo.pop(0)
        if current in seen or current not in classes:
            continue
        seen.add(current)
        for base in classes[current].bases:
            written = _dotted(base)
            if written is None:
                continue
            head, _, rest = written.partition(".")
            # ``class TrainingArguments(TrainingArguments)`` (NExT-GPT's training_utils.py) names
            # the imported class it shadows, not itself
            if head in classes and not rest and head != current:
                todo.append(head)
                continue
            if head not in imports:
                continue
            origin = imports[head] + (f".{rest}" if rest else "")
            source_module, _, last = origin.rpartition(".")
            if source_module and module_source(source_module) is not None:  # another module of the project
                found_base = _library_base(source_module, last, module_source, hops - 1) if hops > 0 and not rest \
                    else None
                if found_base is not None:
                    return found_base
            elif is_library_dataclass(origin):
                return origin
    return None


def _module_imports(tree: ast.Module) -> dict[str, str]:
    """A module's top-level imports: the name bound -> what it names (``transformers``,
    ``transformers.TrainingArguments``)."""
    out: dict[str, str] = {}
    for statement in tree.body:
        if isinstance(statement, ast.Import):
            for alias in statement.names:
                out[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(statement, ast.ImportFrom) and statement.module and not statement.level:
            for alias in statement.names:
                out[alias.asname or alias.name] = f"{statement.module}.{alias.name}"
    return out


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner is not None else None
    return None


def _script_imports(text: str, tree: ast.Module) -> dict[str, str]:
    """Name -> the module a script imports it from (``from x import A``), inside functions and
    ``if`` blocks too; a relative import keeps its dots."""
    imported = {name: module for module, names in _IMPORT.findall(text) for name in _imported_names(names)}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                imported.setdefault(alias.asname or alias.name, "." * node.level + (node.module or ""))
    return imported


def _parsed_names(tree: ast.Module) -> list[str]:
    """The plain names of the classes an ``HfArgumentParser``/``TrlParser`` call is given
    (``transformers.TrainingArguments`` is a library's, read by its name elsewhere)."""
    out: list[str] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and node.args and
                getattr(node.func, "id", getattr(node.func, "attr", None)) in _PARSERS):
            continue
        written = node.args[0]
        names = written.elts if isinstance(written, (ast.Tuple, ast.List)) else [written]
        out.extend(name.id for name in names if isinstance(name, ast.Name))
    return out


def imported_constants(constants: dict[str, tuple[str, str]], module_source: ModuleSource) -> dict[str, Sourced[str]]:
    """Option name -> the module-level literal its default names (``default=DEFAULT_INPUT_MODEL``
    with ``from .consts import DEFAULT_INPUT_MODEL`` and ``DEFAULT_INPUT_MODEL =
    "EleutherAI/pythia-6.9b"`` in ``consts.py``), as command-line text."""
    out: dict[str, Sourced[str]] = {}
    for option, (module, name) in constants.items():
        found = module_source(module)
        tree = python_module(found[1]) if found is not None else None
        if found is None or tree is None:
            continue
        assigned = _module_constants(tree)
        if name in assigned:
            value, node = assigned[name]
            out[option] = Sourced(str(value), _location(found[0], node), f"{name} from {module}")
    return out


def _module_constants(tree: ast.Module) -> dict[str, tuple[object, ast.expr]]:
    """Name -> (value, where) of each module-level constant whose last assignment is a literal,
    or text built from the module's earlier constants (``MODEL_NAME = f"Qwen/{MODEL_BASE_NAME}"``,
    ``BASE + "-Instruct"``)."""
    out: dict[str, tuple[object, ast.expr]] = {}
    for statement in tree.body:
        if not isinstance(statement, ast.Assign):
            continue
        value = _constant_text(statement.value, out)
        for target in statement.targets:
            if isinstance(target, ast.Name):
                if value is None:
                    out.pop(target.id, None)  # the last assignment wins, as it does when imported
                else:
                    out[target.id] = (value, statement.value)
    return out


def _constant_text(node: ast.expr, known: dict[str, tuple[object, ast.expr]]) -> object | None:
    literal = _literal(node)
    if literal is not None:
        return literal.value
    if isinstance(node, ast.Name) and node.id in known:
        return known[node.id][0]
    if isinstance(node, ast.JoinedStr):
        parts: list[str] = []
        for part in node.values:
            if isinstance(part, ast.Constant) and isinstance(part.value, str):
                parts.append(part.value)
            elif isinstance(part, ast.FormattedValue) and part.conversion == -1 and part.format_spec is None:
                inner = _constant_text(part.value, known)
                if not isinstance(inner, (str, int)) or isinstance(inner, bool):
                    return None
                parts.append(str(inner))
            else:
                return None
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _constant_text(node.left, known), _constant_text(node.right, known)
        if isinstance(left, str) and isinstance(right, str):
            return left + right
    return None


def _location(path: str, value: ast.expr) -> Location:
    return Location(path, Range.of(value.lineno, value.col_offset, value.end_lineno or value.lineno,
                                   value.end_col_offset or value.col_offset))


def _field_defaults(path: str, source: str, wanted: set[str]) -> dict[str, Sourced[str]]:
    tree = python_module(source)
    if tree is None:
        return {}
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    out: dict[str, Sourced[str]] = {}
    todo = [name for name in wanted if name in classes and _is_dataclass(classes[name])]
    seen: set[str] = set()
    while todo:
        name = todo.pop(0)
        if name in seen:
            continue
        seen.add(name)
        node = classes[name]
        for statement in node.body:
            if not (isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)):
                continue
            value = _literal(statement.value)
            if value is not None and statement.target.id not in out:
                out[statement.target.id] = Sourced(str(value.value), _location(path, value),
                                                   f"default of {name}.{statement.target.id}")
        todo.extend(b.id for b in node.bases if isinstance(b, ast.Name) and b.id in classes)
    return out


def _is_dataclass(node: ast.ClassDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if (isinstance(target, ast.Name) and target.id == "dataclass") or (
                isinstance(target, ast.Attribute) and target.attr == "dataclass"):
            return True
    return False


def _literal(value: ast.expr | None) -> ast.Constant | None:
    """``4096`` or ``field(default=4096, metadata=...)``: the literal default, if any."""
    if isinstance(value, ast.Call) and getattr(value.func, "id", getattr(value.func, "attr", "")) == "field":
        value = next((k.value for k in value.keywords if k.arg == "default"), None)
    if isinstance(value, ast.Constant) and isinstance(value.value, _SCALARS):
        return value
    return None
