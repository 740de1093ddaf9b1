"""``memlint check`` over many files: the walk, the result cache, workers on every core, --fix."""
