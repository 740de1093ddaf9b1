"""Training loops as ordered events.

A loop's body becomes the list of calls it makes, in the order Python makes them, each with
the ``if`` guards around it (``if (step + 1) % accum == 0:`` and the ``if step % k: continue``
shape), the loops inside the analysed loop that enclose it, and whether it sits in an
``except`` handler. Calls of the module's own helper functions (``train_step(...)``,
``self.evaluate()``) are inlined a few levels deep, so a loop that delegates its backward
to a helper still reads as a training loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst
from libcst.helpers import get_full_name_for_node

from memlint.python.index import ModuleIndex
from memlint.python.limits import LOOP_HELPER_DEPTH
from memlint.python.syntax import (
    block_statements,
    calls_in_evaluation_order,
    ends_with_continue,
    integer_value,
    iter_nodes,
    method_name,
    modulo_divisors,
    positional,
)
from memlint.python.training import Backward, Step, backward_of, is_optimizer_object, step_of, zero_grad_target

Loop = cst.For | cst.While


@dataclass(frozen=True)
class Guard:
    """An ``if`` that decides whether an event runs."""

    node: cst.If
    branch: str  # "body", "orelse", or "after-continue" (``if cond: continue`` earlier in the block)
    divisors: tuple[cst.BaseExpression, ...]  # right operands of ``%`` in its test

    @property
    def key(self) -> tuple[int, str]:
        return (id(self.node), self.branch)


@dataclass(frozen=True)
class Event:
    node: cst.CSTNode  # a Call, or an Assign that zeroes gradients (``p.grad = None``)
    guards: tuple[Guard, ...]
    loops: tuple[Loop, ...]  # loops inside the analysed one that enclose the event
    site: cst.CSTNode  # the call in the analysed body through which the event is reached
    in_except: bool
    depth: int  # 0 when written in the analysed body, else how many helpers deep
    chain: tuple[cst.Call, ...] = ()  # the helper calls that lead here, outermost first

    @property
    def call(self) -> cst.Call | None:
        return self.node if isinstance(self.node, cst.Call) else None

    @property
    def modulo_guards(self) -> tuple[Guard, ...]:
        return tuple(g for g in self.guards if g.divisors)

    def guard_keys(self) -> set[tuple[int, str]]:
        return {g.key for g in self.guards}


class _Walker:
    def __init__(self, index: ModuleIndex) -> None:
        self.index = index
        self.events: list[Event] = []
        self.chain: list[cst.Call] = []  # helper calls being inlined

    def block(self, statements, guards, loops, site, in_except, depth, stack) -> None:
        pending: list[Guard] = []
        for statement in statements:
            current = guards + tuple(pending)
            self.statement(statement, current, loops, site, in_except, depth, stack)
            if isinstance(statement, cst.If) and statement.orelse is None and ends_with_continue(statement.body):
                pending.append(Guard(statement, "after-continue", self.divisors(statement.test)))

    def statement(self, node, guards, loops, site, in_except, depth, stack) -> None:
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                self.expression(small, guards, loops, site, in_except, depth, stack)
        elif isinstance(node, cst.If):
            self.expression(node.test, guards, loops, site, in_except, depth, stack)
            divisors = self.divisors(node.test)
            self.block(
                block_statements(node.body),
                guards + (Guard(node, "body", divisors),),
                loops,
                site,
                in_except,
                depth,
                stack,
            )
            other = guards + (Guard(node, "orelse", divisors),)
            if isinstance(node.orelse, cst.Else):
                self.block(block_statements(node.orelse.body), other, loops, site, in_except, depth, stack)
            elif isinstance(node.orelse, cst.If):
                self.statement(node.orelse, other, loops, site, in_except, depth, stack)
        elif isinstance(node, cst.For):
            self.expression(node.iter, guards, loops, site, in_except, depth, stack)
            self.block(block_statements(node.body), guards, loops + (node,), site, in_except, depth, stack)
            if node.orelse is not None:
                self.block(block_statements(node.orelse.body), guards, loops, site, in_except, depth, stack)
        elif isinstance(node, cst.While):
            self.expression(node.test, guards, loops + (node,), site, in_except, depth, stack)
            self.block(block_statements(node.body), guards, loops + (node,), site, in_except, depth, stack)
        elif isinstance(node, cst.With):
            for item in node.items:
                self.expression(item.item, guards, loops, site, in_except, depth, stack)
            self.block(block_statements(node.body), guards, loops, site, in_except, depth, stack)
        elif isinstance(node, (cst.Try, cst.TryStar)):
            self.block(block_statements(node.body), guards, loops, site, in_except, depth, stack)
            for handler in node.handlers:
                self.block(block_statements(handler.body), guards, loops, site, True, depth, stack)
            if node.orelse is not None:
                self.block(block_statements(node.orelse.body), guards, loops, site, in_except, depth, stack)
            if node.finalbody is not None:
                self.block(block_statements(node.finalbody.body), guards, loops, site, in_except, depth, stack)
        elif isinstance(node, cst.Match):
            self.expression(node.subject, guards, loops, site, in_except, depth, stack)
            for case in node.cases:
                self.block(block_statements(case.body), guards, loops, site, in_except, depth, stack)
        elif isinstance(node, (cst.FunctionDef, cst.ClassDef)):
            return  # defined here, run elsewhere
        elif isinstance(node, cst.BaseSmallStatement):
            self.expression(node, guards, loops, site, in_except, depth, stack)

    def expression(self, node, guards, loops, site, in_except, depth, stack) -> None:
        # once per node, as ``divisors``: a helper's statements are walked wherever it runs
        calls = self.index.once(("calls in order", id(node)), lambda: calls_in_evaluation_order(node))
        for call in calls:
            here = site if site is not None else call
            if depth < LOOP_HELPER_DEPTH:
                for helper in self._helpers_run_by(call):
                    if helper not in stack:
                        self.chain.append(call)
                        body = block_statements(helper.body)
                        self.block(body, guards, loops, here, in_except, depth + 1, stack + (helper,))
                        self.chain.pop()
            self.events.append(Event(call, guards, loops, here, in_except, depth, tuple(self.chain)))
        if isinstance(node, cst.Assign) and zero_grad_target(self.index, node):
            here = site if site is not None else node
            self.events.append(Event(node, guards, loops, here, in_except, depth, tuple(self.chain)))

    def _helpers_run_by(self, call: cst.Call) -> list[cst.FunctionDef]:
        out = []
        helper = self.index.helper_for(call)
        if helper is not None:
            out.append(helper)
        for arg in call.args:  # optimizer.step(closure): the closure runs inside the step
            if isinstance(arg.value, cst.Name) and method_name(call) == "step":
                out.extend(self.index.functions.get(arg.value.value, [])[:1])
        return out

    def divisors(self, test: cst.BaseExpression) -> tuple[cst.BaseExpression, ...]:
        # once per test: helpers are inlined into every loop and flow that runs them, so the
        # same ``if`` is met many times (trainer.py: ~1,400 times for ~500 tests per lint)
        return self.index.once(("divisors", id(test)), lambda: self._divisors(test))

    def _divisors(self, test: cst.BaseExpression) -> tuple[cst.BaseExpression, ...]:
        found = list(modulo_divisors(test))
        for node in iter_nodes(test):  # is_update_step = (step + 1) % accum == 0; if is_update_step:
            if isinstance(node, cst.Name):
                for definition in self.index.reaching(node.value, test):
                    if definition.value is not None and definition.augmented is None:
                        found.extend(modulo_divisors(definition.value))
        return tuple(found)


def body_events(index: ModuleIndex, loop: Loop) -> list[Event]:
    """The events of one pass through a loop's body (and, for ``while``, its test)."""
    walker = _Walker(index)
    if isinstance(loop, cst.While):
        walker.expression(loop.test, (), (), None, False, 0, ())
    walker.block(block_statements(loop.body), (), (), None, False, 0, ())
    return walker.events


def flow_events(index: ModuleIndex, flow: cst.Module | cst.FunctionDef) -> list[Event]:
    """The events of a function body (or the module's top level), helpers inlined."""
    return index.once(f"flow_events:{id(flow)}", lambda: _flow_events(index, flow))


def _flow_events(index: ModuleIndex, flow: cst.Module | cst.FunctionDef) -> list[Event]:
    walker = _Walker(index)
    statements = list(flow.body) if isinstance(flow, cst.Module) else block_statements(flow.body)
    walker.block(statements, (), (), None, False, 0, (flow,) if isinstance(flow, cst.FunctionDef) else ())
    return walker.events


# ---------------------------------------------------------------------- training loops


@dataclass
class TrainingLoop:
    """A loop that runs ``backward()``; ``steps`` are the optimizer steps it makes."""

    loop: Loop
    events: list[Event]
    backwards: list[tuple[Event, Backward]] = field(default_factory=list)
    steps: list[tuple[Event, Step]] = field(default_factory=list)

    @property
    def is_step_loop(self) -> bool:
        return bool(self.backwards) and bool(self.steps)


def training_loops(index: ModuleIndex) -> list[TrainingLoop]:
    """Every loop of the module (in any function) whose body runs a ``backward()``."""
    return index.once("training_loops", lambda: _training_loops(index))


def _training_loops(index: ModuleIndex) -> list[TrainingLoop]:
    out = []
    could_train = _loops_that_could_train(index)
    for node in index.nodes_of(cst.For, cst.While):
        if id(node) not in could_train:
            continue
        events = body_events(index, node)
        found = TrainingLoop(node, events)
        for event in events:
            if event.call is None:
                continue
            backward = backward_of(index, event.call)
            if backward is not None and not _without_autograd(index, event):
                found.backwards.append((event, backward))
            step = step_of(index, event.call)
            if step is not None:
                found.steps.append((event, step))
        if found.backwards:
            out.append(found)
    return out


def _without_autograd(index: ModuleIndex, event: Event) -> bool:
    """Is the backward reached through a helper called under ``torch.no_grad()`` (verl's
    ``validation_step``: ``with torch.no_grad(): self._compute_loss_and_backward(batch,
    do_backward=False)``)? Autograd is off there, so no backward can run: it is evaluation."""
    return any(index.under_no_grad(call) for call in event.chain)


def _loops_that_could_train(index: ModuleIndex) -> set[int]:
    """ids of the loops whose events can hold a ``backward()``: those around a call that could
    be one, or around a call of a module function (a helper ``body_events`` inlines, or a
    ``step(closure)``) that holds one, through any number of helpers. A superset of the
    training loops, found from the calls alone: most loops of a large script (data
    preparation, evaluation) are not walked at all."""
    calls = index.calls
    backward_like = [c for c in calls if _could_be_backward(index, c)]  # asked once, not per round
    triggers = backward_like
    reaching: set[str] = set()
    while True:
        names = {a.name.value for t in triggers for a in index.ancestors(t) if type(a) is cst.FunctionDef}
        if names <= reaching:
            break
        reaching |= names
        triggers = [*backward_like, *(c for c in calls if _could_run_one_of(c, reaching))]
    return {id(a) for t in triggers for a in index.ancestors(t) if type(a) in (cst.For, cst.While)}


def _could_be_backward(index: ModuleIndex, call: cst.Call) -> bool:
    if method_name(call) == "backward":
        return True
    # ``backward(loss)``: only an import can make a plain name torch.autograd.backward
    return type(call.func) is cst.Name and _imports_a_backward(index) \
        and index.calls_named(call, "torch.autograd.backward")


def _imports_a_backward(index: ModuleIndex) -> bool:
    return index.once("imports a backward", lambda: any(
        (get_full_name_for_node(alias.name) or "").rsplit(".", 1)[-1] == "backward"
        for alias in index.nodes_of(cst.ImportAlias)))


def _could_run_one_of(call: cst.Call, functions: set[str]) -> bool:
    """Could ``call`` run one of these module functions (``helper(...)``, ``self.helper(...)``,
    ``optimizer.step(helper)``)?"""
    if method_name(call) in functions:
        return True
    return method_name(call) == "step" and any(
        type(arg.value) is cst.Name and arg.value.value in functions for arg in call.args)


# methods a framework calls between its own backward and optimizer step (Lightning's
# ``training_step`` with manual optimisation, a Trainer subclass's ``training_step``)
_FRAMEWORK_STEP_METHODS = frozenset({"training_step"})


def updating_backwards(index: ModuleIndex) -> set[int]:
    """ids of the ``backward()`` calls that train: those that run with a parameter update.

    What a training loop is, for every rule that judges training: a loop (or a function,
    helpers inlined) that runs ``backward()`` *and* updates the parameters — an optimizer's
    ``step()``, ``scaler.step(optimizer)``, an engine's or a Fabric's step — or a Trainer's
    ``training_step`` (the Trainer steps after it). A ``backward()`` alone computes gradients
    to compare or inspect them (a test of two attention implementations, a gradient-norm
    probe): nothing is trained, so nothing is judged as training. Nor is a test function
    (``def test_...``, pytest's and unittest's convention): a test that steps two models in
    lockstep and compares them checks code, it trains no model anyone keeps."""
    return index.once("updating_backwards", lambda: _updating_backwards(index))


def _updating_backwards(index: ModuleIndex) -> set[int]:
    found: set[int] = set()
    for loop in training_loops(index):
        if loop.steps and not in_test(index, loop.loop):
            found.update(id(b.call) for _, b in loop.backwards)
    candidates = [c for c in index.calls if _could_be_backward(index, c)]
    flows: list = []
    for call in candidates:
        for ancestor in index.ancestors(call):
            if type(ancestor) is cst.FunctionDef:
                if ancestor.name.value in _FRAMEWORK_STEP_METHODS and index.class_of(ancestor) is not None:
                    found.add(id(call))
                if not any(f is ancestor for f in flows):
                    flows.append(ancestor)
                break
        else:
            if not any(f is index.py.module for f in flows):
                flows.append(index.py.module)
    for flow in flows:
        if isinstance(flow, cst.FunctionDef) and in_test(index, flow):
            continue
        events = flow_events(index, flow)
        if any(e.call is not None and step_of(index, e.call) is not None for e in events):
            found.update(id(e.node) for e in events if e.call is not None and backward_of(index, e.call) is not None)
    return found


def in_test(index: ModuleIndex, node: cst.CSTNode) -> bool:
    """Is ``node`` in a test function (``def test_...``, or the function itself is one), or in a
    function only test functions use? InternEvo's ``exam_hybrid_zero_optim_with_ddp`` steps a
    ZeRO optimizer and a DDP one in lockstep; ``test_hybrid_zero_optim_with_ddp`` hands it to
    ``pool.map`` on eight processes."""
    nodes = [node, *index.ancestors(node)]
    functions = [n for n in nodes if type(n) is cst.FunctionDef]
    if any(n.name.value.startswith("test") for n in functions):
        return True
    return bool(functions) and functions[-1].name.value in _used_only_by_tests(index)


def _used_only_by_tests(index: ModuleIndex) -> frozenset[str]:
    """Names of the module's functions that are named (called, or handed on as ``pool.map(f, ...)``
    or ``mp.spawn(f)`` do) only inside test functions, at least once."""
    def compute() -> frozenset[str]:
        defined = {f.name.value for f in index.nodes_of(cst.FunctionDef) if not f.name.value.startswith("test")}
        if not defined:
            return frozenset()
        uses: dict[str, list[bool]] = {}
        for name in index.nodes_of(cst.Name):
            if name.value in defined and not isinstance(index.parent(name), cst.FunctionDef):
                uses.setdefault(name.value, []).append(any(
                    type(n) is cst.FunctionDef and n.name.value.startswith("test") for n in index.ancestors(name)))
        return frozenset(name for name, tested in uses.items() if tested and all(tested))
    return index.once("used_only_by_tests", compute)


def step_loops(index: ModuleIndex) -> list[TrainingLoop]:
    """The innermost loops that run both ``backward()`` and an optimizer step: one pass is
    one training (micro-)step. Loops of test functions are not training (see
    :func:`updating_backwards`)."""
    out = []
    for candidate in training_loops(index):
        if not candidate.is_step_loop or in_test(index, candidate.loop):
            continue
        inner_with_backward = {id(loop) for e, _ in candidate.backwards for loop in e.loops}
        inner_with_step = {id(loop) for e, _ in candidate.steps for loop in e.loops}
        if inner_with_backward & inner_with_step:
            continue  # a loop inside does both: that one is the step loop
        out.append(candidate)
    return out


@dataclass(frozen=True)
class Accumulation:
    """Gradient accumulation: the optimizer steps every ``divisor`` passes of the loop."""

    loop: TrainingLoop
    step: Event
    divisor: cst.BaseExpression
    guard: Guard | None  # the modulo guard of the step (None for the inner-range shape)
    inner: cst.For | None = None  # ``for micro_step in range(accum):`` holding the backward

    def accumulates(self, event: Event) -> bool:
        """Does ``event`` run on every micro-step, under no interval condition at all?"""
        if self.inner is not None:
            return any(loop is self.inner for loop in event.loops)
        return not event.modulo_guards

    def outside_step_guard(self, event: Event) -> bool:
        """Does ``event`` run apart from the step: not under the step's own condition? (A
        backward under ``if not is_update: with model.no_sync(): ...`` still runs on every
        micro-step, on one branch or the other.)"""
        if self.inner is not None:
            return any(loop is self.inner for loop in event.loops)
        step_guards = {g.key for g in self.step.modulo_guards}
        return not (step_guards & event.guard_keys())


def clears_step_gradients(index: ModuleIndex, zero: Event, step: Step) -> bool:
    """Does this zero_grad clear the gradients this step uses?"""
    target = zero_grad_target(index, zero.node)
    if target == "<grads>":
        return _over_every_parameter(index, zero.node)
    if target in ("", step.optimizer):
        return True
    call = zero.call  # a zero_grad() with a receiver: ``optimizer.zero_grad()``, ``model.zero_grad()``
    expr = call.func.value if call is not None and isinstance(call.func, cst.Attribute) else None
    return expr is not None and not is_optimizer_object(index, expr)  # model.zero_grad() clears every optimizer's


def _over_every_parameter(index: ModuleIndex, node: cst.CSTNode) -> bool:
    """Does ``p.grad = None`` (or ``p.grad.zero_()``) run for every parameter: in a loop over
    ``model.parameters()`` / ``named_parameters()`` or an optimizer group's ``["params"]``? A loop
    over a list the script selected (RL4LMs' TRPO clears the actor's share, ``for param in
    actor_params``, so that the critic's step keeps only its own) masks some gradients, and one
    parameter's ``.grad = None`` clears that one."""
    for ancestor in index.ancestors(node):
        if isinstance(ancestor, cst.For):
            source = ancestor.iter
            while isinstance(source, cst.Call) and method_name(source) in (None, "list", "tuple") and source.args:
                source = source.args[0].value  # list(model.parameters())
            if isinstance(source, cst.Call) and method_name(source) in ("parameters", "named_parameters"):
                return True
            return isinstance(source, cst.Subscript) and "params" in index.py.code_of(source.slice[0])
    return False


def zeroed_every_micro_step(index: ModuleIndex, accumulation: Accumulation) -> list[Event]:
    """The zero_grads that run on every pass of an accumulating loop and clear the gradients its
    step uses: nothing accumulates there, each micro-batch erases the ones before it. One inside
    an ``if`` runs only when its condition holds (open_flamingo's ``if torch.isnan(loss):
    optimizer.zero_grad(); continue`` drops a bad batch), not on every pass."""
    step = step_of(index, accumulation.step.node) if isinstance(accumulation.step.node, cst.Call) else None
    if step is None:
        return []
    return [event for event in accumulation.loop.events
            if zero_grad_target(index, event.node) is not None and accumulation.accumulates(event)
            and all(g.branch == "after-continue" for g in event.guards)
            and clears_step_gradients(index, event, step)]


_ACCUMULATION_WORDS = ("accum", "micro", "grad_acc", "update_freq", "accumulat", "gas")


def accumulation_of(index: ModuleIndex, loop: TrainingLoop) -> Accumulation | None:
    steps = [(e, s) for e, s in loop.steps if s.kind in ("direct", "scaled")]
    if not steps:
        return None
    guarded = [(e, g) for e, _ in steps for g in e.modulo_guards]
    every_time = [e for e, _ in steps if not e.modulo_guards]
    if guarded and not every_time and not _steps_on_both_branches(steps):
        event, guard = guarded[0]
        return Accumulation(loop, event, guard.divisors[0], guard)
    for event, _ in loop.backwards:
        for inner in event.loops:
            bound = _range_bound(inner)
            if bound is None or not isinstance(inner, cst.For) or any(inner in e.loops for e, _ in steps):
                continue
            words = index.py.code_of(inner.target).lower() + " " + index.py.code_of(bound).lower()
            if any(word in words for word in _ACCUMULATION_WORDS):
                return Accumulation(loop, steps[0][0], bound, None, inner)
    return None


def _steps_on_both_branches(steps: list[tuple[Event, Step]]) -> bool:
    """A step under ``if step % k == 0:`` and another under its ``else:``, each with no other
    interval condition: some optimizer steps on every pass. modded-nanogpt's alternating
    schedule (Adam on every pass, Muon on every other) is not accumulation of the whole loss,
    and dividing the loss by ``k`` would shrink the gradients of the optimizer that steps
    every pass. The two must be different calls: one helper's step inlined on both branches
    (timm's ``no_sync`` branches) runs under the helper's own condition."""
    branches: dict[int, dict[str, set[int]]] = {}
    for event, _ in steps:
        guards = event.modulo_guards
        if len(guards) == 1 and guards[0].branch in ("body", "orelse"):
            calls = branches.setdefault(id(guards[0].node), {}).setdefault(guards[0].branch, set())
            calls.add(id(event.node))
    return any(
        len(seen) == 2 and not (seen["body"] & seen["orelse"]) for seen in branches.values()
    )


def _range_bound(loop: Loop) -> cst.BaseExpression | None:
    """``k`` for ``for i in range(k)`` / ``range(0, k)``; None otherwise or when ``k`` is 1."""
    if not isinstance(loop, cst.For) or not isinstance(loop.iter, cst.Call):
        return None
    call = loop.iter
    if not (isinstance(call.func, cst.Name) and call.func.value == "range"):
        return None
    args = positional(call)
    if len(args) == 1:
        bound = args[0].value
    elif len(args) == 2 and integer_value(args[0].value) == 0:
        bound = args[1].value
    else:
        return None
    return None if integer_value(bound) == 1 else bound
