"""An :class:`Architecture` from a model's ``config.json``: its family's builder, else the
parameters counted on the meta device (stored for the catalogue's configs, counted live with the
``trace`` extra for others)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from memlint.estimate import architecture, decoders, encoders, hybrid, meta_count, meta_table, vision
from memlint.estimate.architecture import Architecture, UnsupportedArchitecture, _multimodal_extra, text_config

# model_type -> the recipe that reads its config.json
BUILDERS = {
    **architecture.BUILDERS,
    **decoders.BUILDERS,
    **encoders.BUILDERS,
    "qwen2_5_vl": vision.from_vl_config,
    "qwen3_vl": vision.from_vl_config,
    "falcon_h1": hybrid.from_falcon_h1_config,
}
SUPPORTED_MODEL_TYPES = tuple(sorted(BUILDERS))


def from_config(config: Mapping[str, Any], name: str = "") -> Architecture:
    """Build an :class:`Architecture` from a ``config.json`` mapping.

    Raises :class:`UnsupportedArchitecture` with a message that names the model type and the
    supported ones; a malformed config (missing or non-numeric sizes) raises the same.
    """
    if not isinstance(config, Mapping):
        raise UnsupportedArchitecture("config.json must hold a JSON object")
    cfg, model_type = text_config(config)
    builder = BUILDERS.get(model_type)
    if builder is None:
        stored = meta_table.lookup(config, name or str(config.get("_name_or_path") or model_type))
        if stored is not None:
            return stored
        if model_type and meta_count.available():
            return meta_count.from_meta(config, name or str(config.get("_name_or_path") or model_type))
        supported = ", ".join(SUPPORTED_MODEL_TYPES)
        shown = model_type or "(no model_type)"
        raise UnsupportedArchitecture(
            f"model_type {shown!r} is not supported; supported: {supported} (with the `trace` "
            "extra installed, memlint counts other transformers architectures on the meta device)"
        )
    arch = builder(name or str(config.get("_name_or_path") or model_type), cfg, model_type)
    extra = _multimodal_extra(config, arch.hidden_size)
    if extra:
        arch = replace(arch, extra_params=extra)
    return arch
