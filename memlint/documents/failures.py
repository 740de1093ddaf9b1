"""When memlint itself fails on a document: the failure stays with that document.

Whatever a document makes memlint raise — reading it, extracting its facts, estimating its
runs, a rule, writing its findings, fixing it — costs that document (part of) its findings,
never the run: it gets one SYN002 diagnostic that says memlint failed on it and asks for a
report, and every other file is linted and reported as usual. The exit code stays the
findings' (0 or 1); 2 is for usage errors only.
"""

from __future__ import annotations

import os
import sys
import traceback

from memlint.model.diagnostics import Diagnostic, Range, Severity

CODE = "SYN002"  # the document could not be (fully) linted
ISSUES_URL = "https://github.com/memlint/memlint/issues"
_MAX_ERROR = 200  # characters of the error kept in the message


def error_text(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}".replace("\n", " ")
    return text if len(text) <= _MAX_ERROR else text[:_MAX_ERROR - 1] + "…"


def describe(stage: str, error: BaseException | str) -> str:
    """The message of a failure: where memlint was, what it raised, and what to do."""
    shown = error if isinstance(error, str) else error_text(error)
    return (f"not fully linted: memlint failed on this file while {stage} ({shown}); its findings may be "
            f"incomplete. This is a bug in memlint: please report it at {ISSUES_URL}")


def note(stage: str, path: str, error: BaseException) -> str:
    """Say it on stderr (with the traceback under MEMLINT_DEBUG); return the short form."""
    short = f"{stage} {path}: {error_text(error)}"
    print(f"memlint: internal error: {short} (please report it)", file=sys.stderr)
    if "MEMLINT_DEBUG" in os.environ:
        traceback.print_exception(error)
    return short


def diagnostic(path: str, message: str, settings) -> Diagnostic | None:
    """The diagnostic for a failure on ``path`` (None when the settings turn SYN002 off)."""
    if not settings.enabled(CODE):
        return None
    return Diagnostic(code=CODE, message=message, path=path, range=Range.file_start(),
                      severity=settings.severity_of(CODE, Severity.WARNING))
