"""What a script lets the command line set: argparse options, dataclass fields, and the
parameters of a function a function-based CLI exposes (python-fire, typer, click).

``parser.add_argument("--batch_size", type=int, default=8)`` makes ``args.batch_size`` worth 8
unless a launcher passes ``--batch_size``; ``HfArgumentParser((ModelArguments, TrainingArguments))``
makes every field of those dataclasses an option whose default is the field's default. This
module answers "what is ``args.x`` / ``model_args.x`` by default, and which options set it".
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, AbstractSet, Any

import libcst as cst

from memlint.python.library import is_argument_parser, is_library_dataclass
from memlint.python.unit_scopes import ARGPARSE
from memlint.python import file_entries
from memlint.python.value_types import MISSING, CallValue, ClassValue, Found, Instance, Ref

if TYPE_CHECKING:
    from memlint.python.values import Values

# calls that turn a function's parameters into command-line options
_FUNCTION_CLIS = frozenset({"fire.Fire", "typer.run"})
# decorators that parse the command line into the config dataclass their function takes first
_CONFIG_WRAPPERS = frozenset({"draccus.wrap", "pyrallis.wrap"})

# Defaults of library dataclass fields that scripts test in conditions
# (``if training_args.gradient_checkpointing: ...``). transformers 5 TrainingArguments, TRL
# ModelConfig. They decide which branch runs; they are never facts themselves.
LIBRARY_DEFAULTS: dict[str, Any] = {
    "gradient_checkpointing": False,
    "activation_checkpointing": False,
    "bf16": False,
    "fp16": False,
    "use_liger_kernel": False,
    "use_peft": False,
    "load_in_4bit": False,
    "load_in_8bit": False,
    "packing": False,
    "do_train": False,
    "do_eval": False,
}


@dataclass(frozen=True)
class ArgOption:
    """One ``add_argument`` call."""

    dest: str
    keys: tuple[str, ...]  # option strings without dashes, "-" as "_" ("bs", "batch_size")
    default: cst.BaseExpression | None  # the default's expression, if written
    flag: str | None  # "store_true" / "store_false" / "boolean_optional" for value-less flags
    flag_node: cst.CSTNode | None
    call: cst.Call


# how a value bound to a constant another module writes is keyed among a script's options
# (``@MODEL_CHECKPOINT``): no command line can pass it
CONSTANT_PREFIX = "@"


def option_key(text: str) -> str:
    """``--per-device-train-batch-size`` -> ``per_device_train_batch_size``."""
    return text.lstrip("-").replace("-", "_")


class Options:
    """The command-line options a script defines (argparse ``add_argument`` calls, the fields
    of dataclasses given to ``HfArgumentParser``) and the default each gives an attribute."""

    def __init__(self, values: "Values") -> None:
        # weak: ``values`` keeps this object (``Values.options``); a strong reference back would
        # be a cycle that only the cycle collector frees
        self._values = weakref.ref(values)
        self._argparse: dict[str, list[ArgOption]] | None = None
        self._set_defaults: dict[str, cst.BaseExpression] | None = None
        # option -> (module, name) of a default imported from another module (``default=
        # DEFAULT_INPUT_MODEL`` with ``from .consts import DEFAULT_INPUT_MODEL``): the project
        # reads that module's constant, which this module cannot see
        self.imported: dict[str, tuple[str, str]] = {}
        self._parses_dataclasses: bool | None = None

    @property
    def values(self) -> "Values":
        values = self._values()
        assert values is not None, "options are reached through their values"
        return values

    # ------------------------------------------------------------- argparse

    def argparse_options(self) -> dict[str, list[ArgOption]]:
        """Every ``*.add_argument("--x", ...)`` of the module, by destination."""
        self.values.depends(ARGPARSE)  # read from every statement: an edit that may change it drops it
        if self._argparse is None:
            found: dict[str, list[ArgOption]] = {}
            defaults: dict[str, cst.BaseExpression] = {}
            for node in self.values.source.nodes_of(cst.Call):
                # a type test: libcst's classes are ABCs, whose ``isinstance`` is a Python-level call
                if type(node.func) is not cst.Attribute:
                    continue
                method = node.func.attr.value
                if method == "add_argument":
                    option = self._add_argument(node)
                    if option is not None:
                        found.setdefault(option.dest, []).append(option)
                elif method == "set_defaults":
                    for arg in node.args:
                        if arg.keyword is not None:
                            defaults[arg.keyword.value] = arg.value
            self._argparse = found
            self._set_defaults = defaults
        return self._argparse

    def _add_argument(self, call: cst.Call) -> ArgOption | None:
        strings: list[str] = []
        for arg in call.args:
            if arg.keyword is not None or arg.star:
                continue
            if not isinstance(arg.value, cst.SimpleString):
                return None
            text = arg.value.evaluated_value
            if not isinstance(text, str) or not text.startswith("-"):
                return None  # a positional argument: launchers pass no option for it
            strings.append(text)
        if not strings:
            return None
        keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
        dest = None
        if "dest" in keywords and isinstance(keywords["dest"], cst.SimpleString):
            dest = keywords["dest"].evaluated_value
        if dest is None:
            long = [s for s in strings if s.startswith("--")]
            dest = option_key(long[0] if long else strings[0])
        flag: str | None = None
        flag_node: cst.CSTNode | None = None
        action = keywords.get("action")
        if isinstance(action, cst.SimpleString) and action.evaluated_value in ("store_true", "store_false"):
            flag, flag_node = action.evaluated_value, action
        elif isinstance(action, (cst.Attribute, cst.Name)) and \
                "argparse.BooleanOptionalAction" in self.values.qualified(action):
            flag, flag_node = "boolean_optional", action  # ``--x`` sets it, ``--no-x`` clears it
        return ArgOption(str(dest), tuple(dict.fromkeys(option_key(s) for s in strings)), keywords.get("default"),
                         flag, flag_node, call)

    def argparse_value(self, dest: str, fallback: bool = False) -> Found | None:
        """``args.<dest>``: its default and the options that set it (None if no such option)."""
        options = self.argparse_options().get(dest)
        if not options:
            return None
        keys = tuple(dict.fromkeys(k for o in options for k in o.keys))
        candidates = []
        for option in options:
            candidates.append(self._default_of(option))
        override = (self._set_defaults or {}).get(dest)
        if override is not None:
            found = self.values.evaluate(override)
            candidates = [Found(found.value, found.node, (), "set_defaults") if found and found.known else None]
        known = [c for c in candidates if c is not None]
        if len(known) < len(candidates) or any(c.value != known[0].value for c in known):
            return Found(MISSING, None, keys, f"--{keys[0]}")
        first = known[0]
        note = f"argparse default of --{keys[0]}" + (" (guessed from the attribute name)" if fallback else "")
        return Found(first.value, first.node, keys, note)

    def _default_of(self, option: ArgOption) -> Found | None:
        if option.default is not None:
            found = self.values.evaluate(option.default)
            if found is None or not found.known:
                return None
            return Found(found.value, found.node)
        if option.flag == "store_true":
            return Found(False, option.flag_node)
        if option.flag == "store_false":
            return Found(True, option.flag_node)
        return Found(None, None)  # argparse's default when none is given

    def flag_kind(self, key: str) -> str | None:
        """"store_true"/"store_false" when the option ``--key`` is a value-less flag."""
        for options in self.argparse_options().values():
            for option in options:
                if key in option.keys:
                    return option.flag
        return None

    # ------------------------------------------------------------- function CLIs

    def function_option(self, function: cst.FunctionDef, param: cst.Param) -> Found | None:
        """A parameter of a function that a function-based CLI exposes (``fire.Fire(train)``,
        ``typer.run(main)``, click's ``@click.option``): its default, replaced by ``--<name>``
        on the command line, or by a positional word where the CLI takes one: typer's arguments
        (a parameter without a default, or one marked ``typer.Argument``, also inside
        ``Annotated[...]``) in their order, and any of fire's parameters in theirs (key ``#k``
        for the k-th word after the script). None for a function no such CLI exposes."""
        name = param.name.value
        clicked = self.click_option(function, name)
        if clicked is not None:
            return clicked
        cli = self._exposed(function)
        if cli is None:
            return None
        position = self._position(function, param, cli)
        keys = (name,) if position is None else (name, f"#{position}")
        default = param.default
        if isinstance(default, cst.Call) and {"typer.Option", "typer.Argument"} & self.values.qualified(default.func):
            first = next((a.value for a in default.args if a.keyword is None or a.keyword.value == "default"), None)
            default = first if first is not None and not isinstance(first, cst.Ellipsis) else None
        if default is None:
            return Found(MISSING, None, keys, f"--{name}")
        found = self.values.evaluate(default)
        if found is None or not found.known:
            self._note_import(name, default)
            return Found(MISSING, None, keys, f"--{name}")
        return Found(found.value, found.node, keys, f"default of {function.name.value}({name}=...), a command-line option")

    def wrapped_config(self, function: cst.FunctionDef, param: cst.Param) -> cst.ClassDef | None:
        """The config dataclass a ``@draccus.wrap()`` / ``@pyrallis.wrap()`` function takes as
        ``param`` (openvla's ``def finetune(cfg: FinetuneConfig)``): the wrapper parses the command
        line into it, each field an option (``--vla_path``). None for any other parameter."""
        if param.annotation is None or not any(
                _CONFIG_WRAPPERS & self.values.qualified(d.decorator.func if type(d.decorator) is cst.Call else d.decorator)
                for d in function.decorators):
            return None
        params = [p for p in function.params.params if p.name.value not in ("self", "cls")]
        if not params or params[0] is not param:
            return None
        found = self.values.evaluate(param.annotation.annotation)
        return found.value.node if found is not None and isinstance(found.value, ClassValue) and \
            self.is_dataclass(found.value.node) else None

    def _position(self, function: cst.FunctionDef, param: cst.Param, cli: str) -> int | None:
        """The 1-based place of ``param`` among the words the CLI reads by position, if any."""
        params = [p for p in function.params.params if p.name.value not in ("self", "cls")]
        if cli == "typer":
            params = [p for p in params if self._typer_argument(p)]
        return next((i + 1 for i, p in enumerate(params) if p is param), None)

    def _typer_argument(self, param: cst.Param) -> bool:
        """A typer parameter read by position: no default, or ``typer.Argument`` as its default or
        in its ``Annotated[...]`` annotation."""
        markers: list[cst.BaseExpression] = [param.default] if param.default is not None else []
        annotation = param.annotation.annotation if param.annotation is not None else None
        if type(annotation) is cst.Subscript:
            markers += [e.slice.value for e in annotation.slice[1:] if type(e.slice) is cst.Index]
        for marker in markers:
            if type(marker) is cst.Call:
                names = self.values.qualified(marker.func)
                if "typer.Argument" in names:
                    return True
                if "typer.Option" in names:
                    return False
        return param.default is None

    def _note_import(self, key: str, default: cst.BaseExpression | None) -> None:
        if type(default) is cst.Name:
            source = self.values.import_source(default)
            if source is not None:
                self.imported.setdefault(key, source)

    def _exposed(self, function: cst.FunctionDef) -> str | None:
        """The function-based CLI ``function`` is handed to, if any: "fire" (``fire.Fire(train)``)
        or "typer" (``typer.run(main)``, ``@app.command()`` of a ``typer.Typer()``)."""
        for use in self.values.references(function):
            argument = self.values.parent(use)
            call = self.values.parent(argument) if type(argument) is cst.Arg else None
            if type(call) is cst.Call and call.args and call.args[0] is argument:
                clis = _FUNCTION_CLIS & self.values.callee_names(call)
                if clis:
                    return "fire" if "fire.Fire" in clis else "typer"
        for decorator in function.decorators:
            target = decorator.decorator
            if type(target) is cst.Call and type(target.func) is cst.Attribute and target.func.attr.value == "command":
                owner = self.values.evaluate(target.func.value)
                if owner is not None and isinstance(owner.value, CallValue) and \
                        "typer.Typer" in self.values.callee_names(owner.value.call):
                    return "typer"
        return None

    def click_option(self, function: cst.FunctionDef, name: str) -> Found | None:
        """``@click.option("--micro-batch-size", default=4)`` over ``def main(micro_batch_size)``."""
        for decorator in function.decorators:
            target = decorator.decorator
            if type(target) is not cst.Call or "click.option" not in self.values.qualified(target.func):
                continue
            written = [a.value.evaluated_value for a in target.args
                       if a.keyword is None and type(a.value) is cst.SimpleString]
            # ``"--gradient-checkpointing/--no-gradient-checkpointing"``: the "on" spelling names it
            strings = [s.split("/")[0].strip() if s.startswith("-") else s for s in written if isinstance(s, str)]
            named = [s for s in strings if not s.startswith("-")]
            dashed = [s for s in strings if s.startswith("-")]
            longest = sorted(dashed, key=lambda s: (not s.startswith("--"), -len(s)))
            dest = named[0] if named else (option_key(longest[0]) if longest else None)
            if dest != name:
                continue
            keys = tuple(dict.fromkeys(option_key(s) for s in dashed)) or (name,)
            default = next((a.value for a in target.args if a.keyword is not None and a.keyword.value == "default"), None)
            found = self.values.evaluate(default) if default is not None else Found(None, None)
            if found is None or not found.known:
                self._note_import(keys[0], default)
                return Found(MISSING, None, keys, f"--{keys[0]}")
            return Found(found.value, found.node, keys, f"click default of --{keys[0]}")
        return None

    # ------------------------------------------------------------- dataclasses

    def is_dataclass(self, node: cst.ClassDef) -> bool:
        for decorator in node.decorators:
            target = decorator.decorator
            if isinstance(target, cst.Call):
                target = target.func
            names = self.values.qualified(target)
            if "dataclasses.dataclass" in names or "pydantic.dataclasses.dataclass" in names:
                return True
        return False

    def parses_dataclasses(self) -> bool:
        """Does the module build an ``HfArgumentParser``-style parser of dataclasses?"""
        if self._parses_dataclasses is None:
            source = self.values.source
            self._parses_dataclasses = "Parser" in source.text and any(
                "Parser" in source.code_of(call.func) and self.is_dataclass_parser(call)
                for call in source.nodes_of(cst.Call))
        return self._parses_dataclasses

    def is_dataclass_parser(self, call: cst.Call, names: AbstractSet[str] | None = None) -> bool:
        """``HfArgumentParser``/``TrlParser``, or a project's own subclass of one imported from
        another module (open-instruct's ``ArgumentParserPlus((FlatArguments, TokenizerConfig))``):
        a ``*Parser*`` class called with the script's dataclasses, which ``argparse`` never is.
        ``names``: the call's ``callee_names`` where the caller has them (the extractor asks of
        every call)."""
        if names is None:
            names = self.values.callee_names(call)
        if any(is_argument_parser(n) for n in names):
            return True
        if not call.args or call.args[0].keyword is not None or not any("Parser" in n.rsplit(".", 1)[-1] for n in names):
            return False
        if any(n.startswith("argparse.") for n in names):
            return False
        first = call.args[0].value
        items = [e.value for e in first.elements] if isinstance(first, (cst.Tuple, cst.List)) else [first]
        for item in items:
            found = self.values.evaluate(item)
            if found is not None and isinstance(found.value, ClassValue) and self.is_dataclass(found.value.node):
                return True
        return False

    def parser_classes(self, call: cst.Call) -> tuple[Any, ...] | None:
        """The dataclasses of an ``HfArgumentParser``/``TrlParser`` call: ClassDefs for the
        script's own, qualified names for library ones, None where unknown."""
        if not self.is_dataclass_parser(call):
            return None
        arguments = self.values.arguments(call, ("dataclass_types",))
        first = arguments.get("dataclass_types")
        if first is None:
            return None
        items = list(first.elements) if isinstance(first, (cst.Tuple, cst.List)) else None
        if items is not None:
            values = [self.values.evaluate(e.value) for e in items]
            return tuple(_parsed_class(f.value if f is not None else None) or self._shadowing_class(e.value)
                         for e, f in zip(items, values))
        found = self.values.evaluate(first)
        if found is not None and isinstance(found.value, (tuple, list)):
            # ``dataclass_types = (ScriptArguments, SFTConfig, ModelConfig); TrlParser(dataclass_types)``
            return tuple(_parsed_class(value) for value in found.value)
        return (_parsed_class(found.value if found is not None else None),)

    def _shadowing_class(self, expr: cst.BaseExpression) -> cst.ClassDef | None:
        """``class TrainingArguments(TrainingArguments)`` after ``from transformers import
        TrainingArguments`` (BELLE's ``sft_train.py``; AnyGPT's writes the base
        ``transformers.TrainingArguments``): the name is bound twice, and once the module has run
        it is the script's class, which extends the imported one."""
        if not isinstance(expr, cst.Name):
            return None
        definitions = self.values.definitions(expr)
        classes = [d for d in definitions if isinstance(d, cst.ClassDef)]
        if len(classes) != 1 or len(definitions) != 2 or not any(
            isinstance(d, (cst.Import, cst.ImportFrom)) for d in definitions
        ):
            return None
        (cls,) = classes
        if any((isinstance(base.value, cst.Name) and base.value.value == expr.value)
               or (isinstance(base.value, cst.Attribute) and base.value.attr.value == expr.value)
               for base in cls.bases):
            return cls
        return None

    def fields(self, node: cst.ClassDef) -> dict[str, cst.BaseExpression | None]:
        """A dataclass's own fields and the expression of each default (None: no default)."""
        out: dict[str, cst.BaseExpression | None] = {}
        body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
        for statement in body:
            if not isinstance(statement, cst.SimpleStatementLine):
                continue
            for small in statement.body:
                if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                    out[small.target.value] = self._field_default(small.value)
                elif isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(
                    small.targets[0].target, cst.Name
                ):
                    out[small.targets[0].target.value] = self._field_default(small.value)
        return out

    def _field_default(self, value: cst.BaseExpression | None) -> cst.BaseExpression | None:
        if isinstance(value, cst.Call) and {"dataclasses.field", "pydantic.Field"} & self.values.qualified(value.func):
            for arg in value.args:
                if arg.keyword is not None and arg.keyword.value in ("default", "default_factory"):
                    return arg.value
            return None
        return value

    def bases(self, node: cst.ClassDef) -> tuple[list[cst.ClassDef], list[str]]:
        """A class's bases: the script's own classes, and library qualified names."""
        own: list[cst.ClassDef] = []
        library: list[str] = []
        for base in node.bases:
            found = self.values.evaluate(base.value)
            if found is not None and isinstance(found.value, ClassValue) and found.value.node is not node:
                own.append(found.value.node)
            else:
                library.extend(sorted(n for n in self.values.qualified(base.value) if "." in n))
        return own, library

    def library_base(self, node: cst.ClassDef, depth: int = 0) -> str | None:
        """The library dataclass a user class extends (``class TrainingArguments(transformers.TrainingArguments)``)."""
        if depth > 6:
            return None
        own, library = self.bases(node)
        for name in library:
            if is_library_dataclass(name):
                return name
        for base in own:
            found = self.library_base(base, depth + 1)
            if found:
                return found
        return None

    def field_value(self, instance: Instance, attr: str, depth: int = 0) -> Found | None:
        """``instance.attr``: a constructor keyword, else the field default (own or inherited)."""
        passed, found = self._constructor_keyword(instance, attr, depth)
        if passed:
            return found
        keys = (attr,) if instance.cli else ()
        if instance.cls is not None:
            found = self._class_field(instance.cls, attr, keys, depth)
            if found is not None:
                return found
            library = self.library_base(instance.cls)
        else:
            library = instance.library
        if library is not None:
            short = library.rsplit(".", 1)[-1]
            return Found(LIBRARY_DEFAULTS.get(attr, MISSING), None, keys, f"{short}.{attr}")
        if instance.cli and instance.cls is None:
            # a parsed dataclass this module cannot see (``from .arguments import
            # CustomTrainingArguments``): each field is still an option of the command line, its
            # default written in the other module (``memlint.facts.imported_arguments``)
            return Found(MISSING, None, keys, f"--{attr}")
        return None

    def declared_field(self, instance: Instance, attr: str, depth: int = 0) -> tuple[bool, Found | None]:
        """``instance.attr`` where the code itself states it -- a constructor keyword, or a field
        of the user class or of its user bases -- as (stated, value); a library class's own
        field is not stated (``argparse.Namespace(**vars(a), **vars(b))`` asks each in turn)."""
        passed, found = self._constructor_keyword(instance, attr, depth)
        if passed or instance.cls is None:
            return passed, found
        found = self._class_field(instance.cls, attr, (attr,) if instance.cli else (), depth)
        return found is not None, found

    def _constructor_keyword(self, instance: Instance, attr: str, depth: int) -> tuple[bool, Found | None]:
        if instance.call is not None:
            for arg in instance.call.args:
                if arg.keyword is not None and arg.keyword.value == attr:
                    found = self.values.evaluate(arg.value, depth + 1)
                    return True, (found.at(found.node) if found is not None else None)
            for arg in instance.call.args:
                if arg.star == "**" and instance.cls is not None:
                    return True, self._file_field(instance.cls, arg.value, attr, depth)
        return False, None

    def _file_field(self, cls: cst.ClassDef, mapping: cst.BaseExpression, attr: str, depth: int) -> Found | None:
        """``SFTConfig(**yaml.safe_load(path.read_text()))``: a field is the file's entry where the
        file writes one, else the class's default (``file_entries``, as ``cfg.get(key, default)``);
        unknown when the mapping is no file this module reads."""
        read = file_entries.entry_of(self.values.evaluate(mapping, depth + 1))
        if read is None:
            return None
        default = self._class_field(cls, attr, (), depth)
        fallback = default.value if default is not None and default.known else None
        return Found(MISSING, None, (read.child(attr, fallback).name,))

    def _class_field(self, node: cst.ClassDef, attr: str, keys: tuple[str, ...], depth: int) -> Found | None:
        if depth > 12:
            return None
        fields = self.fields(node)
        if attr in fields:
            default = fields[attr]
            note = f"default of {node.name.value}.{attr}"
            if default is None:
                return Found(MISSING, None, keys, note)
            found = self.values.evaluate(default, depth + 1)
            if found is None or not found.known:
                return Found(MISSING, None, keys, note)
            # ``model_id: str = os.getenv("MODEL_ID", "...")``: a launch's environment still replaces it
            environment = tuple(option for option in found.options if option.startswith("$"))
            return Found(found.value, found.node, keys + environment,
                         f"{note}, {found.note}" if environment and found.note else note)
        own, _ = self.bases(node)
        for base in own:
            found = self._class_field(base, attr, keys, depth + 1)
            if found is not None:
                return found
        return None

    def class_attribute(self, node: cst.ClassDef, attr: str, depth: int = 0) -> Found | None:
        """``Config.batch_size`` on a plain class holding constants."""
        return self._class_field(node, attr, (), depth)


def _parsed_class(value: Any) -> Any:
    """A parser's dataclass as ``parser_classes`` gives it: the script's ClassDef, a library
    class's qualified name, or None."""
    if isinstance(value, ClassValue):
        return value.node
    if isinstance(value, Ref):
        return value.qualname
    return None

