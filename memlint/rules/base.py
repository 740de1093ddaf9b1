"""What a rule is: a code, a name, a severity, its docs, its own examples, and a check.

Every rule is one small module under ``memlint/rules/``. Its docstring has fixed sections
(``What it does``, ``Why it matters``, optionally ``Fix``) that become its page in ``rules/``
and its hover; its ``VALID`` and ``INVALID`` examples are run by the test suite and shown on
the page as "Use instead" and "Example". Subclassing registers the rule; a duplicate code
fails at import.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Iterator, Mapping

from memlint.documents.kinds import DocumentKind
from memlint.model.diagnostics import Applicability, Fix, Range, Related, Severity

if TYPE_CHECKING:
    from memlint.lint.context import RuleContext
    from memlint.project.settings import Settings
    from memlint.python.prefilter import Pattern

REGISTRY: dict[str, type["Rule"]] = {}
DOCS_URL = "https://github.com/memlint/memlint/blob/main/rules/{code}.md"


@dataclass(frozen=True)
class Example:
    """A realistic document (plus the files it links) on which a rule must or must not fire."""

    source: str | bytes  # bytes for files that are not valid UTF-8
    path: str = "train.py"  # the linted file's name (its kind follows from it)
    files: Mapping[str, str | bytes] = field(default_factory=dict)  # other files of the project
    settings: Mapping[str, Any] = field(default_factory=dict)  # [tool.memlint] values
    lines: tuple[int, ...] = ()  # INVALID: the 1-based lines the rule must report (all of them)
    message: str = ""  # INVALID: text every message must contain
    fixed: str | None = None  # INVALID: the linted file after applying the rule's fix
    title: str = ""  # a line shown above the example on the rule's page


@dataclass(frozen=True)
class Finding:
    """What a rule reports; the engine turns it into a Diagnostic."""

    range: Range
    message: str
    path: str | None = None  # default: the linted document
    fix: Fix | None = None
    related: tuple[Related, ...] = ()
    data: dict[str, Any] = field(default_factory=dict)
    # a finding less certain than the rule's usual verdict (an out-of-memory verdict that rests
    # on an assumed fact is a warning); None: the rule's severity. A user's override still wins.
    severity: Severity | None = None


class Rule:
    """A rule: its code, name, severity, the documents it looks at, its docs and its own
    VALID/INVALID examples, and ``check``, which yields findings for one document."""

    code: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[Severity] = Severity.WARNING
    # the kinds of document the rule looks at
    kinds: ClassVar[frozenset[DocumentKind]] = frozenset()
    # a rule that judges a whole training run sees every document that takes part in one
    judges_runs: ClassVar[bool] = False
    # a rule about reading files at all (SYN002) sees every document, whatever its kind
    every_document: ClassVar[bool] = False
    fix_applicability: ClassVar[Applicability | None] = None  # set when the rule's findings carry fixes
    # What a Python module must name for ``check`` to find anything in its tree: a regular
    # expression over the names its code uses (memlint.python.prefilter; ``memlint check`` sets
    # aside the modules no rule and no extractor needs). "" (the default): every module; None:
    # the rule reads no module tree (only facts, runs, the syntax verdict); a tuple: all of them;
    # a ``Called`` pattern: over the names the module's calls are made through only.
    python_needs: ClassVar["Pattern | tuple[Pattern, ...] | None"] = ""
    VALID: ClassVar[tuple[Example, ...]] = ()
    INVALID: ClassVar[tuple[Example, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        code = cls.__dict__.get("code")
        if code is None:
            return  # an abstract helper base
        if not re.fullmatch(r"[A-Z]{3}\d{3}", code):
            raise ValueError(f"{cls.__name__}: rule code {code!r} must look like ABC123")
        if code in REGISTRY and REGISTRY[code] is not cls:
            raise ValueError(f"duplicate rule code {code}: {REGISTRY[code].__name__} and {cls.__name__}")
        if not cls.__doc__ or "## What it does" not in cls.__doc__ or "## Why it matters" not in cls.__doc__:
            raise ValueError(f"{code}: the docstring needs '## What it does' and '## Why it matters'")
        REGISTRY[code] = cls

    @classmethod
    def applies_to(cls, kind: DocumentKind, in_a_run: bool) -> bool:
        """Does the rule look at a document of ``kind`` (``in_a_run``: it takes part in one)?"""
        return kind in cls.kinds or cls.every_document or (cls.judges_runs and in_a_run)

    @classmethod
    def needs(cls, settings: "Settings") -> "Pattern | tuple[Pattern, ...] | None":
        """``python_needs`` under these settings (a rule that cannot fire under them needs nothing)."""
        return cls.python_needs

    def check(self, ctx: "RuleContext") -> Iterator[Finding]:  # pragma: no cover - abstract
        raise NotImplementedError

    # ----------------------------------------------------------------- docs

    @classmethod
    def url(cls) -> str:
        return DOCS_URL.format(code=cls.code)

    @classmethod
    def summary(cls) -> str:
        return section(cls.__doc__ or "", "What it does").split("\n\n")[0].strip()


def section(doc: str, title: str) -> str:
    """The text of ``## title`` in a rule docstring (dedented, up to the next section)."""
    lines = _dedent(doc).splitlines()
    out: list[str] = []
    inside = False
    for line in lines:
        if line.startswith("## "):
            if inside:
                break
            inside = line[3:].strip().lower() == title.lower()
            continue
        if inside:
            out.append(line)
    return "\n".join(out).strip()


def _dedent(doc: str) -> str:
    import textwrap

    first, _, rest = doc.partition("\n")
    return (first.strip() + "\n" + textwrap.dedent(rest)).strip()
