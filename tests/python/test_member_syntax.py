"""An edit inside a class is checked by CPython as the members it touched, with the whole text's verdict.

``python_member_syntax`` keeps a top-level class's syntax tree summarised per member and, after an
edit inside its body, parses only the touched members inside a stand-in class. The verdict (an
error with CPython's message and place, the nesting limit) and the depths must be those of the
whole new text, for the edits typing goes through: a method half written, a statement at another
indentation, a bracket or a block left open just above the next member, a backslash before a
comment, a decorator without its function, nesting past the limit.
"""

from __future__ import annotations

import ast

import pytest
from python_texts import source_of

from memlint.python import source as python_source
from memlint.python.member_syntax import ClassSyntax, summarise

TRAINER = '''\
import torch
from transformers import Trainer


class GRPOTrainer(Trainer):
    """Group relative policy optimisation."""

    _tag_names = ["trl", "grpo"]

    def __init__(self, model, args, reward_funcs, beta: float = 0.04):
        super().__init__(model=model, args=args)
        self.reward_funcs = reward_funcs
        self.beta = beta

    @property
    def num_generations(self):
        return self.args.num_generations

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        logits = model(**inputs).logits
        per_token_logps = torch.log_softmax(logits, dim=-1)
        loss = -(per_token_logps * inputs["advantages"]).mean()
        return loss

    # the generation step
    @torch.no_grad()
    def _generate(self, prompts):
        return self.model.generate(prompts, max_new_tokens=256)


trainer = GRPOTrainer(model, args, [reward])
'''

LOSS = "        loss = -(per_token_logps * inputs[\"advantages\"]).mean()\n"


def _edited(old: str, new: str) -> str:
    assert old in TRAINER
    return TRAINER.replace(old, new, 1)


def _nested(depth: int) -> str:
    return "        x = " + "-" * depth + "1\n"


EDITS = {
    "a number in a method": _edited("beta: float = 0.04", "beta: float = 0.08"),
    "a method added": _edited("    # the generation step\n", "    def log(self, logs):\n        print(logs)\n\n"
                              "    # the generation step\n"),
    "a method half written": _edited("    # the generation step\n", "    def log(self, logs):\n\n"
                                     "    # the generation step\n"),
    "a block left open above the next member": _edited(LOSS, LOSS + "        if loss:\n"),
    "a bracket left open": _edited(LOSS, "        loss = (\n"),
    "a backslash before a comment": _edited(LOSS, "        loss = 1 + \\\n        # the rest\n"),
    "a backslash at a member's end": _edited("        return loss\n", "        return loss \\\n"),
    "a decorator without its function": _edited("    # the generation step\n", "    @torch.no_grad()\n\n"
                                                "    # the generation step\n"),
    "a statement indented less than the members": _edited(
        "    # the generation step\n", "  x = 1\n    # the generation step\n"),
    "a method indented less than the members, at the class's end": _edited(
        "        return self.model.generate(prompts, max_new_tokens=256)\n",
        "        return self.model.generate(prompts, max_new_tokens=256)\n\n  def late(self):\n      pass\n"),
    "the last method indented less than the others": _edited(
        "    @torch.no_grad()\n    def _generate(self, prompts):\n        return",
        "  @torch.no_grad()\n  def _generate(self, prompts):\n      return"),
    "a statement indented more than the members": _edited("    _tag_names", "      _tag_names"),
    "a statement at column 0 inside the class": _edited("    # the generation step\n", "x = 1\n    # the generation step\n"),
    "a tab": _edited(LOSS, "\t" + LOSS.lstrip(" ")),
    "two statements on a line": _edited("    _tag_names = [\"trl\", \"grpo\"]\n", "    a = 1; b = 2\n"),
    "a member deleted": _edited("    @property\n    def num_generations(self):\n        return self.args.num_generations\n\n",
                                ""),
    "nesting past the limit": _edited(LOSS, LOSS + _nested(python_source.MAX_DEPTH)),
    "nesting just under the limit": _edited(LOSS, LOSS + _nested(python_source.MAX_DEPTH - 12)),
    "the docstring": _edited('"""Group relative', '"""Grouped relative'),
    "the class's header": _edited("class GRPOTrainer(Trainer):", "class GRPOTrainer(Trainer, Mixin):"),
    "the class's trailing line": _edited("\n\ntrainer = ", "\n    # the end\n\ntrainer = "),
}


@pytest.mark.parametrize("name", list(EDITS))
def test_the_verdict_and_depth_are_the_whole_texts(name: str) -> None:
    before = source_of(TRAINER)
    assert list(before.classes.values()) and all(isinstance(c, ClassSyntax) for c in before.classes.values())
    text = EDITS[name]
    after = python_source.parse(text, before)
    fresh = python_source.parse(text)
    if not isinstance(fresh, python_source.PythonSource):
        assert after == fresh
        return
    assert isinstance(after, python_source.PythonSource), after
    assert after.depths == fresh.depths
    assert after.classes == fresh.classes
    assert python_source._depth(ast.parse(text)) == 1 + max(after.depths.values())


def _parsed_texts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = ast.parse

    def spy(source, *args, **kwargs):
        seen.append(source)
        return real(source, *args, **kwargs)

    monkeypatch.setattr(ast, "parse", spy)
    return seen


def _long_trainer(methods: int) -> str:
    body = "".join(
        f"    def step_{n}(self, batch):\n        loss = self.model(**batch).loss * {n}\n"
        f"        loss.backward()\n        return loss\n\n" for n in range(methods))
    return f"import torch\n\n\nclass Trainer:\n{body}\ntrainer = Trainer()\n"


def test_an_edit_in_a_method_is_checked_as_that_method(monkeypatch: pytest.MonkeyPatch) -> None:
    text = _long_trainer(200)
    before = source_of(text)
    seen = _parsed_texts(monkeypatch)
    edited = text.replace("loss * 117\n", "loss * 118\n")
    after = source_of(edited, before)
    assert seen and max(map(len, seen)) < 200  # the stand-in and one method, not the 1,000-line class
    monkeypatch.undo()
    assert after.depths == source_of(edited).depths
    # a method indented otherwise than the others is caught on the whole text, as before
    seen = _parsed_texts(monkeypatch)
    wrong = edited.replace("        return loss\n\n    def step_118", "        return loss\n\n   def step_118")
    assert isinstance(python_source.parse(wrong, after), python_source.PythonSyntaxError)
    assert any(len(s) == len(wrong) for s in seen)


def test_a_one_line_class_or_a_tabbed_one_is_not_summarised() -> None:
    for text in ("class A: x = 1\n", "class A:\n\tx = 1\n", "def f():\n    pass\n"):
        statement = ast.parse(text).body[0]
        assert summarise(statement, text, 1, python_source.MAX_DEPTH) is None
