"""memlint's language server (``memlint lsp``): a thin adapter from LSP to the engine.

Needs the optional extra ``memlint[lsp]`` (pygls 2 and lsprotocol); the engine never imports
this package. Modules: ``server`` (wiring), ``session`` (the engine side), ``convert``
(diagnostics, ranges, position encodings), ``actions`` (code actions), ``per_file_ignores``
(the settings-file edit behind "Ignore in this file"), ``hover``, ``lens`` (inlay hints and
code lenses), ``settings`` (``workspace/configuration``), ``debounce``.
"""

INSTALL_HINT = "pip install 'memlint[lsp]'"


def missing_dependency() -> str | None:
    """Why the server cannot start (pygls 2 / lsprotocol missing or too old), or None."""
    try:
        import lsprotocol.types  # noqa: F401
        from pygls.lsp.server import LanguageServer  # noqa: F401  (pygls >= 2)
    except ImportError as error:
        return f"the language server needs pygls >= 2 and lsprotocol ({error}); install them with: {INSTALL_HINT}"
    return None
