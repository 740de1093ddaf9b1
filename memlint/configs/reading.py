"""Reading facts out of a loaded config: values with the exact range that set them.

Every config extractor works the same way: look a key up, convert its value, and record it as
a ``Sourced`` fact whose location is the value's range. A key the file does not set may still
decide memory through the tool's default (Axolotl's ``sequence_len``, LLaMA-Factory's
gradient checkpointing): those defaults come from the committed schema, never retyped, and
are facts without an origin, which the plan reports as assumptions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from memlint.configs import schema
from memlint.documents.structured import Path_, Structured
from memlint.facts.plan import RunFacts
from memlint.model.provenance import Location, Sourced


@dataclass
class ConfigReader:
    """A loaded config (or a block inside one, from ``base``) and the facts being read from it."""

    path: str
    data: Structured
    facts: RunFacts
    schema_name: str | None = None
    base: Path_ = ()
    schema_base: Path_ = ()  # where ``base`` is in the schema

    def inside(self, *keys: Any, schema_name: str | None = None) -> "ConfigReader":
        """A reader for the block at ``keys``: part of the same config (``fsdp_config``), or
        a config of another tool written inline (``deepspeed: {...}``, with its schema)."""
        if schema_name is not None:
            return ConfigReader(self.path, self.data, self.facts, schema_name, self.base + keys, ())
        return ConfigReader(self.path, self.data, self.facts, self.schema_name, self.base + keys,
                            self.schema_base + keys)

    def value(self, *keys: Any, default: Any = None) -> Any:
        return self.data.get(*self.base, *keys, default=default)

    def has(self, *keys: Any) -> bool:
        return self.data.has(self.base + keys)

    def location(self, *keys: Any) -> Location:
        return Location(self.path, self.data.range_of(self.base + keys))

    def key_location(self, *keys: Any) -> Location:
        return Location(self.path, self.data.range_of(self.base + keys, key=True))

    def default(self, *keys: str) -> Any:
        """The tool's default for ``keys`` from its schema (None when it states none)."""
        if self.schema_name is None:
            return None
        found = schema.default(self.schema_name, *self.schema_base, *keys)
        return None if found is schema.MISSING else found

    def setting(self, *keys: str) -> tuple[Any, Location | None]:
        """The value of ``keys`` as written, else the tool's default (with no location)."""
        if self.has(*keys) and self.value(*keys) is not None:
            return self.value(*keys), self.location(*keys)
        return self.default(*keys), None

    def set(self, name: str, value: Any, where: Location | None, note: str) -> None:
        """Record a fact unless it is unknown or another key of this file already set it."""
        if value is None or getattr(self.facts, name) is not None:
            return
        setattr(self.facts, name, Sourced(value, where, note))

    def read(self, name: str, keys: tuple[str, ...], convert: Callable[[Any], Any], tool: str) -> None:
        """A fact from ``keys`` (or the tool's default), converted; "auto" is recorded as an
        auto key, never as a value."""
        raw, where = self.setting(*keys)
        if raw == "auto":
            self.auto(keys)
            return
        if raw is None:
            return
        converted = convert(raw)
        note = ".".join(keys) if where is not None else f"{tool} default {'.'.join(keys)}={raw!r}"
        self.set(name, converted, where, note)

    def auto(self, keys: tuple[Any, ...]) -> None:
        dotted = ".".join(str(k) for k in keys)
        if not any(a.value == dotted and a.origin == self.location(*keys) for a in self.facts.auto_keys):
            self.facts.auto_keys.append(Sourced(dotted, self.location(*keys), "auto"))

    def reference(self, keys: tuple[str, ...], note: str) -> None:
        """A path to another document (a DeepSpeed JSON named in a YAML)."""
        value = self.value(*keys)
        if isinstance(value, str) and value.strip():
            self.facts.references.append(Sourced(value.strip(), self.location(*keys), note))


def new_facts(path: str, kind: str, data: Structured) -> RunFacts:
    """Facts of a config whose findings, when no fact points better, go on its first key."""
    return RunFacts(path, kind, anchor=Location(path, data.first_key_range()))


def loaded_mapping(parsed) -> Structured | None:
    """The loaded document, when the tools would read it and it is a mapping."""
    data = parsed.structured
    if data is None or not data.ok or not isinstance(data.value, dict):
        return None
    return data
