"""SYN001: a Python file memlint cannot parse."""

from __future__ import annotations

from typing import Iterator

from memlint.documents.conflicts import conflict_message
from memlint.documents.kinds import DocumentKind
from memlint.lint.context import RuleContext
from memlint.model.diagnostics import Severity
from memlint.rules.base import Example, Finding, Rule


class PythonSyntaxError(Rule):
    """## What it does
    Reports a Python file that does not parse, at the place the parser stopped. memlint reads
    training scripts with libcst and never runs them, so a file that does not parse cannot be
    checked for memory or mistakes; the rest of the project still is.

    ## Why it matters
    A script that does not parse will not train either — and until it parses, every other
    check in it is silent.
    """

    code = "SYN001"
    name = "python-syntax-error"
    severity = Severity.ERROR
    kinds = frozenset({DocumentKind.PYTHON})
    python_needs = None  # the syntax verdict comes before any tree

    VALID = (Example("import torch\n\nmodel = torch.nn.Linear(4, 4)\n", title="Parses"),)
    INVALID = (
        Example(
            "import torch\n\ndef train(model, loader):\n    for batch in loader\n        model(batch)\n",
            lines=(4,),
            message="",
            title="A missing colon",
        ),
        Example(
            "import torch\n\n\ndef train_step(model, batch, optimizer):\n"
            "<<<<<<< HEAD\n    loss = model(**batch).loss\n=======\n    loss = model(**batch).loss / 4\n"
            ">>>>>>> grad-accum\n    loss.backward()\n    optimizer.step()\n",
            lines=(5,),
            message="unresolved merge conflict (`<<<<<<< HEAD`)",
            title="A merge conflict left in the script",
        ),
    )

    def check(self, ctx: RuleContext) -> Iterator[Finding]:
        error = ctx.parsed.syntax_error
        if error is not None and error.kind == "syntax":
            conflict = conflict_message(ctx.parsed.text)
            if conflict is not None:
                yield Finding(range=conflict[0], message=conflict[1])
            else:
                yield Finding(range=error.range, message=f"cannot parse: {error.message}")
