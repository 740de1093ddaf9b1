"""An :class:`Architecture` from a model's ``config.json``: its family's builder, else the
parameters counted on the meta device (stored for the catalogue's configs, counted live with the
``trace`` extra for others)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping

from memlint.estimate import architecture, decoders, encoders, hybrid, meta_count, meta_table, vision
from memlint.estimate.architecture import (Architecture, Linear, UnsupportedArchitecture, _multimodal_extra,
                                           text_config)

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
    labels = classifier_labels(config)
    if labels and arch.is_causal_lm:
        arch = as_sequence_classifier(arch, labels)
    return arch


def classifier_labels(config: Mapping[str, Any]) -> int:
    """How many labels a checkpoint saved as ``*ForSequenceClassification`` scores (a reward or
    value model: one), as ``PretrainedConfig.num_labels`` reads it; 0 for any other checkpoint."""
    names = config.get("architectures")
    if not isinstance(names, list) or not any(str(n).endswith("ForSequenceClassification") for n in names):
        return 0
    id2label = config.get("id2label")
    if isinstance(id2label, Mapping) and id2label:
        return len(id2label)
    labels = config.get("num_labels")
    return labels if isinstance(labels, int) and not isinstance(labels, bool) and labels > 0 else 2


def as_sequence_classifier(arch: Architecture, labels: int) -> Architecture:
    """A decoder loaded as ``AutoModelForSequenceClassification``: the vocabulary head is replaced
    by ``score`` (hidden -> labels, no bias, in every transformers ``*ForSequenceClassification``)
    and the step scores the last token instead of computing logits over the vocabulary."""
    return replace(arch, lm_head=Linear("score", arch.hidden_size, labels), tie_word_embeddings=False,
                   classifier_labels=labels)
