"""memlint's rules: one module per rule. Importing this package registers all of them."""

import importlib
import pkgutil

from memlint.rules.base import REGISTRY, Example, Finding, Rule

for _module in pkgutil.iter_modules(__path__):
    if not _module.name.startswith("_") and _module.name != "base":
        importlib.import_module(f"{__name__}.{_module.name}")


def all_rules() -> dict[str, type[Rule]]:
    """Every rule, by code (importing this package registered them)."""
    return dict(sorted(REGISTRY.items()))


__all__ = ["REGISTRY", "Example", "Finding", "Rule", "all_rules"]
