"""Answers kept across edits are the answers a fresh analysis gives.

The language server analyses each version of an edited script from the last one's statements;
the evaluator keeps its answers about unchanged statements (``Values.kept_answer``) with what
they read elsewhere, and a join drops those the edit may change (``python_unit_scopes``). These
tests edit scripts again and again and compare every answer with a fresh parse's.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path

import libcst as cst
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from python_texts import parses, source_of

from memlint.documents.parsed import parse_document
from memlint.documents.reading import Document
from memlint.facts.extract import extract
from memlint.facts.script_loops import _is_tokenizer, is_model
from memlint.python import source as python_source
from memlint.python.values import Values

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from lsp_latency import training_script  # noqa: E402

# top-level statements of training scripts; several bind the same names differently, so that
# inserting or deleting one changes what the others' names refer to
BLOCKS = [
    "import torch\n",
    "import torch.nn\n",
    "import transformers as tf\n",
    "from torch.optim import AdamW as Opt\n",
    "from transformers import AutoModelForCausalLM, AutoTokenizer, Trainer, TrainingArguments\n",
    "Opt = torch.optim.SGD\n",
    "MODEL = 'gpt2'\n",
    "MODEL = 'meta-llama/Llama-3.1-8B'\n",
    "LR = 1e-4\n",
    "CFG = {'learning_rate': LR, 'bf16': True}\n",
    "CFG['learning_rate'] = 3e-4\n",
    "def load(name=MODEL):\n    return AutoModelForCausalLM.from_pretrained(name, torch_dtype=torch.bfloat16)\n",
    "def load(name):\n    return torch.nn.Linear(2, 2)\n",
    "model = load()\n",
    "model = load('gpt2')\n",
    "class MyTrainer(Trainer):\n    pass\n",
    "class MyTrainer:\n    pass\n",
    ("def train(model, lr=LR, steps=10):\n    opt = Opt(model.parameters(), lr=lr)\n"
     "    for step in range(steps):\n        loss = model(step).loss\n        loss.backward()\n"
     "        opt.step()\n    return opt\n"),
    "def make_args(bs):\n    return TrainingArguments(output_dir='out', per_device_train_batch_size=bs, **CFG)\n",
    "trainer = MyTrainer(model=model, args=make_args(8))\n",
    "args = make_args(16)\n",
    "opt = train(model)\n",
    "train(load('x'), lr=CFG['learning_rate'])\n",
    "tokenizer = tf.AutoTokenizer.from_pretrained(MODEL)\n",
    "tok = AutoTokenizer.from_pretrained(MODEL, model_max_length=512)\n",
    "def encode(tok, text, n=256):\n    ids = tok(text, max_length=n)\n    ids.append(0)\n    return ids\n",
    "encode(tokenizer, 'a')\n",
    "encode(tok, 'b', n=1024)\n",
    "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('--lr', type=float, default=1e-3)\n",
    "cli = parser.parse_args()\n",
    "opt2 = Opt(model.parameters(), lr=cli.lr)\n",
    "def reload():\n    global model\n    model = torch.nn.Linear(1, 1)\n",
    "for model in [load()]:\n    model.half()\n",
    "x = model if LR > 0 else None\n",
    ("class Job:\n    def __init__(self, name=MODEL, bs=4):\n        self.name = name\n        self.bs = bs\n"
     "    def load(self):\n        return AutoModelForCausalLM.from_pretrained(self.name)\n"
     "    def args(self):\n        return TrainingArguments(output_dir='o', per_device_train_batch_size=self.bs)\n"),
    ("class Job:\n    def __init__(self, name='gpt2'):\n        self.name = name\n"
     "    def rename(self):\n        self.name = 'facebook/opt-125m'\n"
     "    def load(self):\n        return AutoModelForCausalLM.from_pretrained(self.name)\n"),
    "job = Job()\n",
    "job = Job('Qwen/Qwen2.5-0.5B', bs=8)\n",
    "\n",
    "# a comment\n",
]




def _described(source: python_source.PythonSource, value: object) -> object:
    """An evaluator's answer with its nodes replaced by their class and place, so answers
    about two parses of the same text compare equal."""
    if isinstance(value, cst.CSTNode):
        where = source.positions[value]
        return type(value).__name__, where.start.line, where.start.column, where.end.line, where.end.column
    if isinstance(value, (tuple, list)):
        return tuple(_described(source, item) for item in value)
    if isinstance(value, (set, frozenset)):
        return frozenset(_described(source, item) for item in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return type(value).__name__, tuple(_described(source, getattr(value, f.name)) for f in dataclasses.fields(value))
    return value


def _answers(source: python_source.PythonSource, values: Values | None = None) -> list[tuple]:
    """What the extractors ask of every call: the callee's names, each argument's value, and
    whether the receiver or the called name is the model or a tokenizer."""
    values = values or Values(source)
    out = []
    for call in source.nodes_in_order(cst.Call):
        receiver = call.func.value if isinstance(call.func, cst.Attribute) else call.func
        out.append((
            _described(source, call),
            frozenset(values.callee_names(call)),
            tuple(_described(source, values.evaluate(arg.value)) for arg in call.args),
            is_model(values, receiver) if isinstance(receiver, cst.Name) else None,
            _is_tokenizer(values, receiver),
        ))
    return out


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(BLOCKS), min_size=1, max_size=12),
       st.lists(st.tuples(st.booleans(), st.sampled_from(BLOCKS), st.integers(min_value=0, max_value=14)),
                min_size=2, max_size=6))
def test_answers_kept_across_edits_are_a_fresh_analysis(first: list[str], edits: list[tuple[bool, str, int]]) -> None:
    """Statements inserted and deleted one at a time, as the language server sees a script
    typed: after each, every answer (some kept from the version before, some worked out again)
    is the one a fresh parse of the same text gives."""
    blocks = list(first)
    if not parses("".join(blocks)):
        return
    source = source_of("".join(blocks))
    _answers(source)
    for insert, block, at in edits:
        if insert:
            blocks.insert(min(at, len(blocks)), block)
        elif blocks:
            del blocks[at % len(blocks)]
        text = "".join(blocks)
        if not blocks or not parses(text):
            continue
        source = source_of(text, source)
        assert _answers(source) == _answers(source_of(text)), text


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(BLOCKS), min_size=1, max_size=14))
def test_answers_asked_again_of_a_module_parsed_whole_are_worked_out_afresh(blocks: list[str]) -> None:
    """``memlint check`` parses a module whole (no unit keeps answers); the answers one
    evaluator gives again (kept for the version: ``Values.kept_answer``) are those it gave
    first, and those of the editor's parse in units."""
    text = "".join(blocks)
    if not parses(text):
        return
    whole = python_source.parse(text, whole=True)
    assert isinstance(whole, python_source.PythonSource)
    values = Values(whole)
    first = _answers(whole, values)
    assert _answers(whole, values) == first == _answers(source_of(text)), text


_NUMBER = re.compile(r"(?<![\w.])\d+(?![\w.])")


def _numbers_changed(text: str, step: int) -> str:
    """Every third number of the script bumped (a value in many statements edited at once)."""
    matches = list(_NUMBER.finditer(text))
    for match in reversed(matches[step % 3::3]):
        text = text[: match.start()] + str(int(match.group()) + step) + text[match.end():]
    return text


def _statement_dropped(text: str, step: int) -> str:
    """One top-level statement deleted (a different one each step)."""
    module = cst.parse_module(text)
    if len(module.body) < 2:
        return text
    index = step * 7 % len(module.body)
    return module.with_changes(body=[*module.body[:index], *module.body[index + 1:]]).code


def _alias_rebound(text: str, step: int) -> str:
    """A module-level name that other statements use, bound again at the end (and back)."""
    return text + ("\nAutoModelForCausalLM = None\n" if step % 2 else "\nimport torch as torch\n")


SCRIPTS = sorted({*ROOT.glob("examples/*/*.py"), *ROOT.glob("bench/scripts/*.py")})


@pytest.mark.parametrize("path", [p for p in SCRIPTS if parses(p.read_text(encoding="utf-8"))], ids=lambda p: p.name)
def test_an_edited_scripts_facts_are_a_fresh_parses(path: Path) -> None:
    """A realistic script edited in the ways a user edits one, each version's facts (runs,
    models, batch sizes, with their places) extracted from the last version's kept answers and
    compared with a fresh extraction."""
    original = path.read_text(encoding="utf-8")
    previous = parse_document(Document(str(path), original, "python"))
    extract(previous)
    for step in range(1, 7):
        text = original
        for change in (_numbers_changed, _statement_dropped, _alias_rebound)[: 1 + step % 3]:
            text = change(text, step)
        if not parses(text):
            continue
        parsed = parse_document(Document(str(path), text, "python"), previous)
        assert extract(parsed) == extract(parse_document(Document(str(path), text, "python"))), step
        previous = parsed


def test_the_generated_2000_line_scripts_answers_stay_fresh_while_its_numbers_are_tuned() -> None:
    """The benchmark's script (``bench/lsp_latency.py``): kept answers after edits of one
    statement at a time, and of its module-level settings, are the fresh ones."""
    text = training_script(2000)
    source = source_of(text)
    _answers(source)
    lines = text.splitlines(keepends=True)
    numbered = [i for i, line in enumerate(lines) if _NUMBER.search(line)]
    for step, index in enumerate(numbered[:: max(1, len(numbered) // 6)][:6]):
        lines[index] = _NUMBER.sub(lambda m, bump=step + 1: str(int(m.group()) + bump), lines[index], count=1)
        text = "".join(lines)
        source = source_of(text, source)
        assert _answers(source) == _answers(source_of(text)), lines[index]


JOB = (
    "from transformers import AutoModelForCausalLM\n\n\n"
    "class Job:\n"
    "    def __init__(self, name='gpt2'):\n"
    "        self.name = name\n\n"
    "    def load(self):\n"
    "        return AutoModelForCausalLM.from_pretrained(self.name)\n\n\n"
    "job = Job()\n"
)


@pytest.mark.parametrize("edited", [
    JOB.replace("name='gpt2'", "name='facebook/opt-125m'"),  # the default __init__ gives the attribute
    JOB.replace("        self.name = name\n", "        self.name = name\n        self.name = 'x'\n"),  # set twice
    JOB.replace("    def load(self):\n", "    def rename(self):\n        self.name = 'y'\n\n    def load(self):\n"),
    JOB.replace("job = Job()", "job = Job('Qwen/Qwen2.5-0.5B')"),  # the one constructor call passes it
])
def test_an_attribute_read_in_one_method_follows_an_edit_of_another(edited: str) -> None:
    """``self.name`` in ``load`` is what ``__init__`` sets (its default, or what the constructor
    call passes): editing ``__init__``, adding a method that sets it again, or the call changes
    the answer kept for ``load``."""
    source = source_of(JOB)
    before = _answers(source)
    assert any("'gpt2'" in repr(call[2]) for call in before)  # from_pretrained(self.name) reads the default
    source = source_of(edited, source)
    assert _answers(source) == _answers(source_of(edited)), edited
