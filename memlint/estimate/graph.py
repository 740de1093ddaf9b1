"""A symbolic autograd tape: which tensors a block's forward keeps alive for its backward.

Activation memory is the sum of the tensors autograd saves, and which ones it saves depends on
details a closed formula misses: whether a weight trains (a frozen Linear keeps no input, a
frozen RMSNorm keeps no normalised copy), whether autocast makes a per-consumer bf16 copy of
an fp32 input, whether ``.to(torch.float32)`` is a no-op, whether dropout runs. So each model
family writes its block once, as the sequence of operations its Hugging Face implementation
runs (``families.py``), and this tape applies PyTorch's saving rules to symbolic tensors.

Sizes are elements per token (per position of the micro-batch); attention scores have
``heads * seq_len`` elements per token. Identical tensors are saved once (by identity).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(eq=False)
class Value:
    """A symbolic tensor: elements per token, bytes per element, whether it needs grad."""

    numel: float
    nbytes: int
    rg: bool
    # Stored head-major (B, heads, T, d) rather than as a (B, T, heads, d) view of a projection:
    # true after ``torch.cat`` or ``reshape`` copies. Attention kernels then return a
    # head-major output, and ``transpose(1, 2).contiguous()`` must copy it.
    head_major: bool = False
    # A view (a chunk of a fused qkv output): saving it keeps ``view_of`` alive.
    view_of: "Value | None" = None
    # Tensors of this size that the backward of the op that saved it holds at once: the gradient
    # of its output and of its input (2); CUDA's softmax backward over SDPA's math kernel adds a
    # workspace as large as its result (3; ``_softmax_backward_data``, measured on an H200).
    backward_buffers: int = 2

    @property
    def bytes(self) -> float:
        return self.numel * self.nbytes


@dataclass(frozen=True)
class TapeSettings:
    """How one block runs: dtypes, autocast, which weights train, attention kernel."""

    compute_bytes: int  # matmul outputs (2 for bf16/fp16 compute, 4 for fp32)
    param_bytes: int  # dtype of weights that are not autocast (norms, embeddings)
    autocast: bool
    seq_len: int
    attention: str  # "eager", "sdpa" or "flash"
    trainable: Callable[[str], bool]  # is this (linear or norm) weight trained?
    lora_targets: Callable[[str], bool]  # does this linear carry a LoRA adapter?
    lora_rank: int = 0
    lora_dropout: float = 0.0
    lora_bytes: int = 4  # PEFT keeps adapters in fp32 (autocast_adapter_dtype=True)
    oft: bool = False  # the adapters are OFT rotations of the layer's input, not LoRA branches
    # CUDA's dropout keeps a 1-byte boolean mask (native_dropout); CPU keeps a mask of the
    # input's dtype (None). memlint prices the CUDA kernel.
    mask_bytes: int | None = 1
    quantized_base: bool = False  # bitsandbytes 4/8-bit base linears (QLoRA)
    # CUDA's SDPA has no fused kernel for fp32 inputs with fewer key/value heads (flash takes
    # no fp32, memory-efficient no enable_gqa): it runs the math kernel, which saves the
    # probabilities. Measured on an H200 (tests/calibration/gpu_truth.json). False prices the
    # CPU flash kernel the fake-tensor oracle ran.
    fp32_gqa_sdpa_math: bool = True
    # CUDA's softmax backward over the math kernel's probabilities allocates a workspace of
    # their size (TrainingSetup.cuda_workspaces)
    softmax_workspace: bool = True
    grad_ckpt: bool = False  # gradient checkpointing on (T5 then marks a bias requires_grad)
    # positions of the encoder's output a decoder's cross-attention reads, when they differ from
    # ``seq_len`` (the decoder's own: a seq2seq step's labels are shorter than its inputs); 0: as many
    encoder_len: int = 0


class Tape:
    """Records the tensors saved for backward while a block's ops are replayed."""

    def __init__(self, settings: TapeSettings) -> None:
        self.s = settings
        self._saved: dict[int, Value] = {}

    # ----------------------------------------------------------------- bookkeeping

    @property
    def saved_bytes(self) -> float:
        return sum(v.bytes for v in self._saved.values())

    @property
    def backward_peak(self) -> float:
        """Bytes per token alive at the worst moment of this block's backward.

        Backward runs the ops in reverse: when it reaches the op that saved tensor *i*, the
        tensors saved after *i* are already freed, those saved up to *i* are alive, and the
        gradients of *i* and of its input exist at once (softmax's backward over eager
        attention probabilities: two fp32 buffers of heads x T per token), with any workspace
        that backward allocates (``Value.backward_buffers``).
        """
        alive = 0.0
        peak = 0.0
        for value in self._saved.values():
            alive += value.bytes
            peak = max(peak, alive + value.backward_buffers * value.bytes)
        return peak

    def save(self, *values: Value | None) -> None:
        for value in values:
            while value is not None and value.view_of is not None:
                value = value.view_of
            if value is not None:
                self._saved[id(value)] = value

    @staticmethod
    def view(base: Value, numel: float) -> Value:
        """A chunk of ``base`` (no new storage)."""
        return Value(numel, base.nbytes, base.rg, view_of=base)

    def new(self, numel: float, nbytes: int, rg: bool) -> Value:
        return Value(numel, nbytes, rg)

    @staticmethod
    def promote(*values: Value) -> int:
        """Type promotion between float tensors: the widest dtype wins."""
        return max(v.nbytes for v in values)

    # ----------------------------------------------------------------- dtype moves

    def cast(self, x: Value, nbytes: int) -> Value:
        """``x.to(dtype)``: the same tensor when the dtype already matches; saves nothing."""
        if x.nbytes == nbytes:
            return x
        return self.new(x.numel, nbytes, x.rg)

    def autocast_input(self, x: Value) -> Value:
        """Autocast casts each fp32 activation per use: copies of activations are not cached."""
        if self.s.autocast:
            return self.cast(x, self.s.compute_bytes)
        return x

    # ----------------------------------------------------------------- elementwise

    def add(self, a: Value, b: Value) -> Value:
        return self.new(max(a.numel, b.numel), self.promote(a, b), a.rg or b.rg)

    def mul(self, a: Value, b: Value) -> Value:
        """Each operand is saved when the other one needs its gradient."""
        if b.rg:
            self.save(a)
        if a.rg:
            self.save(b)
        return self.new(max(a.numel, b.numel), self.promote(a, b), a.rg or b.rg)

    def scale(self, x: Value) -> Value:
        """Multiplication by a Python scalar: saves nothing."""
        return self.new(x.numel, x.nbytes, x.rg)

    def param(self, numel: float, name: str, nbytes: int | None = None) -> Value:
        """A weight, seen as a broadcast operand (its storage is counted as a parameter)."""
        return self.new(0.0, nbytes or self.s.param_bytes, self.s.trainable(name))

    def dropout(self, x: Value, p: float) -> Value:
        if p <= 0.0:
            return x
        if x.rg:
            self.save(self.new(x.numel, self.s.mask_bytes or x.nbytes, False))
        return self.new(x.numel, x.nbytes, x.rg)

    # ----------------------------------------------------------------- activations

    def silu(self, x: Value) -> Value:
        if x.rg:
            self.save(x)
        return self.new(x.numel, x.nbytes, x.rg)

    gelu = silu  # F.gelu (exact or tanh-approximate) saves its input only

    def relu(self, x: Value) -> Value:
        out = self.new(x.numel, x.nbytes, x.rg)
        if x.rg:
            self.save(out)  # threshold_backward reads the result
        return out

    def gelu_python(self, x: Value) -> Value:
        """HF's NewGELUActivation: 0.5*x*(1+tanh(c*(x+0.044715*x**3))) in Python ops.

        CUDA autocast runs ``pow`` in fp32, so under autocast the cube and everything mixed
        with it become fp32.
        """
        x_pow = self.cast(x, 4) if self.s.autocast else x
        if x.rg:
            self.save(x_pow)  # pow(x, 3) saves its input
        cube = self.new(x.numel, x_pow.nbytes, x.rg)
        inner = self.add(x, self.scale(cube))
        tanh = self.new(x.numel, inner.nbytes, x.rg)
        if x.rg:
            self.save(tanh)  # tanh saves its result
        one_plus = self.new(x.numel, tanh.nbytes, x.rg)
        half_x = self.scale(x)
        return self.mul(half_x, one_plus)

    def activation(self, x: Value, kind: str) -> Value:
        kind = kind.lower()
        if kind in ("silu", "swish"):
            return self.silu(x)
        if kind in ("relu",):
            return self.relu(x)
        if kind in ("gelu_new", "gelu_fast", "quick_gelu", "gelu_accurate"):
            return self.gelu_python(x)
        return self.gelu(x)  # gelu, gelu_pytorch_tanh

    # ----------------------------------------------------------------- layers

    def linear(self, x: Value, out_features: int, name: str, in_features: int | None = None) -> Value:
        """A Linear (or Conv1D) layer, with its LoRA adapter when it has one."""
        trains = self.s.trainable(name) and not self.s.quantized_base
        oft = self.s.oft and self.s.lora_targets(name)
        if oft:
            x = self._oft(x)
        x_in = self.autocast_input(x)
        if self.s.quantized_base and not self.s.autocast:
            # bnb Linear4bit casts its input to the compute dtype
            x_in = self.cast(x, self.s.compute_bytes)
        if trains:
            self.save(x_in)  # the weight's gradient is grad_out^T @ input
        # rows of the input per token of the tape: 1, but for a tensor of another length priced
        # per token of this one (a decoder's cross-attention projecting the encoder's output)
        rows = x.numel / in_features if in_features else 1.0
        # bitsandbytes' Linear4bit returns its result in the input's dtype (``.to(inp_dtype)``):
        # fp32 where the hidden states are fp32 (prepare_model_for_kbit_training, or mixed
        # precision's fp32 norms and embeddings), whatever the compute dtype; the head is not quantized
        out_bytes = x.nbytes if self.s.quantized_base and name != "lm_head" else x_in.nbytes
        out = self.new(out_features * rows, out_bytes, x.rg or trains)
        if self.s.lora_targets(name) and not oft:
            out = self._lora(x, out, out_features, rows)
        return out

    def _oft(self, x: Value) -> Value:
        """PEFT OFT (peft/tuners/oft/layer.py, ``Linear.forward``): the input cast to the adapter's
        dtype, rotated block by block (an einsum that saves it for the rotation's gradient), and
        cast back before the frozen base layer."""
        x_a = self.autocast_input(self.cast(x, self.s.lora_bytes))
        self.save(x_a)
        rotated = self.new(x.numel, x_a.nbytes, True)
        return self.cast(rotated, x.nbytes)

    def _lora(self, x: Value, base_out: Value, out_features: int, rows: float = 1.0) -> Value:
        """PEFT LoRA: result + lora_B(lora_A(dropout(x.to(adapter dtype)))) * scaling."""
        r = self.s.lora_rank
        x_a = self.cast(x, self.s.lora_bytes)
        x_a = self.dropout(x_a, self.s.lora_dropout)
        a_in = self.autocast_input(x_a)
        self.save(a_in)  # lora_A's weight trains
        a_out = self.new(r * rows, a_in.nbytes, True)
        b_in = self.autocast_input(a_out)
        self.save(b_in)
        b_out = self.new(out_features * rows, b_in.nbytes, True)
        scaled = self.scale(b_out)
        total = self.add(base_out, scaled)
        return self.cast(total, base_out.nbytes)

    def rms_norm(self, x: Value, name: str, gemma: bool = False) -> Value:
        """Llama-style RMSNorm: fp32 statistics, weight applied in the input dtype.

        Gemma multiplies by (1 + weight) in fp32 and casts back at the end.
        """
        h = x.numel
        x32 = self.cast(x, 4)
        if x.rg:
            self.save(x32, self.new(1, 4, True))  # pow/mul read x32; rsqrt's result
        normed = self.new(h, 4, x.rg)
        weight = self.param(h, name, nbytes=4 if gemma else self.s.param_bytes)
        if gemma:
            return self.cast(self.mul(normed, weight), x.nbytes)
        return self.mul(self.cast(normed, x.nbytes), weight)

    def layer_norm(self, x: Value, name: str) -> Value:
        """native_layer_norm saves its input, mean and rstd; CUDA autocast runs it in fp32."""
        x_in = self.cast(x, 4) if self.s.autocast else x
        weight_trains = self.s.trainable(name)
        if x.rg or weight_trains:
            self.save(x_in, self.new(2, 4, False))
        return self.new(x.numel, x_in.nbytes, x.rg or weight_trains)

    def rope(
        self, x: Value, cos_bytes: int, rotary_fraction: float = 1.0, concat: bool = False
    ) -> Value:
        """x*cos + rotate_half(x)*sin: cos/sin need no grad, so only they are saved.

        cos/sin have the dtype of the hidden states (fp32 under autocast), so the rotated
        query is fp32 there. A partial rotary embedding (or Phi-3's, which always splits
        and concatenates) makes a new head-major tensor.
        """
        if rotary_fraction < 1.0 or concat:
            rotated = self.new(x.numel * rotary_fraction, max(x.nbytes, cos_bytes), x.rg)
            # cat((rotated, pass_through)) makes a new head-major tensor
            return Value(x.numel, rotated.nbytes, x.rg, head_major=True)
        return Value(x.numel, max(x.nbytes, cos_bytes), x.rg, head_major=x.head_major)

    # ----------------------------------------------------------------- attention

    def attention(
        self,
        q: Value,
        k: Value,
        v: Value,
        heads: int,
        kv_heads: int,
        dropout: float = 0.0,
        out_numel: float | None = None,
        softmax: str = "fp32",
        softcap: bool = False,
        broadcast_kv: bool = False,
    ) -> Value:
        """Attention over roped q, k and v; returns the output in (B, T, heads*d) layout.

        ``out_numel`` is the output size when q is a view of a fused qkv tensor; ``softmax``
        is the dtype eager attention normalises in: "fp32" (``softmax(dtype=float32)``, most
        models), "input" (GPT-2, BERT, T5: the scores' dtype) or "hidden" (Falcon: the hidden
        states' dtype).
        """
        out_numel = q.numel if out_numel is None else out_numel
        if self.s.attention == "eager":
            return self._eager_attention(
                q, k, v, heads, kv_heads, dropout, out_numel, softmax, softcap
            )
        # SDPA (flash / memory-efficient) and flash-attention: save q, k, v, the output and
        # an fp32 log-sum-exp per head; GQA keys are not expanded; flash kernels regenerate a
        # dropout mask from the RNG state instead of keeping it.
        qc, kc, vc = (self.autocast_input(t) for t in (q, k, v))
        rg = q.rg or k.rg or v.rg
        if kv_heads != heads and (broadcast_kv or self._fp32_gqa_on_cuda_sdpa()):
            return self._math_sdpa(qc, kc, vc, heads, kv_heads, out_numel)
        out = self.new(out_numel, qc.nbytes, rg)
        if rg:
            self.save(qc, kc, vc, out, self.new(heads, 4, False))
        if q.head_major:
            return self.new(out_numel, out.nbytes, rg)  # transpose(1, 2).contiguous() copies
        return out

    def _fp32_gqa_on_cuda_sdpa(self) -> bool:
        """Whether torch's SDPA gets fp32 inputs (fp32 compute, no autocast): with grouped
        key/value heads CUDA then has no fused kernel (flash-attention 2 is another kernel)."""
        s = self.s
        return s.fp32_gqa_sdpa_math and s.attention == "sdpa" and s.compute_bytes == 4 and not s.autocast

    def _math_sdpa(self, q, k, v, heads, kv_heads, out_numel) -> Value:
        """SDPA's math kernel, taken when k/v have fewer heads and no fused kernel serves them
        (Falcon's multi-query attention without enable_gqa; fp32 GQA on CUDA): half inputs are
        upcast to fp32, k and v broadcast to every head, and the fp32 probabilities are saved.
        Their softmax backward on CUDA takes a workspace of their size besides the two gradients
        (Falcon-7B LoRA b4 s2048: 4.4 GiB that no op returns, so PyTorch's tracker misses it;
        ``max_memory_allocated`` sees it, tests/calibration/gpu_truth.json)."""
        rep = heads // max(kv_heads, 1)
        rg = q.rg or k.rg or v.rg
        up = 4 if q.nbytes < 4 else q.nbytes
        if rg:
            self.save(
                self.new(q.numel, up, rg),
                self.new(k.numel * rep, up, rg),
                self.new(v.numel * rep, up, rg),
                self.math_sdpa_probabilities(heads, up, rg),
            )
        return Value(out_numel, q.nbytes, rg, head_major=True)

    def math_sdpa_probabilities(self, heads: int, nbytes: int, rg: bool) -> Value:
        """The probabilities SDPA's math kernel saves, with the CUDA softmax backward's workspace."""
        probs = self.new(heads * self.s.seq_len, nbytes, rg)
        if self.s.softmax_workspace:
            probs.backward_buffers = 3
        return probs

    def _eager_attention(
        self, q, k, v, heads, kv_heads, dropout, out_numel, softmax, softcap=False
    ) -> Value:
        """HF eager_attention_forward: scores and probabilities of size heads x T per token."""
        s = self.s
        n_rep = heads // max(kv_heads, 1)
        rg = q.rg or k.rg or v.rg
        def operand(x: Value, repeat: int) -> Value:
            # matmul on 4-D tensors runs bmm on contiguous (B*h, T, d) copies, unless the
            # tensor is already head-major; repeat_kv materialises expanded GQA keys/values.
            x = self.autocast_input(x)
            if repeat > 1 or not x.head_major:
                return Value(x.numel * repeat, x.nbytes, x.rg, head_major=True)
            return x

        q_mm = operand(q, 1)
        k_mm = operand(k, n_rep)
        v_mm = operand(v, n_rep)
        if rg:
            self.save(q_mm, k_mm)
        scores_numel = heads * s.seq_len
        cb = q_mm.nbytes
        if softcap and rg:  # Gemma 2: tanh(scores / cap) * cap; tanh saves its result
            self.save(self.new(scores_numel, cb, rg))
        if s.autocast or softmax == "fp32":
            softmax_bytes = 4  # CUDA autocast runs softmax in fp32 whatever the code asks
        elif softmax == "hidden":
            softmax_bytes = s.param_bytes
        else:
            softmax_bytes = cb
        probs_full = self.new(scores_numel, softmax_bytes, rg)
        if rg:
            self.save(probs_full)  # softmax saves its result
        probs = self.cast(probs_full, cb)
        probs = self.dropout(probs, dropout)
        if rg:
            self.save(probs, v_mm)
        return self.new(out_numel, cb, rg)  # matmul output, then transpose(1, 2).contiguous()
