"""Reading measured cases (the oracle's and memlint trace's format) into estimator inputs.

Used by the accuracy tests and by ``docs/accuracy.md``'s generator; it lives in the package so
that ``memlint trace`` can print a measurement beside the estimate of the same case.
"""

from __future__ import annotations

from typing import Any, Mapping

from memlint.estimate.architecture import Architecture
from memlint.estimate.config_json import from_config
from memlint.estimate.policy import Optimizer, Precision
from memlint.estimate.setup import Attention, Lora, Sharding, TrainingSetup, projector_only_fields

_IMPLS = {"foreach": "adamw", "fused": "adamw-fused", "forloop": "adamw-forloop"}
_SHARDING = {"none": Sharding.NONE, "fsdp2": Sharding.FSDP_FULL, "fsdp-full": Sharding.FSDP_FULL,
             "zero1": Sharding.ZERO1, "zero2": Sharding.ZERO2}


def optimizer_of(inputs: Mapping[str, Any]) -> Optimizer:
    name = str(inputs.get("optimizer", "adamw"))
    impl = inputs.get("optimizer_impl")
    if name == "adamw" and impl:
        return Optimizer(_IMPLS[impl])
    if name == "sgd" and inputs.get("momentum", 0.9 if "optimizer_impl" in inputs else 0):
        return Optimizer.SGD_MOMENTUM  # the oracle's "sgd" is SGD with momentum 0.9
    return Optimizer.parse(name)


def _bucket(value: Any) -> float | None:
    """A measured case's reduce bucket in elements; absent or None means the framework default."""
    return None if value is None else float(value)


def setup_of(inputs: Mapping[str, Any], cpu_dropout: bool = False) -> TrainingSetup:
    lora = None
    spec = inputs.get("lora")
    if spec:
        targets = spec.get("target_modules")
        targets = tuple(targets) if isinstance(targets, (list, tuple)) else (str(targets),)
        lora = Lora(
            r=int(spec["r"]),
            targets=targets,
            alpha=float(spec.get("alpha", 16)),
            dropout=float(spec.get("dropout", 0.05)),
            quantization=spec.get("quantization"),
        )
    world = int(inputs.get("world_size", 1))
    return TrainingSetup(
        micro_batch=int(inputs["batch_size"]),
        seq_len=int(inputs["seq_len"]),
        precision=Precision(inputs["precision"]),
        optimizer=optimizer_of(inputs),
        grad_ckpt_every=1 if inputs.get("grad_ckpt") else 0,
        attention=Attention(inputs.get("attn_impl", inputs.get("attn", "sdpa"))),
        lora=lora,
        sharding=_SHARDING[str(inputs.get("sharding", "none"))],
        world_size=world,
        keep_logits=bool(inputs.get("keep_outputs", False)),
        reduce_bucket_elements=_bucket(inputs.get("reduce_bucket_size")),
        dropout_mask_bytes=None if cpu_dropout else 1,
        cuda_workspaces=False,  # measured by PyTorch's tracker, which sees no kernel's workspace
        # the oracle ran CPU SDPA's flash kernel for every sdpa case, fp32 GQA included
        fp32_gqa_sdpa_math=False,
    )


def case_inputs(case: Mapping[str, Any]) -> tuple[Architecture, TrainingSetup]:
    """The architecture and setup of a measured case (``inputs`` of a result entry)."""
    inputs = case["inputs"]
    arch = from_config(inputs["model"], str(inputs.get("model_name") or ""))
    cpu = inputs.get("emulate_cuda_dropout") is not True  # the oracle kept CPU dropout
    return arch, setup_of(inputs, cpu_dropout=cpu)


def trace_case_inputs(result: Mapping[str, Any]) -> tuple[Architecture, TrainingSetup]:
    """The architecture and setup of a ``memlint trace`` result (its ``case``)."""
    case = result["case"]
    arch = from_config(case["model"], str(case.get("model_name") or ""))
    lora_spec = case.get("lora") or case.get("qlora")
    lora = None
    if lora_spec:
        targets = lora_spec.get("target_modules")
        targets = tuple(targets) if isinstance(targets, (list, tuple)) else (str(targets),)
        lora = Lora(
            r=int(lora_spec["r"]),
            targets=targets,
            alpha=float(lora_spec.get("alpha", 16)),
            dropout=float(lora_spec.get("dropout", 0.05)),
            quantization="nf4" if case.get("qlora") else None,
            double_quant=bool(lora_spec.get("double_quant", True)),
            kbit_prepared=False,  # the trace quantises without prepare_model_for_kbit_training
            method=str(lora_spec.get("method", "lora")),
            block_size=int(lora_spec.get("block_size", 32)),
        )
    # the whole model frozen, a two-layer MLP of its width trains at its input
    projector = projector_only_fields(arch) if case.get("projector") else {}
    setup = TrainingSetup(
        **projector,
        micro_batch=int(case["batch_size"]),
        seq_len=int(case["seq_len"]),
        decoder_len=int(case.get("target_len") or 0),
        precision=Precision(case["precision"]),
        optimizer=Optimizer.parse(case["optimizer"]),
        grad_ckpt_every=1 if case.get("grad_ckpt") else 0,
        attention=Attention(case.get("attn", "sdpa")),
        lora=lora,
        sharding=_SHARDING[str(case.get("sharding", "none"))],
        world_size=int(case.get("world_size", 1)),
        keep_logits=bool(case.get("keep_outputs", False)),
        grad_accum=int(case.get("grad_accum", 1)),
        # the DeepSpeed cases' zero_optimization.reduce_bucket_size (None: DeepSpeed's default)
        reduce_bucket_elements=_bucket(case.get("reduce_bucket_size")),
        dropout_mask_bytes=None,  # measured with the CPU's dropout kernel
        cuda_workspaces=False,  # and by PyTorch's tracker, which sees no kernel's workspace
        image_tokens=_image_tokens(case),
    )
    return arch, setup


def _image_tokens(case: Mapping[str, Any]) -> int:
    """Image placeholder tokens per sequence of a vision-language case (its ``images``)."""
    from memlint.estimate import vision

    images = case.get("images")
    if not images or case["model"].get("model_type") not in vision.MODEL_TYPES:
        return 0
    per_image = vision.image_tokens(case["model"], int(images.get("height", 448)), int(images.get("width", 448)))
    return int(images.get("per_sequence", 1)) * per_image
