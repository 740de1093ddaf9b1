"""Vision-language models whose language model is a Qwen decoder: Qwen2.5-VL and Qwen3-VL.

The checkpoint is the language model (a Qwen2 or Qwen3 decoder, whose recipe memlint already
has) plus a vision tower: a patch embedding, ``depth`` ViT blocks and a merger that folds
``spatial_merge_size``² patches into one image token of the language model's width. The tower's
parameters take weight, gradient and optimizer memory like the language model's; its
activations scale with the image patches of a batch (:func:`tower_activation_bytes_per_patch`),
which the config does not fix (the processor's pixel budget does).

A config.json lists only the vision keys that differ from the vision config class's defaults,
so the missing ones are filled with transformers 5.23's defaults (``_VISION_DEFAULTS``, read
from ``Qwen2_5_VLVisionConfig()`` and ``Qwen3VLVisionConfig()``). Older Qwen2.5-VL files keep
the language model's keys at the top level; newer ones nest them in ``text_config``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping

from memlint.estimate.architecture import Architecture, UnsupportedArchitecture

# transformers 5.23.0's vision config defaults (the fields that size the tower)
_VISION_DEFAULTS: dict[str, dict[str, Any]] = {
    "qwen2_5_vl": {"depth": 32, "hidden_size": 3584, "intermediate_size": 3420, "num_heads": 16,
                   "in_channels": 3, "patch_size": 14, "spatial_merge_size": 2, "temporal_patch_size": 2,
                   "out_hidden_size": 3584, "hidden_act": "silu"},
    "qwen3_vl": {"depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "num_heads": 16,
                 "in_channels": 3, "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2,
                 "out_hidden_size": 3584, "num_position_embeddings": 2304,
                 "deepstack_visual_indexes": [8, 16, 24], "hidden_act": "gelu_pytorch_tanh"},
}
# the language model's recipe for each vision-language model type
_TEXT_TYPE = {"qwen2_5_vl": "qwen2", "qwen3_vl": "qwen3"}
MODEL_TYPES = tuple(sorted(_TEXT_TYPE))


@dataclass(frozen=True)
class VisionTower:
    """The sizes of a vision tower that its memory depends on."""

    model_type: str
    hidden_size: int
    depth: int
    intermediate_size: int
    num_heads: int
    patch_inputs: int  # pixels x channels x frames one patch embeds
    merge: int  # patches folded into one image token (spatial_merge_size squared)
    out_hidden_size: int
    gated_mlp: bool  # Qwen2.5-VL: SwiGLU; Qwen3-VL: a plain GELU MLP
    params: int

    def image_tokens(self, patches: int) -> int:
        return patches // self.merge


def vision_config(config: Mapping[str, Any]) -> dict[str, Any]:
    model_type = str(config.get("model_type", ""))
    given = config.get("vision_config")
    given = given if isinstance(given, Mapping) else {}
    merged = {**_VISION_DEFAULTS[model_type], **given}
    if "in_chans" in given and "in_channels" not in given:  # Qwen2.5-VL's older key name
        merged["in_channels"] = given["in_chans"]
    if "spatial_patch_size" in given and "patch_size" not in given:
        merged["patch_size"] = given["spatial_patch_size"]
    return merged


def _int(cfg: Mapping[str, Any], key: str) -> int:
    try:
        value = int(cfg[key])
    except (KeyError, TypeError, ValueError):
        raise UnsupportedArchitecture(f"vision_config.{key} must be a number") from None
    if value <= 0:
        raise UnsupportedArchitecture(f"vision_config.{key} must be positive")
    return value


def tower(config: Mapping[str, Any]) -> VisionTower:
    """The vision tower of a Qwen2.5-VL / Qwen3-VL ``config.json``, with its parameter count."""
    model_type = str(config.get("model_type", ""))
    v = vision_config(config)
    h, depth, inter = _int(v, "hidden_size"), _int(v, "depth"), _int(v, "intermediate_size")
    patch, frames, channels = _int(v, "patch_size"), _int(v, "temporal_patch_size"), _int(v, "in_channels")
    merge = _int(v, "spatial_merge_size") ** 2
    out = _int(v, "out_hidden_size")
    patch_inputs = channels * frames * patch * patch
    attention = (h * 3 * h + 3 * h) + (h * h + h)  # fused qkv and the output projection, with biases
    merged = merge * h
    if model_type == "qwen2_5_vl":
        # Conv3d without bias; RMSNorm x2 (weights only); SwiGLU MLP with biases
        block = 2 * h + attention + 2 * (h * inter + inter) + (inter * h + h)
        merger = h + (merged * merged + merged) + (merged * out + out)  # ln_q, Linear, GELU, Linear
        params = patch_inputs * h + depth * block + merger
        gated = True
    else:
        # Conv3d with bias and learned position embeddings; LayerNorm x2; GELU MLP; the merger and
        # one DeepStack merger per listed layer (LayerNorm over the merged width, two Linears)
        block = 4 * h + attention + (h * inter + inter) + (inter * h + h)
        merger = 2 * h + (merged * merged + merged) + (merged * out + out)
        deepstack = len(v.get("deepstack_visual_indexes") or ()) * (
            2 * merged + (merged * merged + merged) + (merged * out + out))
        positions = _int(v, "num_position_embeddings") * h
        params = patch_inputs * h + h + positions + depth * block + merger + deepstack
        gated = False
    return VisionTower(model_type, h, depth, inter, _int(v, "num_heads"), patch_inputs, merge, out, gated,
                       params)


def from_vl_config(name: str, config: Mapping[str, Any], model_type: str) -> Architecture:
    """The language model's architecture with the vision tower's parameters added."""
    from memlint.estimate import architecture

    inner = config.get("text_config")
    text = {k: v for k, v in config.items() if k not in ("text_config", "vision_config")}
    if isinstance(inner, Mapping):
        text.update(inner)
    text.setdefault("tie_word_embeddings", config.get("tie_word_embeddings", False))
    arch = architecture.BUILDERS[_TEXT_TYPE[model_type]](name, text, _TEXT_TYPE[model_type])
    vision = tower(config)
    return replace(arch, model_type=model_type, extra_params=vision.params, config=config)


# transformers 5.23's Qwen2VLImageProcessor.size (used by Qwen2.5-VL's processor when the
# checkpoint's preprocessor_config.json sets no budget): the pixel count an image is resized into
MIN_PIXELS = 56 * 56
MAX_PIXELS = 28 * 28 * 1280


def image_grid(config: Mapping[str, Any], height: int, width: int,
               min_pixels: int = MIN_PIXELS, max_pixels: int = MAX_PIXELS) -> tuple[int, int]:
    """(patch rows, patch columns) of one ``height`` x ``width`` image, resized as the Qwen image
    processor's ``smart_resize`` does: each side rounded to a multiple of ``patch_size *
    spatial_merge_size``, then scaled (keeping the aspect ratio) into ``[min_pixels, max_pixels]``."""
    import math

    v = vision_config(config)
    patch, merge = _int(v, "patch_size"), _int(v, "spatial_merge_size")
    factor = patch * merge
    if height <= 0 or width <= 0:
        raise UnsupportedArchitecture("an image needs a positive height and width")
    h, w = round(height / factor) * factor, round(width / factor) * factor
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h, w = math.ceil(height * beta / factor) * factor, math.ceil(width * beta / factor) * factor
    return h // patch, w // patch


def image_tokens(config: Mapping[str, Any], height: int, width: int, **budget: int) -> int:
    """Image placeholder tokens one image of that size takes in the language model's sequence."""
    rows, cols = image_grid(config, height, width, **budget)
    return rows * cols // _int(vision_config(config), "spatial_merge_size") ** 2


def _vision_block(t: Any, v: VisionTower, x: Any) -> Any:
    """One ViT block of the tower on the tape: norm, fused qkv, attention (SDPA over the
    window or the whole image: no patches x patches term), projection, MLP.

    As transformers runs it: the rotary embedding is applied in fp32 and cast back, so q and k
    are new tensors while v stays a view that keeps the whole fused qkv output alive; SDPA runs
    once per image or window and ``torch.cat`` joins the outputs into a new tensor for the
    projection, while each chunk's output stays saved by its SDPA call."""
    norm = t.rms_norm if v.gated_mlp else t.layer_norm
    h = norm(x, "visual.norm1")
    qkv = t.linear(h, 3 * v.hidden_size, "visual.qkv")
    q, k, w = (t.view(qkv, v.hidden_size) for _ in range(3))
    q, k = (t.cast(t.rope(r, 4), r.nbytes) for r in (q, k))
    out = t.attention(q, k, w, v.num_heads, v.num_heads)
    out = t.new(out.numel, out.nbytes, out.rg)  # torch.cat of the per-chunk outputs
    x = t.add(x, t.linear(out, v.hidden_size, "visual.proj"))
    h = norm(x, "visual.norm2")
    if v.gated_mlp:
        m = t.mul(t.silu(t.linear(h, v.intermediate_size, "visual.gate_proj")),
                  t.linear(h, v.intermediate_size, "visual.up_proj"))
        m = t.linear(m, v.hidden_size, "visual.down_proj")
    else:
        m = t.linear(t.activation(t.linear(h, v.intermediate_size, "visual.linear_fc1"), "gelu_pytorch_tanh"),
                     v.hidden_size, "visual.linear_fc2")
    return t.add(x, m)


# the tower's linear layers as transformers names them (blocks.N.attn.qkv, ...mlp.gate_proj, ...)
_TOWER_LINEARS = {"qwen2_5_vl": ("qkv", "proj", "gate_proj", "up_proj", "down_proj"),
                  "qwen3_vl": ("qkv", "proj", "linear_fc1", "linear_fc2")}


def tower_adapted(arch: Architecture, lora: Any) -> bool:
    """Does PEFT put adapters in the vision tower? ``all-linear`` does, and so does any target
    named like one of the tower's linears (Qwen2.5-VL's MLP shares gate/up/down_proj with the
    language model). Then the tower's activations are kept for the adapters' gradients."""
    return any(lora.applies_to("visual.blocks.0." + ("attn." if n in ("qkv", "proj") else "mlp.") + n)
               for n in _TOWER_LINEARS.get(arch.model_type, ()))


def tower_lora_params(arch: Architecture, lora: Any) -> int:
    """Adapter parameters PEFT adds to the tower's blocks (LoRA: ``r * (in + out)`` per adapted linear; OFT: its blocks)."""
    if arch.model_type not in MODEL_TYPES:
        return 0
    v = tower(arch.config)
    h, inter = v.hidden_size, v.intermediate_size
    shapes = {"qkv": (h, 3 * h), "proj": (h, h), "gate_proj": (h, inter), "up_proj": (h, inter),
              "down_proj": (inter, h), "linear_fc1": (h, inter), "linear_fc2": (inter, h)}
    total = 0
    for name in _TOWER_LINEARS[arch.model_type]:
        if lora.applies_to("visual.blocks.0." + ("attn." if name in ("qkv", "proj") else "mlp.") + name):
            total += lora.adapter_params(*shapes[name])
    return v.depth * total


def saved_bytes(arch: Architecture, setup: Any) -> int:
    """Bytes the vision tower keeps for backward in one micro-batch: ``setup.image_tokens``
    image tokens per sequence are ``merge`` patches each. Nothing when there are no images, or
    when the tower does not train (frozen, or LoRA on the language model only: its output needs
    no gradient)."""
    from memlint.estimate.activations import tape_settings
    from memlint.estimate.graph import Tape, Value

    images = int(getattr(setup, "image_tokens", 0) or 0)
    if images <= 0 or arch.model_type not in MODEL_TYPES or setup.freeze_vision_tower:
        return 0
    if setup.lora is not None and not tower_adapted(arch, setup.lora):
        return 0
    v = tower(arch.config)
    settings = tape_settings(arch, setup)
    tape = Tape(settings)
    x = Value(v.hidden_size, settings.param_bytes, True)
    _vision_block(tape, v, x)
    per_patch = x.bytes if setup.grad_ckpt else tape.saved_bytes  # checkpointing keeps block inputs
    patches = images * v.merge * setup.micro_batch * setup.sequences_per_example
    # outside the blocks: the patch embedding keeps its input (the pixels in the tower's dtype,
    # for its weight's gradient) and each merger (Qwen3-VL adds one per DeepStack layer) keeps
    # its norm's input and the inputs of its two linears and GELU, ``merge`` patches wide
    mergers = 1 + len(vision_config(arch.config).get("deepstack_visual_indexes") or ())
    outside = v.patch_inputs * settings.compute_bytes + mergers * 4 * v.hidden_size * settings.compute_bytes
    return int((per_patch * v.depth + outside) * patches)
