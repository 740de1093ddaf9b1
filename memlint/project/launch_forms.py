"""The parallelism form of a launch, and the form a set of launches agrees on.

A project's launches of one kind of config often name different Accelerate or DeepSpeed files
that say the same thing: LLaMA-Factory's ``examples/ascend/*.yaml`` are launched (each in its own
comment) with ``fsdp_config.yaml``, ``fsdp2_config.yaml`` or ``fsdp2_config_qwen35.yaml`` -- three
files, one form: FSDP full sharding. The form is the sharding (ZeRO stage or FSDP strategy) and
its offloads, read from the launch's own facts and the DeepSpeed/Accelerate configs it names; a
config no launch names may be judged under the form every such launch agrees on (as a named
assumption), never under one they disagree on. The GPU count is the one they agree on, if any.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable

from memlint.documents import reads
from memlint.documents.kinds import STANDALONE_KINDS
from memlint.model.provenance import Sourced

if TYPE_CHECKING:
    from memlint.facts.plan import RunFacts
    from memlint.project.documents import DocumentStore

# the facts that make a launch's parallelism form
FORM_FACTS = ("zero_stage", "fsdp", "offload_optimizer", "offload_params")
_DEPTH = 2  # a launch -> its Accelerate config -> the DeepSpeed config that one names
_FSDP_NAMES = {"full": "FSDP full shard", "hybrid": "FSDP hybrid shard", "grad-op": "FSDP SHARD_GRAD_OP"}


@dataclass(frozen=True)
class Form:
    """A launch's sharding, as read: the facts (located where the launch's configs state them)
    and its GPU count when the launch states one."""

    facts: dict[str, Sourced[Any]]
    world_size: Sourced[int] | None

    @property
    def key(self) -> tuple:
        def part(name: str) -> object:
            fact = self.facts.get(name)
            if name.startswith("offload"):
                return fact is not None and bool(fact.value)
            return fact.value if fact is not None else None

        return tuple(part(name) for name in FORM_FACTS)

    @property
    def name(self) -> str:
        stage, fsdp = self.facts.get("zero_stage"), self.facts.get("fsdp")
        name = f"ZeRO-{stage.value}" if stage is not None else _FSDP_NAMES.get(str(fsdp.value) if fsdp else "", "?")
        offloads = [what for fact, what in (("offload_optimizer", "optimizer"), ("offload_params", "parameter"))
                    if (found := self.facts.get(fact)) is not None and found.value]
        return name + (f" with {' and '.join(offloads)} offload" if offloads else "")


def form_of(documents: DocumentStore, launch: RunFacts) -> Form | None:
    """The sharding a launch states (its own facts first, then the DeepSpeed/Accelerate configs
    it names, two links deep); None when it states none (plain data parallelism, or unknown)."""
    facts: dict[str, Sourced[Any]] = {}
    world: Sourced[int] | None = None
    todo: list[tuple[RunFacts, int]] = [(launch, 0)]
    seen = {documents.key(launch.path)}
    while todo:
        current, depth = todo.pop(0)
        for name in FORM_FACTS:
            value = getattr(current, name)
            if value is not None and name not in facts:
                facts[name] = value
        if world is None and current.world_size is not None:
            world = current.world_size
        if depth >= _DEPTH:
            continue
        for reference in current.references:
            target = documents.resolve_reference(str(reference.value), current.path)
            if target is None or documents.key(target) in seen or documents.kind(target) not in STANDALONE_KINDS:
                continue
            seen.add(documents.key(target))
            reads.document(documents.key(target), documents.digest(target))  # the form depends on it
            todo.extend((found, depth + 1) for found in documents.facts(target))
    if "zero_stage" not in facts and "fsdp" not in facts:
        return None
    stage = facts.get("zero_stage")
    if stage is not None and stage.value == 0:
        return None  # ZeRO-0 is plain data parallelism
    return Form(facts, world)


def agreed_form(documents: DocumentStore, launches: Iterable[RunFacts]) -> Form | None:
    """The form every launch states, with the GPU count when they all state the same one;
    None when one states none or two disagree."""
    forms = [form_of(documents, launch) for launch in launches]
    if not forms or any(f is None for f in forms):
        return None
    first = forms[0]
    assert first is not None
    if any(f is not None and f.key != first.key for f in forms):
        return None
    counts = {f.world_size.value if f is not None and f.world_size is not None else None for f in forms}
    world = first.world_size if len(counts) == 1 and None not in counts else None
    return Form(first.facts, world)
