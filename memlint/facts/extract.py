"""The registry of fact extractors: one per document kind.

An extractor turns a parsed document into the ``RunFacts`` it states (usually one; none for a
file that says nothing about training). Extractors live next to their parsers
(``memlint.facts.script`` for Python, ``memlint.configs.*`` for configs) and register here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from memlint.python.prefilter import Pattern

if TYPE_CHECKING:
    from memlint.documents.parsed import ParsedDocument
    from memlint.python.prefilter import Needs
    from memlint.facts.plan import RunFacts

Extractor = Callable[["ParsedDocument"], "list[RunFacts]"]
EXTRACTORS: dict[str, Extractor] = {}
# what a Python module must name for the extractor of its kind to find anything in it: regular
# expressions over the names it uses, any one of them (memlint.python.prefilter; a ``Called`` one
# over the names its calls are made through); "" (the default): every module
NEEDS: dict[str, list[Pattern]] = {}


def extractor(*kinds: str, needs: Pattern | list[Pattern] = "") -> Callable[[Extractor], Extractor]:
    def register(function: Extractor) -> Extractor:
        for kind in kinds:
            if kind in EXTRACTORS:
                raise ValueError(f"two extractors for document kind {kind!r}")
            EXTRACTORS[kind] = function
            NEEDS[kind] = list(needs) if isinstance(needs, list) else [needs]
        return function

    return register


def extract(parsed: "ParsedDocument") -> "list[RunFacts]":
    """The facts a parsed document states. Extracted once per parsed document: the project and
    the rules that read them again (CFG015) share the result, which nobody mutates."""
    if parsed.facts is None:
        load_extractors()
        function = EXTRACTORS.get(parsed.kind)
        parsed.facts = function(parsed) if function is not None and _needed(parsed) else []
    return list(parsed.facts)


def _needed(parsed: "ParsedDocument") -> bool:
    """Can the extractor find anything here? A module that ``check``'s prefilter kept for a
    rule (its ``names`` read) but that names nothing the extractor needs has no facts: the same
    promise as the prefilter's (``memlint.python.prefilter``), for the extractor alone."""
    names = parsed.python.names if parsed.python is not None else None
    if names is None:
        return True
    if parsed.kind not in _GATES:
        from memlint.python.prefilter import Needs

        # asked of the names outside the classes the module never uses: training in them alone is
        # no run (``memlint.facts.script._only_in_unused_classes``)
        _GATES[parsed.kind] = Needs.of([], outside=NEEDS.get(parsed.kind, [""]))
    gate = _GATES[parsed.kind]
    return gate is None or gate.wanted(names)


_GATES: dict[str, "Needs | None"] = {}  # each kind's NEEDS, compiled


def load_extractors() -> None:
    """Import the modules that register extractors (once)."""
    import importlib

    for name in EXTRACTOR_MODULES:
        importlib.import_module(name)


# modules whose import registers extractors; each owner adds its module here
EXTRACTOR_MODULES: list[str] = [
    "memlint.configs.trainer_args",
    "memlint.configs.deepspeed",
    "memlint.configs.accelerate",
    "memlint.configs.axolotl",
    "memlint.configs.llamafactory",
    "memlint.configs.torchtune",
    "memlint.configs.llamafactory_v1",
    "memlint.configs.composer",
    "memlint.configs.lightning_cli",
    "memlint.facts.script",
    "memlint.facts.launchers",
    "memlint.facts.markdown",
    "memlint.facts.makefile",
]
