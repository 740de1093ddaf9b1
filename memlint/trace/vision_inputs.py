"""The synthetic batch of a vision-language case: image placeholder tokens in ``input_ids``, the
patches of each image (``pixel_values``), its patch grid (``image_grid_thw``) and the 3-D rotary
positions the language model reads, built as a Qwen2.5-VL / Qwen3-VL processor and collator
would for images of the stated size.

Why the index tensors are *constants*: the vision tower derives its attention windows, the
per-image split sizes and the rotary positions from ``image_grid_thw`` with data-dependent
operations (``.tolist()``, boolean indexing). A fake tensor has no values, so those tensors are
made fake tensors that carry their real values (``make_constant``), and
:func:`constant_index_tensors` lets the fake mode propagate values through the small integer
tensors computed from them. The rotary positions and Qwen2.5-VL's window index are computed
for real beforehand, by transformers' own functions (``get_rope_index``,
``transformers.vision_utils``), and passed as the precomputed inputs transformers accepts.
Parameters and activations stay plain fake tensors: what is measured does not change.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from memlint.trace.case import Case

#: model types whose batches carry images, and the Auto class that builds them
VL_MODEL_TYPES = ("qwen2_5_vl", "qwen3_vl")


def is_vision_language(case: Case) -> bool:
    return case.model.get("model_type") in VL_MODEL_TYPES


def image_grid(case: Case, height: int, width: int) -> tuple[int, int, int]:
    """(frames, patch rows, patch columns) of one image as the Qwen image processor resizes it
    (:func:`memlint.estimate.vision.image_grid`: transformers' ``smart_resize`` needs
    torchvision or PIL, which the trace extra does not install)."""
    from memlint.estimate.vision import image_grid as grid

    rows, cols = grid(case.model, height, width)
    return 1, rows, cols


@contextlib.contextmanager
def constant_index_tensors(limit: int) -> Iterator[None]:
    """Let the fake mode keep real values for tensors of up to ``limit`` elements computed only
    from constants (the index tensors above); torch's default keeps scalars only."""
    import torch._subclasses.fake_tensor as fake_tensor

    before = fake_tensor.CONSTANT_NUMEL_LIMIT
    fake_tensor.CONSTANT_NUMEL_LIMIT = max(before, limit)
    try:
        yield
    finally:
        fake_tensor.CONSTANT_NUMEL_LIMIT = before


def build_batch(case: Case, model: Any, fake_mode: Any, device: torch.device) -> tuple[dict[str, Any], dict[str, Any]]:
    """The keyword arguments of ``model(...)`` for one micro-batch, and what they hold.

    Each sequence is ``[text] <vision_start> <image>*n <vision_end> [text] ...`` with
    ``case.images["per_sequence"]`` images; the rest of the ``seq_len`` tokens are text. Labels
    are the input ids with the image placeholders set to -100, as TRL's and LLaMA-Factory's
    collators do.
    """
    config = model.config
    spec = case.images or {}
    per_seq = int(spec.get("per_sequence", 1))
    t, gh, gw = image_grid(case, int(spec.get("height", 448)), int(spec.get("width", 448)))
    merge = config.vision_config.spatial_merge_size ** 2
    tokens_per_image = t * gh * gw // merge
    needed = per_seq * (tokens_per_image + 2)
    if needed >= case.seq_len:
        raise ValueError(f"{per_seq} image(s) of {tokens_per_image} tokens each do not fit in seq_len "
                         f"{case.seq_len}: raise seq_len or lower the image size")
    text = config.get_text_config()
    ids = torch.randint(0, min(int(text.vocab_size), int(config.image_token_id)), (case.batch_size, case.seq_len))
    start = 1
    for _ in range(per_seq):
        ids[:, start] = config.vision_start_token_id
        ids[:, start + 1:start + 1 + tokens_per_image] = config.image_token_id
        ids[:, start + 1 + tokens_per_image] = config.vision_end_token_id
        start += tokens_per_image + 2
    grid = torch.tensor([[t, gh, gw]] * (per_seq * case.batch_size))
    mm_types = (ids == config.image_token_id).int()
    labels = ids.masked_fill(ids == config.image_token_id, -100)
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    positions, _ = inner.model.get_rope_index(ids, image_grid_thw=grid, mm_token_type_ids=mm_types)

    extra: dict[str, Any] = {}
    v = config.vision_config
    if config.model_type == "qwen2_5_vl":
        from transformers import vision_utils

        extra["image_position_ids"] = vision_utils.get_vision_position_ids(grid, v.spatial_merge_size)
        extra["image_cu_seqlens"] = vision_utils.get_vision_cu_seqlens(grid)
        extra["image_window_index"], extra["image_cu_window_seqlens"] = vision_utils.get_vision_window_index(
            grid, v.spatial_merge_size, v.window_size, v.patch_size)

    patch_inputs = v.in_channels * v.temporal_patch_size * v.patch_size ** 2
    n_patches = int(grid.prod(-1).sum())

    def const(x: torch.Tensor) -> torch.Tensor:
        # a compact copy, as a collator hands over (a view would keep its base's storage)
        x = x.to(device).clone()
        if fake_mode is None:
            return x
        return fake_mode.fake_tensor_converter.from_real_tensor(fake_mode, x, make_constant=True)

    outer = fake_mode if fake_mode is not None else contextlib.nullcontext()
    with outer:
        pixels = torch.randn(n_patches, patch_inputs, device=device)
    batch = {"input_ids": const(ids), "labels": const(labels), "pixel_values": pixels,
             "image_grid_thw": const(grid), "position_ids": const(positions),
             **{k: const(x) for k, x in extra.items()}}
    info = {"images": per_seq * case.batch_size, "image_tokens_per_sequence": per_seq * tokens_per_image,
            "patches": n_patches, "grid_thw": [t, gh, gw],
            "constant_limit": max(ids.numel(), positions.numel(), n_patches * 2) + 1}
    return batch, info
