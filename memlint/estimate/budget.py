"""The estimator's answer: a per-GPU memory budget, phase by phase, every byte named."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Component:
    """One named allocation, in bytes per GPU."""

    key: str  # stable identifier: "weights", "gradients", "optimizer_states", ...
    label: str  # for people: "Weights (bf16)"
    bytes: int
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "label": self.label, "bytes": int(self.bytes), "note": self.note}


@dataclass(frozen=True)
class Phase:
    """Memory alive at the high point of one phase of a training step."""

    name: str  # "forward", "backward", "optimizer_step"
    components: tuple[Component, ...]

    @property
    def bytes(self) -> int:
        return sum(c.bytes for c in self.components)

    def component(self, key: str) -> Component | None:
        return next((c for c in self.components if c.key == key), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "bytes": int(self.bytes),
            "components": [c.to_json() for c in self.components],
        }


@dataclass(frozen=True)
class Capacity:
    """What one GPU can hold for this run's tensors, and what the verdict is."""

    gpu_id: str
    gpu_name: str
    total_bytes: int  # torch.cuda.mem_get_info()'s total
    reserved_bytes: int  # CUDA context, kernels and library workspaces (not in the allocator)
    headroom_fraction: float  # margin below usable that MEM002 warns in
    fragmentation_fraction: float = 0.0  # what the caching allocator cannot hand out

    @property
    def usable_bytes(self) -> int:
        """The largest tensor peak (``max_memory_allocated``) a run can reach: the GPU less
        the context, less what the caching allocator loses to fragmentation."""
        return int((self.total_bytes - self.reserved_bytes) * (1.0 - self.fragmentation_fraction))

    @property
    def comfortable_bytes(self) -> int:
        """Usable bytes minus the headroom MEM002 warns in."""
        return int(self.usable_bytes * (1.0 - self.headroom_fraction))

    def to_json(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu_id,
            "name": self.gpu_name,
            "total_bytes": self.total_bytes,
            "reserved_bytes": self.reserved_bytes,
            "usable_bytes": self.usable_bytes,
            "headroom_fraction": self.headroom_fraction,
            "fragmentation_fraction": self.fragmentation_fraction,
        }


@dataclass(frozen=True)
class Budget:
    """Per-GPU peak of a training (or inference) step, with its phases and assumptions.

    ``peak_bytes`` is the peak of tensor memory, what ``torch.cuda.max_memory_allocated``
    reports; the CUDA context and library workspaces come on top of it (``Capacity``).
    """

    model: str
    parameters: int
    trainable_parameters: int
    phases: tuple[Phase, ...]
    assumptions: tuple[str, ...] = ()
    host_bytes: int = 0  # CPU memory per node for offloaded states/parameters
    setup: dict[str, Any] = field(default_factory=dict)
    capacity: Capacity | None = None

    @property
    def peak_phase(self) -> Phase:
        return max(self.phases, key=lambda p: p.bytes)

    @property
    def peak_bytes(self) -> int:
        return self.peak_phase.bytes

    @property
    def components(self) -> tuple[Component, ...]:
        """The components at the peak."""
        return self.peak_phase.components

    @property
    def dominant(self) -> Component:
        return max(self.components, key=lambda c: c.bytes)

    @property
    def fits(self) -> bool | None:
        if self.capacity is None:
            return None
        return self.peak_bytes <= self.capacity.usable_bytes

    @property
    def paged_bytes(self) -> int:
        """Bytes at the peak that a paged optimizer keeps in CUDA managed memory (bitsandbytes'
        ``Paged*`` optimizers): the driver evicts them to host memory rather than fail."""
        paged = self.peak_phase.component("paged_optimizer_states")
        return paged.bytes if paged is not None else 0

    @property
    def fits_by_paging(self) -> bool:
        """The peak overflows, but by no more than the paged optimizer states: the run pages
        them to host memory each step instead of running out of memory."""
        margin = self.margin_bytes
        return margin is not None and margin < 0 and -margin <= self.paged_bytes

    @property
    def comfortable(self) -> bool | None:
        if self.capacity is None:
            return None
        return self.peak_bytes <= self.capacity.comfortable_bytes

    @property
    def margin_bytes(self) -> int | None:
        """Usable bytes left at the peak (negative: this much is missing)."""
        if self.capacity is None:
            return None
        return self.capacity.usable_bytes - self.peak_bytes

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "model": self.model,
            "parameters": int(self.parameters),
            "trainable_parameters": int(self.trainable_parameters),
            "peak_bytes": int(self.peak_bytes),
            "peak_phase": self.peak_phase.name,
            "components": [c.to_json() for c in self.components],
            "phases": [p.to_json() for p in self.phases],
            "host_bytes": int(self.host_bytes),
            "setup": self.setup,
            "assumptions": list(self.assumptions),
        }
        if self.capacity is not None:
            out["capacity"] = self.capacity.to_json()
            out["fits"] = self.fits
            out["margin_bytes"] = self.margin_bytes
        return out
