"""An edit inside a class's body reparses the members it touched, and gives what a fresh parse gives.

Real trainer modules are one class of thousands of lines; ``python_class_units`` makes the
class's unit from its previous version by parsing the touched members alone. The module, its
positions, parents, children, scopes and qualified names must be libcst's for the new text
(``assert_same_module``, ``assert_same_names``), after any edit of the body: methods and
comments added, removed or changed, lines whose owner libcst decides by what follows them,
states typing goes through that do not parse.
"""

from __future__ import annotations

import re

import libcst as cst
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from python_texts import parses, source_of
from test_python_analysis import assert_same_module, assert_same_names

from memlint.python import source as python_source
from memlint.python.class_units import _bounds, _first_line, derive_unit
from memlint.python.tree import parents_of

HEADER = "import torch\nfrom typing import cast\nimport typing as t\n\n\n"
CLASS = "@dataclass\nclass GRPOTrainer(Trainer):\n"
FOOTERS = ["", "\n\ntrainer = GRPOTrainer()\n", "    # trailing indented comment\n", "\n# the end\n",
           "\n\n        # deeper, after the class\n\nx = 1\n"]

# members of a class body as people write them, with the lines around them
MEMBERS = [
    '    """A trainer."""\n', "    _tag_names = ['trl', 'grpo']\n", "    z: int = 3\n", "\n", "    # a comment\n",
    "        # a deeper comment\n", "# a comment at column 0\n", "    def f(self, a, b=2):\n        return a + self.z\n",
    "    @property\n    def p(self):\n        return 1\n",
    ("    @torch.no_grad()\n    def step(self, x):\n        loss = self.model(x)\n        loss.backward()\n"
     "        # after the loss\n"),
    "    class Inner:\n        pass\n", "    async def g(self):\n        await h()\n",
    "    def k(self):\n        pass\n\n        # done\n\n",
    "    def u(self):\n        global y\n        y = cast('int', y)\n        return t.List['C']\n",
    "    def n(self, x):\n        def inner():\n            nonlocal x\n            return x\n        return inner\n",
    "    def lr(self):\n        return 2e-5 * self.args.per_device_train_batch_size\n",
]
# pieces typing goes through: half a method, a stray indent, an open bracket, other indentation
BROKEN = ["    def half(self):\n", "        y = (1,\n", "      w = 2\n", "\tw = 2\n", "    if x:\n", "    else:\n",
          "y = 0\n", "        return 5\n"]
PIECES = st.sampled_from(MEMBERS) | st.sampled_from(BROKEN)


def _text(members: list[str], footer: str) -> str:
    return HEADER + CLASS + "".join(members) + footer


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(MEMBERS), min_size=1, max_size=10), st.sampled_from(FOOTERS),
       st.lists(st.tuples(st.lists(PIECES, max_size=3), st.integers(min_value=0, max_value=10),
                          st.integers(min_value=0, max_value=2)), min_size=1, max_size=4))
@example(  # a method that writes a module-level name (``global y``) replaced by one that does not
    members=['    """A trainer."""\n', "    def u(self):\n        global y\n        y = cast('int', y)\n        return t.List['C']\n"],
    footer="", edits=[(["    def f(self, a, b=2):\n        return a + self.z\n"], 1, 1)])
def test_edits_inside_a_class_give_what_a_fresh_parse_gives(members: list[str], footer: str,
                                                            edits: list[tuple[list[str], int, int]]) -> None:
    """What the language server does: each version parsed from the last valid one (its scopes
    asked, as a lint asks them), compared with libcst each time."""
    if not parses(_text(members, footer)):
        return
    source = source_of(_text(members, footer))
    source.scopes  # noqa: B018
    for inserted, at, removed in edits:
        members = members[:at] + inserted + members[at + removed:]
        text = _text(members, footer)
        after = python_source.parse(text, source)
        fresh = python_source.parse(text)
        if isinstance(fresh, python_source.PythonSyntaxError):
            assert after == fresh
            continue
        assert isinstance(after, python_source.PythonSource), after
        assert_same_module(after, text)
        assert_same_names(after)
        assert after.depths == fresh.depths
        assert after.classes == fresh.classes  # each class's members' lines and depths (python_member_syntax)
        for unit in after.units:  # where each member's nodes begin, kept from the edit that made the unit
            if unit.bounds is not None:
                block = unit.statement.body
                body = list(block.body)
                assert unit.bounds == _bounds(unit.positions, block, body,
                                              [_first_line(m, unit.positions) for m in body[1:]])
            if unit.origin is not None:  # parents spliced from the earlier version's, in a walk's order
                assert list(unit.parents.items()) == list(parents_of(unit.statement, unit.shape).items())
            if unit.sizes is not None:  # each member's count of nodes, kept from the edit that made it
                assert unit.sizes == [len(parents_of(m, unit.shape)) for m in unit.statement.body.body]
        source = after


def _trainer(methods: int) -> str:
    body = "".join(
        f"    def method_{n}(self, batch):\n        # step {n}\n        loss = self.model(**batch).loss * {n}\n"
        f"        loss.backward()\n        return loss\n\n" for n in range(methods))
    return HEADER + CLASS + '    """A trainer."""\n\n' + body + "\ntrainer = GRPOTrainer()\n"


def test_an_edit_in_a_method_reparses_that_method_alone() -> None:
    text = _trainer(40)
    before = source_of(text)
    before.scopes  # noqa: B018
    edited = text.replace("* 17\n", "* 170\n")
    after = source_of(edited, before)
    old_body, new_body = before.module.body[-2].body.body, after.module.body[-2].body.body
    changed = [n for n, (old, new) in enumerate(zip(old_body, new_body)) if old is not new]
    assert changed == [18]  # the docstring, then method_0 ...
    assert_same_module(after, edited)
    assert_same_names(after)
    # a line added above a method moves every member below it
    added = edited.replace("        # step 3\n", "        # step 3\n        torch.cuda.synchronize()\n")
    again = source_of(added, after)
    assert [n for n, (old, new) in enumerate(zip(new_body, again.module.body[-2].body.body)) if old is not new] == [4]
    assert_same_module(again, added)
    assert_same_names(again)


def test_edits_outside_the_body_parse_the_class_again() -> None:
    text = _trainer(3)
    before = source_of(text)
    unit = next(u for u in before.units if type(u.statement) is cst.ClassDef)
    header_edit = unit.text.replace("(Trainer)", "(Trainer, Mixin)")
    assert derive_unit(unit, header_edit) is None
    assert derive_unit(unit, unit.text) is None
    broken = unit.text.replace("* 1\n", "* (1\n")
    assert derive_unit(unit, broken) is None
    for edited in (header_edit, text.replace("* 1\n", "* 11\n")):
        after = source_of(edited, before)
        assert_same_module(after, edited)
        assert_same_names(after)


def test_versions_of_an_edited_class_are_forgotten() -> None:
    """Each version shares the untouched members' nodes with the one before; what no version
    uses any more leaves the registries of units and children: typing in two methods, they
    stay the size they were after the first edits (an edited member's first version is kept
    with the parse of the class, whose header and other members the versions still use)."""
    import gc

    from memlint.python import tree, units

    text = _trainer(30)
    source = source_of(text)
    source.scopes  # noqa: B018
    sizes = []
    for n in range(40):
        line, added = "        # step 7\n", "        # step 7\n        x = 1\n"
        if n % 2:
            text = re.sub(r"\* 3\d*\n", f"* 3{n}\n", text, count=1)
        else:  # a line added, then taken away
            text = text.replace(added, line, 1) if added in text else text.replace(line, added, 1)
        source = source_of(text, source)
        source.scopes  # noqa: B018
        gc.collect()
        sizes.append((len(units._UNIT_OF), len(tree._CHILDREN)))
    assert_same_module(source, text)
    assert_same_names(source)
    assert sizes[-1][0] <= sizes[3][0] * 1.05 and sizes[-1][1] <= sizes[3][1] * 1.05, sizes


def test_a_member_deleted_under_a_block_leaves_a_deeper_comment_to_the_block() -> None:
    """``x = 1`` deleted: the deeper comment below it follows ``f``'s block now, which owns it."""
    text = _text(["    def f(self):\n        return 1\n", "    x = 1\n", "        # deeper\n", "    y = 2\n"], "")
    before = source_of(text)
    before.scopes  # noqa: B018
    edited = text.replace("    x = 1\n", "")
    after = source_of(edited, before)
    assert_same_module(after, edited)
    assert_same_names(after)
