"""The facts a script's own project modules establish for it: a helper function or a trainer
class the script imports from the project and calls (or subclasses).

Training scripts hand the deciding parts of a run to their own modules. peft's QLoRA example
calls ``create_and_prepare_model(model_args, data_args, training_args)`` from ``utils.py``, which
builds ``BitsAndBytesConfig(load_in_4bit=args.use_4bit_quantization)`` and applies LoRA;
DeepSpeed-Chat loads its model in ``create_hf_model(AutoModelForCausalLM, args.model_name_or_path,
...)``; SimPO's ``SimPOTrainer(Trainer)`` (``simpo_trainer.py``) runs chosen and rejected in one
forward; LOMO's ``LOMOTrainer`` builds its engine with ``deepspeed.initialize``. Judged on the
script alone, each of those runs is another run.

For every name the script imports from a module of the project (``from utils import f``,
``from .trainer import T as U``, resolved by the caller) and calls:

- a function: the script extractor's recognisers run over its body and over the bodies of the
  module's top-level functions it calls (``script.definition_facts``), with its parameters bound
  to the call's arguments (positional or keyword). A parameter given an options object
  (``model_args`` from ``HfArgumentParser``, ``args`` from argparse) reads ``param.attr`` as the
  caller's option ``attr``; one given an option (``args.model_name_or_path``) reads as that
  option; one given a library class (``AutoModelForCausalLM``) is that class. The caller's
  defaults for those options come back too, located where the caller writes them, so that a
  launch without the option runs what the defaults say and one with it what it passes.
- a class: what decides memory that its code states: a ``Trainer`` base (the framework), a TRL
  base or a ``concatenated_forward`` (pairs in one forward), a ``deepspeed.initialize`` in its
  methods (the engine it builds, which no ``Trainer`` checks), and an override of
  ``compute_loss``/``training_step`` memlint does not model: then the activation estimate is a
  lower bound (``lower_bound``), which rules that claim a fit must not state as a verdict.

Depth: one module hop (the script to the module it imports from; that module's own imports are
not followed), one level of calls inside that module. Modules are read with libcst, never
imported or run; the caller's document store parses each once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

import libcst as cst

from memlint.documents.parsed import ParsedDocument
from memlint.facts import olmo_core_parallel, project_trainers, script_gradient_cache
from memlint.facts.imported_arguments import imported_names
from memlint.facts.lazy_exports import lazy_submodule
from memlint.facts.plan import RunFacts
from memlint.facts.script import definition_facts
from memlint.facts.script_facts import ScriptFacts
from memlint.model.provenance import Location, Sourced
from memlint.python.library import DEEPSPEED_INITIALIZE, trainer_framework
from memlint.python.references import NOT_PASSED, Assigned, Parameter, Unpacked
from memlint.python.value_types import MISSING, CallerOptions, Found, Instance, Namespace, Ref
from memlint.python.values import Values

# a module name as the script writes it -> that module parsed, or None when it is not the project's
ModuleParser = Callable[[str], "ParsedDocument | None"]

# ``from .grpo_trainer import VLMGRPOTrainer`` (or ``(A, B)``): the submodule and the names
_RELATIVE_IMPORT = re.compile(r"^[ \t]*from[ \t]+\.([A-Za-z_][\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n]*)", re.MULTILINE)
# TRL's preference trainers (a project class extending one trains on pairs, as TRL's does)
_PAIRED_BASES = ("DPOTrainer", "CPOTrainer", "ORPOTrainer", "KTOTrainer")
# those of them that build a reference model of their own (CPO and ORPO hold none)
_REFERENCE_BASES = ("DPOTrainer", "KTOTrainer")
# the methods a Trainer subclass overrides to change what a step computes
_STEP_METHODS = ("compute_loss", "training_step")


@dataclass
class Imported:
    """What one imported function or class establishes for the script that calls it."""

    facts: RunFacts  # located in the imported module; ``cli_bindings`` keyed by the caller's options
    defaults: dict[str, Sourced[str]] = field(default_factory=dict)  # the caller's default of each bound option
    overrides: dict[str, Sourced[Any]] = field(default_factory=dict)  # facts the script's own cannot beat


def imported_facts(caller: ParsedDocument, module_parser: ModuleParser) -> list[Imported]:
    """The facts of each project function or class ``caller`` imports and calls, in import order."""
    source = caller.python
    if source is None:
        return []
    wanted = [(module, name, alias) for module, name, alias in imported_names(caller.text)
              if _used(caller.text, alias)]
    if not wanted:
        return []
    values: Values | None = None
    out: list[Imported] = []
    for module, name, alias in wanted:
        parsed = module_parser(module)
        if parsed is None:
            continue
        helper = parsed.python
        definition = _defined(helper.module, name) if helper is not None else None
        if definition is None:  # a package's ``__init__`` re-exports it (``from .grpo_trainer import T``)
            parsed = _reexported(parsed, module, name, module_parser)
            helper = parsed.python if parsed is not None else None
            definition = _defined(helper.module, name) if helper is not None else None
        if parsed is None or definition is None:
            continue
        if values is None:
            values = Values(source)
        if isinstance(definition, cst.ClassDef):
            found = _class_facts(parsed, definition)
            out.extend(_builder_facts(caller, values, parsed, definition, alias, _project_bases(module_parser)))
        else:
            found = _function_facts(caller, values, parsed, definition, alias, _project_bases(module_parser))
        if found is not None:
            out.append(found)
    return out


def _builder_facts(caller: ParsedDocument, values: Values, parsed: ParsedDocument, cls: cst.ClassDef, alias: str,
                   project_bases: Callable[[frozenset[str]], set[str]]) -> list[Imported]:
    """The facts of a class method the script calls on a project class to build its model
    (tevatron's ``RepLLaMA.build(model_args, training_args)``: ``LlamaModel.from_pretrained``, then
    ``get_peft_model`` with a LoRA of r=32), read as a helper function's are; one per method."""
    if f"{alias}." not in caller.text:
        return []
    out: list[Imported] = []
    for statement in cls.body.body:
        if not isinstance(statement, cst.FunctionDef) or f"{alias}.{statement.name.value}(" not in caller.text:
            continue
        decorators = {d.decorator.value for d in statement.decorators if isinstance(d.decorator, cst.Name)}
        if not decorators & {"classmethod", "staticmethod"}:
            continue
        found = _function_facts(caller, values, parsed, statement, alias, project_bases, owner=cls.name.value,
                                bound_self="classmethod" in decorators)
        if found is not None:
            out.append(found)
    return out


def _defined(module: cst.Module, name: str) -> cst.FunctionDef | cst.ClassDef | None:
    return next((d for d in module.body if isinstance(d, (cst.FunctionDef, cst.ClassDef)) and d.name.value == name),
                None)


def _reexported(parsed: ParsedDocument, module: str, name: str, module_parser: ModuleParser) -> ParsedDocument | None:
    """The module a package re-exports ``name`` from: VLM-R1's ``open_r1/trainer/__init__.py``
    has ``from .grpo_trainer import VLMGRPOTrainer``, which its scripts import from
    ``open_r1.trainer``; mPLUG-Owl's lazy ``mplug_owl/__init__.py`` lists its model class in
    ``_import_structure`` (``facts/lazy_exports.py``). One level, relative imports of the package
    only (read from the text: an ``__init__`` that only re-exports is not parsed for the rules)."""
    package = module if Path(parsed.path).name == "__init__.py" else module.rpartition(".")[0]
    for match in _RELATIVE_IMPORT.finditer(parsed.text):
        if any(words.split() == [name] for words in match.group(2).strip().strip("()").replace("\n", " ").split(",")):
            return module_parser(f"{package}.{match.group(1)}" if package else match.group(1))
    lazy = lazy_submodule(parsed.text, name)  # transformers' ``_LazyModule`` mapping
    if lazy is not None:
        return module_parser(f"{package}.{lazy}" if package else lazy)
    return None


def _used(text: str, alias: str) -> bool:
    """Is the imported name called, subclassed, or assigned to a name the script calls
    (``trainer_cls = VLMGRPOTrainer`` then ``trainer_cls(...)``, as open-r1's descendants choose
    their trainer class): a cheap text check before any parsing."""
    escaped = re.escape(alias)
    if f"{alias}(" in text or f"{alias} (" in text or re.search(rf"(?<![\w.]){escaped}\.\w+\(", text) or re.search(
            rf"^[ \t]*class[ \t]+\w+[ \t]*\([^)]*\b{escaped}\b", text, re.MULTILINE) is not None:
        return True
    return any(f"{match.group(1)}(" in text for match in
               re.finditer(rf"^[ \t]*(\w+)[ \t]*=[^=\n]*(?<![\w.]){escaped}\b", text, re.MULTILINE))


# the class methods whose call builds a model (a project subclass of a transformers model class)
_BUILDERS = ("from_pretrained", "from_config")


def _project_bases(module_parser: ModuleParser) -> Callable[[frozenset[str]], set[str]]:
    """For a helper module's calls: ``PreLlamaModel.from_pretrained(...)`` where the helper imports
    ``PreLlamaModel`` from another module of the project (FlagEmbedding's LLARA: ``class
    PreLlamaModel(LlamaForCausalLM)`` in ``modeling.py``) also calls its library bases'
    ``from_pretrained``: the model loader the recognisers know. One more module, read, not run."""
    def bases(names: frozenset[str]) -> set[str]:
        out: set[str] = set()
        for name in names:
            owner, _, method = name.rpartition(".")
            module, _, cls = owner.rpartition(".")
            if method not in _BUILDERS or not module or not cls:
                continue
            parsed = module_parser(module)
            definition = _defined(parsed.python.module, cls) if parsed is not None and parsed.python else None
            if definition is None and parsed is not None:  # a package's ``__init__`` re-exports it
                parsed = _reexported(parsed, module, cls, module_parser)
                definition = _defined(parsed.python.module, cls) if parsed is not None and parsed.python else None
            if isinstance(definition, cst.ClassDef) and parsed is not None and parsed.python is not None:
                out |= {f"{base}.{method}" for base in Values(parsed.python).class_names(definition) if "." in base}
        return out
    return bases


def _function_facts(caller: ParsedDocument, values: Values, parsed: ParsedDocument, function: cst.FunctionDef,
                    alias: str, project_bases: Callable[[frozenset[str]], set[str]] | None = None,
                    owner: str | None = None, bound_self: bool = False) -> Imported | None:
    """The facts ``function`` states when the caller's first call of ``alias`` runs it (or of
    ``alias.<function>``, a class method of the class ``owner``, whose ``cls`` the call does not
    pass when ``bound_self``)."""
    source = caller.python
    assert source is not None
    name = function.name.value

    def calls_it(c: cst.Call) -> bool:
        if owner is None:
            return type(c.func) is cst.Name and c.func.value == alias
        return type(c.func) is cst.Attribute and type(c.func.value) is cst.Name and c.func.value.value == alias \
            and c.func.attr.value == name

    call = next((c for c in source.nodes_in_order(cst.Call) if calls_it(c)), None)
    if call is None:
        return None
    passed: dict[tuple[str, str], Found] = {}
    objects: list[Found] = []  # options objects passed through
    direct: dict[str, Found] = {}  # an option passed as it is -> the caller's value of it
    params = function.params
    skipped = [*params.posonly_params, *params.params][:1] if bound_self else []
    for param in [*params.posonly_params, *params.params, *params.kwonly_params]:
        if param in skipped:
            continue
        argument = values.argument_for(function, param, call, bound_self=bound_self)
        if argument is NOT_PASSED or argument is None or isinstance(argument, Unpacked):
            continue
        found = values.evaluate(argument)
        if (found is None or not found.known) and not (found is not None and found.options):
            if _parsed_options(values, argument):
                passed[(name, param.name.value)] = Found(CallerOptions(), None)
                objects.extend(_parser_objects(values))
            continue
        assert found is not None
        if isinstance(found.value, (Namespace, CallerOptions)) or (
                isinstance(found.value, Instance) and found.value.cli):
            passed[(name, param.name.value)] = Found(CallerOptions(), None)
            objects.append(found)
        elif isinstance(found.value, Ref):
            passed[(name, param.name.value)] = Found(found.value, None)
        elif found.options:
            passed[(name, param.name.value)] = Found(MISSING, None, found.options,
                                                     found.note or f"--{found.options[0]}")
            for option in found.options:
                direct.setdefault(option, found)

    def caller_option(option: str) -> Found | None:
        found = _object_default(values, objects, option)
        if found is not None and found.known and found.note:
            return replace(found, note=f"{found.note} in {Path(caller.path).name}")
        return found

    facts = definition_facts(parsed, f"{owner}.{name}" if owner else name, passed, caller_option, project_bases)
    if facts is None:
        return None
    defaults: dict[str, Sourced[str]] = {}
    for option in facts.cli_bindings:
        found = direct.get(option)
        if found is None or not found.known or found.node is None or found.value is None or \
                not isinstance(found.value, (bool, int, float, str)):
            continue
        text = ("true" if found.value else "false") if isinstance(found.value, bool) else str(found.value)
        defaults[option] = Sourced(text, Location(caller.path, source.range_of(found.node)),
                                   found.note or f"default of --{option}")
    return Imported(facts, defaults)


def _parsed_options(values: Values, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """Is ``expr`` what a command-line parser returned, though which of its calls is not known
    (``model_args`` unpacked from ``parse_json_file`` or ``parse_args_into_dataclasses`` under an
    ``if``), possibly handed through parameters of the caller's own functions?"""
    if type(expr) is not cst.Name or depth > 3:
        return False
    definitions = values.definitions(expr)
    if not definitions:
        return False
    for definition in definitions:
        if isinstance(definition, Parameter) and type(definition.function) is cst.FunctionDef:
            calls = values.call_sites(definition.function)
            arguments = [values.argument_for(definition.function, definition.param, c) for c in calls]
            if not arguments or not all(isinstance(a, cst.BaseExpression) and _parsed_options(values, a, depth + 1)
                                        for a in arguments):
                return False
            continue
        written = definition.expr if isinstance(definition, (Assigned, Unpacked)) else None
        # ``parse_args_into_dataclasses()``, ``parse_yaml_file(...)``, and alignment-handbook's
        # ``H4ArgumentParser.parse()`` (SimPO: ``model_args, data_args, training_args = parser.parse()``)
        if not (isinstance(written, cst.Call) and type(written.func) is cst.Attribute
                and (written.func.attr.value.startswith("parse_") or written.func.attr.value == "parse")):
            return False
    return True


def _parser_objects(values: Values) -> list[Found]:
    """The options objects the caller's parsers return: its own dataclasses first, then library
    ones (whose fields memlint knows only by name), then argparse's namespace."""
    own: list[Found] = []
    library: list[Found] = []
    source = values.source
    for call in source.nodes_in_order(cst.Call):
        for parsed in values.options.parser_classes(call) or ():
            if isinstance(parsed, cst.ClassDef):
                own.append(Found(Instance(cls=parsed, cli=True), None))
            elif isinstance(parsed, str):
                library.append(Found(Instance(library=parsed, cli=True), None))
    return own + library + [Found(Namespace(), None)]


def _object_default(values: Values, objects: list[Found], option: str) -> Found | None:
    """The caller's value of ``option`` read from an options object it passed on."""
    for found in objects:
        if isinstance(found.value, Namespace):
            value = values.options.argparse_value(option)
        elif isinstance(found.value, Instance):
            value = values.options.field_value(found.value, option)
        else:
            value = None
        if value is not None:
            return value
    return None


def _class_facts(parsed: ParsedDocument, cls: cst.ClassDef) -> Imported | None:
    """What a project class states about the run that builds it."""
    helper = parsed.python
    assert helper is not None
    values = Values(helper)
    name = cls.name.value
    facts = RunFacts(parsed.path, "python")
    overrides: dict[str, Sourced[Any]] = {}

    def at(node: cst.CSTNode) -> Location:
        return Location(parsed.path, helper.range_of(node))

    bases = values.class_names(cls)
    frameworks = sorted({f for f in (trainer_framework(b) for b in bases) if f is not None})
    methods = {s.name.value: s for s in cls.body.body if isinstance(s, cst.FunctionDef)}
    if frameworks:
        facts.framework = Sourced("trl" if "trl" in frameworks else frameworks[0], at(cls.name),
                                  f"class {name}({', '.join(sorted(b for b in bases if b != name))[:80]})")
    paired_base = next((b for b in bases if b.rsplit(".", 1)[-1] in _PAIRED_BASES), None)
    if frameworks and ("concatenated_forward" in methods or paired_base is not None):
        node = methods["concatenated_forward"].name if "concatenated_forward" in methods else cls.name
        facts.trainer_kind = Sourced("paired", at(node), f"{name}.concatenated_forward (chosen and rejected "
                                     "sequences in one forward)" if "concatenated_forward" in methods
                                     else f"{name} extends {paired_base}")
        built = project_trainers.reference_built(cls)
        if built is not None:
            facts.builds_reference = Sourced(True, at(built), f"{name}.__init__ builds a reference model when "
                                             "given none (as TRL's DPOTrainer)")
        elif paired_base is not None and paired_base.rsplit(".", 1)[-1] in _REFERENCE_BASES:
            facts.builds_reference = Sourced(True, at(cls.name), f"{name} extends {paired_base}, which builds a "
                                             "reference model when given none")
    elif frameworks:
        overridden = [m for m in _STEP_METHODS if m in methods]
        if overridden:
            facts.lower_bound = Sourced(f"`{name}.{overridden[0]}`", at(methods[overridden[0]].name),
                                        f"{name} overrides {overridden[0]}")
    engine = next((c for c in helper.nodes_in_order(cst.Call) if _inside(helper, c, cls)
                   and values.callee_names(c) & DEEPSPEED_INITIALIZE), None)
    if engine is not None and not frameworks:
        # the class builds its own DeepSpeed engine: the run is that engine's, whatever
        # TrainingArguments-style class carries the script's options
        overrides["framework"] = Sourced("deepspeed", at(engine.func), f"{name}: deepspeed.initialize(...)")
    _gradient_cache(parsed, values, cls, facts)
    parallel = olmo_core_parallel.data_parallel_type(parsed.text, helper, values, cls, _inside)
    if parallel is not None:
        call, kind = parallel
        note = f"{name}: OLMo-core TransformerDataParallelConfig(name=DataParallelType.{kind})"
        facts.parallel_library = Sourced(olmo_core_parallel.LIBRARY, at(call.func), note)
        if kind in olmo_core_parallel.FORMS:
            facts.fsdp = Sourced(olmo_core_parallel.FORMS[kind], at(call.func), note)
    if not (facts.stated() or overrides):
        return None
    return Imported(facts, overrides=overrides)


def _gradient_cache(parsed: ParsedDocument, values: Values, cls: cst.ClassDef, facts: RunFacts) -> None:
    """A gradient cache the class builds (VLM2Vec's ``GradCache(chunk_sizes=[self.args.gc_q_chunk_size,
    self.args.gc_p_chunk_size])`` in its trainer's ``__init__``): its chunk, bound to the caller's
    options it reads (``memlint.facts.script_gradient_cache``)."""
    helper = parsed.python
    assert helper is not None
    if "GradCache" not in parsed.text:
        return
    ctx = ScriptFacts(parsed, values)
    for call in helper.nodes_in_order(cst.Call):
        if _inside(helper, call, cls):
            script_gradient_cache.recognise(ctx, call, values.callee_names(call), None)
    if ctx.facts.gradient_cache_chunk is not None:
        facts.gradient_cache_chunk = ctx.facts.gradient_cache_chunk
    for option, bound in ctx.facts.cli_bindings.items():
        facts.cli_bindings[option] = facts.cli_bindings.get(option, ()) + bound


def _inside(source: Any, node: cst.CSTNode, ancestor: cst.CSTNode) -> bool:
    current = source.parent(node)
    while current is not None:
        if current is ancestor:
            return True
        current = source.parent(current)
    return False

