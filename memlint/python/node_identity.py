"""libcst nodes hashed and compared by identity in C, as libcst means them to be.

libcst's ``CSTNode`` defines ``__hash__`` as ``return id(self)`` and ``__eq__`` as ``return self
is other`` (nodes are equal only to themselves, like CPython's ``ast`` nodes) and copies both
into every node class. Being Python functions, each costs a Python call: every lookup in a
dictionary keyed by nodes -- positions, parents, children, libcst's own scope maps, the rules'
indexes -- pays one, and an analysis of a 2,000-line script makes hundreds of thousands. The
``object`` slots answer the same (a hash that depends on the identity alone, equality by
identity) without the call: about a fifth of a language-server edit's CPU time.

The hash *values* differ from ``id(node)``, so the swap is made once, when memlint's parser is
imported, before memlint has put any node in a dictionary.
"""

from __future__ import annotations

import libcst as cst


def _node_classes() -> list[type]:
    found: list[type] = []
    stack: list[type] = [cst.CSTNode]
    while stack:
        cls = stack.pop()
        found.append(cls)
        stack.extend(cls.__subclasses__())
    return found


def use_identity_slots() -> None:
    """Give every libcst node class ``object``'s hash and equality where it has libcst's
    identity versions (a class that defines its own keeps it)."""
    identity_hash = cst.CSTNode.__dict__["__hash__"]
    identity_eq = cst.CSTNode.__dict__["__eq__"]
    for cls in _node_classes():
        if cls.__dict__.get("__hash__") is identity_hash:
            setattr(cls, "__hash__", object.__hash__)
        if cls.__dict__.get("__eq__") is identity_eq:
            setattr(cls, "__eq__", object.__eq__)


use_identity_slots()
