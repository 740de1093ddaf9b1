"""Vision towers that transformers builds through timm, counted without timm.

Gemma 3n's vision tower is a timm MobileNetV5 that transformers wraps (``TimmWrapperModel``):
building the model on the meta device needs the ``timm`` package, which memlint does not depend
on. The tower's parameter count is fixed by its timm architecture name, so it is stored here with
how it was measured, and the meta count builds the rest of the model with an empty module in the
tower's place, then adds the stored count.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Mapping

from memlint.estimate.architecture import UnsupportedArchitecture

# model_type of the sub-configs transformers hands to timm (``vision_config``)
TIMM_CONFIG_TYPES = ("gemma3n_vision", "timm_wrapper")

# timm architecture -> (parameters, how the figure was measured)
TOWERS: dict[str, tuple[int, str]] = {
    "mobilenetv5_300m_enc": (
        294_126_912,
        "timm 1.0.31 timm.create_model('mobilenetv5_300m_enc', pretrained=False, num_classes=0) on the "
        "meta device with torch 2.13.0, as transformers 5.23's TimmWrapperModel builds it for Gemma 3n "
        "(equal to that model's vision_tower count)",
    ),
}


def towers(config: Mapping[str, Any]) -> list[str]:
    """The timm architectures a ``config.json`` asks transformers to build (none for most)."""
    found = []
    for value in config.values():
        if isinstance(value, Mapping) and value.get("model_type") in TIMM_CONFIG_TYPES:
            found.append(str(value.get("architecture") or ""))
    return found


def stored_params(config: Mapping[str, Any]) -> int:
    """The stored count of every timm tower of ``config``; refuses a tower that is not stored."""
    total = 0
    for name in towers(config):
        if name not in TOWERS:
            raise UnsupportedArchitecture(
                f"its vision tower is the timm model {name!r}, which transformers builds only with the "
                "`timm` package and memlint has not counted; set `model-config` in [tool.memlint] to a "
                "config.json without it, or measure this run on a GPU"
            )
        total += TOWERS[name][0]
    return total


@contextlib.contextmanager
def stand_in() -> Iterator[None]:
    """While building on the meta device, give each timm-wrapped sub-config an empty module.

    transformers builds the tower with ``AutoModel.from_config(vision_config)`` from the parent
    model's ``__init__``; every other ``from_config`` call goes through unchanged."""
    import torch
    import transformers

    auto = transformers.AutoModel
    own = auto.__dict__.get("from_config")  # None: inherited from the auto-class base
    build = auto.from_config

    def from_config(config: Any, *args: Any, **kwargs: Any) -> Any:
        if getattr(config, "model_type", None) in TIMM_CONFIG_TYPES:
            return torch.nn.Module()
        return build(config, *args, **kwargs)

    setattr(auto, "from_config", staticmethod(from_config))
    try:
        yield
    finally:
        if own is None:
            del auto.from_config
        else:
            setattr(auto, "from_config", own)
