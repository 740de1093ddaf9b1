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
from memlint.python.prefilter import Needs, UsedNames


def prefilter_on() -> bool:
    """Not with ``MEMLINT_PREFILTER=off``: every module parsed and read by every reader."""
    return os.environ.get("MEMLINT_PREFILTER") != "off"


def python_needs(settings: Settings) -> Needs | None:
    """None: some reader needs every module (a rule that declares nothing: a plugin's)."""
    from memlint.rules import all_rules

    if not prefilter_on():
        return None

    load_extractors()
    readers = [cls.needs(settings) for code, cls in all_rules().items()
               if settings.enabled(code) and cls.applies_to(DocumentKind.PYTHON, True)]
    # the extractor drops what lies only in classes the module never uses (``Needs.outside``)
    return Needs.of(readers, outside=NEEDS.get(DocumentKind.PYTHON.value, [""]))


class Prefilter:
    """``python_needs(settings).wanted``, worked out when the first module is asked about: a
    run whose results all come from the cache never imports the rules."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._needs: Needs | None = None
        self._known = False

    def __call__(self, names: ast.AST | str | UsedNames) -> bool:
        if not self._known:
            self._needs, self._known = python_needs(self.settings), True
        return self._needs is None or self._needs.wanted(names)


def rule_gates(settings: Settings) -> dict[str, Needs]:
    """Each enabled rule's own need, by code: a module the prefilter kept for one reader is not
    read by the others whose need it does not meet (``Rule.python_needs``: nothing there for
    them). Rules that read every module, or no module tree (their runs' facts), are not listed;
    none are with ``MEMLINT_PREFILTER=off``."""
    from memlint.rules import all_rules

    if not prefilter_on():
        return {}
    gates = {}
    for code, cls in all_rules().items():
        if settings.enabled(code) and cls.applies_to(DocumentKind.PYTHON, True):
            need = cls.needs(settings)
            if need is not None and (gate := Needs.of([need])) is not None:
                gates[code] = gate
    return gates
