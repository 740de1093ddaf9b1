"""OLMo-core's data parallelism, as a project class that builds its train module states it.

OLMo-core trains with one of three data-parallel forms (``olmo_core.distributed.parallel.
DataParallelType``): ``ddp``, ``fsdp`` (every GPU a shard) and ``hsdp`` (shards within a group of
``shard_degree`` GPUs, one per node by default, replicated across groups). Its FSDP always reshards
after forward (``fully_shard(..., reshard_after_forward=True)`` in ``Transformer.apply_fsdp``): it
has no SHARD_GRAD_OP form. open-instruct's GRPO learners build
``TransformerDataParallelConfig(name=DataParallelType.hsdp, shard_degree=..., ...)`` in a Ray actor
class of the module the script imports (``OLMoCoreModelGroup`` starts ``PolicyTrainerOLMoCoreProcess``),
so the classes of that module the imported class names are read too.
"""

from __future__ import annotations

from typing import Any, Callable

import libcst as cst

from memlint.python.values import Values

# is a node inside another (the caller's tree walk over the module's parents)
Inside = Callable[[Any, cst.CSTNode, cst.CSTNode], bool]

# the memlint FSDP strategy of each OLMo-core data-parallel type (ddp shards nothing)
FORMS = {"fsdp": "full", "hsdp": "hybrid"}
LIBRARY = "olmo-core"


def data_parallel_type(text: str, helper: Any, values: Values, cls: cst.ClassDef,
                       inside: Inside) -> tuple[cst.Call, str] | None:
    """The first OLMo-core data-parallel config built in ``cls`` or in a class of its module that
    ``cls`` names, with its type ("fsdp", "hsdp", "ddp"); ``text`` is the module's."""
    if "DataParallelConfig" not in text:
        return None  # the usual module: nothing to walk
    named = _names_in(cls)
    classes = [cls] + [s for s in helper.module.body if isinstance(s, cst.ClassDef) and s is not cls
                       and s.name.value in named]
    for call in helper.nodes_in_order(cst.Call):
        if not any(n.startswith("olmo_core.") and n.endswith("DataParallelConfig") for n in values.callee_names(call)):
            continue
        if not any(inside(helper, call, c) for c in classes):
            continue
        kind = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "name"), None)
        if kind is None:
            continue
        written = helper.module.code_for_node(kind).strip().strip("\"'")
        leaf = written.rsplit(".", 1)[-1]
        if leaf in ("fsdp", "hsdp", "ddp"):
            return call, leaf
    return None


def _names_in(node: cst.CSTNode) -> set[str]:
    """The plain names written inside ``node``."""
    names: set[str] = set()
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            names.add(current.value)
        stack.extend(current.children)
    return names
