"""The values static evaluation answers with: a :class:`Found` (value, the node that wrote it,
the options that can replace it) holding plain data or one of the markers below for what a
script builds (an instance, a class, a function, a parsed namespace, a mapping, a call)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import libcst as cst


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Any = _Missing()  # the value of an option whose default is not statically known


@dataclass(frozen=True)
class Ref:
    """A library object by its qualified name (``torch.bfloat16``, ``transformers.Trainer``)."""

    qualname: str


@dataclass(frozen=True)
class Namespace:
    """What ``ArgumentParser.parse_args()`` returns: attributes are argparse options."""


@dataclass(frozen=True)
class Merged:
    """``argparse.Namespace(**vars(model_args), **vars(training_args), seed=1)``: one object
    whose attributes are its keywords and the attributes of each object unpacked into it
    (qlora hands such a namespace to ``get_accelerate_model(args, ...)``)."""

    call: cst.Call


class CallerOptions:
    """A parameter bound to the options object a caller in another module passes it
    (``create_and_prepare_model(model_args, ...)``): each attribute is that caller's option."""


@dataclass(frozen=True)
class Instance:
    """A dataclass instance: a user ``@dataclass`` (``cls``) or a library one (``library``).

    ``cli`` is True when the instance comes from ``HfArgumentParser``/``TrlParser``: every field
    is then a command-line option. ``call`` is the constructor call, whose keywords beat the
    field defaults.
    """

    cls: cst.ClassDef | None = None
    library: str | None = None
    cli: bool = False
    call: cst.Call | None = None


@dataclass(frozen=True)
class Parsed:
    """``HfArgumentParser((A, B)).parse_args_into_dataclasses()``: a tuple of instances."""

    classes: tuple[Any, ...]  # each a ClassDef or a library qualified name


@dataclass(frozen=True)
class OptionEntries:
    """Entries a script copies from its parsed command line, each under its option's name
    (``memlint.python.option_dicts``)."""

    keys: tuple[str, ...] | None  # None: every option (``vars(args).items()``)
    passed_only: bool  # only the options that are set (``if value is not None:``)


@dataclass(frozen=True)
class Mapping:
    """A dict with constant string keys: the expression of each value, as written."""

    entries: tuple[tuple[str, cst.BaseExpression], ...]
    complete: bool = True  # False when part of it is unknown (``**other`` that did not evaluate)
    copied: OptionEntries | None = None  # the command-line options copied into it

    def get(self, key: str) -> cst.BaseExpression | None:
        for name, value in self.entries:
            if name == key:
                return value
        return None

    def keys(self) -> list[str]:
        return [name for name, _ in self.entries]


@dataclass(frozen=True)
class CallValue:
    """The result of a call memlint does not compute (a config object, a model)."""

    call: cst.Call


@dataclass(frozen=True)
class ClassValue:
    node: cst.ClassDef


@dataclass(frozen=True)
class FunctionValue:
    node: cst.FunctionDef


@dataclass(frozen=True)
class Found:
    """A value as the code states it.

    ``node`` is where the value is written (None for a library default, which is no fact);
    ``options`` are the command-line options (without dashes) that replace it.
    """

    value: Any
    node: cst.CSTNode | None
    options: tuple[str, ...] = ()
    note: str = ""
    # ``a if args.flag else b``: (the options, "if"/"ifnot", the value the other setting gives)
    flip: tuple[tuple[str, ...], str, Any] | None = None
    flip_node: cst.CSTNode | None = None  # where that other value is written
    # ``batch_size // micro_batch_size`` over options: how a launch's options redo the value
    # (``memlint.python.option_formulas``); None for a value no option derives
    formula: tuple | None = None

    @property
    def known(self) -> bool:
        return self.value is not MISSING

    def at(self, node: cst.CSTNode | None) -> "Found":
        return Found(self.value, node, self.options, self.note, self.flip, self.flip_node, self.formula)
