"""What part of a GPU a run's tensors can use, as measured on a real GPU.

The allocator's peak (``torch.cuda.max_memory_allocated``, what memlint estimates) is not all a
run needs. Measured on an H200 with torch 2.11 / CUDA 13 (``bench/gpu_truth.py``,
``tests/calibration/gpu_truth.json``, ``docs/accuracy.md``):

- the process holds 527 MiB once CUDA is initialised and 751-767 MiB outside the caching
  allocator after two training steps (the context plus lazily loaded kernel modules), and
  cuBLAS keeps 64 MiB of workspaces inside the allocator that no estimate of tensors counts:
  memlint reserves 1 GiB per GPU (``cuda-context-gib``);
- the default caching allocator cannot hand out all of what is left: a Llama-2-7B step ran at
  131.5 GiB allocated (94.7 % of the rest) and ran out of memory needing 135.9 GiB (97.9 %),
  which ran with ``expandable_segments``; two public reports bound it from the other side (a
  DeepSpeed-Chat BLOOM run at 96.3 % fitted, a LLaMA-Factory ZeRO-3 run at 96.9 % did not).
  memlint keeps 3.5 % of it back (``fragmentation``): a peak above the rest is MEM001;
- MEM002 warns within ``headroom`` (5 %) below that.
"""

from __future__ import annotations

from memlint.catalog.gpus import Gpu
from memlint.estimate.budget import Capacity
from memlint.model.units import GiB

DEFAULT_RESERVED_BYTES = 1 * GiB
DEFAULT_FRAGMENTATION = 0.035
DEFAULT_HEADROOM = 0.05


def capacity_for(
    gpu: Gpu, reserved_bytes: int | None = None, headroom: float | None = None,
    fragmentation: float | None = None,
) -> Capacity:
    return Capacity(
        gpu_id=gpu.id,
        gpu_name=gpu.name,
        total_bytes=gpu.total_bytes,
        reserved_bytes=DEFAULT_RESERVED_BYTES if reserved_bytes is None else int(reserved_bytes),
        headroom_fraction=DEFAULT_HEADROOM if headroom is None else float(headroom),
        fragmentation_fraction=DEFAULT_FRAGMENTATION if fragmentation is None else float(fragmentation),
    )
