"""The training-script extractor: a Python file's facts about the run it defines.

The file is read with libcst, never imported or run. A cheap text check skips files that import
none of the training libraries before any libcst metadata is built. Every call is then matched
by qualified name against the recognisers (model loading, trainers and their arguments,
hand-written loops, distributed engines), which report what each call states; values are read
statically through ``python_values`` (constants, argparse defaults, dataclass fields, helper
parameters). A file yields a run only when something in it trains (a trainer, an optimizer, a
``backward()``): an inference script that loads a model is not a training run.
"""

from __future__ import annotations

import re

import libcst as cst

from memlint.facts import script_distributed, script_loops, script_models, script_trainers
from memlint.facts.extract import extractor
from memlint.facts.plan import RunFacts
from memlint.facts.python_values import Mapping, Values
from memlint.facts.script_facts import RANK_CONFIG, ScriptFacts
from memlint.parsed import ParsedDocument

TRAINING_PACKAGES = (
    "torch", "transformers", "deepspeed", "accelerate", "peft", "trl", "bitsandbytes", "lightning",
    "pytorch_lightning", "liger_kernel",
)
_IMPORTS_TRAINING = re.compile(
    r"^[ \t]*(?:import|from)[ \t][^\n]*?\b(?:" + "|".join(TRAINING_PACKAGES) + r")\b", re.MULTILINE
)

RECOGNISERS = (script_trainers, script_models, script_loops, script_distributed)


def imports_training_library(text: str) -> bool:
    """The prefilter: does the text import any training library (a regex, no parsing)?"""
    return _IMPORTS_TRAINING.search(text) is not None


@extractor("python")
def extract_script(parsed: ParsedDocument) -> list[RunFacts]:
    source = parsed.python
    if source is None or not imports_training_library(parsed.text):
        return []
    values = Values(source)
    ctx = ScriptFacts(parsed, values)
    calls: list[cst.Call] = []
    assignments: list[cst.Assign] = []
    for node in source.parents:
        if isinstance(node, cst.Call):
            calls.append(node)
        elif isinstance(node, cst.Assign):
            assignments.append(node)
    positions = source.positions
    calls.sort(key=lambda c: (positions[c].start.line, positions[c].start.column))
    for call in calls:
        names = values.callee_names(call)
        method = call.func.attr.value if isinstance(call.func, cst.Attribute) else None
        for recogniser in RECOGNISERS:
            recogniser.recognise(ctx, call, names, method)
    for assignment in assignments:
        _attribute_assignment(ctx, assignment)
    script_loops.finish(ctx)
    if not ctx.training:
        return []
    return [ctx.facts]


def _attribute_assignment(ctx: ScriptFacts, assignment: cst.Assign) -> None:
    """``training_args.model_init_kwargs = dict(...)`` (TRL), ``tokenizer.model_max_length = 512``."""
    if len(assignment.targets) != 1 or not isinstance(assignment.targets[0].target, cst.Attribute):
        return
    attr = assignment.targets[0].target.attr.value
    if attr == "model_init_kwargs":
        found = ctx.values.evaluate(assignment.value)
        if found is not None and isinstance(found.value, Mapping):
            script_models.loading_arguments(ctx, dict(found.value.entries), assignment, RANK_CONFIG)
    elif attr == "model_max_length":
        script_loops._length_candidate(ctx, ctx.values.evaluate(assignment.value), assignment,
                                       "tokenizer.model_max_length = ...")
