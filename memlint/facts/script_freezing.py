"""A script that freezes the model it loads and trains what it builds on top of it.

Medusa's decoding heads, a classifier or a probe on a frozen encoder: the script loads a model,
turns its gradients off (``for p in model.base_model.parameters(): p.requires_grad = False``,
``model.requires_grad_(False)``), never turns any back on, and trains modules of its own that
take the frozen model's outputs. memlint's estimate is of the loaded model trained; here none of
its weights has a gradient or an optimizer state, and its activations are kept only where the
script's own modules need them, so a verdict from that estimate says nothing about the run. The
freeze is stated as the fact ``frozen_model``; ``resolve`` reports the run as not estimated unless
another fact already says what trains (adapters, a projector, the last blocks).

Only the model being trained counts (the one loader that is not a reference, a teacher or a
reward model), frozen whole or through the attribute that holds its transformer body
(``base_model``, ``model``, ``transformer``, ``backbone``); freezing a vision tower leaves the
language model training, and a script that turns any gradient back on (``p.requires_grad =
True``, LLaVA's projector) trains a part of the model, which other facts describe.

One such part no other fact describes: the parameters whose names match a selection the script
reads at run time (Spectrum's list of regexes from a YAML file, "unfreeze the layers named in
``--trainable``"): the model is frozen whole, then ``for name, p in model.named_parameters():
if any(re.match(r, name) for r in patterns): p.requires_grad = True``. What trains is a share
of the model memlint cannot read, so the run is stated ``partly_frozen`` (the selection, at the
unfreezing loop), and ``resolve`` reports it as not checked rather than as full fine-tuning
(unless the run names a Spectrum file, ``spectrum_config_path``, whose patterns it can match). A
selection of literals only (``"vision_tower" in name``, LLaVA-NeXT's tunable parts) names a
component other facts describe, and is left to them.
"""

from __future__ import annotations

from typing import Callable

import libcst as cst

from memlint.facts.script_facts import ScriptFacts
from memlint.facts.script_models import is_frozen_companion
from memlint.python.gradient_switches import assigned_gradient, sets_requires_grad
from memlint.python.library import is_model_loader
from memlint.python.references import Parameter
from memlint.python.syntax import dotted, is_false

# attributes that hold a model's whole transformer body (what stays to train is a head at most)
_BODY = ("base_model", "model", "transformer", "backbone")


def recognise(ctx: ScriptFacts, named: list[tuple[cst.Call, frozenset[str]]],
              in_run: Callable[[cst.CSTNode], bool]) -> None:
    """State ``frozen_model`` where the trained model's weights are all turned off (``named``:
    the script's calls; ``in_run``: whether a node belongs to this run). The loops and calls are
    gathered only for a script with one trained-model loader, the only one this reads."""
    if _trains_only_named_parts(ctx, in_run):
        return
    if ctx.model_loaders != 1:
        return
    loops = [loop for loop in ctx.python.nodes_of(cst.For) if in_run(loop)]
    calls = [call for call, _ in named if in_run(call)]
    if _partly_unfrozen(ctx, loops, calls):
        return
    if _turns_gradients_on(ctx, loops, calls):
        return
    for loop in loops:
        frozen = _frozen_by_loop(loop)
        if frozen is not None and _is_trained_model(ctx, frozen):
            _state(ctx, frozen, loop)
    for call in calls:
        if sets_requires_grad(call) is False and isinstance(call.func, cst.Attribute) \
                and isinstance(ctx.values.parent(call), cst.Expr) and _is_trained_model(ctx, call.func.value):
            _state(ctx, call.func.value, call)


# words that name a multimodal model's connector between its vision encoder and its language model
_PROJECTOR_WORDS = ("projector", "connector", "merger", "resampler", "aligner")
# words in the names of a language model's own parameters (a selection naming one trains part of it)
_LANGUAGE_MODEL_WORDS = ("layer", "block", "embed", "lm_head", "norm", "attn", "attention", "mlp", "proj", "lora",
                         "bias", "wte", "wpe", "head", "language_model", "llm", "decoder", "model.")


def _trains_only_named_parts(ctx: ScriptFacts, in_run: Callable[[cst.CSTNode], bool]) -> bool:
    """``for name, p in model.named_parameters(): if "multi_modal_projector" in name: ... else:
    p.requires_grad = False`` (Mantis's pre-training stage): every parameter but those a literal
    names is frozen. A projector's name makes the run a projector-only stage (``projector_only``,
    as LLaVA's ``--tune_mm_mlp_adapter``); another part no language-model parameter is named like
    (Mantis's ``vae_visual``) is a module the estimate does not price, on a frozen model
    (``frozen_model``). A literal naming the language model's own parameters (``"layers.31"``,
    ``"lm_head"``) trains part of it: left to the other facts."""
    for loop in ctx.python.nodes_of(cst.For):
        found = _all_but_literals_frozen(loop)
        if found is None or not in_run(loop):
            continue
        receiver, literals = found
        if not (dotted(receiver) in ("model", "self.model") or _is_trained_model(ctx, receiver)):
            continue
        lowered = [text.lower() for text in literals]
        named = ", ".join(f"`{text}`" for text in literals)
        if any(word in text for text in lowered for word in _PROJECTOR_WORDS):
            ctx.state("projector_only", True, loop, f"every parameter but {named} frozen", at=loop)
            return True
        if not any(word in text for text in lowered for word in _LANGUAGE_MODEL_WORDS):
            ctx.state("frozen_model", f"{ctx.python.code_of(receiver)} except {', '.join(literals)}", loop,
                      f"every parameter but {named} frozen", at=loop)
            return True
    return False


def _all_but_literals_frozen(loop: cst.For) -> tuple[cst.BaseExpression, list[str]] | None:
    """(X, the literals) for a loop over ``X.named_parameters()`` that turns off the gradient of
    every parameter whose name a test of literals does not match (its ``else``, or its body under
    ``not``), and of none that it matches."""
    header = _named_parameters_loop(loop)
    if header is None or not isinstance(loop.body, cst.IndentedBlock):
        return None
    model, name, param = header
    for statement in loop.body.body:
        if not isinstance(statement, cst.If) or not _mentions(statement.test, name) \
                or _reads_more_than(statement.test, name):
            continue
        test, negated = statement.test, False
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            test, negated = test.expression, True
        elif isinstance(test, cst.Comparison) and len(test.comparisons) == 1 \
                and isinstance(test.comparisons[0].operator, cst.NotIn):
            negated = True
        matched: cst.BaseSuite | None = statement.body
        rest: cst.BaseSuite | None = statement.orelse.body if isinstance(statement.orelse, cst.Else) else None
        if negated:
            matched, rest = rest, matched
        if rest is None or not _turns_off(rest, param) or (matched is not None and _turns_off(matched, param)):
            continue
        literals = [node.evaluated_value for node in _strings(statement.test)
                    if isinstance(node.evaluated_value, str) and node.evaluated_value]
        if literals:
            return model, literals
    return None


def _named_parameters_loop(loop: cst.For) -> tuple[cst.BaseExpression, str, str] | None:
    """``for name, p in X.named_parameters():``: (X, the name's and the parameter's names). The
    iterator may be listed first (llm2vec's ``list(model.named_parameters())``)."""
    source = loop.iter
    if isinstance(source, cst.Call) and isinstance(source.func, cst.Name) and source.func.value in ("list", "tuple") \
            and len(source.args) == 1:
        source = source.args[0].value
    if not (isinstance(source, cst.Call) and isinstance(source.func, cst.Attribute)
            and source.func.attr.value == "named_parameters"):
        return None
    target = loop.target
    if not (isinstance(target, cst.Tuple) and len(target.elements) == 2
            and all(isinstance(e.value, cst.Name) for e in target.elements)):
        return None
    name, param = (cst.ensure_type(e.value, cst.Name).value for e in target.elements)
    return source.func.value, name, param


def _turns_off(block: cst.BaseSuite, param: str) -> bool:
    """Does the block set ``param.requires_grad = False``: an indented body, or one written on the
    test's own line (xRAG's ``if 'projector' not in n:p.requires_grad = False``)."""
    if isinstance(block, cst.SimpleStatementSuite):
        lines: list[cst.SimpleStatementLine | cst.SimpleStatementSuite] = [block]
    elif isinstance(block, cst.IndentedBlock):
        lines = [line for line in block.body if isinstance(line, cst.SimpleStatementLine)]
    else:
        return False
    return any((value := assigned_gradient(small, param)) is not None and is_false(value)
               for line in lines for small in line.body)


def _strings(expr: cst.BaseExpression) -> list[cst.SimpleString]:
    found: list[cst.SimpleString] = []

    class _Strings(cst.CSTVisitor):
        def visit_SimpleString(self, node: cst.SimpleString) -> None:
            found.append(node)

    expr.visit(_Strings())
    return found


def _state(ctx: ScriptFacts, frozen: cst.BaseExpression, at: cst.CSTNode) -> None:
    ctx.state("frozen_model", ctx.python.code_of(frozen), at, "its gradients turned off", at=at)


def _frozen_by_loop(loop: cst.For) -> cst.BaseExpression | None:
    """``for p in X.parameters(): p.requires_grad = False`` (or ``for n, p in
    X.named_parameters():``), the assignment its whole body: the ``X`` it freezes."""
    source = loop.iter
    if not (isinstance(source, cst.Call) and isinstance(source.func, cst.Attribute)
            and source.func.attr.value in ("parameters", "named_parameters")):
        return None
    target: cst.BaseExpression = loop.target
    if isinstance(target, cst.Tuple) and len(target.elements) == 2:
        target = target.elements[1].value
    if not isinstance(target, cst.Name) or not isinstance(loop.body, cst.IndentedBlock):
        return None
    body = loop.body.body
    if len(body) != 1 or not isinstance(body[0], cst.SimpleStatementLine) or len(body[0].body) != 1:
        return None
    statement = body[0].body[0]
    if not (isinstance(statement, cst.Assign) and len(statement.targets) == 1 and is_false(statement.value)):
        return None
    assigned = statement.targets[0].target
    if isinstance(assigned, cst.Attribute) and assigned.attr.value == "requires_grad" \
            and isinstance(assigned.value, cst.Name) and assigned.value.value == target.value:
        return source.func.value
    return None


def _turns_gradients_on(ctx: ScriptFacts, loops: list[cst.For], calls: list[cst.Call]) -> bool:
    """Does the script turn any gradient back on (``p.requires_grad = True``, ``requires_grad_()``)?"""
    if any(sets_requires_grad(call) for call in calls):
        return True
    for assign in ctx.python.nodes_of(cst.Assign):
        target = assign.targets[0].target if len(assign.targets) == 1 else None
        if isinstance(target, cst.Attribute) and target.attr.value == "requires_grad" and not is_false(assign.value):
            return True
    return False


def _is_trained_model(ctx: ScriptFacts, expr: cst.BaseExpression, depth: int = 0) -> bool:
    """Is ``expr`` the loaded model being trained, or the attribute holding its body? A helper's
    parameter (``def freeze_for_spectrum(model, path):``) is, when a call of the helper passes it."""
    text = dotted(expr)
    if text is None:
        return False
    root, _, attr = text.partition(".")
    if attr and attr not in _BODY:
        return False
    node = expr.value if attr and isinstance(expr, cst.Attribute) else expr
    loaded = ctx.values.definition(node)
    if isinstance(loaded, cst.Name) and depth < 2:
        passed = _passed_for(ctx, loaded)
        if passed:
            return any(_is_trained_model(ctx, argument, depth + 1) for argument in passed)
        # what a helper is passed may be reassigned (``model = setup_for_spectrum(model, path)``)
        return depth > 0 and ctx.values.could_be(loaded, lambda value: _loads_trained_model(ctx, value))
    return _loads_trained_model(ctx, loaded)


def _loads_trained_model(ctx: ScriptFacts, value: cst.BaseExpression) -> bool:
    return isinstance(value, cst.Call) and any(is_model_loader(n) for n in ctx.values.callee_names(value)) \
        and not is_frozen_companion(ctx.values, value)


def _passed_for(ctx: ScriptFacts, name: cst.Name) -> list[cst.BaseExpression]:
    """What the calls of a function pass for its parameter ``name`` (nothing for any other name)."""
    values = ctx.values
    definitions = values.definitions(name)
    if len(definitions) != 1 or not isinstance(definitions[0], Parameter) \
            or not isinstance(definitions[0].function, cst.FunctionDef) or values.is_method(definitions[0].function):
        return []
    function, param = definitions[0].function, definitions[0].param
    passed = (values.argument_for(function, param, call) for call in values.call_sites(function))
    return [argument for argument in passed if isinstance(argument, cst.BaseExpression)]


def _partly_unfrozen(ctx: ScriptFacts, loops: list[cst.For], calls: list[cst.Call]) -> bool:
    """State ``partly_frozen`` where the trained model is frozen whole and a loop over its named
    parameters turns gradients back on for the names a selection memlint cannot read matches."""
    for loop in loops:
        found = _name_selection(loop)
        if found is None or not _is_trained_model(ctx, found[0]):
            continue
        model, selection, whole = found
        if whole or _frozen_whole(ctx, loops, calls):
            ctx.state("partly_frozen", ctx.python.code_of(selection), loop,
                      f"only the parameters of `{ctx.python.code_of(model)}` whose names match it train", at=loop)
            return True
    return False


def _frozen_whole(ctx: ScriptFacts, loops: list[cst.For], calls: list[cst.Call]) -> bool:
    """Does the run turn off every gradient of the trained model (a loop or ``requires_grad_(False)``)?"""
    if any((frozen := _frozen_by_loop(loop)) is not None and _is_trained_model(ctx, frozen) for loop in loops):
        return True
    return any(sets_requires_grad(call) is False and isinstance(call.func, cst.Attribute)
               and _is_trained_model(ctx, call.func.value) for call in calls)


def _name_selection(loop: cst.For) -> tuple[cst.BaseExpression, cst.BaseExpression, bool] | None:
    """``for name, p in X.named_parameters():`` turning ``p``'s gradient on under a test of
    ``name`` that reads something besides literals (``p.requires_grad = True`` in ``if
    any(re.match(r, name) for r in patterns):``, or ``p.requires_grad = name in trainable``):
    (X, the selection, whether the loop itself turns the others off)."""
    header = _named_parameters_loop(loop)
    if header is None:
        return None
    model, name, param = header
    # Axolotl's freeze_layers_except: ``param.requires_grad = False`` first, then the test
    body = loop.body.body if isinstance(loop.body, cst.IndentedBlock) else ()
    off_first = any(isinstance(line, cst.SimpleStatementLine) and any(
        (value := assigned_gradient(small, param)) is not None and is_false(value) for small in line.body)
        for line in body)
    for selection, whole in _turned_on(loop.body, param, name, ()):
        if _reads_more_than(selection, name):
            return model, selection, whole or off_first
    return None


def _turned_on(block: cst.BaseSuite, param: str, name: str, tests: tuple[cst.BaseExpression, ...]):
    """The selections under which ``block`` turns ``param``'s gradient on: the innermost test of
    ``name`` around ``param.requires_grad = True`` / ``param.requires_grad_()``, or the assigned
    expression itself when it tests ``name``; each with whether the same loop turns the rest off."""
    if not isinstance(block, cst.IndentedBlock):
        return
    for statement in block.body:
        if isinstance(statement, cst.If):
            inner = (*tests, statement.test)
            yield from _turned_on(statement.body, param, name, inner)
            if statement.orelse is not None:
                branch = statement.orelse
                if isinstance(branch, cst.If):
                    yield from _turned_on(cst.IndentedBlock(body=[branch]), param, name, inner)
                else:
                    yield from _turned_on(branch.body, param, name, inner)
        elif isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                value = assigned_gradient(small, param)
                if value is None:
                    continue
                if not isinstance(value, cst.Name) and _mentions(value, name):
                    yield value, True  # ``p.requires_grad = name in trainable``
                elif not is_false(value):
                    named = [test for test in tests if _mentions(test, name)]
                    if named:
                        yield named[-1], False
        elif isinstance(statement, (cst.With, cst.Try, cst.For, cst.While)):
            yield from _turned_on(statement.body, param, name, tests)


class _Names(cst.CSTVisitor):
    """The names an expression reads, less callees (``any``, ``re.match``) and names its own
    comprehensions bind."""

    def __init__(self) -> None:
        self.read: set[str] = set()
        self.bound: set[str] = set()

    def visit_Call(self, node: cst.Call) -> bool:
        if dotted(node.func) is None:
            node.func.visit(self)
        for argument in node.args:
            argument.visit(self)
        return False

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self.bound.update(n.value for n in _targets(node.target))

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)
        return False

    def visit_Name(self, node: cst.Name) -> None:
        self.read.add(node.value)


def _targets(target: cst.BaseExpression) -> list[cst.Name]:
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for element in target.elements for n in _targets(element.value)]
    return []


def _read_names(expr: cst.BaseExpression) -> set[str]:
    names = _Names()
    expr.visit(names)
    return names.read - names.bound


def _mentions(expr: cst.BaseExpression, name: str) -> bool:
    return name in _read_names(expr)


def _reads_more_than(selection: cst.BaseExpression, name: str) -> bool:
    """Does a test of ``name`` read a value besides literals (a list, a file's lines, an option)?"""
    read = _read_names(selection)
    return name in read and bool(read - {name, "True", "False", "None"})
