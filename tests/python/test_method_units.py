"""An edit among the statements of a long method reparses those statements alone, and gives what
a fresh parse gives.

``python_method_units`` makes a method's new version from its previous one by parsing only the
statements of its body an edit touched (Accelerate's ``_prepare_deepspeed`` is 277 lines). Here a
trainer class with a long training step is edited statement by statement -- assignments, nested
blocks with comments after them (libcst gives those to the block above or the statement below by
their indentation), nested functions with ``nonlocal``, ``global``, comprehensions, lambdas, lines
typing goes through that do not parse -- each version analysed from the one before and compared
with a fresh parse: the module, positions, parents (in order), children, scopes, qualified names,
the rules' index and the evaluator's answers.
"""

from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from python_texts import parses, source_of
from test_member_answers import _answers
from test_python_analysis import assert_index_parts_spliced, assert_same_module, assert_same_names

from memlint.python import class_units
from memlint.python import source as python_source
from memlint.python.class_units import _bounds, _first_line
from memlint.python.index import index_for
from memlint.python.tree import parents_of

HEADER = ("import argparse\nimport torch\nfrom transformers import AutoModelForCausalLM, Trainer\n\n"
          "g = 0\n\n\nclass GRPOTrainer(Trainer):\n    \"\"\"A trainer.\"\"\"\n\n"
          "    def setup(self):\n        self.batch_size = 8\n        return self\n\n"
          "    def training_step(self, model, inputs, steps=4):\n")
FIRST = '        """One step."""\n        loss = 0\n'  # the method's first statements
CLOSING = "        return loss\n"
FOOTER = ("\n    def log(self, logs):\n        print(logs)\n\n\n"
          "trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained('gpt2'))\n")

# statements of the training step as people write them, with the lines around them
STATEMENTS = [
    "        x = inputs['input_ids']\n", "        loss = model(x).loss / steps\n", "\n", "        # a comment\n",
    "            # a deeper comment\n", "# a comment at column 0\n",
    "        if self.batch_size > 4:\n            loss = loss * 2\n",
    "        for micro in range(steps):\n            out = model(x[micro])\n            out.loss.backward()\n\n"
    "            # after the loop's body\n",
    "        with torch.no_grad():\n            y = model(x)\n",
    "        def scale(v):\n            nonlocal steps\n            return v / steps\n",
    "        global g\n        g = g + 1\n", "        f = lambda q: q + self.batch_size\n",
    "        ids = [t for t in x if t]\n", "        opt = torch.optim.AdamW(model.parameters(), lr=1e-5)\n",
    "        self.batch_size = 16\n", "        loss.backward(); opt.step()\n",
]
BROKEN = ["        y = (1,\n", "      w = 2\n", "        if x:\n", "    def half(self):\n", "\tw = 2\n", "        else:\n"]
PIECES = st.sampled_from(STATEMENTS) | st.sampled_from(BROKEN)


# blocks the statements may be nested in (each around the one after it), with a statement above
# and below them in each
BLOCKS = [("        for micro in range(steps):\n            x = micro\n", "            x = None\n"),
          ("            with torch.autocast('cuda'):\n                y = 0\n", "                y = 1\n"),
          ("                if self.batch_size:\n                    pass\n",
           "                    pass\n                else:\n                    loss = 1\n")]


def _indented(piece: str, depth: int) -> str:
    return "".join("    " * depth + line if line.startswith("    ") else line
                   for line in piece.splitlines(keepends=True))


def _text(statements: list[str], depth: int = 0, bare: bool = False, last: bool = False) -> str:
    """``bare``: the statements first in their block (no statement above them); ``last``: the
    last in it (the block's trailing lines follow them, then the ``if``'s ``else:`` or the next
    statement of the block around)."""
    opening = [above for above, _ in BLOCKS[:depth]]
    if bare and opening:
        opening[-1] = opening[-1].split("\n")[0] + "\n"
    belows = [below for _, below in BLOCKS[:depth]]
    if last and belows:
        belows[-1] = belows[-1].split("\n", 1)[1]
    closing = "".join(reversed(belows))
    body = "".join(_indented(piece, depth) for piece in statements)
    return HEADER + ("" if bare and not depth else FIRST) + "".join(opening) + body + closing + CLOSING + FOOTER


def _check(after: python_source.PythonSource, text: str) -> None:
    fresh = python_source.parse(text)
    assert isinstance(fresh, python_source.PythonSource)
    assert_same_module(after, text)
    assert_same_names(after)
    assert after.depths == fresh.depths
    assert after.classes == fresh.classes
    for unit in after.units:
        if unit.bounds is not None:
            body = list(unit.statement.body.body)
            assert unit.bounds == _bounds(unit.positions, unit.statement.body, body,
                                          [_first_line(m, unit.positions) for m in body[1:]])
        if unit.origin is not None:
            assert list(unit.parents.items()) == list(parents_of(unit.statement, unit.shape).items())
        if unit.sizes is not None:
            assert unit.sizes == [len(parents_of(m, unit.shape)) for m in unit.statement.body.body]
    assert_index_parts_spliced(after)
    assert _answers(after) == _answers(source_of(text))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(STATEMENTS), min_size=2, max_size=8), st.integers(min_value=0, max_value=len(BLOCKS)),
       st.booleans(),
       st.lists(st.tuples(st.lists(PIECES, max_size=2), st.integers(min_value=0, max_value=8),
                          st.integers(min_value=0, max_value=2)), min_size=1, max_size=4), st.booleans())
@example(statements=["        x = inputs['input_ids']\n", "        if self.batch_size > 4:\n            loss = loss * 2\n",
                     "        ids = [t for t in x if t]\n"], depth=0, bare=False,
         edits=[(["            # a deeper comment\n"], 2, 0)], last=False)
@example(statements=["        x = inputs['input_ids']\n", "        f = lambda q: q + self.batch_size\n",
                     "        ids = [t for t in x if t]\n"], depth=3, bare=True,
         edits=[(["        def scale(v):\n            nonlocal steps\n            return v / steps\n"], 1, 1),
                (["            # a deeper comment\n"], 3, 0), ([], 1, 1)], last=False)
@example(statements=["        x = inputs['input_ids']\n", "        with torch.no_grad():\n            y = model(x)\n"],
         depth=3, bare=False, edits=[(["            # a deeper comment\n", "                # deeper still\n"], 2, 0),
                                     (["        loss.backward(); opt.step()\n"], 1, 1)], last=True)
def test_edits_inside_a_method_give_what_a_fresh_parse_gives(statements: list[str], depth: int, bare: bool,
                                                             edits: list[tuple[list[str], int, int]], last: bool) -> None:
    """What the language server does: each version parsed from the last valid one (scopes, the
    index and the answers asked, as a lint asks them), compared with a fresh parse each time;
    the statements edited in the method's body or in blocks nested ``depth`` deep in it, first
    in their block or not, last in it or not."""
    if not parses(_text(statements, depth, bare, last)):
        return
    source = source_of(_text(statements, depth, bare, last))
    source.scopes  # noqa: B018
    index_for(source)
    _answers(source)
    for inserted, at, removed in edits:
        statements = statements[:at] + inserted + statements[at + removed:]
        text = _text(statements, depth, bare, last)
        after = python_source.parse(text, source)
        if isinstance(python_source.parse(text), python_source.PythonSyntaxError):
            assert after == python_source.parse(text)
            continue
        assert isinstance(after, python_source.PythonSource), after
        _check(after, text)
        source = after


def test_an_edit_in_a_long_method_reparses_the_statements_it_touched(monkeypatch) -> None:
    """One statement of the step changed: the method is made from its previous version, its
    other statements are the same nodes; an edit of the last statement (its block's trailing
    lines follow it) or of the method's header parses the method whole."""
    made = []
    derive = class_units.derive_method

    def counted(*args, **kwargs):
        piece = derive(*args, **kwargs)
        made.append(piece is not None)
        return piece

    monkeypatch.setattr(class_units, "derive_method", counted)
    statements = [STATEMENTS[0], STATEMENTS[1], STATEMENTS[6], STATEMENTS[7], STATEMENTS[13]]
    text = _text(statements)
    source = source_of(text)
    source.scopes  # noqa: B018
    edited = text.replace("loss * 2", "loss * 3")
    after = python_source.parse(edited, source)
    assert isinstance(after, python_source.PythonSource)
    assert made == [True]
    step = lambda s: s.module.body[-2].body.body[2]  # noqa: E731  (the class docstring, setup, the step)
    old_body, new_body = step(source).body.body, step(after).body.body
    assert [n for n, (old, new) in enumerate(zip(old_body, new_body)) if old is not new] == [4]
    _check(after, edited)
    # lines added: the statements below move down
    added = edited.replace("        for micro", "        torch.cuda.synchronize()\n\n        for micro")
    again = python_source.parse(added, after)
    assert isinstance(again, python_source.PythonSource)
    assert made == [True, True]
    _check(again, added)
    docstring = added.replace('"""One step."""', '"""One step, scaled."""')
    made.clear()
    again = python_source.parse(docstring, again)
    assert isinstance(again, python_source.PythonSource)
    assert made == [True]
    _check(again, docstring)
    for whole in (docstring.replace("steps=4", "steps=8"), docstring.replace("        return loss\n", "        return 2\n")):
        made.clear()
        other = python_source.parse(whole, again)
        assert isinstance(other, python_source.PythonSource)
        assert True not in made
        _check(other, whole)
    # inside blocks nested in the method: the innermost block's statements alone
    nested = _text(statements, 3)
    source = source_of(nested)
    source.scopes  # noqa: B018
    made.clear()
    edited = nested.replace("loss * 2", "loss * 5")
    after = python_source.parse(edited, source)
    assert isinstance(after, python_source.PythonSource)
    assert made == [True]
    inner = lambda s: step(s).body.body[2].body.body[1].body.body[1].body.body  # noqa: E731  (for, with, if)
    assert [n for n, (old, new) in enumerate(zip(inner(source), inner(after))) if old is not new] == [3]
    _check(after, edited)


def test_an_edit_of_a_blocks_last_statement_reparses_that_statement(monkeypatch) -> None:
    """TRL's ``_move_model_to_vllm``: an ``if`` whose body is one ``with``, then ``else:``; the
    comment above the ``with`` edited. The ``with`` and the block's trailing lines are parsed
    again, not the ``if``; the ``else:`` and the statements around are the same nodes. The same
    for the last statement of a ``for`` followed by the method's next statement."""
    texts: list[str] = []
    parse_module = class_units.cst.parse_module

    def recorded(text, *args, **kwargs):
        texts.append(text)
        return parse_module(text, *args, **kwargs)

    monkeypatch.setattr(class_units.cst, "parse_module", recorded)
    step = ("        if model is not None:\n"
            "            # With PEFT and ZeRO stage 3, gather first\n"
            "            with torch.no_grad():\n                loss = model(inputs).loss\n"
            "                    # after the with's body, deeper\n"
            "                # at the with's body\n"
            "            # at the if's body\n"
            "        # at the else\n"
            "        else:\n            loss = 0\n")
    looped = "        for micro in range(steps):\n            x = micro\n            y = x * 2\n\n"
    text = _text([STATEMENTS[0], step, looped, STATEMENTS[1]])
    source = source_of(text)
    source.scopes  # noqa: B018
    index_for(source)
    for old, new in (("stage 3", "stage 2"), ("                # at the with's body\n", ""),
                     ("loss = model(inputs).loss\n", "loss = model(inputs).loss\n                loss = loss / 2\n"),
                     ("            # at the if's body\n", "            # at the if's body\n            # and more\n"),
                     ("y = x * 2", "y = x * 4")):
        texts.clear()
        edited = text.replace(old, new)
        after = python_source.parse(edited, source)
        assert isinstance(after, python_source.PythonSource)
        assert len(texts) == 1 and "if model" not in texts[0] and "for micro" not in texts[0], texts
        if_node = lambda s: s.module.body[-2].body.body[2].body.body[3]  # noqa: E731
        assert if_node(after).orelse is if_node(source).orelse
        _check(after, edited)
        source, text = after, edited
