"""memlint: will this training run fit in GPU memory, and which well-known mistakes does it make?

The engine (sources -> facts -> estimate -> rules -> diagnostics) never imports the language
server; ``memlint.lsp`` is a thin adapter over it.
"""

__version__ = "0.1.0"
