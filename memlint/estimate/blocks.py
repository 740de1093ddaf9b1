"""Every family's transformer block recipe and final norm, by family: those of ``families.py``
and of the newer decoders in ``decoder_blocks.py``, registered here so neither imports the other
back."""

from memlint.estimate import decoder_blocks, encoder_decoder, families

BLOCKS: dict[str, families.Block] = {**families.BLOCKS, **decoder_blocks.BLOCKS}
FINAL_NORM: dict[str, str] = {**families.FINAL_NORM, **decoder_blocks.FINAL_NORM}
# the blocks of a "cross_decoder" group (a decoder that attends to an encoder's output), by family
CROSS_DECODER_BLOCKS: dict[str, families.Block] = {"t5": encoder_decoder.t5_decoder_block}
