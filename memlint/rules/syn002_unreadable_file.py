"""SYN002: a file memlint was asked to lint but cannot read as text."""

from __future__ import annotations

from typing import Iterator

from memlint.lint.context import RuleContext
from memlint.model.diagnostics import Range, Severity
from memlint.rules.base import Example, Finding, Rule


class UnreadableFile(Rule):
    """## What it does
    Reports a file that memlint was given (or found) but cannot read as text: binary content,
    invalid UTF-8, a file larger than the 4 MiB limit for scripts and configs, a FIFO or device,
    a broken or looping symlink, or one it has no permission to read — or Python it can parse
    but not analyse (nesting hundreds of levels deep, lines tens of thousands of characters
    long, more than 20,000 lines: generated code, never a hand-written script). The finding is on the first line;
    every other file is still checked.

    It also reports a file memlint itself failed on — reading it, extracting its facts,
    estimating its runs, a rule, writing its findings or fixing it raised an error: a bug in
    memlint, which the message asks you to report. The failure costs that file (part of) its
    findings and nothing else: every other file is linted and reported, and the exit code is
    the findings' as usual.

    ## Why it matters
    A ``train.py`` that is really a binary, or a ``ds_config.json`` saved in UTF-16 by an
    editor, silently escapes every check; saying so is better than a clean report.
    """

    code = "SYN002"
    name = "unreadable-file"
    severity = Severity.WARNING
    every_document = True
    python_needs = None

    VALID = (Example('{"train_micro_batch_size_per_gpu": 4}\n', path="ds_config.json", title="Plain UTF-8"),)
    INVALID = (
        Example(b'{"train_micro_batch_size_per_gpu": 4, "comment": "caf\xe9"}\n', path="ds_config.json",
                lines=(1,), message="UTF-8",
                title="A config saved in Latin-1 by an old editor ('é' as the single byte 0xE9)"),
    )

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        problem = ctx.parsed.document.problem
        if problem is not None:
            yield Finding(range=Range.file_start(), message=f"not linted: {problem}")
        error = ctx.parsed.syntax_error
        if error is not None and error.kind == "too-complex":
            yield Finding(range=error.range, message=f"not linted: {error.message}")
