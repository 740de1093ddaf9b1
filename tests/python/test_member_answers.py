"""The evaluator's answers kept across an edit inside a class are those a fresh analysis gives.

After an edit inside one method of a trainer class, the class's scope visit is taken over
(``python_member_scopes``) and the answers the facts' evaluator worked out about the other
members' nodes are kept (``Values.kept_answer``, ``Values.evaluate``): an answer reads outside
its own member only through module-level names, the uses of a function (its call sites), what
the class scope binds to a name a class-level use meets (a default ``fn=scale``, a decorator
``@steps.setter``) or the module's command-line options (``self.batch_size`` guessed from an
``add_argument`` in another method), and the edit drops those it may change. Here a trainer
module written with all of those is edited member by member; every answer of each version,
analysed from the one before, must equal a fresh analysis's.
"""

from __future__ import annotations

import dataclasses

import libcst as cst
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from python_texts import source_of

from memlint.facts.script_loops import _is_tokenizer, is_model
from memlint.python import source as python_source
from memlint.python.unit_scopes import visit_of
from memlint.python.values import Values

HEADER = '''"""Fine-tune a causal LM with a trainer of our own."""

import argparse
import functools

import torch
from torch.optim import AdamW as Adam
from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer

STEPS = 4


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=2e-5)
    return parser.parse_args()


def make_optimizer(params, lr=1e-3):
    return Adam(params, lr=lr)


class AccumulatingTrainer(Trainer):
    """Accumulates gradients over a few micro-batches."""

    micro_batches = STEPS

'''
FOOTER = '''

def main():
    args = parse_args()
    trainer = AccumulatingTrainer("meta-llama/Llama-3.1-8B")
    trainer.train_step({"input_ids": torch.ones(args.lr)})
'''

# each member of the class, in order, with the versions an edit may give it
SLOTS: list[list[str]] = [
    [
        "    def __init__(self, name, accumulation=STEPS):\n"
        "        self.model = AutoModelForCausalLM.from_pretrained(name)\n"
        "        self.tokenizer = AutoTokenizer.from_pretrained(name, model_max_length=2048)\n"
        "        self.accumulation = accumulation\n",
        "    def __init__(self, name, accumulation=8):\n"
        "        self.model = AutoModelForCausalLM.from_pretrained(name)\n"
        "        self.tokenizer = AutoTokenizer.from_pretrained(name)\n"
        "        self.optimizer = make_optimizer(self.model.parameters(), lr=3e-4)\n",
        "    def __init__(self, name, accumulation=STEPS):\n"
        "        model = AutoModelForCausalLM.from_pretrained(name)\n"
        "        self.optimizer = make_optimizer(model.parameters())\n",
    ],
    [
        "    def add_options(self, parser):\n"
        "        parser.add_argument(\"--batch_size\", type=int, default=8)\n        return parser\n",
        "    def add_options(self, parser):\n"
        "        parser.add_argument(\"--batch_size\", type=int, default=16)\n        return parser\n",
        "    def add_options(self, parser):\n        return parser\n",
        "    def add_options(self, parser):\n        parser.set_defaults(lr=1e-4)\n        return parser\n",
    ],
    [
        "    @property\n    def steps(self):\n        return STEPS\n",
        "    @property\n    def steps(self):\n        return 2 * STEPS\n",
        "    @functools.cached_property\n    def steps(self):\n        return self.micro_batches\n",
    ],
    [
        "    @steps.setter\n    def steps(self, value):\n        self.accumulation = value\n",
        "    def set_steps(self, value):\n        self.accumulation = int(value)\n",
    ],
    [
        "    def scale(self):\n        return 2\n",
        "    def scale(self):\n        return 3\n",
        "    def rescale(self):\n        return 2\n",
    ],
    [
        "    def evaluate(self, fn=scale, factor=micro_batches):\n        return fn(self) * factor\n",
        "    def evaluate(self, fn=scale, factor=4):\n        total = fn(self) * factor\n        return total\n",
    ],
    [
        "    def train_step(self, batch):\n"
        "        model = self.model\n        loss = model(**batch).loss / self.batch_size\n"
        "        loss.backward()\n        return self.lr * make_optimizer(model.parameters(), lr=self.lr)\n",
        "    def train_step(self, batch):\n"
        "        tokenizer = AutoTokenizer.from_pretrained(\"gpt2\")\n        ids = tokenizer(batch)\n"
        "        loss = self.model(ids).loss\n        loss.backward()\n        return loss\n",
    ],
]


def _text(choice: list[int]) -> str:
    return HEADER + "\n".join(SLOTS[slot][variant] for slot, variant in enumerate(choice)) + FOOTER


def _plain(value, source: python_source.PythonSource):
    """An answer with its nodes replaced by where they are (versions share no node)."""
    if isinstance(value, cst.CSTNode):
        return ("node", type(value).__name__, source.place(value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__name__, *(_plain(getattr(value, f.name), source) for f in dataclasses.fields(value)))
    if isinstance(value, (tuple, list)):
        return tuple(_plain(item, source) for item in value)
    if isinstance(value, (set, frozenset)):
        return tuple(sorted(map(repr, value)))
    return repr(value)


def _answers(source: python_source.PythonSource) -> dict:
    """Every answer the facts' extractor asks of the evaluator, by where its node is."""
    values = Values(source)
    out = {}
    for node in source.parents:
        kind = type(node)
        if kind is cst.Call:
            out[("callee", source.place(node))] = sorted(values.callee_names(node))
        if kind in (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.BinaryOperation, cst.Integer):
            out[("value", kind.__name__, source.place(node))] = _plain(values.evaluate(node), source)
        if kind is cst.Name:
            out[("model", source.place(node))] = is_model(values, node)
            out[("tokenizer", source.place(node))] = _is_tokenizer(values, node)
    return out


EDITS = st.lists(st.tuples(st.integers(0, len(SLOTS) - 1), st.integers(0, 3)), min_size=1, max_size=6)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(EDITS)
def test_answers_kept_across_member_edits_are_a_fresh_analysis_answers(edits: list[tuple[int, int]]) -> None:
    choice = [0] * len(SLOTS)
    source = source_of(_text(choice))
    _answers(source)
    for slot, variant in edits:
        choice[slot] = variant % len(SLOTS[slot])
        text = _text(choice)
        after = python_source.parse(text, source)
        assert isinstance(after, python_source.PythonSource)
        assert _answers(after) == _answers(source_of(text)), text
        source = after


def test_an_edit_of_one_method_keeps_the_other_members_answers() -> None:
    """A method body edited: the class's answers about the other members are kept, those that
    read what changed (the options an ``add_argument`` adds) are not."""
    choice = [0] * len(SLOTS)
    source = source_of(_text(choice))
    _answers(source)
    class_unit = next(u for u in source.units if type(u.statement) is cst.ClassDef)
    before = len(visit_of(class_unit).kept)
    choice[4] = 1  # ``scale`` returns 3
    after = python_source.parse(_text(choice), source)
    after.scopes  # noqa: B018
    unit = next(u for u in after.units if type(u.statement) is cst.ClassDef)
    assert unit.origin is not None, "the class is made from its earlier version"
    kept = visit_of(unit).kept
    assert len(kept) > before // 2
    # ``evaluate(self, fn=scale)``: its default reads the class scope's ``scale``, rebound
    evaluate_node = next(n for n in after.parents if type(n) is cst.FunctionDef and n.name.value == "evaluate")
    default = evaluate_node.params.params[1].default
    assert default not in kept
    assert _answers(after) == _answers(source_of(_text(choice)))
    # the option ``add_options`` adds goes: ``self.batch_size``'s answer with it
    choice[1] = 2
    again = python_source.parse(_text(choice), after)
    again.scopes  # noqa: B018
    unit = next(u for u in again.units if type(u.statement) is cst.ClassDef)
    batch = [k for k in visit_of(unit).kept if type(k) is cst.Attribute and k.attr.value == "batch_size"]
    assert not batch
    assert _answers(again) == _answers(source_of(_text(choice)))
