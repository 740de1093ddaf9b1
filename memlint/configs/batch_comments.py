"""The GPU count a config's own comment on its batch keys implies.

A config that no launch sizes often says on its batch lines how the run was laid out:
allenai/open-instruct's ``per_device_train_batch_size: 1 # note, this is set up for 8 GPUs`` and
``gradient_accumulation_steps: 4 # effective batch size 128 with 4 nodes``. The global batch is
micro-batch x accumulation steps x GPUs, so a stated global batch gives the GPU count: 128 / (1 x 4)
= 32, which "4 nodes" of 8 confirms. Read only when the division is exact and agrees with a node
count the comment also states; a comment that does not add up says nothing.
"""

from __future__ import annotations

import re

from memlint.model.diagnostics import Range
from memlint.model.provenance import Location, Sourced

# "effective batch size 128", "global batch size = 256", "total batch of 64"
_GLOBAL_BATCH = re.compile(r"\b(?:effective|global|total)\s+batch(?:[\s_-]+size)?\s*(?:of|=|:|is)?\s*(\d+)\b", re.I)
_NODES = re.compile(r"\b(\d+)\s+nodes?\b", re.I)
# the keys whose lines carry such a comment (TrainingArguments' names)
BATCH_KEYS = ("per_device_train_batch_size", "gradient_accumulation_steps")


def stated_gpus(text: str, path: str, lines: list[int], micro_batch: int,
                accumulation: int) -> tuple[Sourced[int], Sourced[int] | None] | None:
    """The world size (and GPUs per node, when the comment names its nodes) that a global-batch
    comment on one of ``lines`` (1-based) implies, located at that comment."""
    rows = text.splitlines()
    for line in lines:
        if not 1 <= line <= len(rows):
            continue
        row = rows[line - 1]
        hash_at = row.find("#")
        if hash_at < 0:
            continue
        comment = row[hash_at + 1:]
        batch = _GLOBAL_BATCH.search(comment)
        if batch is None:
            continue
        per_step = micro_batch * accumulation
        total = int(batch.group(1))
        if per_step < 1 or total % per_step:
            return None
        world = total // per_step
        where = Location(path, Range.of(line, hash_at, line, len(row)))
        note = (f"the comment's effective batch size {total} / (micro-batch {micro_batch} x "
                f"{accumulation} accumulation steps)")
        nodes = _NODES.search(comment)
        if nodes is None:
            return Sourced(world, where, note), None
        count = int(nodes.group(1))
        if count < 1 or world % count:
            return None
        return (Sourced(world, where, f"{note}, over the {count} nodes it names"),
                Sourced(world // count, where, f"{world} GPUs over the comment's {count} nodes"))
    return None
