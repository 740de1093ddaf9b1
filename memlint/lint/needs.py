"""What ``memlint check``'s prefilter asks of a Python module: the needs of the enabled rules
that look at Python and of the Python fact extractor (``memlint.python.prefilter``).

``MEMLINT_PREFILTER=off`` in the environment parses every module: how the tests and
``bench/prefilter_check.py`` show that the prefilter changes no finding."""

from __future__ import annotations

import ast
import os

from memlint.documents.kinds import DocumentKind
from memlint.facts.extract import NEEDS, load_extractors
from memlint.project.settings import Settings
from memlint.python.prefilter import Needs


def python_needs(settings: Settings) -> Needs | None:
    """None: some reader needs every module (a rule that declares nothing: a plugin's)."""
    from memlint.rules import all_rules

    if os.environ.get("MEMLINT_PREFILTER") == "off":
        return None

    load_extractors()
    readers = [cls.needs(settings) for code, cls in all_rules().items()
               if settings.enabled(code) and cls.applies_to(DocumentKind.PYTHON, True)]
    return Needs.of([*readers, NEEDS.get(DocumentKind.PYTHON.value, "")])


class Prefilter:
    """``python_needs(settings).wanted``, worked out when the first module is asked about: a
    run whose results all come from the cache never imports the rules."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._needs: Needs | None = None
        self._known = False

    def __call__(self, tree: ast.AST) -> bool:
        if not self._known:
            self._needs, self._known = python_needs(self.settings), True
        return self._needs is None or self._needs.wanted(tree)
