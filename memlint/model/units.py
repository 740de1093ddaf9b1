"""Byte units. memlint reports binary units only: 1 GiB = 2**30 bytes."""

from __future__ import annotations

KiB = 1024
MiB = 1024**2
GiB = 1024**3


def gib(n_bytes: float) -> float:
    """Bytes as GiB (2**30 bytes)."""
    return n_bytes / GiB


def format_count(n: float) -> str:
    """Parameter counts the way model cards write them: 6.74B, 494M, 8.4K."""
    for limit, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        # compare the rounded figure: 999,885,952 is "1B" (Gemma-3-1B), not "1e+03M"
        if abs(float(f"{n:.3g}")) >= limit:
            return f"{float(f'{n / limit:.3g}'):g}{suffix}"
    return str(int(n))
