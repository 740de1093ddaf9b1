"""DeepSpeed's ``fp16``/``bf16`` sections judged for the release the project pins.

DeepSpeed validates these two sections only since 0.17.1: ``deepspeed/runtime/precision_config.py``
(``DeepSpeedFP16Config``, a pydantic model that forbids unknown keys and types
``min_loss_scale: int``) arrived with commit e440506 "Improve overflow handling in ZeRO (#6976)",
first tagged v0.17.1. Earlier releases read each key with ``get_scalar_param`` from the plain
dict (``deepspeed/runtime/config.py`` of 0.10.1): a key they do not know is ignored, and a value
is used as written (trlx pins ``deepspeed==0.10.1`` and writes ``"min_loss_scale": 0.5`` and
``"opt_level": "O2"`` in ``fp16``). For a pin whose newest admitted release is older, the schema's
errors on those sections say so: an unknown key is a warning (it does nothing, silently), a value
of another type an info (used as written), each saying that an upgrade refuses the config.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from memlint.configs.validation import Issue
from memlint.facts.pinned_versions import Pin
from memlint.model.diagnostics import Severity


@dataclass(frozen=True)
class Rejudged(Issue):
    """A schema issue re-judged for the pinned DeepSpeed; ``severity`` overrides the rule's."""

    severity: Severity | None = None


VALIDATED_SINCE = Version("0.17.1")
SECTIONS = ("fp16", "bf16")
# releases at or after 0.17.1 a range pin may admit (the last of each minor line, then later lines)
_LATER = ("0.17.1", "0.17.999", "0.18.999", "0.19.999", "0.99", "1.999", "99")


def unvalidated(pin: Pin | None) -> bool:
    """Does the pinned DeepSpeed read ``fp16``/``bf16`` without validating them?"""
    if pin is None or pin.url:
        return False
    if pin.exact is not None:
        try:
            return Version(pin.exact) < VALIDATED_SINCE
        except InvalidVersion:
            return False
    return len(pin.specifier) > 0 and not any(pin.specifier.contains(v, prereleases=True) for v in _LATER)


def judged(found: list[Issue], pin: Pin | None) -> list[Issue]:
    """The schema's issues, with those on the precision sections re-judged for ``pin``."""
    if not unvalidated(pin):
        return found
    assert pin is not None
    out: list[Issue] = []
    for issue in found:
        if len(issue.path) >= 2 and issue.path[0] in SECTIONS and issue.category in ("unknown", "invalid"):
            issue = Rejudged(
                issue.category, issue.path,
                f"{issue.message.replace(' (DeepSpeed refuses the config)', '')}: the DeepSpeed you pin "
                f"(`deepspeed{pin.specifier}`, {pin.where}) reads `{issue.path[0]}` without checking it "
                f"({'ignores the key' if issue.category == 'unknown' else 'uses the value as written'}); "
                f"DeepSpeed {VALIDATED_SINCE} and later refuse the config",
                issue.range, issue.fix,
                severity=Severity.WARNING if issue.category == "unknown" else Severity.INFO)
        out.append(issue)
    return out
