"""TrainingArguments written as a JSON or YAML file (``--config args.yaml``, LLaMA-Factory-style
files, ``run_clm.py`` argument files): each key means what the dataclass field means."""

from __future__ import annotations

from memlint.facts import hf_args
from memlint.facts.extract import extractor
from memlint.facts.plan import RunFacts
from memlint.parsed import ParsedDocument
from memlint.sourced import Location, Sourced


@extractor("hf-args")
def extract_trainer_args(parsed: ParsedDocument) -> list[RunFacts]:
    data = parsed.structured
    if data is None or not isinstance(data.value, dict):
        return []
    facts = RunFacts(parsed.path, parsed.kind)
    facts.framework = Sourced("hf-trainer", None, "TrainingArguments file")
    first = next(iter(data.value), None)
    if first is not None:
        facts.anchor = Location(parsed.path, data.range_of((first,), key=True))
    for key, value in data.value.items():
        if not isinstance(key, str):
            continue
        where = Location(parsed.path, data.range_of((key,)))
        for name, converted in hf_args.facts_for(key, value).items():
            if name == "__reference__":
                facts.references.append(Sourced(converted, where, "deepspeed"))
            elif getattr(facts, name) is None:
                setattr(facts, name, Sourced(converted, where, key))
    return [facts]
