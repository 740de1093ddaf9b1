"""Every family's transformer block recipe and final norm, by family: those of ``families.py``
and of the newer decoders in ``decoder_blocks.py``, registered here so neither imports the other
back."""

from memlint.estimate import decoder_blocks, families

BLOCKS: dict[str, families.Block] = {**families.BLOCKS, **decoder_blocks.BLOCKS}
FINAL_NORM: dict[str, str] = {**families.FINAL_NORM, **decoder_blocks.FINAL_NORM}
