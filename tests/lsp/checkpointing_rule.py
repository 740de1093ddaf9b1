"""A fixable rule for the end-to-end code-action tests, loaded only into the server they start.

memlint's own rules that carry fixes live on other branches; this one has the shape they have
(a structured-config rule whose fix edits one value) so the whole path from a rule's ``Fix``
to the editor's quick fix is exercised with a real server and client.
"""

from memlint.model.diagnostics import Edit, Fix, Severity
from memlint.rules.base import Example, Finding, Rule


class CheckpointingOff(Rule):
    """## What it does
    Reports ``gradient_checkpointing: false`` in a TrainingArguments config.

    ## Why it matters
    Without checkpointing, activations of every layer stay alive until the backward pass.
    """

    code = "TST901"
    name = "checkpointing-off"
    severity = Severity.WARNING
    kinds = frozenset({"hf-args"})
    fix_applicability = "safe"
    INVALID = (Example("gradient_checkpointing: false\noutput_dir: out\n", path="args.yaml", lines=(1,)),)

    def check(self, ctx):
        data = ctx.structured
        if data is None or data.get("gradient_checkpointing") is not False:
            return
        where = data.range_of(("gradient_checkpointing",))
        fix = Fix("enable gradient checkpointing", (Edit(ctx.path, where, "true"),), "safe")
        yield Finding(range=where, message="gradient checkpointing is off", fix=fix)
