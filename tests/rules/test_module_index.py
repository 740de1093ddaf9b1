"""The rules' module index, joined from parts kept with each top-level statement across edits,
is the index of a fresh parse: the same nodes in the same order, functions, classes and
definitions."""

from __future__ import annotations

import sys
from pathlib import Path

import libcst as cst
import pytest

from memlint.python import source as python_source
from memlint.python.index import ModuleIndex, _definitions_in, could_be_named, index_for
from memlint.python.syntax import iter_nodes

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "python"))
sys.path.insert(0, str(ROOT / "bench"))
from lint_latency import edited  # noqa: E402
from lsp_latency import training_script  # noqa: E402
from test_python_analysis import EDITS, SCRIPT  # noqa: E402


def _parse(text: str, previous: python_source.PythonSource | None = None) -> python_source.PythonSource:
    source = python_source.parse(text, previous)
    assert isinstance(source, python_source.PythonSource), source
    return source


def _summary(index: ModuleIndex) -> dict:
    """The index as positions and code, comparable between two parses of the same text."""
    return _described(index, index.nodes, index.flows, lambda flow: index.definitions[id(flow)])


def _walked(index: ModuleIndex) -> dict:
    """The same, from walks over the whole module (what the index held before it was joined
    from parts)."""
    module = index.py.module
    nodes = list(iter_nodes(module, enter_defs=True))
    flows = [module, *(n for n in nodes if type(n) is cst.FunctionDef)]

    def table(flow) -> dict:
        out: dict = {}
        for node in iter_nodes(module if flow is module else flow.body):
            for definition in _definitions_in(node):
                out.setdefault(definition.name, []).append(definition)
        return out

    return _described(index, nodes, flows, table)


def _described(index: ModuleIndex, nodes: list, flows: list, table) -> dict:
    py = index.py

    def where(node: cst.CSTNode) -> tuple:
        return (type(node).__name__, index.start(node), index.end(node))

    def definitions(flow) -> dict:
        return {name: [(where(d.statement), d.value is not None and py.code_of(d.value),
                        d.whole_value is not None and py.code_of(d.whole_value), d.position,
                        d.augmented is not None and type(d.augmented).__name__) for d in found]
                for name, found in table(flow).items()}

    functions: dict = {}
    classes: dict = {}
    for node in nodes:
        if type(node) is cst.FunctionDef:
            functions.setdefault(node.name.value, []).append(where(node))
        elif type(node) is cst.ClassDef:
            classes.setdefault(node.name.value, where(node))
    return {
        "nodes": [where(n) for n in nodes],
        "calls": [where(n) for n in nodes if type(n) is cst.Call],
        "loops": [where(n) for n in nodes if type(n) in (cst.For, cst.While)],
        "functions": functions,
        "classes": classes,
        "flows": [where(f) for f in flows],
        "definitions": [definitions(f) for f in flows],
    }


def assert_same_index(index: ModuleIndex) -> None:
    summary = _summary(index)
    assert summary == _walked(index)
    for flow in index.flows:  # the calls each flow makes itself, kept with the statements
        body = flow if isinstance(flow, cst.Module) else flow.body
        assert index.calls_of_flow(flow) == [n for n in iter_nodes(body) if type(n) is cst.Call]
    assert summary["calls"] == [(type(n).__name__, index.start(n), index.end(n)) for n in index.calls]
    assert summary["loops"] == [(type(n).__name__, index.start(n), index.end(n))
                                for n in index.nodes_of(cst.For, cst.While)]
    assert {name: [(type(f).__name__, index.start(f), index.end(f)) for f in found]
            for name, found in index.functions.items()} == summary["functions"]
    assert {name: (type(c).__name__, index.start(c), index.end(c)) for name, c in index.classes.items()} \
        == summary["classes"]


def test_the_index_after_each_edit_is_a_fresh_parses() -> None:
    previous = _parse(SCRIPT)
    index_for(previous)  # the parts of the first version are kept with its units
    text = SCRIPT
    for name, edit in EDITS.items():
        try:
            text = edit(text)
        except ValueError:  # an edit whose anchor an earlier one removed
            continue
        source = _parse(text, previous)
        assert_same_index(index_for(source))
        assert _summary(index_for(source)) == _summary(index_for(_parse(text))), name
        previous = source


@pytest.mark.parametrize("edits", [1, 5])
def test_a_large_script_edited_keeps_the_parts_of_the_statements_it_left(edits: int) -> None:
    text = training_script(2000)
    previous = _parse(text)
    first = index_for(previous)
    for number in range(edits):
        changed = edited(text, number)
        source = _parse(changed, previous)
        index = index_for(source)
        assert_same_index(index)
        kept = sum(1 for (_, a), (_, b) in zip(first.parts, index.parts) if a is b)
        assert kept >= len(index.parts) - 2, "an edit recomputes only the statements it changed"
        previous = source


TOP_LEVEL_LOOP = '''import torch
from torch.optim import AdamW as Opt

model = torch.nn.Linear(8, 8)
optimizer = Opt(model.parameters(), lr=1e-3)


for step, batch in enumerate(torch.randn(10, 8)):
    loss = model(batch).sum() / 4
    loss.backward()
    if (step + 1) % 4 == 0:
        optimizer.step()
        optimizer.zero_grad()

with torch.no_grad():
    total = sum(p.sum() for p in model.parameters())
'''


def test_a_script_that_trains_at_module_level_is_indexed_after_edits() -> None:
    """Statements whose own node defines names (a top-level ``for``), rebuilt by the join when
    the lines above them change."""
    previous = _parse(TOP_LEVEL_LOOP)
    assert_same_index(index_for(previous))
    for text in (TOP_LEVEL_LOOP.replace("lr=1e-3)\n", "lr=1e-3)\n# the loop\n"),
                 TOP_LEVEL_LOOP.replace("% 4 == 0", "% 8 == 0"),
                 TOP_LEVEL_LOOP.replace("\n\nfor step", "\n\n\n\nfor step")):
        source = _parse(text, previous)
        index = index_for(source)
        assert_same_index(index)
        assert [d.statement for d in index.definitions_of("step", source.module)] == \
            [s for s in source.module.body if type(s) is cst.For]
        previous = source


def _scripts() -> list[Path]:
    found = []
    for path in sorted({*ROOT.glob("examples/*/*.py"), *ROOT.glob("tests/real_runs/**/*.py"),
                        *ROOT.glob("bench/scripts/*.py")}):
        source = python_source.parse(path.read_text(encoding="utf-8", errors="replace"))
        if isinstance(source, python_source.PythonSource):
            found.append(path)
    return found


@pytest.mark.parametrize("path", _scripts(), ids=lambda p: str(p.relative_to(ROOT)))
def test_an_attribute_can_only_be_named_for_its_last_part(path: Path) -> None:
    """``could_be_named`` lets the rules skip resolving attributes whose last part no name they
    look for has: every qualified name libcst gives an attribute (builtins aside) ends in it."""
    source = _parse(path.read_text(encoding="utf-8"))
    checked = 0
    for node in source.nodes_of(cst.Attribute, cst.Call):
        for name in source.qualified_names(node):
            if not name.startswith("builtins."):
                target = node.func if type(node) is cst.Call else node
                assert could_be_named(target, (name,)), (source.code_of(node), name)
                checked += 1
    assert checked or "import" not in source.text


@pytest.mark.parametrize("path", _scripts(), ids=lambda p: str(p.relative_to(ROOT)))
def test_a_name_can_only_come_from_a_package_it_is_bound_to(path: Path) -> None:
    """``could_come_from`` lets the rules skip resolving calls that no import (or a name at
    module level called like the package) can make a package's: every qualified name libcst
    gives a node (builtins and comprehensions' names aside) starts with a package the index
    lets through."""
    source = _parse(path.read_text(encoding="utf-8"))
    index = index_for(source)
    assert index is not None
    checked = 0
    for node in source.nodes_of(cst.Name, cst.Attribute, cst.Call):
        target = node.func if type(node) is cst.Call else node
        for name in source.qualified_names(node):
            if not name.startswith(("builtins.", "<comprehension>")):  # no package is called so
                assert index.could_come_from(target, frozenset({name.split(".", 1)[0]})), (source.code_of(node), name)
                if type(node) is cst.Call:  # every filter ``calls_named`` puts before resolving
                    assert index.calls_named(node, name), (source.code_of(node), name)
                checked += 1
    assert checked or "import" not in source.text


PACKAGES = '''\
import argparse
import torch.optim
from torch.utils import checkpoint as ckpt_module


class deepspeed:  # a class called like a package: its attributes are named ``deepspeed.x``
    ops = None


def build(model, args):
    import bitsandbytes as bnb  # a lazy import, bound in the function only
    from torch.utils.checkpoint import checkpoint as ckpt
    from torch.autograd import backward as run_backward, grad

    optimizer_cls = getattr(torch.optim, args.optimizer)
    ckpt(model.layer, args.x)
    ckpt_module.checkpoint(model.layer, args.x)
    self_made = optimizer_cls(model.parameters())
    run_backward(model.loss)
    grad(model.loss, model.inputs)
    return bnb.optim.AdamW8bit(model.parameters()), torch.optim.SGD(model.parameters(), lr=0.1), self_made


class Trainer:
    def step(self, loss):
        self.accelerator.backward(loss)
        len(self.losses)
        "".join(self.names)
'''


def test_the_packages_a_call_can_come_from_follow_its_imports_anywhere() -> None:
    source = _parse(PACKAGES)
    index = index_for(source)
    assert index is not None
    calls = {index.py.code_of(call.func): call for call in index.calls}

    def could(callee: str, *packages: str) -> bool:
        return index.could_come_from(calls[callee].func, frozenset(packages))

    assert index.imported_names >= {"argparse", "torch", "ckpt_module", "bnb", "ckpt"}
    assert could("ckpt", "torch") and index.calls_named(calls["ckpt"], "torch.utils.checkpoint.checkpoint")
    assert could("ckpt_module.checkpoint", "torch")
    assert could("bnb.optim.AdamW8bit", "bitsandbytes") and could("torch.optim.SGD", "torch")
    # bound by no import: a local, ``self``, a builtin, a string's method
    for callee in ("optimizer_cls", "self.accelerator.backward", "len", '"".join', "model.parameters"):
        assert not could(callee, "torch", "bitsandbytes"), callee
        assert not index.qualified(calls[callee]) or not any(
            q.startswith(("torch.", "bitsandbytes.")) for q in index.qualified(calls[callee]))
    # a plain name ends in its own name or, imported as an alias, in what it imports
    assert index.calls_named(calls["run_backward"], "torch.autograd.backward")
    assert not index.calls_named(calls["grad"], "torch.autograd.backward")
    assert index.calls_named(calls["grad"], "torch.autograd.grad")
    # a module-level class called like a package lets every name through for that package
    assert could("optimizer_cls", "deepspeed") and could("len", "deepspeed")


TIES = '''\
import torch

def train(model, loader, optimizer, accum):
    step = 0
    for step, batch in enumerate(loader):
        foo(total := step % accum)
        print(total)
        loss = model(batch).loss
        loss.div_(accum); get_loss(batch).div_(accum)
        if (step + 1) % accum == 0 and [s for s in range(step) if s % 2]:
            optimizer.step()
        with open(batch) as handle, ctx(handle) as other:
            other.read(handle)
    step += 1
    return step
'''


def _whole(text: str) -> python_source.PythonSource:
    source = python_source.parse(text, whole=True)  # as ``memlint check`` parses
    assert isinstance(source, python_source.PythonSource) and source.by_statement, source
    return source


@pytest.mark.parametrize("path", [None, *_scripts()], ids=lambda p: "ties" if p is None else str(p.relative_to(ROOT)))
def test_a_definition_is_written_before_a_node_as_the_positions_say(path: Path | None) -> None:
    """``reaching`` compares a definition's statement with a node by source order where the
    module was parsed whole (no positions regenerated): the same answers as the positions, for
    every definition and every node of its flow, ties (a node that starts where the statement
    around it starts: ``foo(x := ...)``, ``get_loss(b).div_(n)``, ``with open(f) as h``) included."""
    text = TIES if path is None else path.read_text(encoding="utf-8")
    source = _whole(text)  # the index holds its source weakly
    index = index_for(source)
    compared = 0
    for flow in index.flows:
        nodes = list(iter_nodes(flow))
        for definitions in index.definitions.get(id(flow), {}).values():
            for definition in definitions:
                statement = definition.statement
                for at in nodes:
                    if at is flow:
                        continue
                    assert index._starts_before(statement, at) == (index.start(statement) < index.start(at)), (
                        index.py.code_of(statement), index.py.code_of(at))
                    compared += 1
    assert compared or not any(index.definitions.values())


_HELPERS = '''\
import torch
from torch.cuda.amp import GradScaler


def scaled_backward(scaler, loss):
    scaler.scale(loss).backward()


def micro_step(model, batch, scaler):
    loss = model(**batch).loss
    scaled_backward(scaler, loss)
    return loss


def evaluate(model, loader):
    with torch.no_grad():
        return [model(**batch).loss for batch in loader]


class Trainer:
    def __init__(self, model, optimizer):
        self.model, self.optimizer = model, optimizer
        self.scaler = GradScaler()

    def step(self, batch):
        loss = micro_step(self.model, batch, self.scaler)
        self.clip()
        return loss

    def clip(self):
        self.scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)

    def epoch(self, loader):
        for batch in loader:
            self.step(batch)
        self.log(evaluate(self.model, loader))

    def log(self, losses):
        print(sum(losses))

    def log(self, losses):  # a second definition: ``self.log`` runs the first, as the index reads it
        self.epoch([])

    def fit(self, loaders):
        for loader in loaders:
            self.epoch(loader)


def retry(model, batch, scaler, times):
    if times:
        retry(model, batch, scaler, times - 1)
    return micro_step(model, batch, scaler)


def main():
    trainer = Trainer(torch.nn.Linear(2, 2), None)
    trainer.fit([[]])
'''


def test_the_flows_that_run_a_function_are_those_whose_callees_reach_it() -> None:
    """``runners_of`` (one walk of the call graph backwards, AMP003's question) gives the flows
    whose ``callees`` meet the functions, at every depth: through helpers, ``self.`` methods (the
    first of two of one name), a recursive helper, the module; and ``helper_for`` finds the
    first method of a name."""
    source = _parse(_HELPERS)  # held: the index reaches its source weakly
    index = index_for(source)
    assert index is not None
    functions = {name: found[0] for name, found in index.functions.items()}
    every = list(index.flows)
    for targets in ({id(functions["scaled_backward"])}, {id(functions["retry"])},
                    {id(index.functions["log"][0]), id(functions["evaluate"])}, set()):
        for depth in (1, 2, 3, 5):
            expected = {id(flow) for flow in every if index.callees(flow, depth) & targets}
            assert index.runners_of(targets, depth) == expected, (targets, depth)
    step_calls = [call for call in index.calls if isinstance(call.func, cst.Attribute)
                  and call.func.attr.value == "log"]
    assert [index.helper_for(call) for call in step_calls] == [index.functions["log"][0]]
    # three levels up from the scaled backward: micro_step, then Trainer.step and retry, then epoch
    runners = index.runners_of({id(functions["scaled_backward"])}, 3)
    assert {flow.name.value for flow in every if id(flow) in runners} == {"micro_step", "step", "retry", "epoch"}
