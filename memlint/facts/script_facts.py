"""Collecting one script's facts: which statement wins, what runs, what the command line sets.

Recognisers (``script_models``, ``script_trainers``, ``script_loops``, ``script_distributed``)
report what each call states; :class:`ScriptFacts` decides:

- precedence: a value from a ``TrainingArguments`` beats a ``DataLoader(batch_size=...)``; among
  equals the first in the file wins;
- conditions: a statement under ``if args.use_lora:`` with the option off by default states
  nothing, but the option is bound (``"if:lora_r=8"``) so a launcher passing ``--use_lora``
  turns the fact on;
- bindings: a value read from ``args.batch_size`` binds ``--batch_size`` to the fact; one worked
  out from options (``args.total_batch // args.micro_batch``) binds each of them to the formula
  (``"calc:grad_accum@[...]"``), which the launch redoes with its own values.
"""

from __future__ import annotations

from typing import Any, Callable

import libcst as cst

from memlint.documents.parsed import ParsedDocument
from memlint.facts.plan import RunFacts
from memlint.model.provenance import Location, Sourced
from memlint.python import option_formulas
from memlint.python.conditions import Guard, guards
from memlint.python.source import PythonSource
from memlint.python.values import MISSING, CallValue, Found, Mapping, Values

# precedence of the places a fact can come from (higher wins)
RANK_LOOP = 0  # DataLoader(batch_size=...), tokenizer(max_length=...), torch.autocast
RANK_MODEL = 1  # from_pretrained(...), model.gradient_checkpointing_enable()
RANK_CONFIG = 2  # TrainingArguments / SFTConfig / Accelerator / Lightning Trainer arguments
RANK_EXPLICIT = 3  # an optimizer built by hand, a DeepSpeed config dict

# which call anchors a run (higher wins): a trainer, a config, an engine, a model load
ANCHOR_TRAINER, ANCHOR_CONFIG, ANCHOR_ENGINE, ANCHOR_MODEL = 4, 3, 2, 1

_FRAMEWORK_RANK = {"trl": 5, "hf-trainer": 4, "lightning": 4, "deepspeed": 3, "accelerate": 2, "plain": 1}

_SCALARS = (bool, int, float, str)


def _names(value: Any) -> bool:
    """A tuple of plain names (``("q_proj", "v_proj")``), which a binding can carry."""
    return isinstance(value, tuple) and bool(value) and all(
        isinstance(v, str) and v and not set(v) & set("[],=:") for v in value)


def encode(value: Any) -> str:
    """A scalar as an ``if:`` binding writes it (``true``, ``4``, ``nf4``); a tuple of names
    (LoRA's target modules) as ``[q_proj,v_proj]``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ",".join(str(v) for v in value) + "]"
    return str(value)


class ScriptFacts:
    """The facts of one script while its recognisers run: which statement set each fact (the
    last one to run wins), whether the script trains at all, what the command line can change."""

    def __init__(self, parsed: ParsedDocument, values: Values) -> None:
        self.parsed = parsed
        self.values = values
        self.facts = RunFacts(parsed.path, "python")
        self._ranks: dict[str, int] = {}
        self._anchor_rank = 0
        self.training = False  # saw something that trains (a trainer, an optimizer, backward())
        self.training_at: list[cst.CSTNode] = []  # where (what ``memlint.facts.script`` asks of a library module)
        self.model_loaders = 0  # from_pretrained calls of the trained model seen so far
        self.finalizers: list[Callable[[], None]] = []
        self.pending: dict[str, Any] = {}  # what recognisers collect until the whole file is read

    # ------------------------------------------------------------- locations

    @property
    def python(self) -> PythonSource:
        python = self.parsed.python
        assert python is not None  # facts are read from parsed Python only
        return python

    def location(self, node: cst.CSTNode) -> Location:
        return Location(self.parsed.path, self.python.range_of(node))

    def anchor(self, node: cst.CSTNode, rank: int) -> None:
        if rank > self._anchor_rank:
            self._anchor_rank = rank
            self.facts.anchor = self.location(node)

    def framework(self, name: str, node: cst.CSTNode, note: str, trains: bool = True) -> None:
        """The framework the script runs under; ``trains`` False for one that also runs inference
        (an ``Accelerator`` trains only with an optimizer or a trainer beside it)."""
        current = self.facts.framework
        if current is None or _FRAMEWORK_RANK.get(name, 0) > _FRAMEWORK_RANK.get(str(current.value), 0):
            self.facts.framework = Sourced(name, self.location(node), note)
        if trains:
            self.training = True
            self.training_at.append(node)

    def reference(self, path: str, node: cst.CSTNode, note: str) -> None:
        if path and not any(r.value == path for r in self.facts.references):
            self.facts.references.append(Sourced(path, self.location(node), note))

    def switched_reference(self, options: tuple[str, ...], prefix: str, path: str, node: cst.CSTNode,
                           note: str) -> None:
        """A config the script names only when ``options`` are switched (``prefix``: "if" on)."""
        self.facts.switched_references.append((options, prefix, Sourced(path, self.location(node), note)))

    def auto_key(self, key: str, node: cst.CSTNode) -> None:
        self.facts.auto_keys.append(Sourced(key, self.location(node), "DeepSpeed \"auto\""))

    # ------------------------------------------------------------- bindings

    def bind(self, options: tuple[str, ...], binding: str) -> None:
        for option in options:
            # an argparse store_false flag (--no_x) sets its destination to False when passed
            bound = f"not:{binding}" if self.values.options.flag_kind(option) == "store_false" else binding
            current = self.facts.cli_bindings.get(option, ())
            if bound not in current:
                self.facts.cli_bindings[option] = current + (bound,)

    def bind_test(self, formula: tuple, negated: bool, name: str, value: Any) -> None:
        """Bind each option a comparison reads (``load_in_4bit=args.bits == 4``) to ``name = value``
        while the comparison holds (``negated``: while it fails), redone with the launch's values:
        ``--bits 16`` states no 4-bit load, even though the script's default does."""
        binding = f"{'whennot' if negated else 'when'}:{name}={encode(value)}@{option_formulas.encode(formula)}"
        for option in option_formulas.options_of(formula):
            current = self.facts.cli_bindings.get(option, ())
            if binding not in current:
                self.facts.cli_bindings[option] = current + (binding,)

    def bind_switch(self, found: Found, name: str, value: Any) -> None:
        """Bind the options that switch ``name = value`` on (``use_gradient_checkpointing=args.gc``,
        ``load_in_4bit=args.bits == 4``): a comparison is redone with the launch's values; an option
        on by default is also bound to take the fact back when a launch turns it off."""
        if found.formula is not None and not option_formulas.is_number(found.formula):
            self.bind_test(found.formula, False, name, value)
        elif found.options:
            self.bind(found.options, f"if:{name}={encode(value)}")
            if found.known and isinstance(found.value, _SCALARS) and bool(found.value):
                self._bind_taken_back(found.options, False, name, value)

    def _bind_taken_back(self, options: tuple[str, ...], negated: bool, name: str, value: Any) -> None:
        """``name = value`` holds because ``options`` are on (``negated``: off) by default: a launch
        turning them the other way takes it back. HfArgumentParser gives a boolean field that
        defaults to True a ``--no_<field>`` flag that turns it off, as argparse does an option of
        ``action=argparse.BooleanOptionalAction``."""
        binding = f"{'unlessnot' if negated else 'unless'}:{name}={encode(value)}"
        self.bind(options, binding)
        flags = self.values.options
        if not negated and (flags.parses_dataclasses() or any(flags.flag_kind(o) == "boolean_optional" for o in options)):
            for option in options:
                current = self.facts.cli_bindings.get(f"no_{option}", ())
                if f"not:{binding}" not in current:
                    self.facts.cli_bindings[f"no_{option}"] = current + (f"not:{binding}",)

    def bind_found(self, found: Found, binding: str) -> None:
        """Bind what replaces ``found`` on a command line to ``binding``: its options, or for a
        value worked out from options, each option the formula reads (``option_formulas``)."""
        if found.options:
            self.bind(found.options, binding)
        if found.formula is not None and option_formulas.is_number(found.formula):
            calculated = f"calc:{binding}@{option_formulas.encode(found.formula)}"
            # a formula over constants and WORLD_SIZE alone is kept under "$WORLD_SIZE", which no
            # launch passes as an option: its process count redoes it (``facts_from_cli``)
            variables = tuple(f"${name}" for name in sorted(option_formulas.variables_of(found.formula)))
            for option in option_formulas.options_of(found.formula) + variables:
                current = self.facts.cli_bindings.get(option, ())
                if calculated not in current:
                    self.facts.cli_bindings[option] = current + (calculated,)

    # ------------------------------------------------------------- facts

    def runs(self, at: cst.CSTNode, extra: list[Guard] | None = None) -> tuple[bool, Guard | None]:
        """Does the statement at ``at`` run by default? If not, the one option-decided guard
        that keeps it from running (None when it is not a single option)."""
        return self._runs(guards(self.values, at) + (extra or []))

    @staticmethod
    def _runs(found: list[Guard]) -> tuple[bool, Guard | None]:
        # the same condition met twice (``cfg = LoraConfig(...)`` and its one use,
        # ``get_peft_model(model, cfg)``, both under ``if args.lora_enable:``) is one guard
        blocking = list({id(g.node): g for g in found if g.blocks}.values())
        # ``elif adapter_name == "dora":`` after ``if adapter_name == "lora":``: the option equal to
        # "dora" implies it is not "lora", so the one choice decides
        chosen = {(g.options, g.equals) for g in blocking if g.equals is not None and not g.negated}
        blocking = [g for g in blocking if not (g.equals is not None and g.negated and any(
            options == g.options and value != g.equals for options, value in chosen))]
        if not blocking:
            return True, None
        if len(blocking) == 1 and blocking[0].options:
            return False, blocking[0]
        return False, None

    def state(self, name: str, value: Any, node: cst.CSTNode | None, note: str, *, at: cst.CSTNode,
              rank: int = RANK_MODEL, extra_guards: list[Guard] | None = None) -> None:
        """``name`` is ``value`` as written at ``node`` -- when the statement at ``at`` runs."""
        if value is None or value is MISSING or node is None:
            return
        conditions = guards(self.values, at) + (extra_guards or [])
        runs, guard = self._runs(conditions)
        bindable = isinstance(value, _SCALARS) or _names(value)
        if not runs:
            if guard is not None and guard.formula is not None and bindable:  # ``if args.bits == 8:``
                self.bind_test(guard.formula, guard.negated, name, value)
            elif guard is not None and bindable:
                prefix = "ifnot" if guard.negated else "if"
                if guard.equals is not None:  # ``if args.train_mode == 'qlora':``
                    prefix = f"{'isnot' if guard.negated else 'is'}={guard.equals}"
                self.bind(guard.options, f"{prefix}:{name}={encode(value)}")
            return
        previous = self._ranks.get(name)
        if previous is not None and previous >= rank:
            return
        self._ranks[name] = rank
        setattr(self.facts, name, Sourced(value, self.location(node), note))
        if bindable:
            self._bind_passing_guards(conditions, name, value)

    def _bind_passing_guards(self, conditions: list[Guard], name: str, value: Any) -> None:
        """A statement that runs because its options are on by default (``if args.bits == 4:``,
        ``if model_args.use_lora:`` with ``use_lora: bool = True``): a launch that turns one
        off takes the fact back (``when:``/``unless:``, ``memlint.facts.launch_options``)."""
        for passing in conditions:
            if passing.active is not True or not passing.options:
                continue
            if passing.equals is not None:  # ``if adapter_name == "lora":`` with ``adapter_name="lora"``
                prefix = "unlessisnot" if passing.negated else "unlessis"
                self.bind(passing.options, f"{prefix}={passing.equals}:{name}={encode(value)}")
            elif passing.formula is not None:
                self.bind_test(passing.formula, passing.negated, name, value)
            else:
                self._bind_taken_back(passing.options, passing.negated, name, value)

    def state_found(self, name: str, found: Found | None, convert: Callable[[Any], Any], note: str, *,
                    at: cst.CSTNode, binding: str | None = None, rank: int = RANK_MODEL,
                    extra_guards: list[Guard] | None = None) -> None:
        """A fact read from an expression: bound to its options, stated when known."""
        if found is None:
            return
        self.bind_found(found, binding or name)
        if found.flip is not None:
            options, prefix, other = found.flip
            try:
                alternative = convert(other)
            except (TypeError, ValueError):
                alternative = None
            if isinstance(alternative, _SCALARS):
                self.bind(options, f"{prefix}:{name}={encode(alternative)}")
        if not found.known or found.node is None:
            return
        try:
            converted = convert(found.value)
        except (TypeError, ValueError):
            return
        note = f"{note} ({found.note})" if found.note else note
        self.state(name, converted, found.node, note, at=at, rank=rank, extra_guards=extra_guards)

    def switch(self, name: str, value: Any, expr: cst.BaseExpression | None, default_on: bool, node: cst.CSTNode,
               note: str, *, at: cst.CSTNode, rank: int = RANK_MODEL) -> None:
        """A boolean argument that turns a fact on (``use_gradient_checkpointing=...``)."""
        if expr is None:
            if default_on:
                self.state(name, value, node, note, at=at, rank=rank)
            return
        found = self.values.evaluate(expr)
        if found is None:
            return
        self.bind_switch(found, name, value)
        if found.known and found.value and found.node is not None:
            self.state(name, value, found.node, note, at=at, rank=rank)

    # ------------------------------------------------------------- helpers for recognisers

    def value_guards(self, call: cst.Call) -> list[Guard]:
        """Conditions on where a constructed object is used: ``cfg = LoraConfig(...)`` used once
        in ``get_peft_model(model, cfg)`` under ``if args.use_lora:``."""
        parent = self.values.parent(call)
        if not (isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name)):
            return []
        target = parent.targets[0].target
        scope = self.python.scopes.get(parent)
        if scope is None:
            return []
        uses: list[cst.CSTNode] = []
        for assignment in scope.assignments[target.value]:
            if getattr(assignment, "node", None) is target:
                uses.extend(a.node for a in assignment.references)
        if len(uses) != 1:
            return []
        return guards(self.values, uses[0])

    def mapping(self, found: Found | None, depth: int = 0) -> tuple[dict[str, Any], dict[tuple[str, ...], Found]] | None:
        """A statically known dict as plain values, with where each leaf is written."""
        if found is None or not isinstance(found.value, Mapping) or depth > 6:
            return None
        plain: dict[str, Any] = {}
        where: dict[tuple[str, ...], Found] = {}
        for key, expression in found.value.entries:
            inner = self.values.evaluate(expression)
            if inner is None:
                continue
            nested = self.mapping(inner, depth + 1)
            if nested is not None:
                plain[key] = nested[0]
                for path, leaf in nested[1].items():
                    where[(key,) + path] = leaf
            elif inner.known and not isinstance(inner.value, CallValue):
                plain[key] = inner.value
                where[(key,)] = inner
            elif inner.options or inner.formula:  # an option without a default, or a formula a launch fills
                where[(key,)] = inner
        return plain, where
