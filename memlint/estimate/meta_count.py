"""An architecture memlint has no recipe for, counted by transformers on the meta device.

When the ``trace`` extra (torch + transformers) is installed, a ``config.json`` whose
``model_type`` transformers knows is built with ``from_config`` under ``torch.device("meta")``:
no weights, no memory, no network, and never ``trust_remote_code`` (a config that needs its own
modelling code is refused, as before). The modules give exact parameter counts and the shape
memlint's estimate reads: the repeated layer stack (its Linear layers, for LoRA and QLoRA),
the input embeddings and an untied output head. What the layers save for backward is not
known, so the estimate prices them with the Llama recipe and says so; ``memlint trace``
measures the real model.
"""

from __future__ import annotations

import contextlib
import copy
import io
import logging
import warnings
from typing import Any, Mapping

from memlint.estimate import timm_towers
from memlint.estimate.architecture import Architecture, BlockGroup, Linear, UnsupportedArchitecture

GENERIC_NOTE = (
    "no memlint recipe for model_type {model_type!r}: parameters counted by transformers "
    "{version} on the meta device; activations use the Llama recipe (an approximation); "
    "run `memlint trace` to measure this model"
)

# The heads a published checkpoint of each kind carries, tried in order.
_AUTO_CLASSES = ("AutoModelForCausalLM", "AutoModelForImageTextToText", "AutoModelForSeq2SeqLM",
                 "AutoModelForMaskedLM", "AutoModel")
# A config with a vision tower is a vision-language checkpoint: its text-only causal-LM class
# (``MllamaForCausalLM``) would leave the vision weights out, so the image-text head comes first.
_MULTIMODAL_AUTO_CLASSES = ("AutoModelForImageTextToText",) + tuple(
    c for c in _AUTO_CLASSES if c != "AutoModelForImageTextToText")


def available() -> bool:
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


def _build(config: Mapping[str, Any]):
    import torch
    import transformers

    model_type = str(config.get("model_type") or "")
    # a copy: transformers completes nested settings in place (``rope_scaling`` gains ``rope_theta``), which
    # would change the caller's config.json mapping, a catalogue entry's included, and so its stored fingerprint
    kwargs = copy.deepcopy({k: v for k, v in config.items() if k not in ("model_type", "auto_map", "_name_or_path")})
    try:
        hf_config = transformers.AutoConfig.for_model(model_type, **kwargs)
    except (ValueError, KeyError, TypeError):
        # (transformers' own message lists every model type it knows: hundreds of names)
        code = config.get("auto_map")
        where = (f" It is defined only by the modelling code its checkpoint ships ({_remote_code(code)}, "
                 "loaded with trust_remote_code), which memlint never runs." if code else "")
        raise UnsupportedArchitecture(
            f"model_type {model_type!r} has no memlint recipe and no class in transformers "
            f"{transformers.__version__}.{where} Set `model-config` in [tool.memlint] to the config.json "
            "of a model transformers knows with the same layer sizes, or measure this run on a GPU"
        ) from None
    # a timm-wrapped vision tower (Gemma 3n) is left out here and added from its stored count
    timm = bool(timm_towers.towers(config)) and timm_towers.stored_params(config) > 0
    last: Exception | None = None
    for name in _MULTIMODAL_AUTO_CLASSES if "vision_config" in config else _AUTO_CLASSES:
        auto = getattr(transformers, name, None)
        if auto is None:
            continue
        try:
            with torch.device("meta"), timm_towers.stand_in() if timm else contextlib.nullcontext():
                return auto.from_config(hf_config), transformers.__version__
        except (ValueError, KeyError, TypeError, AttributeError, AssertionError, RuntimeError,
                ImportError) as error:
            last = error
    raise UnsupportedArchitecture(
        f"model_type {model_type!r}: transformers could not build it from config.json ({last})"
    )


def _remote_code(auto_map: Any) -> str:
    """``auto_map``'s causal-LM class, as the checkpoint names it (``modeling_btlm.BTLMLMHeadModel``)."""
    if isinstance(auto_map, Mapping):
        name = auto_map.get("AutoModelForCausalLM") or next(iter(auto_map.values()), None)
        if isinstance(name, str):
            return f"`{name.rpartition('--')[2]}`"
    return "`auto_map`"


def _layer_stack(model):
    """The largest ModuleList: the repeated blocks. Its layers may be of several classes
    (Mllama puts a cross-attention layer every fifth): the per-layer figures are then averages,
    and the total stays exact."""
    import torch

    best, best_params = None, 0
    for module in model.modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) > 1:
            params = sum(p.numel() for p in module.parameters())
            if params > best_params:
                best, best_params = module, params
    return best


def _fused_experts(stack, hidden: int) -> tuple[Linear, ...]:
    """The routed experts of a mixture-of-experts layer, which transformers 5 stores as fused 3-D
    parameters of an ``experts`` module (``gate_up_proj``: experts x out x in; Llama 4 stores
    experts x in x out, told by its first weight reading the hidden size), named as memlint's
    recipes name them (``experts.gate_up_proj``, one copy per expert) so that the estimate can tell
    them from the rest: KTransformers keeps them in host memory, PEFT's targets never reach them.
    Only when every layer of the stack holds the same experts; otherwise they stay in the layer's
    other parameters, as before."""
    found: list[tuple[tuple[str, int, int, int], ...]] = []
    for layer in stack:
        fused: list[tuple[str, int, int, int]] = []
        for sub, module in layer.named_modules():
            if sub.rsplit(".", 1)[-1] != "experts":
                continue
            weights = [(name, p.shape) for name, p in module.named_parameters(recurse=False) if p.dim() == 3]
            flipped = bool(weights) and weights[0][1][1] == hidden != weights[0][1][2]
            fused += [(f"experts.{name}", int(shape[1 if flipped else 2]), int(shape[2 if flipped else 1]),
                       int(shape[0])) for name, shape in weights]
        found.append(tuple(fused))
    if not found[0] or any(f != found[0] for f in found):
        return ()
    return tuple(Linear(name, inp, out, copies=copies) for name, inp, out, copies in found[0])


def _field(text: Any, raw: Mapping[str, Any], key: str, default: Any) -> Any:
    """One setting of the built text config, else of the config.json it came from.

    transformers 5.23 refuses to read a setting that may differ between layers from the config of
    a model whose layers differ (Gemma 4's ``num_key_value_heads``) and raises rather than answer;
    the value written in config.json is the global one the file states.
    """
    try:
        return getattr(text, key, default)
    except Exception:  # noqa: BLE001 - transformers' per-layer attribute errors have no common base
        return raw.get(key, default)


def _widest(value: Any) -> int:
    """A size config.json may give per layer (Gemma 3n's ``intermediate_size`` list): its widest."""
    if isinstance(value, (list, tuple)):
        return max((int(v) for v in value if isinstance(v, (int, float))), default=0)
    return int(value or 0)


def from_meta(config: Mapping[str, Any], name: str) -> Architecture:
    """An :class:`Architecture` counted from the modules transformers builds for ``config``."""
    import torch

    model_type = str(config.get("model_type") or "")
    quiet = logging.getLogger("transformers")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            model, version = _build(config)
    finally:
        quiet.setLevel(level)
    total = sum(p.numel() for p in model.parameters()) + timm_towers.stored_params(config)  # tied once
    stack = _layer_stack(model)
    if stack is None:
        raise UnsupportedArchitecture(f"model_type {model_type!r}: no repeated layers found")
    first = stack[0]
    linears = tuple(
        Linear(sub, m.in_features, m.out_features, m.bias is not None)
        for sub, m in first.named_modules()
        if isinstance(m, torch.nn.Linear)
    )
    embed = model.get_input_embeddings()
    linears += _fused_experts(stack, int(embed.weight.shape[1]) if embed is not None else 0)
    per_block = sum(p.numel() for p in stack.parameters()) // len(stack)
    block_linear = sum(lin.params for lin in linears)
    embedding = embed.weight.numel() if embed is not None else 0
    out = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    tied = out is None or embed is None or out.weight is embed.weight
    head = None if tied or out is None else Linear("lm_head", out.weight.shape[1], out.weight.shape[0],
                                    getattr(out, "bias", None) is not None)
    text = getattr(model.config, "text_config", None) or model.config
    nested = config.get("text_config")
    raw: Mapping[str, Any] = nested if isinstance(nested, Mapping) else config

    def field(key: str, default: Any = 0) -> Any:
        return _field(text, raw, key, default)

    hidden = int(field("hidden_size") or embed.weight.shape[1])
    heads = int(field("num_attention_heads") or 1)
    kv = int(field("num_key_value_heads") or heads)
    head_dim = int(field("head_dim") or hidden // heads)
    vocab = int(field("vocab_size") or embed.weight.shape[0])
    inter = _widest(field("intermediate_size")) or _widest(field("moe_intermediate_size")) or 4 * hidden
    counted = embedding + len(stack) * per_block + (head.params if head else 0)
    return Architecture(
        name=name,
        model_type=model_type,
        family="llama",
        hidden_size=hidden,
        num_layers=len(stack),
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=head_dim,
        intermediate_size=inter,
        vocab_size=vocab,
        tie_word_embeddings=tied,
        blocks=(BlockGroup("decoder", len(stack), linears, per_block - block_linear),),
        embedding_params=embedding,
        final_params=0,
        lm_head=head,
        max_position_embeddings=field("max_position_embeddings", None),
        extra_params=total - counted,  # final norms, vision towers, pooler: no text activations
        activation=str(field("hidden_act", "silu")),
        config=config,
        generic_note=GENERIC_NOTE.format(model_type=model_type, version=version),
    )
