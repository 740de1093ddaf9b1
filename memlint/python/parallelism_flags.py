"""The switches of accelerate's ``ParallelismConfig`` (>= 1.10), read from its sizes.

Scripts test them before they build an FSDP plugin (accelerate's own
``examples/torch_native_parallelism/nd_parallel.py``: ``if parallelism_config.dp_shard_enabled or
parallelism_config.cp_enabled:``); each is ``<size> > 1`` (``parallelism_config.py``), so the
plugin exists only when a size above one is given, by default or by the launch."""

from __future__ import annotations

from typing import TYPE_CHECKING

import libcst as cst

from memlint.python import option_formulas
from memlint.python.library import PARALLELISM_CONFIGS
from memlint.python.value_types import MISSING, Found

if TYPE_CHECKING:
    from memlint.python.values import Values

# property -> the size it tests
_FLAGS = {"dp_replicate_enabled": "dp_replicate_size", "dp_shard_enabled": "dp_shard_size",
          "tp_enabled": "tp_size", "cp_enabled": "cp_size", "sp_enabled": "sp_size"}


def parallelism_flag(values: "Values", call: cst.Call, attr: str, depth: int) -> Found | None:
    """``config.<attr>`` of ``config = ParallelismConfig(...)``: whether its size is above one,
    with the formula a launch redoes over the size's option; None for anything else."""
    size_name = _FLAGS.get(attr)
    if size_name is None or not (values.callee_names(call, depth + 1) & PARALLELISM_CONFIGS):
        return None
    arguments = values.arguments(call)
    if size_name not in arguments:
        return Found(False, call, (), f"ParallelismConfig({size_name}=1)") if arguments.complete else None
    size = values.evaluate(arguments.get(size_name), depth + 1)
    if size is None:
        return None
    operand = option_formulas.operand(size.value, size.options, size.formula, size.known)
    formula = option_formulas.combine(">", [operand, ("number", 1)]) if operand is not None else None
    if not size.known or not isinstance(size.value, int):
        return Found(MISSING, None, formula=formula) if formula is not None else None
    return Found(size.value > 1, size.node, size.options, f"ParallelismConfig({size_name}={size.value})",
                 formula=formula)
