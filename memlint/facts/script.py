"""The training-script extractor: a Python file's facts about the run it defines.

The file is read with libcst, never imported or run. A cheap text check skips files that import
none of the training libraries before any libcst metadata is built. Every call is then matched
by qualified name against the recognisers (model loading, trainers and their arguments,
hand-written loops, distributed engines), which report what each call states; values are read
statically through ``python_values`` (constants, argparse defaults, dataclass fields, helper
parameters). A file yields a run only when something in it trains (a trainer, an optimizer, a
``backward()``): an inference script that loads a model is not a training run. Nor is a test
(``tests/test_peft.py`` trains nothing anyone runs for real), nor a library module whose training
lies only in the methods of classes it defines and never uses (LLaVA's ``llava_trainer.py``, a
``Trainer`` subclass whose ``create_optimizer`` builds an optimizer): the script that builds the
class is the run.
"""

from __future__ import annotations

import re
from typing import Callable

import libcst as cst

from memlint.documents.parsed import ParsedDocument
from memlint.facts import (
    script_argument_files,
    script_distributed,
    script_freezing,
    script_generation,
    script_gradient_cache,
    script_loops,
    script_models,
    script_trainers,
)
from memlint.facts.extract import extractor
from memlint.facts.plan import RunFacts
from memlint.facts.script_facts import RANK_CONFIG, ScriptFacts
from memlint.model.vocabulary import OPTIMIZER_CLASSES
from memlint.python.conditions import Guard, early_exits, guards
from memlint.python.library import DEEPSPEED_INITIALIZE, trainer_framework
from memlint.python.prefilter import Called, Pattern
from memlint.python.values import Found, Mapping, Values

TRAINING_PACKAGES = (
    "torch", "transformers", "deepspeed", "accelerate", "peft", "trl", "bitsandbytes", "lightning",
    "pytorch_lightning", "liger_kernel",
)
_IMPORTS_TRAINING = re.compile(
    r"^[ \t]*(?:import|from)[ \t][^\n]*?\b(?:" + "|".join(TRAINING_PACKAGES) + r")\b", re.MULTILINE
)

# Every way a file can train names one of these somewhere, if only in an import line: a trainer,
# a training config, an engine, an optimizer, a backward pass. A model definition or a data
# utility that imports torch names none of them and costs no libcst metadata.
_TRAINS = re.compile(r"Trainer|TrainingArguments|\btrl\b|Fabric|Accelerator|deepspeed|backward|optim|Adam|\bSGD\b|"
                     r"Adafactor|\bLion")

# What ``memlint check`` asks of the names a module's code uses (memlint.python.prefilter): what
# can make it train (``ScriptFacts.training``), each as the recognisers know it: a trainer class
# (``trainer_framework``: a last name ending in ``Trainer``, Lightning's ``Fabric``), a training
# config (``config_framework``: ``...TrainingArguments``, TRL's configs), ``deepspeed.initialize``,
# a ``backward()``/``manual_backward()`` method call (an ``Accelerator`` trains only beside one),
# or an optimizer class whose states the estimator models (``optimizer_class``: the last name of
# an OPTIMIZER_CLASSES key, or transformers' AdamW) -- not a module that only passes an
# ``optimizer`` around, nor ``TrainerState``, ``AcceleratorState`` or DeepSpeed's
# ``backward_timers``, nor DeepSpeed's own modules, which all import deepspeed. The last name of
# a qualified name is written whole, in the call or in the import that binds it.
NEEDS: list[Pattern] = [
    "|".join([
        # a line's start first: a regex that can match anywhere is tried at every position of the names
        r"^.*(?:Trainer|TrainingArguments|Fabric)$|^initialize$|^trl$",
        *sorted({f"^{re.escape(name.rsplit('.', 1)[-1])}$" for name in [*OPTIMIZER_CLASSES, "transformers.AdamW"]}),
    ]),
    # called (``script_loops``' ``_BACKWARD_METHODS``): an autograd Function's ``def backward`` is none
    Called(r"^(?:manual_)?backward$"),
]

RECOGNISERS = (script_trainers, script_models, script_loops, script_distributed, script_argument_files,
               script_gradient_cache, script_generation)


def imports_training_library(text: str) -> bool:
    """The prefilter: could the text train a model (regexes, no parsing)?"""
    return _IMPORTS_TRAINING.search(text) is not None and _TRAINS.search(text) is not None


@extractor("python", needs=NEEDS)
def extract_script(parsed: ParsedDocument) -> list[RunFacts]:
    return _script_runs(parsed, trains_elsewhere=False)


def handed_to_project_trainer(parsed: ParsedDocument) -> list[RunFacts]:
    """What a script states that trains only through a class of its own project: Qwen2-VL-Finetune's
    ``train_sft.py`` loads the model and parses its options, then hands both to ``QwenSFTTrainer``
    (``src/trainer/sft_trainer.py``: ``class QwenSFTTrainer(Trainer)``). Read alone, nothing in the
    script trains, so ``extract_script`` finds no run; the project, which reads that class, asks
    for these facts instead (``memlint.project.runs``). Extracted once per version of the module."""
    if parsed.handed_facts is None:
        parsed.handed_facts = _script_runs(parsed, trains_elsewhere=True)
    return list(parsed.handed_facts)


def _script_runs(parsed: ParsedDocument, trains_elsewhere: bool) -> list[RunFacts]:
    source = parsed.python
    if source is None or not imports_training_library(parsed.text) or is_test_file(parsed.path):
        return []
    values = Values(source)
    calls: list[cst.Call] = source.nodes_in_order(cst.Call)
    assignments: list[cst.Assign] = source.nodes_of(cst.Assign)
    named = [(call, values.callee_names(call)) for call in calls]
    owners: dict[cst.CSTNode, cst.CSTNode | None] = {}  # asked only of files with several runs

    def owner(node: cst.CSTNode) -> cst.CSTNode | None:
        if node not in owners:
            owners[node] = _owner(values, node)
        return owners[node]

    runs = []
    for excluded in _run_scopes(named, owner):
        ctx = ScriptFacts(parsed, values)
        for call, names in named:
            if excluded and owner(call) in excluded:
                continue
            method = call.func.attr.value if type(call.func) is cst.Attribute else None
            for recogniser in RECOGNISERS:
                recogniser.recognise(ctx, call, names, method)
        for assignment in assignments:
            if not excluded or owner(assignment) not in excluded:
                _attribute_assignment(ctx, assignment)
        script_loops.finish(ctx)
        script_freezing.recognise(ctx, named, lambda node: not excluded or owner(node) not in excluded)
        trains = ctx.training and not _only_in_unused_classes(values, ctx.training_at) \
            and not only_evaluates(parsed.text)
        if trains or (trains_elsewhere and not ctx.training):
            if trains:
                _training_mode(ctx, values)
            ctx.facts.option_constants = {option: source for option, source in values.options.imported.items()
                                          if option in ctx.facts.cli_bindings}
            runs.append(ctx.facts)
    if runs and not trains_elsewhere:
        from memlint.facts.launchers import documented_launches

        runs.extend(documented_launches(parsed))
    return runs


def _training_mode(ctx: ScriptFacts, values: Values) -> None:
    """A script whose training sits under one option's test (``if args.mode == "train":``,
    ``if not args.eval_only:``) trains only when the command line keeps that test true: the
    option is bound so that a launch choosing another mode (``--mode eval``) states that the
    run does not train. Every place that trains must be under the same test, or after the same
    early exit (``if args.debug_tokenization: ...; return``)."""
    common: dict[tuple, Guard] | None = None
    for node in ctx.training_at:
        found = {(g.options, g.equals, g.negated): g for g in guards(values, node) + early_exits(values, node)
                 if len(g.options) == 1 and g.active is not False and g.formula is None}
        common = found if common is None else {k: g for k, g in common.items() if k in found}
        if not common:
            return
    for (options, equals, negated), _ in (common or {}).items():
        if equals is not None:  # trains when the option is (or is not) ``equals``
            ctx.bind(options, f"{'is' if negated else 'isnot'}={equals}:trains=false")
        else:  # trains when the option is on (or off)
            ctx.bind(options, f"{'if' if negated else 'ifnot'}:trains=false")


# a trainer asked only for its metrics: ``trainer.evaluate()`` / ``trainer.predict(...)``, and
# nothing in the module that updates weights (a ``train()``/``fit()`` call, a backward pass, a step)
_EVALUATES = re.compile(r"\.(?:evaluate|predict)\(")
_UPDATES = re.compile(r"\.(?:train|fit|backward|step)\(|\btrain\(|\bTrainer\.train\b|training_step")


def only_evaluates(text: str) -> bool:
    """Does the module build a trainer only to evaluate it (pbressollette/mistral-finetuning's
    ``scripts/evaluate.py``: ``trainer = Trainer(model=..., args=training_args, eval_dataset=...)``
    then ``trainer.evaluate()``)? Then it trains nothing, however its arguments are named."""
    return _EVALUATES.search(text) is not None and _UPDATES.search(text) is None


_TEST_NAME = re.compile(r"(^test_.*|.*_test|^conftest)\.py$")


def is_test_file(path: str) -> bool:
    """A pytest/unittest module (``test_*.py``, ``*_test.py``, ``conftest.py``) or a file in a
    ``tests`` folder (or one level below it): what it trains is checked by an assertion, not run
    for real. Only the nearest folders count: the path may run through folders above the project."""
    parts = path.replace("\\", "/").split("/")
    return bool(_TEST_NAME.match(parts[-1])) or "tests" in parts[-3:-1]


def _only_in_unused_classes(values: Values, training_at: list[cst.CSTNode]) -> bool:
    """Is every sign of training inside the methods of classes the module defines and never
    names outside them (a ``Trainer`` subclass's ``create_optimizer``)? Then the module is a
    library: another file builds the class and is the run."""
    classes: dict[str, cst.ClassDef] = {}
    parents = values.source.parents

    def outermost_class(node: cst.CSTNode) -> cst.ClassDef | None:
        current, outer = parents.get(node), None
        while current is not None and type(current) is not cst.Module:
            if type(current) is cst.ClassDef:
                outer = current
            current = parents.get(current)
        return outer

    for node in training_at:
        outer = outermost_class(node)
        if outer is None:
            return False
        classes[outer.name.value] = outer
    if not classes:
        return False
    for name in values.source.nodes_of(cst.Name):
        if name.value in classes and outermost_class(name) is not classes[name.value] and not (
                type(parents.get(name)) is cst.ClassDef):
            # the module uses its own class (``LLaVATrainer(...)``, ``ray.remote(PolicyTrainer)``):
            # a script that defines its trainer
            return False
    return True


def definition_facts(parsed: ParsedDocument, name: str, passed: dict[tuple[str, str], Found],
                     caller_option: Callable[[str], Found | None] | None = None,
                     project_bases: Callable[[frozenset[str]], set[str]] | None = None) -> RunFacts | None:
    """The facts the top-level function ``name`` of a helper module states when another module
    calls it (``memlint.facts.imported_facts``): the recognisers run over its body and over the
    bodies of the module's top-level functions it calls (one level), with its parameters bound
    to what that caller passes (``passed``; ``caller_option``: the caller's value of an option
    its options objects carry; ``project_bases``: the library names a call of a class defined in
    another project module also makes, through its bases). None when it states and binds nothing."""
    source = parsed.python
    if source is None:
        return None
    values = Values(source)
    values.bind_callers(passed, caller_option)
    functions = {d.name.value: d for d in source.module.body if isinstance(d, cst.FunctionDef)}
    owner, _, wanted = name.rpartition(".")
    if owner:  # a class method (``RepLLaMA.build``) of a class of the module
        cls = next((d for d in source.module.body if isinstance(d, cst.ClassDef) and d.name.value == owner), None)
        helper = next((d for d in cls.body.body if isinstance(d, cst.FunctionDef) and d.name.value == wanted),
                      None) if cls is not None else None
    else:
        helper = functions.get(name)
    if helper is None:
        return None
    called = {helper}

    def runs_in(node: cst.CSTNode) -> cst.CSTNode | None:
        """The definition that runs ``node``: the class method itself for its body, else the
        top-level function or class that holds it."""
        if owner:
            current = values.source.parents.get(node)
            while current is not None and type(current) is not cst.Module:
                if current is helper:
                    return helper
                current = values.source.parents.get(current)
        return _owner(values, node)

    for call in source.nodes_in_order(cst.Call):
        if runs_in(call) is helper and isinstance(call.func, cst.Name) and call.func.value in functions:
            called.add(functions[call.func.value])
    ctx = ScriptFacts(parsed, values)
    for call in source.nodes_in_order(cst.Call):
        if runs_in(call) not in called:
            continue
        names = values.callee_names(call)
        if project_bases is not None:
            names = names | project_bases(names)
        method = call.func.attr.value if type(call.func) is cst.Attribute else None
        for recogniser in RECOGNISERS:
            recogniser.recognise(ctx, call, names, method)
    for assignment in source.nodes_of(cst.Assign):
        if runs_in(assignment) in called:
            _attribute_assignment(ctx, assignment)
    script_loops.finish(ctx)
    facts = ctx.facts
    return facts if facts.stated() or facts.cli_bindings else None


def _owner(values: Values, node: cst.CSTNode) -> cst.CSTNode | None:
    """The top-level function or class ``node`` is in (None at module level)."""
    owner = None
    parents = values.source.parents
    current = parents.get(node)
    # type tests: libcst's classes are ABCs, whose ``isinstance`` is a Python-level call
    while current is not None and type(current) is not cst.Module:
        if type(current) in _DEFINITIONS:
            owner = current
        current = parents.get(current)
    return owner


_DEFINITIONS = (cst.FunctionDef, cst.ClassDef)


def _run_scopes(named: list[tuple[cst.Call, frozenset[str]]],
                owner_of: Callable[[cst.CSTNode], cst.CSTNode | None]) -> list[set]:
    """One run per top-level function that builds its own trainer (``def sft(): SFTTrainer(...)``,
    ``def dpo(): DPOTrainer(...)``): for each, the other such functions to leave out. A file
    with one trainer (or trainers only at module level, or in one function) is one run."""
    owners = []
    for call, names in named:
        if any(trainer_framework(n) for n in names) or names & DEEPSPEED_INITIALIZE:
            owner = owner_of(call)
            if owner is None:
                return [set()]
            if owner not in owners:
                owners.append(owner)
    if len(owners) < 2:
        return [set()]
    return [set(owners) - {owner} for owner in owners]


def _attribute_assignment(ctx: ScriptFacts, assignment: cst.Assign) -> None:
    """``training_args.model_init_kwargs = dict(...)`` (TRL), ``tokenizer.model_max_length = 512``."""
    if len(assignment.targets) != 1 or not isinstance(assignment.targets[0].target, cst.Attribute):
        return
    attr = assignment.targets[0].target.attr.value
    if attr == "model_init_kwargs":
        found = ctx.values.evaluate(assignment.value)
        if found is not None and isinstance(found.value, Mapping):
            script_models.loading_arguments(ctx, dict(found.value.entries), assignment, RANK_CONFIG)
    elif attr == "model_max_length":
        script_loops._length_candidate(ctx, ctx.values.evaluate(assignment.value), assignment,
                                       "tokenizer.model_max_length = ...")
