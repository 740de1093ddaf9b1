"""Fixes that make a fake-tensor CPU run behave, memory-wise, like a real CUDA training step.

We run on *fake CPU* tensors because fake CUDA tensors cannot train on a machine without a GPU
(with the CPU build of torch, ``nn.Linear(device="cuda")`` fails in its init and any backward
aborts the process; with a CUDA build, backward asks for a CUDA context). Where the CPU path
and the CUDA path of PyTorch or Hugging Face differ in what they allocate, we emulate CUDA; where
fake tensors cannot answer a data-dependent question, we give the answer a real run gives.
Every function here says why it exists.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

_HALF = (torch.float16, torch.bfloat16)


# --------------------------------------------------------------------------- fake-tensor fixes
def fix_dtensor_sharding_propagation() -> None:
    """Make FSDP2's DTensor shape propagation use its own fake mode, as in a real run.

    Why: DTensor computes the output metadata of an op by running it on *global-shape* fake
    tensors, in ``detect_fake_mode() or FakeTensorMode()``. In a real run there is no active
    fake mode, so those tensors live in a throw-away mode that the memory tracker ignores. Under
    our outer ``FakeTensorMode`` DTensor would reuse it, and the tracker would count full-size
    (unsharded) temporaries as real memory: the first optimizer step of an FSDP2 case came out
    with optimizer states 15x the sharded parameters instead of 2x.
    """
    import torch.distributed.tensor._sharding_prop as sharding_prop

    sharding_prop.detect_fake_mode = lambda *args, **kwargs: None


def force_unpacked_sequences() -> None:
    """Tell Hugging Face's mask builder that the batch is not a packed sequence.

    Why: ``transformers.masking_utils.find_packed_sequence_indices`` looks at the values of
    ``position_ids`` to detect several sequences packed into one row. A fake tensor has no
    values, so transformers assumes packing is possible and builds an explicit ``(B, 1, T, T)``
    boolean mask, which SDPA then receives instead of ``is_causal=True`` (a different kernel
    input and 2-8 MiB more on tiny models). With the plain ``0..T-1`` positions of our batch a
    real run returns ``None`` there; we return the same. Packed-sequence training is therefore
    not modelled.
    """
    import transformers.masking_utils as masking_utils

    masking_utils.find_packed_sequence_indices = lambda *args, **kwargs: None


def make_grad_scaler(device_type: str) -> torch.amp.GradScaler:
    """A ``GradScaler`` whose ``step`` always runs the optimizer.

    Why: ``GradScaler.step`` decides whether to skip the step with ``found_inf.item()``; a fake
    tensor has no value to give. In a healthy run the step is taken, so we always take it. The
    unscale and inf-check kernels still run, so the scaler's own tensors are still measured.
    """

    class _AlwaysStepGradScaler(torch.amp.GradScaler):
        def _maybe_opt_step(self, optimizer: Any, optimizer_state: Any, *args: Any, **kwargs: Any) -> Any:
            return optimizer.step(*args, **kwargs)

    return _AlwaysStepGradScaler(device_type)


def materialize_meta_module(module: torch.nn.Module, device: torch.device | str) -> None:
    """Replace every ``meta`` parameter and buffer with an uninitialised tensor on ``device``
    (a fake tensor when called under ``FakeTensorMode``), keeping shared tensors shared.

    Why: peft moves new LoRA adapters onto the base layer's device with ``Module.to()``, which
    for fake-tensor parameters goes through ``torch.utils.swap_tensors`` and fails ("Cannot swap
    t1 because it has weakref associated with it"). So LoRA models are built and adapted on the
    ``meta`` device (no memory, no swapping) and turned into fake tensors afterwards. Dtypes,
    ``requires_grad`` and tied weights (e.g. an lm_head tied to the embedding) are kept.
    """
    seen: dict[int, torch.Tensor] = {}
    for mod in module.modules():
        for name, p in list(mod._parameters.items()):
            if p is None or p.device.type != "meta":
                continue
            if id(p) not in seen:
                seen[id(p)] = _new_param_like(p, device)
            mod._parameters[name] = seen[id(p)]  # type: ignore[assignment]
        for name, b in list(mod._buffers.items()):
            if b is None or b.device.type != "meta":
                continue
            if id(b) not in seen:
                seen[id(b)] = torch.empty(b.shape, dtype=b.dtype, device=device)
            mod._buffers[name] = seen[id(b)]


def _new_param_like(p: torch.nn.Parameter, device: torch.device | str) -> torch.nn.Parameter:
    data = torch.empty(p.shape, dtype=p.dtype, device=device)
    cls = type(p)
    if cls is torch.nn.Parameter:
        return torch.nn.Parameter(data, requires_grad=p.requires_grad)
    # a Parameter subclass (e.g. bitsandbytes' Params4bit): keep its class and attributes
    new = torch.nn.Parameter(data, requires_grad=p.requires_grad)
    new.__class__ = cls
    new.__dict__.update({k: v for k, v in p.__dict__.items()})
    return new


# --------------------------------------------------------------------------- CUDA emulations
@contextlib.contextmanager
def cuda_sdpa_kernel_choice() -> Iterator[None]:
    """Give CPU SDPA the kernel that CUDA picks: flash-style, even with attention dropout.

    Why: on CUDA, ``scaled_dot_product_attention`` with ``dropout_p > 0`` still runs the flash or
    memory-efficient kernel; the dropout mask is regenerated from the RNG state in backward,
    never stored, and only the output plus an fp32 log-sum-exp per row are saved. CPU's flash
    kernel has no dropout, so with ``dropout_p > 0`` CPU falls back to the *math* path, which
    keeps ``B*H*T*T`` attention probabilities and a dropout mask (GPT-2 small fp32 b8 s1024:
    28.0 GiB with the fallback vs 14.5 GiB). Calling SDPA with ``dropout_p=0`` gives the CPU
    flash kernel, whose saved tensors are the CUDA kernels'. Only the kernel choice changes; the
    dropout's own memory on CUDA is nil in these kernels.

    The one case CUDA has no fused kernel for: fp32 inputs (after autocast's cast) with fewer
    key/value heads than query heads (``enable_gqa``): flash takes no fp32 and memory-efficient attention no GQA,
    so CUDA runs the math kernel (measured on an H200, torch 2.11: ``_safe_softmax`` in the
    trace, Llama-3.2-1B LoRA fp32 b4 s1024 33.4 GiB against 28.8 GiB with CPU flash). The
    emulation runs the math kernel there too. Values narrower than queries (DeepSeek-V2/V3) are
    padded so that CPU flash runs where CUDA's memory-efficient kernel would (see below).

    A mask that needs a gradient (T5's trained relative position bias): no fused CUDA kernel
    takes one, so CUDA runs the math kernel *with* the dropout (see :func:`_math_as_on_cuda`).
    """
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    original = F.scaled_dot_product_attention

    def sdpa_as_on_cuda(query, key, value, attn_mask=None, dropout_p=0.0, *args, **kwargs):  # type: ignore[no-untyped-def]
        dropout_p = kwargs.pop("dropout_p", dropout_p)
        if _math_as_on_cuda(attn_mask, dropout_p):
            with sdpa_kernel(SDPBackend.MATH):
                return original(query, key, value, attn_mask, dropout_p, *args, **kwargs)
        gqa = kwargs.get("enable_gqa") and key.shape[-3] != query.shape[-3]
        # under autocast the kernel sees the autocast dtype: SDPA is on its lower-precision list
        # (bitsandbytes' 4-bit linears hand fp32 q, k, v to it when the hidden states are fp32)
        dtype = torch.get_autocast_dtype(query.device.type) if torch.is_autocast_enabled(query.device.type) \
            else query.dtype
        if gqa and dtype == torch.float32:
            with sdpa_kernel(SDPBackend.MATH):
                return original(query, key, value, attn_mask, dropout_p, *args, **kwargs)
        dv = value.shape[-1]
        if dv < query.shape[-1]:
            # Values narrower than queries (DeepSeek's MLA: 192 vs 128): CPU flash wants one head
            # size and falls back to the math kernel; CUDA runs memory-efficient attention, which
            # saves q, k, v, the output and a log-sum-exp. Padding v to the query's size gives
            # the CPU flash kernel: its saved padded v and padded output stand for CUDA's v (a
            # view of the wider kv_b_proj output it keeps alive) and narrower output.
            padded = F.pad(value, (0, query.shape[-1] - dv))
            out = original(query, key, padded, attn_mask, 0.0, *args, **kwargs)
            return out[..., :dv]
        return original(query, key, value, attn_mask, 0.0, *args, **kwargs)

    F.scaled_dot_product_attention = sdpa_as_on_cuda
    try:
        yield
    finally:
        F.scaled_dot_product_attention = original


def _math_as_on_cuda(attn_mask: Any, dropout_p: float) -> bool:
    """Whether CUDA runs SDPA's math kernel with its dropout: the mask needs a gradient.

    Why: CUDA's flash, memory-efficient and cuDNN kernels take no mask that requires grad, so a
    trained additive bias (T5's relative position bias, which every self-attention layer adds)
    sends SDPA to ``_scaled_dot_product_attention_math``. That kernel is a device-independent
    composition of aten ops, and on CUDA it applies the dropout itself. The op-level probe on an
    H200 (``tests/calibration/gpu_op_probe.json``, 1-layer t5-base bf16 B=8 T=512, torch 2.11)
    logs its sequence per self-attention: ``bmm`` of fp32 (upcast) q and k, ``add`` of the bf16
    bias, ``_safe_softmax`` (fp32), ``native_dropout`` of the fp32 probabilities (result and
    bool mask kept), ``_to_copy`` to bf16 (the kernel's second result, which F.sdpa drops), and
    in backward ``bmm`` with an fp32 v. CPU's math kernel runs the same ops, so it is called with
    the real ``dropout_p`` here instead of 0 (which gave the CPU trace no attention dropout).
    The dropout itself is then CPU's (``at::dropout``: a mask in the probabilities' dtype, like
    every other dropout of the trace); CUDA's ``native_dropout`` keeps a bool mask, which the
    estimate prices with ``TrainingSetup.dropout_mask_bytes``.
    """
    return (
        dropout_p > 0.0
        and isinstance(attn_mask, torch.Tensor)
        and attn_mask.requires_grad
        and torch.is_grad_enabled()
    )


@contextlib.contextmanager
def cuda_autocast_op_lists(device_type: str) -> Iterator[None]:
    """Apply CUDA autocast's fp32 rules while CPU autocast is on.

    Why: CPU and CUDA autocast have different op lists. CUDA runs ``softmax`` / ``log_softmax``
    with ``dtype=float32`` ("fp32_set_opt_dtype") and casts the inputs of ``layer_norm``,
    ``group_norm``, ``pow``, ``exp``, ``log``, ``rsqrt``, ... and of the losses to float32 ("fp32"
    list); CPU autocast leaves them in bf16/fp16. The difference is real memory: GPT-2's
    ``gelu_new`` uses ``torch.pow``, so its whole GELU chain is fp32 on CUDA; eager attention
    keeps an fp32 softmax per layer on CUDA (GPT-2 small eager amp-bf16 b8 s1024: 21.5 vs 19.8
    GiB). The affected ``torch``, ``torch.nn.functional`` and ``torch.Tensor`` functions are
    wrapped for the duration (they only act while autocast is enabled on ``device_type``).
    Module attributes are patched rather than using a ``TorchFunctionMode`` because such a mode
    is not active during activation-checkpoint recomputation, which then recomputes different
    dtypes and fails ("Recomputed values ... have different metadata").
    Not covered: in-place variants (``pow_``) and ops called only from C++ composites.
    """
    import torch.nn.functional as F
    from torch.utils._pytree import tree_map_only

    def on() -> bool:
        return torch.is_autocast_enabled(device_type)

    def to_fp32(t: torch.Tensor) -> torch.Tensor:
        return t.float() if t.dtype in _HALF else t

    def with_fp32_output(fn: Any, dim_args: int) -> Any:
        # softmax(input, dim, [_stacklevel,] dtype): force dtype=float32 when none is given
        def wrapper(input: Any, *args: Any, **kwargs: Any) -> Any:
            if on() and isinstance(input, torch.Tensor) and input.dtype in _HALF and kwargs.get("dtype") is None:
                if len(args) <= dim_args or args[dim_args] is None:
                    args = args[:dim_args]
                    kwargs["dtype"] = torch.float32
            return fn(input, *args, **kwargs)

        return wrapper

    def with_fp32_inputs(fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if on():
                args, kwargs = tree_map_only(torch.Tensor, to_fp32, (args, kwargs))
            return fn(*args, **kwargs)

        return wrapper

    patches: list[tuple[Any, str, Any]] = []
    # F.softmax(input, dim=None, _stacklevel=3, dtype=None): dtype is the 3rd extra positional
    for name in ("softmax", "log_softmax"):
        patches.append((F, name, with_fp32_output(getattr(F, name), 2)))
        # torch.softmax(input, dim, dtype=None) / Tensor.softmax(dim, dtype=None)
        patches.append((torch, name, with_fp32_output(getattr(torch, name), 1)))
        patches.append((torch.Tensor, name, with_fp32_output(getattr(torch.Tensor, name), 1)))
    for name in ("layer_norm", "group_norm", "cross_entropy", "nll_loss", "mse_loss", "l1_loss",
                 "smooth_l1_loss", "kl_div", "binary_cross_entropy_with_logits", "softplus"):
        patches.append((F, name, with_fp32_inputs(getattr(F, name))))
    for name in ("pow", "exp", "log", "rsqrt", "log1p", "expm1", "reciprocal"):
        patches.append((torch, name, with_fp32_inputs(getattr(torch, name))))
    for name in ("pow", "__pow__", "exp", "log", "rsqrt", "log1p", "expm1", "reciprocal"):
        patches.append((torch.Tensor, name, with_fp32_inputs(getattr(torch.Tensor, name))))

    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patches]
    for owner, name, new in patches:
        setattr(owner, name, new)
    try:
        yield
    finally:
        for owner, name, old in saved:
            setattr(owner, name, old)


# --------------------------------------------------------------------------- speed only
_HALF_MATMULS = ("mm.default", "addmm.default", "bmm.default", "baddbmm.default")


class FastCpuHalfMatmul(torch.utils._python_dispatch.TorchDispatchMode):
    """Run fp16 matrix products on the CPU through fp32 kernels; results stay fp16.

    Why: PyTorch's CPU fp16 GEMM without AVX512-FP16 is a reference loop (~1 GFLOP/s on this
    machine, against ~50 for fp32 and ~120 for bf16), which makes a real ``mixed-fp16`` training
    step of even a 125M-parameter model take many minutes. This changes speed only: the op's output
    is the same fp16 tensor, and the fp32 copies it computes through are made *below* the memory
    tracker when this mode is entered *before* the tracker (the tracker sees ``aten.mm`` and its
    fp16 output, as on CUDA where cuBLAS allocates no tensors). ``tests/test_deepspeed_step.py``
    checks that a step's measured peak is the same with and without it.
    """

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        name = f"{func.overloadpacket.__name__}.{func._overloadname}"
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if (name in _HALF_MATMULS and tensors and all(t.dtype == torch.float16 and t.device.type == "cpu"
                                                       for t in tensors)):
            upcast = [a.float() if isinstance(a, torch.Tensor) else a for a in args]
            return func(*upcast, **kwargs).to(torch.float16)
        return func(*args, **kwargs)
