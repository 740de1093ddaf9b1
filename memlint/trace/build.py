"""Build what a training step needs from a case: the model (from a config dict, no weights), its
LoRA / QLoRA adapters, its FSDP2 sharding, the optimizer, the grad scaler and the input batch.

Everything is created as fake tensors (or on ``meta`` first and then turned into fake tensors),
so nothing here allocates real memory for the model.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch import nn

from memlint.trace.case import Case
from memlint.trace.emulation import make_grad_scaler, materialize_meta_module

# config.json keys that describe where a checkpoint came from or how its weights are stored,
# not the architecture; passing them to AutoConfig would only add noise (or a quantizer).
_NON_ARCH_KEYS = ("_name_or_path", "transformers_version", "architectures", "auto_map",
                  "quantization_config", "torch_dtype", "dtype", "_commit_hash")


def param_dtype(case: Case) -> torch.dtype:
    """dtype of the weights as stored: ``bf16`` / ``fp16`` are pure half-precision training
    (``model.to(dtype)``: weights, gradients and optimizer states in that dtype); ``fp32`` and
    both ``amp-*`` policies keep fp32 weights."""
    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(case.precision, torch.float32)


def autocast_dtype(case: Case) -> torch.dtype | None:
    return {"amp-bf16": torch.bfloat16, "amp-fp16": torch.float16}.get(case.precision)


def compute_dtype(case: Case) -> torch.dtype:
    """dtype the matmuls run in (QLoRA's ``bnb_4bit_compute_dtype``)."""
    return autocast_dtype(case) or param_dtype(case)


def hf_config(case: Case) -> Any:
    """A transformers config object from the case's config dict (published ``config.json``)."""
    from transformers import AutoConfig

    cfg = {k: v for k, v in case.model.items() if k not in _NON_ARCH_KEYS}
    model_type = cfg.pop("model_type")
    config = AutoConfig.for_model(model_type, **cfg)
    config.use_cache = bool(case.use_cache)
    config.get_text_config().use_cache = bool(case.use_cache)
    return config


# Encoders are measured as they are most often fine-tuned, with a sequence-classification head
# (what memlint's estimate prices for them: no vocabulary logits); T5 with its decoder's LM head.
_ENCODERS = ("bert", "roberta", "distilbert")
_SEQ2SEQ = ("t5",)
# vision-language models are built whole (vision tower + language model), as fine-tuned
_VISION_LANGUAGE = ("qwen2_5_vl", "qwen3_vl")


def is_classifier(case: Case) -> bool:
    return case.model.get("model_type") in _ENCODERS


def _auto_class(config: Any) -> Any:
    import transformers

    if config.model_type in _ENCODERS:
        return transformers.AutoModelForSequenceClassification
    if config.model_type in _SEQ2SEQ:
        return transformers.AutoModelForSeq2SeqLM
    if config.model_type in _VISION_LANGUAGE:
        return transformers.AutoModelForImageTextToText
    return transformers.AutoModelForCausalLM


def _new_model(case: Case, config: Any, device: torch.device | str) -> nn.Module:
    with torch.device(device):
        model = _auto_class(config).from_config(config, attn_implementation=case.attn, dtype=param_dtype(case))
    model.train()
    if case.grad_ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model


def _count(model: nn.Module) -> int:
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def _lora_config(case: Case) -> Any:
    from peft import LoraConfig, OFTConfig

    lc = case.lora_config
    assert lc is not None
    model_type = case.model.get("model_type")
    task = "SEQ_2_SEQ_LM" if model_type in _SEQ2SEQ else "SEQ_CLS" if model_type in _ENCODERS else "CAUSAL_LM"
    if lc["method"] == "oft":  # as LLaMA-Factory's finetuning_type: oft builds it (model/adapter.py)
        return OFTConfig(r=0, oft_block_size=lc["block_size"], target_modules=lc["target_modules"], task_type=task)
    return LoraConfig(r=lc["r"], lora_alpha=lc["alpha"], lora_dropout=lc["dropout"],
                      target_modules=lc["target_modules"], task_type=task)


def _swap_in_linear4bit(model: nn.Module, case: Case) -> int:
    """Replace the model's ``nn.Linear`` layers (all but the output head, as transformers'
    bitsandbytes quantizer does) by bitsandbytes ``Linear4bit`` on the meta device. Returns the
    number of layers replaced."""
    import bitsandbytes as bnb

    qc = case.qlora or {}
    head = model.get_output_embeddings()
    replaced = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            # isinstance, as transformers' quantizer does: Falcon's FalconLinear subclasses Linear
            if not isinstance(child, nn.Linear) or isinstance(child, bnb.nn.Linear4bit) or child is head:
                continue
            new = bnb.nn.Linear4bit(child.in_features, child.out_features, bias=child.bias is not None,
                                    compute_dtype=compute_dtype(case), quant_type=qc.get("quant_type", "nf4"),
                                    compress_statistics=bool(qc.get("double_quant", True)), device="meta")
            if child.bias is not None:
                new.bias = nn.Parameter(torch.empty_like(child.bias, device="meta"), requires_grad=False)
            setattr(parent, name, new)
            replaced += 1
    return replaced


def quantize_4bit_params(model: nn.Module, fake_mode: Any) -> None:
    """Turn every meta ``Params4bit`` of the model into a 4-bit quantized fake weight, using
    bitsandbytes' own ``quantize_4bit`` (NF4/FP4 packing, absmax, double quantization).

    Why not a ``Params4bit``: bitsandbytes' ``Params4bit`` is a tensor subclass made with
    ``Tensor._make_subclass``, which cannot wrap a ``FakeTensor`` ("the raw Tensor object is
    already associated to a python object of type FakeTensor"). The packed uint8 weight is
    therefore a plain fake ``Parameter`` carrying the attributes ``Linear4bit.forward`` reads
    (``quant_state``, ``quant_type``, ``blocksize``, ...). The quantization, the forward
    (``matmul_4bit`` -> ``bitsandbytes::gemm_4bit``) and its backward are bitsandbytes' real
    code; only the Python class of the weight object differs.
    """
    import bitsandbytes as bnb
    import bitsandbytes.functional as BF

    for mod in model.modules():
        if not isinstance(mod, bnb.nn.Linear4bit):
            continue
        w = mod.weight
        if not isinstance(w, bnb.nn.Params4bit) or w.device.type != "meta":
            continue
        with fake_mode:
            full = torch.empty(w.shape, dtype=mod.compute_dtype or torch.bfloat16)
            packed, state = BF.quantize_4bit(full, blocksize=w.blocksize, compress_statistics=w.compress_statistics,
                                             quant_type=w.quant_type, quant_storage=w.quant_storage)
            del full
            p = nn.Parameter(packed, requires_grad=False)
        p.quant_state = state
        p.bnb_quantized = True
        p.quant_type = w.quant_type
        p.blocksize = w.blocksize
        p.compress_statistics = w.compress_statistics
        p.quant_storage = w.quant_storage
        p.module = mod
        mod._parameters["weight"] = p


def bitsandbytes_constants_outside_fake_mode(fake_mode: Any) -> contextlib.AbstractContextManager[None]:
    """Compute bitsandbytes' quantization code books for real and hand them to the fake mode.

    Why: ``bitsandbytes.functional.create_dynamic_map`` (the 256-entry dynamic quantization map
    used by 8-bit optimizer states and by NF4 double quantization) builds its table with
    ``Tensor.tolist()``; a fake tensor has no values, so it raises ``DataDependentOutputException``.
    The table is a constant (it depends on no input), so it is computed on real CPU tensors and
    converted to a fake tensor. Its memory (1 KiB per map) is still counted.
    """
    import bitsandbytes.functional as BF
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    original = BF.create_dynamic_map

    def create_dynamic_map(*args: Any, **kwargs: Any) -> torch.Tensor:
        with unset_fake_temporarily():
            table = original(*args, **kwargs)
        return fake_mode.from_tensor(table) if fake_mode is not None else table

    @contextlib.contextmanager
    def cm() -> Any:
        BF.create_dynamic_map = create_dynamic_map
        try:
            yield
        finally:
            BF.create_dynamic_map = original

    return cm()


class _ProjectedEmbedding(nn.Module):
    """The frozen token embedding followed by a trainable two-layer MLP of the model's width: the
    stand-in for a vision-language model's projector, whose output the frozen language model reads
    at its input (LLaVA's alignment stage), so every block keeps what backward needs to reach it."""

    def __init__(self, embedding: nn.Embedding, hidden: int) -> None:
        super().__init__()
        self.embedding = embedding
        param = embedding.weight
        self.projector = nn.Sequential(nn.Linear(hidden, hidden, device=param.device, dtype=param.dtype), nn.GELU(),
                                       nn.Linear(hidden, hidden, device=param.device, dtype=param.dtype))

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.projector(self.embedding(input_ids))


def _train_a_projector(model: nn.Module) -> None:
    """Freeze every parameter of ``model`` and put a trainable projector behind its embedding."""
    model.requires_grad_(False)
    embedding = model.get_input_embeddings()
    model.set_input_embeddings(_ProjectedEmbedding(embedding, int(embedding.weight.shape[1])))


def build_model(case: Case, device: torch.device, fake_mode: Any) -> tuple[nn.Module, dict[str, Any]]:
    """The model of the case as fake tensors (real ones when ``fake_mode`` is None).

    Plain models are built directly inside the fake mode. LoRA / QLoRA models are built and
    adapted on ``meta`` and materialized afterwards (see
    :func:`memlint.trace.emulation.materialize_meta_module`).
    """
    config = hf_config(case)
    info: dict[str, Any] = {"vocab_size": int(config.get_text_config().vocab_size), "notes": []}
    outer = fake_mode if fake_mode is not None else contextlib.nullcontext()
    if case.lora is None and case.qlora is None:
        with outer:
            model = _new_model(case, config, device)
            info["n_params"] = _count(model)
            if case.projector:
                _train_a_projector(model)
        return model, info

    from peft import get_peft_model

    build_dev = "meta" if fake_mode is not None else device
    model = _new_model(case, config, build_dev)
    info["n_params"] = _count(model)
    if case.qlora is not None:
        if fake_mode is None:
            raise ValueError("qlora cases can only be measured on fake tensors here (bitsandbytes CPU "
                             "quantization of a real model is not part of the validation)")
        info["quantized_linear_layers"] = _swap_in_linear4bit(model, case)
        info["notes"].append("QLoRA: peft's prepare_model_for_kbit_training is not applied (it would cast "
                             "the non-quantized weights to fp32)")
    model = get_peft_model(model, _lora_config(case))
    if fake_mode is not None:
        with outer:
            if case.qlora is not None:
                quantize_4bit_params(model, fake_mode)
            materialize_meta_module(model, device)
    return model, info


def shard_fsdp2(model: nn.Module, case: Case, mesh: Any) -> None:
    """FSDP2 ``fully_shard`` on every decoder layer (the model's ``_no_split_modules`` classes)
    and on the root, the layout that HF Accelerate / torchtitan use. ``amp-bf16`` becomes FSDP2's
    ``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)`` (fp32 sharded weights and
    states, bf16 gathered weights and compute) instead of autocast."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    kwargs: dict[str, Any] = {"mesh": mesh}
    if case.precision == "amp-bf16":
        kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    names = set(getattr(base, "_no_split_modules", None) or [])
    blocks = [m for m in model.modules() if type(m).__name__ in names]
    if not blocks:
        raise RuntimeError(f"no decoder layers to shard (the model's _no_split_modules: {sorted(names)})")
    for block in blocks:
        fully_shard(block, **kwargs)
    fully_shard(model, **kwargs)


def build_optimizer(case: Case, params: list[nn.Parameter]) -> Any:
    """The optimizer of the case over the trainable parameters.

    ``adamw`` is ``torch.optim.AdamW`` with ``foreach=True``: what torch selects by itself when
    the parameters are on CUDA (we are on the CPU device, where it would pick the for-loop).
    ``adafactor`` is ``transformers.optimization.Adafactor`` with HF Trainer's settings for
    ``optim="adafactor"`` (``scale_parameter=False, relative_step=False``): factored second
    moments, no first moment. ``adamw-8bit`` is ``bitsandbytes.optim.AdamW8bit`` (blockwise 8-bit
    states; tensors under 4096 elements keep 32-bit states).
    """
    name = case.optimizer
    if name in ("adamw", "adamw-fused", "adamw-forloop", "adam"):
        impl = {"adamw-fused": {"fused": True}, "adamw-forloop": {"foreach": False}}.get(name, {"foreach": True})
        if name == "adam":
            return torch.optim.Adam(params, lr=1e-5, **impl)
        return torch.optim.AdamW(params, lr=1e-5, weight_decay=0.01, **impl)
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-3, foreach=True)
    if name == "sgd-momentum":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9, foreach=True)
    if name == "adafactor":
        from transformers.optimization import Adafactor

        return Adafactor(params, lr=1e-5, scale_parameter=False, relative_step=False, warmup_init=False)
    if name == "adamw-8bit":
        import bitsandbytes as bnb

        return bnb.optim.AdamW8bit(params, lr=1e-5, weight_decay=0.01)
    raise ValueError(f"unknown optimizer {name!r}")


def build_scaler(case: Case, device: torch.device) -> Any:
    """``amp-fp16`` trains with a ``GradScaler`` (see :func:`memlint.trace.emulation.make_grad_scaler`)."""
    return make_grad_scaler(device.type) if case.precision == "amp-fp16" else None
