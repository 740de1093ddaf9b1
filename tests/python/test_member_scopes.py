"""An edit of a method takes over the class's scope visit: the result is libcst's for the new text.

``python_member_scopes`` makes a class's scopes from its previous version's by visiting only the
members an edit replaced. Here a trainer class written as people write one (properties and
their setters, string annotations, decorators with arguments, defaults read from class
attributes, nested functions and closures, ``super()``, comprehensions) is edited method by
method -- bodies, signatures, decorators, names, lines added or removed above a member, nested
functions added -- each version analysed from the one before and compared with a fresh parse:
the module, positions, parents, scopes (every assignment with its uses, every use with what it
refers to), expression contexts and qualified names.
"""

from __future__ import annotations

import libcst as cst
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from python_texts import source_of
from test_python_analysis import assert_index_parts_spliced, assert_same_module, assert_same_names

from memlint.python import member_scopes, scopes
from memlint.python import source as python_source
from memlint.python.index import index_for
from memlint.python.statement_index import part_of
from memlint.python.syntax import iter_nodes

HEADER = '''"""A GRPO-style trainer."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Optional

import torch
from torch import nn
from transformers import Trainer

if TYPE_CHECKING:
    from transformers import PreTrainedModel

MAX_NEW_TOKENS = 256


class GRPOTrainer(Trainer):
    """Group relative policy optimisation."""

    _tag_names = ["trl", "grpo"]
    epsilon: float = 0.2

'''
FOOTER = '''

def build(model: "PreTrainedModel") -> GRPOTrainer:
    return GRPOTrainer(model=model)
'''

# each member of the class, in order, with the versions an edit may give it
SLOTS: list[list[str]] = [
    [
        '    def __init__(self, model: "PreTrainedModel", args=None, num_generations: int = 8):\n'
        '        super().__init__(model=model, args=args)\n        self.num_generations = num_generations\n',
        '    def __init__(self, model: "PreTrainedModel", args=None, num_generations: int = 16):\n'
        '        super().__init__(model=model, args=args)\n        self.num_generations = num_generations\n',
        '    def __init__(self, model: "Optional[PreTrainedModel]", args=None, beta=epsilon):\n'
        '        super().__init__(model=model, args=args)\n        self.beta = beta\n',
        # a parameter named as a property, read before it is rebound (Accelerate's
        # ``gradient_accumulation_steps``): libcst hands those reads to the class scope's ``beta``
        '    def __init__(self, model, args=None, beta=None, epsilon=0.1):\n'
        '        if beta is None:\n            beta = 0.04\n'
        '        epsilon = max(epsilon, 0.0)\n        super().__init__(model=model, args=args)\n'
        '        self.beta = beta\n',
    ],
    [
        "    @property\n    def beta(self) -> float:\n        return self._beta\n",
        "    @property\n    def beta(self) -> float:\n        # the KL coefficient\n        return self._beta * 2\n",
        "    @functools.cached_property\n    def beta(self) -> float:\n        return self._beta\n",
    ],
    [
        "    @beta.setter\n    def beta(self, value: float) -> None:\n        self._beta = value\n",
        "    @beta.setter\n    def beta(self, value: float) -> None:\n        self._beta = float(value)\n\n",
        "    def set_beta(self, value: float) -> None:\n        self._beta = value\n",
    ],
    [
        "    def _get_per_token_logps(self, model: nn.Module, input_ids, batch_size: int = 4):\n"
        "        logps = []\n        for start in range(0, input_ids.size(0), batch_size):\n"
        "            logits = model(input_ids[start:start + batch_size]).logits\n"
        "            logps.append(torch.log_softmax(logits, dim=-1))\n        return torch.cat(logps)\n",
        "    def _get_per_token_logps(self, model: nn.Module, input_ids, batch_size: int = 8):\n"
        "        logps = [torch.log_softmax(model(chunk).logits, dim=-1) for chunk in input_ids.split(batch_size)]\n"
        "        return torch.cat(logps)\n",
        "    @torch.no_grad()\n    def _get_per_token_logps(self, model: nn.Module, input_ids, batch_size: int = 4):\n"
        "        def chunks():\n            for start in range(0, input_ids.size(0), batch_size):\n"
        "                yield input_ids[start:start + batch_size]\n"
        "        return torch.cat([model(c).logits for c in chunks()])\n",
    ],
    [
        "    def compute_loss(self, model, inputs, return_outputs: bool = False, num_items_in_batch=None):\n"
        "        logps = self._get_per_token_logps(model, inputs['input_ids'])\n"
        "        loss = -(logps * inputs['advantages']).mean() * self.epsilon\n"
        "        return (loss, logps) if return_outputs else loss\n",
        "    def compute_loss(self, model, inputs, return_outputs: bool = False, num_items_in_batch=None):\n"
        "        logps = self._get_per_token_logps(model, inputs['input_ids'])\n"
        "        advantages: torch.Tensor = inputs['advantages']\n"
        "        loss = -(logps * advantages).mean() * MAX_NEW_TOKENS\n"
        "        return (loss, logps) if return_outputs else loss\n",
        "    def compute_loss(self, model, inputs, return_outputs: bool = False, num_items_in_batch=None):\n"
        "        total = 0\n        def add(x):\n            nonlocal total\n            total += x\n"
        "            return total\n        return add(1)\n",
        "    def compute_loss(self, model, inputs, return_outputs: bool = False, epsilon=None):\n"
        "        if epsilon is None:\n            epsilon = self.epsilon\n"
        "        loss = -(self._get_per_token_logps(model, inputs['input_ids'])).mean() * epsilon\n"
        "        return (loss, None) if return_outputs else loss\n",
    ],
    [
        "    @staticmethod\n    def _selective_log_softmax(logits, index):\n"
        "        return torch.gather(logits.log_softmax(-1), dim=-1, index=index.unsqueeze(-1)).squeeze(-1)\n",
        "    @staticmethod\n    def _selective_log_softmax(logits, index) -> \"torch.Tensor\":\n"
        "        return torch.gather(logits.log_softmax(-1), dim=-1, index=index.unsqueeze(-1)).squeeze(-1)\n",
        "    @staticmethod\n    def _selective_log_softmax(logits, index):\n"
        "        out = {k: v for k, v in zip(index, logits)}\n        return out\n",
    ],
    [
        "    def log(self, logs: dict[str, float], start_time: Optional[float] = None) -> None:\n"
        "        metrics = {key: sum(val) / len(val) for key, val in self._metrics.items()}\n"
        "        super().log({**logs, **metrics}, start_time)\n",
        "    def log(self, logs: dict[str, float], start_time: Optional[float] = None) -> None:\n"
        "        super().log(logs, start_time)\n",
        "    def log(self, logs: \"dict[str, Any]\", start_time=None) -> None:\n"
        "        metrics = {key: sum(val) / len(val) for key, val in self._metrics.items()}\n"
        "        super().log({**logs, **metrics}, start_time)\n",
        # an import and a lambda inside a method (TRL's ``import deepspeed`` in one method)
        "    def log(self, logs: dict[str, float], start_time: Optional[float] = None) -> None:\n"
        "        import math\n        rounded = {key: math.floor(value) for key, value in logs.items()}\n"
        "        super().log(dict(sorted(rounded.items(), key=lambda item: item[0])), start_time)\n",
    ],
]


def _text(choice: list[int], blank: list[int]) -> str:
    members = []
    for slot, (variant, blanks) in enumerate(zip(choice, blank)):
        members.append(SLOTS[slot][variant] + "\n" * blanks)
    return HEADER + "\n".join(members) + FOOTER


def _counting(monkeypatch) -> list[bool]:
    """Record whether each class visit was taken over (True) or made whole (False)."""
    taken: list[bool] = []

    def counted(*args, **kwargs):
        made = member_scopes.visit_members(*args, **kwargs)
        taken.append(made is not None)
        return made

    monkeypatch.setattr(scopes, "visit_members", counted)
    return taken


FIRST = st.tuples(*(st.integers(0, len(variants) - 1) for variants in SLOTS)).map(list)
EDITS = st.lists(st.integers(0, len(SLOTS) - 1).flatmap(
    lambda slot: st.tuples(st.just(slot), st.integers(0, len(SLOTS[slot]) - 1), st.integers(0, 2))),
    min_size=1, max_size=6)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(FIRST, EDITS)
def test_edits_of_methods_give_what_a_fresh_parse_gives(first: list[int], edits: list[tuple[int, int, int]]) -> None:
    """Each version analysed from the one before (its scopes and the rules' index asked, as a
    lint asks them) and compared with libcst's analysis of its text and a fresh walk of it. The
    first version is drawn too: an edit that replaces a member's variant by another is then
    met in most examples, not only after two edits of the same slot."""
    choice, blank = list(first), [0] * len(SLOTS)
    source = source_of(_text(choice, blank))
    source.scopes  # noqa: B018
    # the last two: kinds most members have none of, so an edit's list is kept or filtered again
    kinds = [(cst.Call,), (cst.For, cst.While), (cst.Assign, cst.AugAssign, cst.AnnAssign), (cst.FunctionDef,),
             (cst.Import, cst.ImportFrom), (cst.Lambda,)]
    for asked in kinds:  # as the rules ask them: each version's lists are spliced from the last's
        index_for(source).nodes_of(*asked)
    for slot, variant, blanks in edits:
        choice[slot], blank[slot] = variant, blanks
        text = _text(choice, blank)
        after = python_source.parse(text, source)
        assert isinstance(after, python_source.PythonSource)
        after.scopes  # noqa: B018
        assert_same_module(after, text)
        assert_same_names(after)
        assert_index_parts_spliced(after)
        for asked in kinds:
            index_for(after).nodes_of(*asked)
        source = after


def test_an_edit_inside_a_method_visits_that_method_alone(monkeypatch) -> None:
    """A number changed in a method's body, a line added above a member (inside the method
    before it), the method's signature and decorator changed, a nested function added: each
    takes over the last visit and gives libcst's scopes."""
    taken = _counting(monkeypatch)
    text = _text([0] * len(SLOTS), [0] * len(SLOTS))
    source = source_of(text)
    source.scopes  # noqa: B018
    edits = [
        lambda t: t.replace("batch_size: int = 4", "batch_size: int = 16"),
        lambda t: t.replace("        self._beta = value\n", "        self._beta = value\n        self._kl = []\n"),
        lambda t: t.replace("    def log(self, logs: dict[str, float],", "    def log(self, logs: \"dict[str, Any]\","),
        lambda t: t.replace("    @staticmethod\n", "    @functools.lru_cache(maxsize=MAX_NEW_TOKENS)\n"),
        lambda t: t.replace("        self.num_generations = num_generations\n",
                            "        def hook(module, grad):\n            return grad * num_generations\n"
                            "        self.num_generations = num_generations\n"),
        lambda t: t.replace("        return self._beta\n", "        return self._beta + self.epsilon\n"),
    ]
    for edit in edits:
        edited = edit(text)
        assert edited != text
        after = python_source.parse(edited, source)
        assert isinstance(after, python_source.PythonSource)
        after.scopes  # noqa: B018
        assert_same_module(after, edited)
        assert_same_names(after)
        text, source = edited, after
    assert taken == [True] * len(edits)


def test_a_parameter_read_before_it_is_rebound_is_linked_to_the_class_names_as_libcst_links_it(monkeypatch) -> None:
    """libcst hands a use that precedes an assignment of its name in a method (``if beta is
    None: beta = ...``) to the class scope's assignments of that name too (Accelerate's
    ``__init__`` and its ``gradient_accumulation_steps`` property). An edit of the method must
    take its old uses out of those assignments, and an edit of the property must give the new
    property the kept method's uses (the comparison with libcst checks every assignment's uses)."""
    taken = _counting(monkeypatch)
    text = _text([3, 0, 0, 0, 3, 0, 0], [0] * len(SLOTS))
    source = source_of(text)
    source.scopes  # noqa: B018
    for old, new in (("beta = 0.04", "beta = 0.05"),  # the method
                     ("        return self._beta\n", "        return self._beta * 2\n"),  # the property
                     ("epsilon = self.epsilon", "epsilon = self.epsilon * 2"),  # another method
                     ("-> float:\n        return", "-> float:\n        # the KL coefficient\n        return")):
        edited = text.replace(old, new)
        assert edited != text
        after = python_source.parse(edited, source)
        after.scopes  # noqa: B018
        assert_same_names(after)
        text, source = edited, after
    assert all(taken)


def test_a_method_renamed_relinks_the_class_level_uses_of_both_names(monkeypatch) -> None:
    """``beta`` renamed ``gamma`` under ``@property``: the setter's ``@beta.setter`` referred to the
    old member, and now to nothing in the class; named back, to the new one (the comparison
    with libcst checks every use's referents)."""
    taken = _counting(monkeypatch)
    text = _text([0] * len(SLOTS), [0] * len(SLOTS))
    source = source_of(text)
    source.scopes  # noqa: B018
    for edited in (text.replace("def beta(self) -> float", "def gamma(self) -> float"), text):
        after = python_source.parse(edited, source)
        after.scopes  # noqa: B018
        assert_same_names(after)
        source = after
    assert taken == [True, True]


def test_the_rules_index_part_of_an_edited_class_is_its_nodes_in_order() -> None:
    """The rules' index keeps a class's part across a method's edit (``statement_index``): its
    nodes are the class's, in source order, as a walk of the new class gives them, and the
    tables of the methods the edit left alone are kept."""
    text = _text([0] * len(SLOTS), [0] * len(SLOTS))
    source = source_of(text)
    index_for(source)
    for old, new in (("batch_size: int = 4", "batch_size: int = 16"),
                     ("        self._beta = value\n", "        self._beta = value\n        self._kl = []\n"),
                     ("    @staticmethod\n", "    @functools.lru_cache(maxsize=MAX_NEW_TOKENS)\n")):
        text = text.replace(old, new)
        after = python_source.parse(text, source)
        assert isinstance(after, python_source.PythonSource)
        index_for(after)
        unit = next(u for u in after.units if u.origin is not None)
        statement = after.module.body[after.units.index(unit)]
        part = part_of(unit, statement)
        assert part.below == list(iter_nodes(statement, enter_defs=True))[1:]
        assert part.tables and all(function not in unit.origin.removed for function in part.tables)
        source = after


def test_diagnostics_after_edits_of_a_method_are_those_of_a_fresh_lint(tmp_path) -> None:
    """End to end, as the language server lints: a trainer module edited method by method in
    one ``Linter`` (its project's overlay) gives the diagnostics a fresh ``Linter`` gives."""
    from memlint.lint.engine import Linter
    from memlint.project.settings import discover

    path = tmp_path / "grpo_trainer.py"
    text = _text([0] * len(SLOTS), [0] * len(SLOTS)) + (
        "\n\ndef train(model, loader, optimizer, accumulation_steps: int = 8):\n"
        "    scaler = torch.cuda.amp.GradScaler()\n"
        "    for step, batch in enumerate(loader):\n"
        "        with torch.cuda.amp.autocast():\n            loss = model(**batch).loss\n"
        "        scaler.scale(loss).backward()\n"
        "        if (step + 1) % accumulation_steps == 0:\n"
        "            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)\n"
        "            scaler.step(optimizer)\n            scaler.update()\n            optimizer.zero_grad()\n")
    path.write_text(text, encoding="utf-8")
    settings = discover(tmp_path)
    linter = Linter(settings)

    def found(diagnostics) -> list[tuple]:
        return sorted((d.code, d.range.start.line, d.range.start.column, d.range.end.line, d.message) for d in diagnostics)

    first = found(linter.lint_path(path))
    assert first, "the loop's mistakes are reported"
    for old, new in (("batch_size: int = 4", "batch_size: int = 16"),
                     ("        return self._beta\n", "        return self._beta * 2\n"),
                     ("        self._beta = value\n", "        self._beta = value\n        self._kl = []\n"),
                     ("    @staticmethod\n", "    @functools.lru_cache(maxsize=MAX_NEW_TOKENS)\n")):
        text = text.replace(old, new)
        linter.project.set_overlay(path, text)
        edited = found(linter.lint_path(path))
        fresh_path = tmp_path / "fresh" / "grpo_trainer.py"
        fresh_path.parent.mkdir(exist_ok=True)
        fresh_path.write_text(text, encoding="utf-8")
        assert edited == found(Linter(discover(fresh_path.parent)).lint_path(fresh_path))


DOTTED = '''import torch
{imports}


class Trainer:
    def step(self, nn, batch):
        return nn.functional.relu(batch).sum() * {scale}

    def clip(self, nn):
        return nn.utils.clip_grad_norm_
'''


def test_dotted_imports_that_come_and_go_around_method_edits_give_libcsts_scopes() -> None:
    """A use under an attribute whose dotted name the module binds (``import nn.functional``,
    a local ``nn`` used as ``nn.functional.relu``) is linked by libcst to that name; a visit
    checked against the module's dotted names is not checked again while they stay or shrink,
    and a method's edit keeps the check of the class's kept uses."""
    source = source_of(DOTTED.format(imports="", scale=1))
    source.scopes  # noqa: B018
    for imports, scale in [("import nn.functional", 1), ("import nn.functional", 2),
                           ("import nn.functional\nimport nn.utils", 2), ("import nn.functional\nimport nn.utils", 3),
                           ("import nn.utils", 3), ("import nn.utils", 4), ("", 4), ("import nn.functional", 5)]:
        text = DOTTED.format(imports=imports, scale=scale)
        after = python_source.parse(text, source)
        assert isinstance(after, python_source.PythonSource)
        after.scopes  # noqa: B018
        assert_same_module(after, text)
        assert_same_names(after)
        source = after
