"""What part of a GPU a run's tensors can use.

The allocator's peak (``torch.cuda.max_memory_allocated``) is not all a run needs: the CUDA
context, the kernels of cuBLAS/cuDNN/NCCL and their workspaces live outside it. PyTorch's
lazy-module-loading change measured a bare context at 287,047,680 bytes lazily loaded vs
666,632,192 bytes eagerly (pytorch/pytorch#86509); Hugging Face's "model memory anatomy"
guide measured 1343 MB of CUDA kernels on a V100. memlint reserves 1 GiB by default
(``cuda-context-gib`` in settings changes it) and warns when the peak comes within a
fragmentation margin (``headroom``, 5 % by default) of what is left.
"""

from __future__ import annotations

from memlint.catalog.gpus import Gpu
from memlint.estimate.budget import Capacity
from memlint.units import GiB

DEFAULT_RESERVED_BYTES = 1 * GiB
DEFAULT_HEADROOM = 0.05


def capacity_for(
    gpu: Gpu, reserved_bytes: int | None = None, headroom: float | None = None
) -> Capacity:
    return Capacity(
        gpu_id=gpu.id,
        gpu_name=gpu.name,
        total_bytes=gpu.total_bytes,
        reserved_bytes=DEFAULT_RESERVED_BYTES if reserved_bytes is None else int(reserved_bytes),
        headroom_fraction=DEFAULT_HEADROOM if headroom is None else float(headroom),
    )
