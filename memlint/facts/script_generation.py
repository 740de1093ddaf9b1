"""The completion limit of a script's own generation: what an RL loop of its own trains on.

simple_GRPO's ``grpo_vllm_one.py`` samples each prompt's answers with vLLM (``SamplingParams(n=8,
max_tokens=700)``) and trains a DeepSpeed engine on prompt plus answer; its ``regroup_ver`` copy
generates with ``GenerationConfig(max_new_tokens=512)``. Nothing else in such a script states a
sequence length, and memlint's usual 2,048 tokens is three times what any of its batches holds.
The limit is stated as ``generation_len``; ``resolve`` takes it, only where no file states a
sequence length, as a lower bound of the training length (the prompts add to it).
"""

from __future__ import annotations

import libcst as cst

from memlint.facts.script_facts import RANK_MODEL, ScriptFacts

# the class or method -> the keyword that limits the completion's tokens
_LIMITS = {"SamplingParams": "max_tokens", "GenerationConfig": "max_new_tokens", "generate": "max_new_tokens"}


def recognise(ctx: ScriptFacts, call: cst.Call, names: frozenset[str], method: str | None) -> None:
    keyword = _limit_keyword(names, method)
    if keyword is None:
        return
    found = ctx.values.arguments(call, ()).get(keyword)
    if found is None:
        return
    value = ctx.values.evaluate(found)
    if value is None or not value.known or not isinstance(value.value, int) or isinstance(value.value, bool) \
            or value.value <= 0 or value.node is None:
        return
    owner = method if method == "generate" else min(names).rsplit(".", 1)[-1]
    # the first generation the script writes (a later one at the same rank keeps it)
    ctx.state("generation_len", value.value, value.node, f"{owner}({keyword}={value.value})", at=call, rank=RANK_MODEL)


def _limit_keyword(names: frozenset[str], method: str | None) -> str | None:
    if method == "generate":
        return _LIMITS["generate"]
    for name in names:
        last = name.rsplit(".", 1)[-1]
        if last in ("SamplingParams", "GenerationConfig") and (name == last or name.startswith(("vllm", "transformers"))):
            return _LIMITS[last]
    return None
