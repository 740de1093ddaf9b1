"""Every family's transformer block recipe and final norm, by family: those of ``families.py``
and of the newer decoders in ``decoder_blocks.py``, registered here so neither imports the other
back."""

from memlint.estimate import decoder_blocks, encoder_decoder, families, hybrid

BLOCKS: dict[str, families.Block] = {**families.BLOCKS, **decoder_blocks.BLOCKS,
                                     "falcon_h1": hybrid.falcon_h1_block}
FINAL_NORM: dict[str, str] = {**families.FINAL_NORM, **decoder_blocks.FINAL_NORM, "falcon_h1": "rms"}
# the blocks of a "cross_decoder" group (a decoder that attends to an encoder's output), by family
CROSS_DECODER_BLOCKS: dict[str, families.Block] = {"t5": encoder_decoder.t5_decoder_block}
