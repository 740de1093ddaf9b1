"""libcst's parse without its per-node validation, for text CPython has already parsed.

Every libcst node checks its own fields when it is built (``CSTNode.__post_init__`` calls
``_validate``: parentheses that balance, whitespace where a keyword needs it...). That guards
trees built by hand; a tree the parser builds from valid Python passes by construction, and
``memlint check`` parses with libcst only text that ``ast.parse`` accepted. On the real tree's
kept modules the checks are a fifth of libcst's parse (``bench/real_speed.py``'s tree; libcst's
own comment on ``__post_init__`` names the same cost: "avoid validating the tree when parsing
a file"). The nodes are the same; only the checks are skipped.

The hook is the class attribute that the dataclass ``__init__`` of every node class calls, put
back to libcst's own function afterwards, whatever another thread did meanwhile (a node built
elsewhere during the parse is then built unchecked, as the parser's are: nothing else changes).

The nodes' constructors too: libcst's native parser builds each node by calling its class, and
the frozen dataclass ``__init__`` then sets each field through ``object.__setattr__`` looked up
by name, and calls the hook. For the length of the parse each node class gets an ``__init__``
that stores the same values in the same places (the class's slot, or the instance's
``__dict__`` for the classes without slots), the same defaults, no hook: about a seventh of
what was left of the parse on the real tree's kept modules (median of six rounds under load,
``bench/libcst_parse.py``). They are generated, as ``dataclasses`` generates
the originals, once per process.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, Callable

import libcst as cst

# libcst's own (``self._validate()``); a libcst without it is parsed as it is
_VALIDATING = cst.CSTNode.__dict__.get("__post_init__")


def _unchecked(self: cst.CSTNode) -> None:
    """What a node built by the parser does after ``__init__``: nothing to check."""


def parse_module(text: str) -> cst.Module:
    """``cst.parse_module(text)``, its nodes built without ``_validate``; the same errors
    (``cst.ParserSyntaxError``) for text the parser rejects."""
    return parse_without_checks(text, builders=True)


def parse_without_checks(text: str, builders: bool) -> cst.Module:
    """``parse_module``; ``builders`` False: with libcst's dataclass constructors (the hook alone
    set to nothing), as before the constructors were replaced (``bench/libcst_parse.py``)."""
    if _VALIDATING is None:
        return cst.parse_module(text)
    swapped = _builders() if builders else {}
    cst.CSTNode.__post_init__ = _unchecked  # type: ignore[method-assign]
    for cls, (fast, _) in swapped.items():
        cls.__init__ = fast  # type: ignore[misc]
    try:
        return cst.parse_module(text)
    finally:
        for cls, (_, original) in swapped.items():
            cls.__init__ = original  # type: ignore[misc]
        cst.CSTNode.__post_init__ = _VALIDATING  # type: ignore[method-assign]


_BUILDERS: dict[type, tuple[Callable[..., None], Callable[..., None]]] | None = None


def _builders() -> dict[type, tuple[Callable[..., None], Callable[..., None]]]:
    """Each concrete node class's fast ``__init__`` and its own, by class (worked out once)."""
    global _BUILDERS
    if _BUILDERS is None:
        found = {}
        for cls in _node_classes():
            fast = _builder(cls)
            if fast is not None:
                found[cls] = (fast, cls.__dict__["__init__"])
        _BUILDERS = found
    return _BUILDERS


def _node_classes() -> list[type]:
    """The node classes the native parser builds: it calls them by their name in ``libcst``."""
    found = {value for name in cst.__all__ if isinstance(value := getattr(cst, name, None), type)}
    return sorted((cls for cls in found if issubclass(cls, cst.CSTNode)),
                  key=lambda cls: cls.__qualname__)


def _builder(cls: type) -> Callable[..., None] | None:
    """An ``__init__`` for ``cls`` that does what its dataclass ``__init__`` does but call
    ``__post_init__``; None where that is not plainly so (a class of another shape is left as
    it is: its own constructor and the hook set to nothing)."""
    if (inspect.isabstract(cls) or not dataclasses.is_dataclass(cls) or "__init__" not in cls.__dict__
            or cls.__dict__["__init__"].__code__.co_filename != "<string>"):  # not dataclasses' own
        return None
    special = dataclasses._FIELDS  # type: ignore[attr-defined]
    declared = list(getattr(cls, special).values())
    # ``__slots__`` shows as a ClassVar (libcst's ``add_slots``), not an argument of ``__init__``
    fields = [f for f in declared if f._field_type is not dataclasses._FIELD_CLASSVAR]  # type: ignore[attr-defined]
    if any(f._field_type is not dataclasses._FIELD or not f.init or f.kw_only  # type: ignore[attr-defined]
           for f in fields):
        return None  # an InitVar, a field outside __init__, a keyword-only one: not a libcst node's shape
    if any(f.name.startswith("_") or f.name == "self" for f in fields):
        return None  # the parser passes the fields by name: the generated names below must not meet them
    names: dict[str, Any] = {"_MISSING": dataclasses.MISSING}
    parameters, body = ["self"], []
    uses_dict = False
    for number, field in enumerate(fields):
        value = field.name
        if field.default is not dataclasses.MISSING:
            names[f"_default{number}"] = field.default
            parameters.append(f"{value}=_default{number}")
        elif field.default_factory is not dataclasses.MISSING:
            names[f"_factory{number}"] = field.default_factory
            parameters.append(f"{value}=_MISSING")
            body.append(f"if {value} is _MISSING: {value} = _factory{number}()")
        else:
            parameters.append(value)
        slot = _slot(cls, field.name)
        if slot is not None:
            names[f"_set{number}"] = slot
            body.append(f"_set{number}(self, {value})")
        elif _plain_attribute(cls, field.name):
            uses_dict = True
            body.append(f"_d[{field.name!r}] = {value}")
        else:
            return None
    if uses_dict:
        body.insert(0, "_d = self.__dict__")
    lines = [f"def __init__({', '.join(parameters)}):", *(f"    {line}" for line in body or ["pass"])]
    exec("\n".join(lines), names)  # what ``dataclasses`` does to make the originals
    fast = names["__init__"]
    fast.__qualname__ = f"{cls.__qualname__}.__init__"
    return fast


def _slot(cls: type, name: str) -> Callable[[Any, Any], None] | None:
    """The setter of the slot ``name`` has in ``cls`` (None: not a slot)."""
    for klass in cls.__mro__:
        if name in klass.__dict__:  # the first class on the way decides, as ``setattr`` does
            found = klass.__dict__[name]
            return found.__set__ if type(found).__name__ == "member_descriptor" else None
    return None


def _plain_attribute(cls: type, name: str) -> bool:
    """``object.__setattr__(node, name, value)`` writes the instance's ``__dict__``: no class on
    the way defines ``name`` as something that intercepts the write, and instances have one."""
    if not cls.__dictoffset__:
        return False
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return not hasattr(type(klass.__dict__[name]), "__set__")
    return True
