"""Reading the files memlint lints: safe reads, their kind, the parsed tree and what each read."""
