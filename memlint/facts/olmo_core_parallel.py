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


def data_parallel_type(helper: Any, values: Values, cls: cst.ClassDef, inside: Inside) -> tuple[cst.Call, str] | None:
    """The first OLMo-core data-parallel config built in ``cls`` or in a class of its module that
    ``cls`` names, with its type ("fsdp", "hsdp", "ddp")."""
    named = {n.value for n in helper.nodes_in_order(cst.Name) if inside(helper, n, cls)}
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
        text = helper.module.code_for_node(kind).strip().strip("\"'")
        leaf = text.rsplit(".", 1)[-1]
        if leaf in ("fsdp", "hsdp", "ddp"):
            return call, leaf
    return None
