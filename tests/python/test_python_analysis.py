"""memlint's fast paths over libcst give what libcst's own providers give.

``memlint.python`` parses a script statement by statement (reusing the statements an edit left
alone), records positions, parents and children in one codegen pass, and walks libcst's scope
visitors over the recorded children. Each must answer exactly as ``cst.parse_module`` and
libcst's ``PositionProvider`` / ``ParentNodeProvider`` / ``ScopeProvider`` /
``QualifiedNameProvider`` do, on the scripts memlint is for -- and keep doing so when libcst
is upgraded. These tests compare them node by node.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import libcst as cst
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from libcst import metadata
from python_texts import parses, source_of

from memlint.documents.parsed import parse_document
from memlint.documents.reading import Document
from memlint.lint.engine import Linter
from memlint.project.settings import Settings
from memlint.python import source as python_source
from memlint.python.scopes import expression_contexts_of
from memlint.python.tree import FORMATTING, children, parents_of
from memlint.python.units import parse_in_units

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from lsp_latency import training_script  # noqa: E402

SCRIPTS = sorted(
    {*ROOT.glob("examples/*/*.py"), *ROOT.glob("tests/real_runs/*/*.py"), *ROOT.glob("tests/real_runs/**/train*.py"),
     *ROOT.glob("bench/scripts/*.py"), *ROOT.glob("tests/lsp/fixtures/project/*.py")}
)


def _parses(path: Path) -> bool:
    try:
        ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError):  # the examples of syntax errors and merge conflicts
        return False
    return True


SCRIPTS = [path for path in SCRIPTS if _parses(path)]



def assert_same_module(source: python_source.PythonSource, text: str) -> None:
    """The module, its positions, parents and children are what libcst gives for ``text``."""
    whole = cst.parse_module(text)
    module = source.module
    # libcst itself loses a blank line above indented comments at the very end of a file
    # (``x = 1\n\n    # c\n``): there memlint's module is libcst's, not the text
    assert module.code == whole.code
    assert module.deep_equals(whole)
    for attribute in ("header", "footer"):
        ours, theirs = getattr(module, attribute), getattr(whole, attribute)
        assert len(ours) == len(theirs) and all(a.deep_equals(b) for a, b in zip(ours, theirs)), attribute
    for attribute in ("encoding", "default_indent", "default_newline", "has_trailing_newline"):
        assert getattr(module, attribute) == getattr(whole, attribute), attribute
    wrapper = metadata.MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(metadata.PositionProvider)
    parents = wrapper.resolve(metadata.ParentNodeProvider)
    assert len(source.positions) == len(positions)
    for node, expected in positions.items():
        assert source.positions[node] == expected, (type(node).__name__, expected)
    stack: list[cst.CSTNode] = [module]
    shape: dict[cst.CSTNode, list[cst.CSTNode]] = {}
    while stack:
        node = stack.pop()
        syntax = [child for child in node.children if type(child) not in FORMATTING]
        # what every walk over the tree reads (``python_tree.children``): the recorded children
        shape[node] = list(children(node))
        assert shape[node] == syntax, type(node).__name__
        if node is not module:
            assert source.parents[node] is parents[node]
        stack.extend(syntax)
    assert len(shape) == len(source.parents) + 1
    # joined from the units' parents, in the order of one walk over the whole module (the order
    # extractors that read the dict see nodes in)
    assert list(source.parents) == list(parents_of(module, shape))
    # the typed lists the extractors walk instead of every node, joined from the units' lists
    for kinds in ((cst.Call,), (cst.Assign, cst.FunctionDef), (cst.SimpleStatementLine, cst.Expr, cst.Call)):
        assert source.nodes_of(*kinds) == [node for node in source.parents if type(node) in kinds]
        # and sorted by where they start (a statement line before the expression it starts with)
        in_order = sorted(source.nodes_of(*kinds), key=lambda n: (positions[n].start.line, positions[n].start.column))
        assert source.nodes_in_order(*kinds) == in_order


def _scope_summary(scopes, nodes) -> tuple:
    def name(scope):
        return (type(scope).__name__, id(getattr(scope, "node", None)))

    per_node = {id(node): name(scopes[node]) if scopes.get(node) else None for node in nodes}
    per_scope = {}
    for scope in {s for s in scopes.values() if s is not None}:
        assignments = sorted(
            (a.name, type(a).__name__, id(getattr(a, "node", None)), tuple(sorted(id(r.node) for r in a.references)))
            for a in scope.assignments
        )
        accesses = sorted(
            (id(a.node), a.is_annotation, a.is_type_hint,
             tuple(sorted((r.name, type(r).__name__, id(getattr(r, "node", None))) for r in a.referents)))
            for a in scope.accesses
        )
        per_scope[name(scope)] = (assignments, accesses, name(scope.parent) if scope.parent is not scope else None)
    return per_node, per_scope


def assert_same_names(source: python_source.PythonSource) -> None:
    """Scopes and qualified names are libcst's (formatting nodes have no scope: none has a name)."""
    wrapper = metadata.MetadataWrapper(source.module, unsafe_skip_copy=True)
    expected = wrapper.resolve(metadata.ScopeProvider)
    syntax = [source.module, *source.parents]
    # the expression contexts the scopes are built from, kept per unit (python_scopes)
    contexts = expression_contexts_of(source.module, source.units)
    assert contexts == dict(wrapper.resolve(metadata.ExpressionContextProvider))
    assert _scope_summary(source.scopes, syntax) == _scope_summary(expected, syntax)
    qualified = wrapper.resolve(metadata.QualifiedNameProvider)
    for node in syntax:
        if isinstance(node, (cst.Name, cst.Attribute, cst.Call)):
            names = qualified.get(node.func if isinstance(node, cst.Call) else node, set())
            names = names() if callable(names) else names
            assert source.qualified_names(node) == {q.name for q in names}, source.code_of(node)


def assert_index_parts_spliced(source: python_source.PythonSource) -> None:
    """The rules' index part of every unit kept from the version before is the statement's own."""
    from memlint.python.index import index_for
    from memlint.python.statement_index import part_of
    from memlint.python.syntax import iter_nodes

    index_for(source)
    for unit, statement in zip(source.units, source.module.body):
        if unit.origin is not None:
            part = part_of(unit, statement)
            assert part.below == list(iter_nodes(statement, enter_defs=True))[1:]
            for asked, found in part.of_kinds.items():
                assert found == [node for node in part.below if type(node) in asked]


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_realistic_scripts_analyse_as_libcst_does(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    source = source_of(text)
    assert source.units, "a realistic script is parsed statement by statement"
    assert_same_module(source, text)
    assert_same_names(source)


def test_a_generated_2000_line_script_analyses_as_libcst_does() -> None:
    text = training_script(2000)
    source = source_of(text)
    assert len(source.units) > 50
    assert_same_module(source, text)
    assert_same_names(source)


SCRIPT = (ROOT / "bench" / "scripts" / "train_clm_no_trainer.py").read_text(encoding="utf-8")

EDITS = {
    "a number in a function": lambda t: t.replace("default=2048", "default=4096"),
    "a line added to a function": lambda t: t.replace(
        "    model.train()\n    return eval_loss", "    model.train()\n    model.zero_grad()\n    return eval_loss"),
    "a function deleted": lambda t: t.replace(t[t.index("def group_texts"):t.index("def optimizer_groups")], ""),
    "a comment between functions": lambda t: t.replace("\n\ndef build_model", "\n# the model and tokenizer\n\ndef build_model"),
    "an indented comment after a function": lambda t: t.replace(
        "    return model, tokenizer\n", "    return model, tokenizer\n    # done\n\n  # odd\n"),
    "a decorator added": lambda t: t.replace("def optimizer_groups", "@functools.cache\ndef optimizer_groups"),
    "an import in the header": lambda t: t.replace("import argparse\n", "import argparse\nimport functools\n"),
    "the module docstring edited": lambda t: t.replace("It is never run.", "It is never run, only read."),
    "no newline at the end": lambda t: t.rstrip("\n"),
    "blank lines at the end": lambda t: t + "\n\n# trailing\n\n",
    "two statements on a line": lambda t: t.replace("logger = get_logger(__name__)", "logger = get_logger(__name__); VERSION = 2"),
    "a statement joined to the previous one": lambda t: t.replace(
        "MODEL_TYPES = tuple", "MODEL_TYPES = \\\n    tuple"),
    "one function indented with tabs": lambda t: _with_tabs(t, "def group_texts", "def optimizer_groups"),
    "a decorator removed": lambda t: t.replace("@torch.no_grad()\ndef evaluate", "def evaluate"),
    "a function re-indented by two spaces": lambda t: _reindent(t, "def group_texts", "def optimizer_groups"),
    "a top-level statement moved into the block above": lambda t: t.replace(
        'if __name__ == "__main__":\n    main()\n', 'if __name__ == "__main__":\n    main()\n    logger.info("done")\n'),
    "a call split over lines": lambda t: t.replace(
        "logger = get_logger(__name__)", "logger = get_logger(\n    __name__,\n)"),
    "a statement split in two": lambda t: t.replace(
        "logger = get_logger(__name__)", "NAME = __name__\nlogger = get_logger(NAME)"),
}


def _reindent(text: str, start: str, end: str) -> str:
    """``text`` with the function between ``start`` and ``end`` indented by two spaces, not four."""
    return _indented(text, start, end, lambda spaces: " " * (spaces // 2))


def _with_tabs(text: str, start: str, end: str) -> str:
    """``text`` with the function between ``start`` and ``end`` indented with tabs."""
    return _indented(text, start, end, lambda spaces: "\t" * (spaces // 4))


def _indented(text: str, start: str, end: str, indent) -> str:
    """``text`` with each line between ``start`` and ``end`` indented by ``indent(spaces)``
    instead of its leading spaces."""
    begin, stop = text.index(start), text.index(end)
    lines = []
    for line in text[begin:stop].splitlines(keepends=True):
        stripped = line.lstrip(" ")
        lines.append(indent(len(line) - len(stripped)) + stripped)
    return text[:begin] + "".join(lines) + text[stop:]


@pytest.mark.parametrize("edit", EDITS, ids=list(EDITS))
def test_an_edit_reparses_only_what_it_changed(edit: str) -> None:
    before = source_of(SCRIPT)
    before.scopes  # noqa: B018 -- the kept units' expression contexts are reused after the edit
    text = EDITS[edit](SCRIPT)
    assert text != SCRIPT
    after = python_source.parse(text, before)
    if isinstance(after, python_source.PythonSyntaxError):
        pytest.fail(f"the edit broke the script: {after}")
    assert_same_module(after, text)
    assert_same_names(after)
    if after.units:  # mixed indentation is parsed whole: nothing to reuse
        reused = [u for u in after.units if any(u is v for v in before.units)]
        assert len(reused) >= len(after.units) - 3, "unchanged statements are not parsed again"


def test_a_syntax_error_typed_and_fixed_keeps_the_statements_around_it() -> None:
    """Typing goes through broken states (``foo(`` before ``)``): the version after the fix
    reuses the statements of the last version that parsed, and is still a whole parse."""
    texts = [
        SCRIPT,
        SCRIPT.replace("    model.train()\n    return eval_loss", "    model.train(\n    return eval_loss"),
        SCRIPT.replace("    model.train()\n    return eval_loss", "    model.train(\n    return eval_loss"
                       ).replace("def main():", "def main(:"),
        SCRIPT.replace("    model.train()\n    return eval_loss", "    model.train()\n    model.eval()\n    return eval_loss"),
        SCRIPT.replace("def build_model(args):", "def build_model(args)\n"),
        SCRIPT.replace("def build_model(args):", "def build_model(args, config=None):"),
    ]
    path = ROOT / "train.py"
    previous = None
    for text in texts:
        parsed = parse_document(Document(str(path), text, "python"), previous)
        broken = isinstance(python_source.parse(text), python_source.PythonSyntaxError)
        assert (parsed.syntax_error is not None) == broken
        if not broken:
            assert_same_module(parsed.python, text)
            assert_same_names(parsed.python)
            if previous is not None:
                reused = [u for u in parsed.python.units if any(u is v for v in previous.reusable.units)]
                assert len(reused) >= len(parsed.python.units) - 2
        previous = parsed


def _nested(depth: int) -> str:
    return "x = " + "-" * depth + "1\n"  # a unary minus in a unary minus...


def test_nesting_too_deep_is_found_in_an_edited_statement_and_forgotten_when_fixed() -> None:
    """Each unit's depth is measured once and kept with the document; an edit that nests a
    statement past the limit is caught, and the version that fixes it parses again."""
    limit = python_source.MAX_DEPTH
    before = source_of(SCRIPT)
    assert before.depths and python_source._depth(ast.parse(SCRIPT)) == 1 + max(before.depths.values())
    deep = SCRIPT.replace("logger = get_logger(__name__)\n", "logger = get_logger(__name__)\n" + _nested(limit))
    problem = python_source.parse(deep, before)
    assert isinstance(problem, python_source.PythonSyntaxError) and problem.kind == "too-complex"
    assert problem == python_source.parse(deep)
    shallow = SCRIPT.replace("logger = get_logger(__name__)\n", "logger = get_logger(__name__)\n" + _nested(limit - 10))
    after = source_of(shallow, before)
    assert_same_module(after, shallow)
    assert python_source._depth(ast.parse(shallow)) == 1 + max(after.depths.values())
    assert max(after.depths.values()) > max(before.depths.values())  # the edited statement measured again


@pytest.mark.parametrize("before_text, after_text", [
    # the changed line runs on into a kept statement: ``x = 1; y = 2`` is one unit
    ("a = 0\nx = 1\ny = 2\n", "a = 0\nx = 1; y = 2\n"),
    # a statement put above the first unit's header comment: the comment goes with it
    ("# header\ndef f():\n    pass\nimport torch\n", "import os\n# header\ndef f():\n    pass\nimport torch\n"),
    # an unclosed bracket swallows the kept statements below it
    ("a = 0\nx = 1\ny = 2\n", "a = 0\nx = (1,\ny = 2\n"),
    # a line continuation at the end of the changed lines
    ("a = 0\nx = 1\ny = 2\n", "a = 0\nx = 1 \\\ny = 2\n"),
    # an indented line joins the block of the kept statement above
    ("if a:\n    b = 1\nx = 1\ny = 2\n", "if a:\n    b = 1\n    x = 1\ny = 2\n"),
    # a stray indent, an ``else`` without ``if``, a decorator without a function
    ("a = 0\nx = 1\ny = 2\n", "a = 0\n  x = 1\ny = 2\n"),
    ("a = 0\nx = 1\ny = 2\n", "a = 0\nelse:\n    x = 1\ny = 2\n"),
    ("a = 0\nx = 1\ny = 2\n", "a = 0\n@decorator\ny = 2\n"),
])
def test_an_edit_checked_alone_gives_the_whole_texts_verdict(before_text: str, after_text: str) -> None:
    """CPython checks only the changed lines when they stand alone; where they do not (they run
    on into the kept statements, or need the lines around them), the whole text is checked."""
    before = source_of(before_text)
    after = python_source.parse(after_text, before)
    fresh = python_source.parse(after_text)
    assert after == fresh if isinstance(fresh, python_source.PythonSyntaxError) else (
        isinstance(after, python_source.PythonSource) and after.module.deep_equals(fresh.module)
        and [u.text for u in after.units] == [u.text for u in fresh.units] and after.depths == fresh.depths)


def test_a_sequence_of_edits_gives_what_a_whole_parse_gives() -> None:
    """Edits one after another, each parsed from the version before it, as the server does."""
    previous = None
    text = SCRIPT
    for edit in EDITS.values():
        try:
            text = edit(text)
        except ValueError:  # an edit whose anchor an earlier one removed
            continue
        source = source_of(text, previous)
        assert_same_module(source, text)
        previous = source
    assert_same_names(previous)


def test_a_file_with_windows_line_ends_is_parsed_whole_and_the_same() -> None:
    text = SCRIPT.replace("\n", "\r\n")
    source = source_of(text)
    assert not source.units
    assert source.module.code == text
    assert_same_names(source)


LINES = [
    "x = 1\n", "    y = x + 1\n", "def f(a, b=2):\n", "    return a\n", "class C:\n", "    z: int = 3\n",
    "# a comment\n", "\n", "    # indented comment\n", "if x:\n", "else:\n", "@decorator\n", "import torch\n",
    "from torch import nn as tnn\n", "    loss.backward()\n", "for i in range(3): pass\n", "\tw = 2\n",
    "print(x); print(y)\n", "z = (1,\n", "     2)\n", "async def g():\n", "    await h()\n",
]


# whole top-level statements with the comments, blank lines and indentation around them
BLOCKS = [
    "x = 1\n", "def f(a, b=2):\n    return a\n", "class C:\n    z: int = 3\n\n    # indented comment\n",
    "# a comment\n", "\n", "    # indented comment\n", "if x:\n    y = x + 1\nelse:\n    pass\n",
    "@decorator\ndef g():\n    pass\n", "@torch.no_grad()\n@other\nclass D:\n  pass\n", "import torch\n",
    "from torch import nn as tnn\n", "for i in range(3): pass\n", "def h():\n\tw = 2\n", "print(x); print(y)\n",
    "z = (1,\n     2)\n", "async def g():\n    await h()\n", "x = 1 \\\n    + 2\n", '"""doc"""\n',
    "with open(p) as f:\n    data = f.read()\n  # odd comment\n", "def k():\n    pass\n    # done\n\n",
    # typing names decide how libcst reads strings; ``global`` writes a module-level name from a function
    "from typing import cast, List\n", "cast = print\n", "import typing as t\n",
    "def u():\n    global x\n    x = cast('int', y)\n    return t.List['C']\n", "y: List['x'] = []\n",
    # uses linked to a statement's own scopes keep their links across joins (python_unit_scopes)
    ("def n(x):\n    x = x + 1\n    y = [x for x in range(x)]\n    def inner():\n        nonlocal x\n        return x\n"
     "    return y, z\n"),
    "def m(a):\n    import os.path\n    b = a.b.c\n    return os.path.join(b, a.b)\n", "import a.b\n",
    "class E:\n    k = 1\n\n    def m(self):\n        return k, self.k\n", "z = 0\n",
]
PIECES = st.sampled_from(BLOCKS) | st.sampled_from(LINES)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(BLOCKS), min_size=1, max_size=14), st.lists(PIECES, max_size=6),
       st.integers(min_value=0, max_value=14))
def test_any_valid_edit_gives_what_a_whole_parse_gives(first: list[str], inserted: list[str], at: int) -> None:
    """An edit reparses only the lines it changed (CPython checks those alone, libcst parses the
    statements in them): the verdict, error or module, is a fresh parse's, for valid edits and
    for the broken states typing goes through (an unclosed bracket, a stray indent, an ``else``)."""
    before_text = "".join(first)
    after_text = "".join(first[:at] + inserted + first[at:])
    try:
        ast.parse(before_text)
        cst.parse_module(before_text)
    except (SyntaxError, cst.ParserSyntaxError):
        return
    before = source_of(before_text)
    before.scopes  # noqa: B018 -- the kept units' expression contexts are reused after the edit
    after = python_source.parse(after_text, before)
    fresh = python_source.parse(after_text)
    if isinstance(fresh, python_source.PythonSyntaxError):
        assert after == fresh
        return
    assert isinstance(after, python_source.PythonSource), after
    assert_same_module(after, after_text)
    assert_same_names(after)
    assert after.depths == fresh.depths
    tree = ast.parse(after_text)
    joined = parse_in_units(after_text, tree)
    if joined is not None:
        assert joined.module.deep_equals(cst.parse_module(after_text))


_USES = "\n\ndef f():\n    return torch.optim.AdamW(p)\n\n\ng = torch.nn.Linear(1, 1)\n"


@pytest.mark.parametrize("versions", [
    # a module-level use before, then after the assignment it may refer to (both statements kept)
    ["print(x)\nx = 1\n", "x = 1\nprint(x)\n", "print(x)\nx = 1\n"],
    # the import above the kept statements rebound, one assignment each time (nothing moves)
    [header + _USES for header in ("import torch\n", "import apex as torch\n", "import torch.optim\n",
                                   "from bitsandbytes import optim\n", "torch = None\n", "import torch\n")],
])
def test_qualified_names_kept_across_edits_are_libcsts(versions: list[str]) -> None:
    """Qualified names are kept with a statement's nodes from one version to the next, until
    the module binds the first part of a name differently or the statement moves among the
    module's assignments; every version's names are compared with libcst's after the last's
    were asked (and kept)."""
    source = source_of(versions[0])
    assert_same_names(source)
    for text in versions[1:]:
        source = source_of(text, source)
        assert_same_names(source)



@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(BLOCKS), min_size=1, max_size=10),
       st.lists(st.tuples(st.lists(PIECES, max_size=3), st.integers(min_value=0, max_value=12)), min_size=2, max_size=5))
def test_several_edits_in_a_row_give_libcsts_scopes(first: list[str], edits: list[tuple[list[str], int]]) -> None:
    """What the language server does: each version joined from the last one's units and links
    (a use linked locally at one join is kept at the next), compared with libcst each time."""
    if not parses("".join(first)):
        return
    blocks = list(first)
    source = source_of("".join(blocks))
    source.scopes  # noqa: B018
    for inserted, at in edits:
        blocks = blocks[:at] + inserted + blocks[at:]
        text = "".join(blocks)
        if not parses(text):
            continue  # typed through a broken state: the last valid version stays the one reused
        source = source_of(text, source)
        assert_same_names(source)


def test_diagnostics_after_edits_are_those_of_a_fresh_lint(tmp_path: Path) -> None:
    """The language server's case: one linter, the document edited again and again."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    settings_ = Settings(root=tmp_path, gpu="v100", gpus=1)
    warm = Linter(settings_)
    warm.lint_path(script)
    text = SCRIPT
    for edit in ("a number in a function", "a line added to a function", "a comment between functions",
                 "a decorator removed", "a statement split in two", "a function re-indented by two spaces",
                 "a function deleted", "an import in the header"):
        text = EDITS[edit](text)
        warm.project.set_overlay(script, text)
        cold = Linter(settings_)
        cold.project.set_overlay(script, text)
        assert warm.lint_path(script) == cold.lint_path(script), edit


TYPING_AND_ORDER = '''import torch
{header}

def loss_of(model, batch):
    logits = cast("torch.Tensor", model(batch))
    scale: List["torch.dtype"] = []
    return logits.float().mean()


def train(model, steps):
    global STEP
    for STEP in range(steps):
        loss_of(model, None).backward()
    print(TOTAL)


TOTAL = 0
{footer}
'''


LOCAL_LINKS = '''import torch
{header}

def step(model, batch, a):
    loss = model(batch).loss
    loss = loss / 4
    b = a.b.c
    total = [loss for loss in range(3)]
    def scaled():
        nonlocal loss
        return loss * scale
    return scaled(), b, total


def late(x):
    x = x + 1  # the use reads the module's ``x`` when there is one: its own comes after
    return x


class Trainer:
    steps = 10

    def run(self):
        return steps, self.steps
{footer}
'''


def test_local_links_kept_across_joins_stay_libcsts() -> None:
    """A use linked to its statement's own scopes keeps its links at the next join; module-level
    names that appear or go later (a dotted import a longer attribute prefers, a module ``x`` the
    read-before-assign falls back to, a module ``steps``) must still reach those uses."""
    previous = source_of(LOCAL_LINKS.format(header="", footer=""))
    previous.scopes  # noqa: B018 -- the first join sorts the uses; the next ones keep the local ones
    for header, footer in [("import a.b", ""), ("import a.b", "x = 0"), ("", "x = 0\nsteps = 3\nscale = 2"),
                           ("import a.b.c as c", "scale = 2"), ("", ""), ("a = None", "loss = 0")]:
        text = LOCAL_LINKS.format(header=header, footer=footer)
        source = source_of(text, previous)
        assert_same_module(source, text)
        assert_same_names(source)
        previous = source


@pytest.mark.parametrize("header, footer", [
    ("from typing import cast, List", ""),          # the strings become annotations
    ("from typing import List\ncast = print", ""),  # ``cast`` is the module's own
    ("import typing\ncast = typing.cast\nList = typing.List", ""),
    ("from typing import cast as cast, List", "cast = str\nSTEP = -1"),
    ("", "from typing import cast, List"),            # imported after use: the visit did not know
    ("from typing_extensions import cast\nfrom typing import List", "TOTAL = TOTAL + 1"),
])
def test_edits_around_typing_names_and_module_assignments_give_libcsts_scopes(header: str, footer: str) -> None:
    """A statement's visit is kept across edits only while the ``typing`` bindings above it are
    the same; module-level assignments above a kept statement move its order numbers."""
    plain = source_of(TYPING_AND_ORDER.format(header="", footer=""))
    plain.scopes  # noqa: B018 -- the visits an edit may reuse
    for text in (TYPING_AND_ORDER.format(header=header, footer=""),
                 TYPING_AND_ORDER.format(header=header, footer=footer),
                 TYPING_AND_ORDER.format(header="", footer=footer)):
        source = source_of(text, plain)
        assert_same_module(source, text)
        assert_same_names(source)
        plain = source


def test_an_edited_documents_earlier_versions_are_freed(tmp_path: Path) -> None:
    """The language server lints every version of a document: what it keeps per version (the
    rules' index, the units' registry, their scope visits) must go with the version, or memory
    grows with every keystroke."""
    import gc
    import weakref

    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    linter = Linter(Settings(root=tmp_path, gpu="v100", gpus=1))
    linter.lint_path(script)
    first = weakref.ref(linter.project.parsed(script).python)
    units = [weakref.ref(u) for u in linter.project.parsed(script).python.units]
    text = SCRIPT
    for edit in ("a number in a function", "a line added to a function", "a function deleted"):
        text = EDITS[edit](text)
        linter.project.set_overlay(script, text)
        linter.lint_path(script)
    gc.collect()
    assert first() is None, "the first version is still alive"
    live = linter.project.parsed(script).python.units
    assert all(u() is None or any(u() is v for v in live) for u in units), "a unit no version uses is alive"


def test_an_edited_documents_earlier_versions_go_without_the_cycle_collector(tmp_path: Path) -> None:
    """Freed by reference counting when the next version is analysed: a version left to the
    cycle collector sits in its generations until a pass walks all of it, a pause of 100 ms
    every tenth keystroke in the language server on a 2,000-line script (docs/latency.md)."""
    import gc
    import weakref

    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    linter = Linter(Settings(root=tmp_path, gpu="v100", gpus=1))
    linter.lint_path(script)
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        text = SCRIPT
        kept: list[tuple[str, weakref.ref]] = []
        for edit in ("a number in a function", "a line added to a function", "a function deleted",
                     "an import in the header"):
            source = linter.project.parsed(script).python
            module_scope = source.scopes[source.module]
            kept.append((f"the source before {edit!r}", weakref.ref(source)))
            if edit == "a number in a function":  # the scope of the function the edit replaces
                replaced = next(s for s in source.module.body
                                if isinstance(s, cst.FunctionDef) and "default=2048" in source.code_of(s))
                kept.append(("the replaced function's scope", weakref.ref(source.scopes[replaced.body.body[0]])))
                del replaced
            del source
            text = EDITS[edit](text)
            linter.project.set_overlay(script, text)
            assert linter.lint_path(script) is not None
            # the module scope is kept and patched (python_unit_scopes._Patch): nothing in it
            # may be of a statement the edit replaced
            current = linter.project.parsed(script).python
            assert current.scopes[current.module] is module_scope
            nodes = current.positions
            assert all(a.node in nodes for a in module_scope.assignments), "an assignment of a replaced statement"
            assert all(access.node in nodes for access in module_scope.accesses), "a use of a replaced statement"
            for scope in (module_scope, module_scope.parent):  # the module's and the builtins' assignments
                assert all(access.node in nodes for a in scope.assignments for access in a.references), \
                    "an assignment still lists a use of a replaced statement"
            del module_scope, current, nodes
        alive = [what for what, ref in kept if ref() is not None]
        assert not alive, f"alive until the cycle collector runs: {alive}"
    finally:
        if was_enabled:
            gc.enable()


def _reaching_lines(text: str, name: str, call_text: str) -> list[int]:
    from memlint.python.index import index_for
    from memlint.python.source import parse

    source = parse(text)
    index = index_for(source)
    [call] = [c for c in index.nodes_of(cst.Call) if source.code_of(c) == call_text]
    lines = sorted(source.range_of(d.statement).start.line for d in index.reaching(name, call))
    del source
    return lines


def test_a_value_set_on_another_branch_does_not_reach():
    """`elif ...: loss = engine.backward(loss)` never reaches the `else:` beside it; inside a
    loop it does, on the next pass."""
    straight = """\
def training_step(self, model, inputs):
    loss = model(**inputs).loss
    if self.accumulating and not self.deepspeed:
        loss = loss / self.args.gradient_accumulation_steps
    if self.deepspeed:
        loss = self.deepspeed.backward(loss)
    else:
        loss.backward()
"""
    assert _reaching_lines(straight, "loss", "loss.backward()") == [2, 4]
    looped = """\
def train(model, loader):
    loss = None
    for batch in loader:
        if batch is None:
            loss = model.fallback_loss()
        else:
            loss.backward()
"""
    assert _reaching_lines(looped, "loss", "loss.backward()") == [2, 5]


# ``check``'s whole-module scopes skip libcst's search of every call's names where the text names
# none of typing's NewType, TypeVar and cast (``python_scopes._Scopes.visit_Call``); these mix
# the words in, aliased and in string annotations, or leave them out
CHECK_SNIPPETS = [
    "import torch", "import typing as t", "from typing import cast as c, List", "from typing import NewType, TypeVar",
    "from typing_extensions import cast", "import typing", "cast = print",
    "x = c(int, torch.ones(2))", "y = t.cast('torch.Tensor', x)", "T = t.TypeVar('T', bound='Model')",
    "U = TypeVar('U', 'int', 'str')", "Id = NewType('Id', int)", "z: 'c(int, 1)' = 0", "w: List['c(int, 2)'] = []",
    "def f(a: 'List[int]') -> 'typing.Dict[str, int]':\n    return call(a)",
    "opt = torch.optim.AdamW(model.parameters(), lr=1e-4)", "loss = model(batch).loss\nloss.backward()",
    "def g(x):\n    return x.to(dtype=torch.bfloat16)",
    "class M(torch.nn.Module):\n    def forward(self, x: 'torch.Tensor') -> 'torch.Tensor':\n        return self.f(x)",
    "v = typing.cast(List['Model'], load())", "k = cast(int, 3)",
]


@pytest.mark.parametrize("path", [*SCRIPTS, *sorted(ROOT.glob("memlint/python/*.py"))], ids=lambda p: str(p.relative_to(ROOT)))
def test_checks_whole_module_scopes_are_libcsts(path: Path) -> None:
    """``memlint check`` parses a module whole: its scopes, accesses (type hints included) and
    qualified names are libcst's, whether the text names typing's special calls or not."""
    source = python_source.parse(path.read_text(encoding="utf-8"), whole=True)
    assert isinstance(source, python_source.PythonSource)
    assert_same_names(source)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(CHECK_SNIPPETS), min_size=1, max_size=8))
def test_checks_scopes_with_and_without_typing_words_are_libcsts(snippets: list[str]) -> None:
    source = python_source.parse("\n".join(snippets) + "\n", whole=True)
    assert isinstance(source, python_source.PythonSource)
    assert_same_names(source)
