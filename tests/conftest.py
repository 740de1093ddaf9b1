"""Hypothesis profiles for the whole suite, chosen with ``MEMLINT_HYPOTHESIS_PROFILE`` (or
pytest's ``--hypothesis-profile``): ``ci`` (the default) keeps each property test to a few
dozen examples; ``thorough`` runs ten times as many; ``triage`` is ``ci`` without shrinking,
for a first look at a failure whose examples are slow to shrink (whole example projects)."""

from __future__ import annotations

import os

# Tests never use the internet: memlint's Hub lookup (memlint/catalog/hub.py) stays off unless a
# test turns it on against its own local server.
os.environ["HF_HUB_OFFLINE"] = "1"

from hypothesis import HealthCheck, Phase, settings

_COMMON = dict(
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("ci", max_examples=40, **_COMMON)
settings.register_profile("thorough", max_examples=400, **_COMMON)
settings.register_profile("triage", max_examples=40, phases=[Phase.explicit, Phase.reuse, Phase.generate], **_COMMON)
settings.load_profile(os.environ.get("MEMLINT_HYPOTHESIS_PROFILE", "ci"))
