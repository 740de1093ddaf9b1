"""The tree ``memlint check`` builds (children from the nodes' fields, positions per statement
when asked, source order from the shape) answers what the regeneration pass answers."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

import libcst as cst
import pytest

from memlint.model.diagnostics import Position
from memlint.python import source as python_source
from memlint.python.shape import shape_of
from memlint.python.tree import record

ROOT = Path(__file__).resolve().parents[2]
# real modules: the examples' scripts and memlint's own analysis code (decorators, classes,
# dataclasses, comments above statements, several statements on a line)
MODULES = sorted([*ROOT.glob("examples/**/*.py"), *ROOT.glob("memlint/python/*.py")])

WRITTEN = {
    "decorated": dedent('''\
        #!/usr/bin/env python
        # Copyright header, then a blank line

        import torch; import os
        from dataclasses import dataclass, field


        # a comment above the decorators
        @dataclass
        # between decorator and class
        @some.decorator(
            "with arguments on two lines")
        class Args:
            lr: float = 1e-4  # trailing
            tags: list = field(default_factory=list)

            @property
            def steps(self): return 1

        if __name__ == "__main__": main(Args()); print("done")
        # a comment at the end
    '''),
    # statements of methods and nested functions recorded alone: blocks indented differently,
    # comments at a lower indentation, statements sharing a line, a decorated nested function
    "nested": dedent('''\
        class Trainer(Base):
          """Two-space class body."""

          def train(self, loader):
                  # eight spaces in this method
                  for batch in loader:
                      loss = self.step(batch); loss.backward()
          # a comment at the class's indentation
                  @torch.no_grad()
                  def evaluate(model):
                      def inner(): return model.eval()
                      return inner()
                  return evaluate(self.model)
        # a comment at column 0 inside the class
          def step(self, batch): return self.model(**batch).loss
    '''),
    "crlf": "import torch\r\n\r\nx = torch.zeros(1)\r\n@dec\r\ndef f():\r\n    return x\r\n",
    "continuation": "total = 1 + \\\n    2\nvalues = [\n    1,\n    2,\n]\nasync def g():\n    async with a as b:\n        await b\n",
}


def _cases():
    for path in MODULES:
        yield pytest.param(path.read_text(encoding="utf-8"), id=str(path.relative_to(ROOT)))
    for name, text in WRITTEN.items():
        yield pytest.param(text, id=name)


@pytest.mark.parametrize("text", list(_cases()))
def test_the_check_tree_matches_the_regeneration_pass(text: str) -> None:
    by_statement = python_source.parse(text, whole=True)
    if isinstance(by_statement, python_source.PythonSyntaxError):
        pytest.skip("an example of invalid Python")
    assert isinstance(by_statement, python_source.PythonSource) and by_statement.by_statement
    recorded = record(by_statement.module)
    assert shape_of(by_statement.module) == recorded.shape

    regenerated = python_source.PythonSource(by_statement.module, text)  # the whole-module pass
    assert list(by_statement.parents) == list(regenerated.parents)
    syntax = [node for node in recorded.positions if node in recorded.shape]
    for node in syntax:  # recorded per statement
        assert by_statement.positions[node] == recorded.positions[node], node
    for node, where in recorded.positions.items():  # formatting nodes too (the whole-module fallback)
        assert by_statement.positions[node] == where, node
    for kinds in [(cst.Call,), (cst.Name, cst.Attribute), (cst.FunctionDef, cst.ClassDef, cst.Decorator),
                  (cst.Assign, cst.AnnAssign, cst.Param, cst.SimpleStatementLine)]:
        assert by_statement.nodes_in_order(*kinds) == regenerated.nodes_in_order(*kinds)


def test_positions_are_recorded_only_for_the_statements_asked_about() -> None:
    text = "import torch\n\n\nclass Trainer:\n    def step(self):\n        return 1\n\n    # the optimizer\n    def make(self):\n        return torch.optim.AdamW(self.model.parameters())\n\n\n# note\nmodel = torch.nn.Linear(4, 4)\n"
    py = python_source.parse(text, whole=True)
    assert isinstance(py, python_source.PythonSource)
    adamw, parameters, linear = py.nodes_in_order(cst.Call)
    assert py.range_of(linear).start.line == 14
    assert py.positions.done == {py.module.body[2]}  # type: ignore[attr-defined]
    assert py.range_of(adamw).start == Position(10, 15)  # in a method: only its statement is recorded
    make = py.module.body[1].body.body[1]  # type: ignore[attr-defined]
    assert py.positions.done == {py.module.body[2], make.body.body[0]}  # type: ignore[attr-defined]
    assert py.range_of(make).start == Position(9, 4)  # the member, decorators and comment aside
    assert py.positions.done == {py.module.body[2], make.body.body[0], make}  # type: ignore[attr-defined]
