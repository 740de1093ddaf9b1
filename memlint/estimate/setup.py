"""The training setup the estimator prices: everything but the architecture and the GPU."""

from __future__ import annotations

import enum
import functools
import re
from typing import Any
from dataclasses import dataclass, field, replace

from memlint.estimate.architecture import Architecture
from memlint.estimate.policy import Optimizer, Precision


class Attention(str, enum.Enum):
    EAGER = "eager"  # materialises the (T x T) scores and probabilities per head
    SDPA = "sdpa"  # torch scaled_dot_product_attention (flash / memory-efficient kernels)
    FLASH = "flash"  # flash-attention 2/3: saves q, k, v, output and log-sum-exp only

    @classmethod
    def parse(cls, text: str) -> "Attention":
        key = text.strip().lower()
        aliases = {"flash_attention_2": "flash", "flash_attention_3": "flash", "fa2": "flash"}
        key = aliases.get(key, key)
        for member in cls:
            if member.value == key:
                return member
        raise ValueError(f"unknown attention {text!r}; expected eager, sdpa or flash")


class Sharding(str, enum.Enum):
    NONE = "none"  # DDP or a single GPU: every rank holds everything
    ZERO1 = "zero1"  # optimizer states (and master weights) sharded
    ZERO2 = "zero2"  # + gradients sharded
    ZERO3 = "zero3"  # + parameters sharded, gathered layer by layer
    FSDP_FULL = "fsdp-full"  # FSDP FULL_SHARD / FSDP2 fully_shard: like ZeRO-3
    FSDP_GRAD_OP = "fsdp-grad-op"  # FSDP SHARD_GRAD_OP: like ZeRO-2
    FSDP_HYBRID = "fsdp-hybrid"  # full shard within a node, replicate across nodes


@dataclass(frozen=True)
class Lora:
    r: int = 16
    # Module names ("q_proj", "v_proj") or "all-linear" (PEFT: every linear but the head).
    targets: tuple[str, ...] = ("q_proj", "v_proj")
    alpha: float = 32.0
    dropout: float = 0.05
    quantization: str | None = None  # None, "nf4" (4-bit QLoRA), "fp4", "int8"
    double_quant: bool = True  # bnb_4bit_use_double_quant
    # peft's prepare_model_for_kbit_training (Axolotl and most QLoRA scripts call it) upcasts
    # every non-quantised parameter (norms, embeddings, head) to fp32
    kbit_prepared: bool = True
    # "lora", or "oft": PEFT's orthogonal fine-tuning, which rotates each adapted layer's input by a
    # block-diagonal orthogonal matrix of ``block_size`` blocks (peft/tuners/oft/layer.py) and trains
    # their skew-symmetric generators, ``in * (block_size - 1) / 2`` values per layer; ``r`` is unused
    method: str = "lora"
    block_size: int = 32

    def oft_block(self, in_features: int) -> int:
        """The block size PEFT uses on a layer: the configured one, or its nearest divisor of
        ``in_features`` (``OFTLayer.adjust_oft_parameters``; on a tie the smaller)."""
        size = self.block_size
        if size >= in_features:
            return in_features
        lower = next(b for b in range(size, 0, -1) if in_features % b == 0)
        higher = next((b for b in range(size, in_features + 1) if in_features % b == 0), in_features)
        return lower if size - lower <= higher - size else higher

    def adapter_params(self, in_features: int, out_features: int) -> int:
        """Trainable adapter values on one adapted linear layer."""
        if self.method == "oft":
            return in_features * (self.oft_block(in_features) - 1) // 2
        return self.r * (in_features + out_features)

    def applies_to(self, linear_name: str) -> bool:
        """PEFT's target matching: a module whose name is, or ends with, a target.

        "all-linear" is every Linear but the output head. Mixture-of-experts experts are
        fused 3-D parameters in transformers 5, not Linear modules, so no target reaches them.
        """
        if linear_name.startswith("experts."):
            return False
        if any(t in ("all-linear", "all_linear") for t in self.targets):
            return linear_name != "lm_head"
        leaf = linear_name.rsplit(".", 1)[-1]
        return any(
            linear_name == t or leaf == t or linear_name.endswith("." + t)
            or (_REGEX_SYNTAX.search(t) is not None and _regex_reaches(t, linear_name))
            for t in self.targets
        )


# A target written as a regular expression (PEFT matches a string ``target_modules`` with
# ``re.fullmatch`` against each module's full name; Axolotl's Gemma 4 examples write
# ``model.language_model.layers.[\d]+.(_checkpoint_wrapped_module.)?(mlp|self_attn).(up|down|gate|q|k|v|o)_proj``).
_REGEX_SYNTAX = re.compile(r"[\[\]()|\\*+?^$]")
# memlint names a block's linears by their leaf; the full names the regex is tried on are the
# layouts transformers gives decoder blocks (text models, and the language model of a
# vision-language one), with FSDP's checkpoint wrapper or without
_BLOCK_PATHS = ("model.layers.0.", "model.language_model.layers.0.", "model.model.layers.0.",
                "language_model.model.layers.0.", "model.decoder.layers.0.", "transformer.h.0.")
_BLOCK_PARTS = ("self_attn.", "mlp.", "attn.", "attention.", "self_attention.", "feed_forward.")


@functools.lru_cache(maxsize=4096)
def _regex_reaches(pattern: str, linear_name: str) -> bool:
    """Does ``pattern`` fullmatch the full name of the linear ``linear_name`` in one of the
    usual block layouts? An invalid pattern matches nothing (PEFT would raise)."""
    try:
        compiled = re.compile(pattern)
    except re.error:
        return False
    leaf = linear_name.rsplit(".", 1)[-1]
    return any(
        compiled.fullmatch(f"{path}{wrapper}{part}{leaf}") is not None
        for path in _BLOCK_PATHS for wrapper in ("", "_checkpoint_wrapped_module.") for part in _BLOCK_PARTS
    )


@dataclass(frozen=True)
class Projection:
    """GaLore / APOLLO: the optimizer keeps its states for each targeted weight matrix in a
    rank-``rank`` projection of its gradient, ``rank x max(rows, cols)`` per state, plus the
    ``rank x min(rows, cols)`` projection matrix its projector keeps in the optimizer state
    (galore_torch ``GaLoreProjector`` with proj_type std; apollo_torch's random ``GradientProjector``).
    Every other trainable parameter keeps the optimizer's full states."""

    rank: int
    name: str = "GaLore"  # "GaLore" or "APOLLO"
    # LLaMA-Factory's ``*_layerwise``: one optimizer per parameter, stepped in a gradient hook during
    # backward, so each gradient is freed as soon as it is complete
    layerwise: bool = False
    # which linears are projected: module names, or "all-linear" (every linear but the output head)
    targets: tuple[str, ...] = ("all-linear",)

    def applies_to(self, linear_name: str) -> bool:
        return Lora(targets=self.targets).applies_to(linear_name)


@dataclass(frozen=True)
class Companion:
    """Another model a run holds on each GPU besides the one it trains: a DPO/PPO reference, a
    reward model, a distillation teacher (frozen: weights only), or a PPO value model (trained:
    weights, gradients, optimizer states and activations, as the run trains its policy)."""

    role: str  # "reference", "reward", "teacher", "value"
    arch: Architecture
    trains: bool = False
    # bytes per weight of a frozen companion (None: the policy's half or full precision, as the
    # trainers load it with the policy's own loading arguments)
    weight_bytes: float | None = None
    # sharded as the run shards its parameters (TRL's ``prepare_deepspeed`` keeps ZeRO-3 for the
    # reference and drops to stage 0 otherwise; ``prepare_fsdp`` wraps it like the policy)
    follows_sharding: bool = True
    # a sequence-classification model (reward / value): a one-label score head, no vocabulary head
    score_head: bool = False
    # the trainer builds it only for a full fine-tune: with an adapter it disables the adapter
    # instead (TRL's DPO/KTO/GRPO/RLOO/PPO: ``is_peft_model(model)`` -> ``ref_model = None``)
    adapter_replaces: bool = False


@dataclass(frozen=True)
class ModelParallel:
    """Parallelism that splits the model itself over GPUs (``estimate/model_parallel.py`` prices it).

    ``megatron``: Megatron-Core's tensor (TP), pipeline (PP) and expert (EP) parallel sizes, with its
    own state layout (fp32 ``main_grad`` buffer, fused Adam, optional distributed optimizer).
    Otherwise expert parallelism under FSDP (LLaMA-Factory v1's ``fsdpturbo`` ``ep_size``): each
    GPU holds 1/EP of the routed experts, the rest is sharded as FSDP shards it."""

    tensor: int = 1
    pipeline: int = 1
    expert: int = 1
    sequence_parallel: bool = False
    distributed_optimizer: bool = False
    megatron: bool = True

    @property
    def model_split(self) -> int:
        """The fewest GPUs the layout runs on (experts split within data parallelism)."""
        return self.tensor * self.pipeline * self.expert


@dataclass(frozen=True)
class TrainingSetup:
    micro_batch: int = 1
    seq_len: int = 2048
    # an encoder-decoder's label positions when they differ from its inputs' (``seq_len``): a
    # summarisation run's ``max_target_length``; 0: as many as the inputs
    decoder_len: int = 0
    precision: Precision = Precision.BF16
    optimizer: Optimizer = Optimizer.ADAMW
    # 0 = off; k = checkpoint every k-th layer (1 = every layer, HF's gradient_checkpointing)
    grad_ckpt_every: int = 0
    attention: Attention = Attention.SDPA
    lora: Lora | None = None
    frozen_layers: int = 0  # leading blocks whose parameters do not train (full fine-tuning)
    freeze_embeddings: bool = False
    freeze_head: bool = False  # the final norm and an untied output head do not train
    # bytes per frozen parameter when frozen ones are stored unlike the trained ones (LLaMA-Factory's
    # freeze tuning upcasts only trainable parameters to fp32); None: as the precision policy says
    frozen_weight_bytes: float | None = None
    # blocks that train when they are not simply the last ones: LLaMA Pro's interleaved expanded
    # blocks, BAdam's one active block. ``frozen_layers`` then counts only the frozen blocks before
    # the first trained one (they save no activations for backward); the other frozen blocks do.
    trained_blocks: int | None = None
    # the parameters that train when a name selection picks them (Spectrum, Axolotl's
    # ``unfrozen_parameters``): gradients and optimizer states hold only these; ``frozen_layers``
    # then counts the blocks before the first one it reaches (None: as the fields above say)
    trainable_params: int | None = None
    # the first block's input needs a gradient although the blocks are frozen: a trained projector
    # feeds it (a vision-language model's alignment stage), so every block keeps what backward
    # through it needs
    trains_inputs: bool = False
    # LISA: this many blocks, sampled anew every few steps, train beside the embeddings and the head.
    # Only they hold gradients; the optimizer was built over every parameter before the first switch
    # and keeps each state it creates, so it ends up with the states of every block.
    sampled_blocks: int | None = None
    # GaLore / APOLLO low-rank optimizer states (None: the optimizer's full states)
    projection: Projection | None = None
    # KTransformers: the routed experts' weights live in CPU memory and run on the CPU (LLaMA-Factory
    # ``use_kt``); the GPU holds attention, shared experts, embeddings and the head
    experts_on_host: bool = False
    # Megatron's tensor / pipeline / expert parallelism, or FSDP's expert parallelism (None: neither)
    model_parallel: ModelParallel | None = None
    sharding: Sharding = Sharding.NONE
    world_size: int = 1
    gpus_per_node: int = 8  # for hybrid sharding / ZeRO++ style partitioning
    offload_optimizer: bool = False
    offload_params: bool = False
    grad_accum: int = 1
    # Fused / chunked cross-entropy (Liger FLCE, Apple CCE): no full B*T*V logits.
    fused_loss: bool = False
    # torchtune's CEWithChunkedOutputLoss: the output projection in this many chunks, each upcast
    # to fp32 on its own (0: the loss takes the whole logits)
    loss_chunks: int = 0
    # the chunked loss compiled (torchtune's ``compile: True`` compiles it): the partitioner keeps
    # each chunk's logits and recomputes the upcast log-probs in backward
    loss_compiled: bool = False
    # A custom loop doing ``out = model(...); out.loss.backward()`` keeps logits alive.
    keep_logits: bool = False
    # DeepSpeed ZeRO buckets, in elements (None: framework defaults / not applicable).
    reduce_bucket_elements: float | None = None
    allgather_bucket_elements: float | None = None
    prefetch_bucket_elements: float | None = None
    max_live_parameters: float | None = None
    # Bytes per element of a saved dropout mask: 1 on CUDA (native_dropout keeps a bool
    # mask); None = the input's dtype, as PyTorch's CPU kernel keeps a scaled noise tensor.
    dropout_mask_bytes: int | None = 1
    # CUDA runs SDPA's math kernel for fp32 inputs with grouped key/value heads (see
    # graph.TapeSettings); False prices the CPU flash kernel the fake-tensor oracle measured.
    fp32_gqa_sdpa_math: bool = True
    # Count the workspaces CUDA kernels allocate inside an op (the softmax backward over SDPA's
    # math kernel): ``max_memory_allocated`` sees them, PyTorch's tracker and fake runs do not.
    # False prices what the tracker measures (the calibration suite's fake-tensor runs).
    cuda_workspaces: bool = True
    # Image placeholder tokens per sequence of a vision-language model (0: text-only batches);
    # the vision tower's activations scale with them (estimate/vision.py).
    image_tokens: int = 0
    # The vision tower and its merger do not train (LLaMA-Factory's ``freeze_vision_tower``, on by
    # default): no gradients or optimizer states for them, no tower activations kept.
    freeze_vision_tower: bool = False
    # Sequences the model runs per example of the micro-batch: 2 for preference pairs, whose chosen
    # and rejected completions run in one forward (TRL's DataCollatorForPreference, LLaMA-Factory's
    # PairwiseDataCollatorWithPadding, OpenRLHF's concatenated_forward)
    sequences_per_example: int = 1
    # Other models the run holds on each GPU (reference, reward, teacher, value model)
    companions: tuple[Companion, ...] = ()
    # Train the model (default) or run inference (forward only, no optimizer).
    mode: str = "train"
    notes: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.micro_batch < 1:
            raise ValueError("micro-batch must be at least 1")
        if self.seq_len < 1:
            raise ValueError("sequence length must be at least 1")
        if self.world_size < 1:
            raise ValueError("world size must be at least 1")
        if self.grad_ckpt_every < 0:
            raise ValueError("gradient checkpointing interval must be >= 0")
        if self.grad_accum < 1:
            raise ValueError("gradient accumulation steps must be at least 1")

    @property
    def grad_ckpt(self) -> bool:
        return self.grad_ckpt_every > 0

    @property
    def tokens(self) -> int:
        return self.micro_batch * self.sequences_per_example * self.seq_len

    @property
    def quantized(self) -> bool:
        return self.lora is not None and self.lora.quantization is not None

    def but(self, **changes) -> "TrainingSetup":
        """A copy with some fields changed (for what-if suggestions)."""
        return replace(self, **changes)


def projector_params(arch: Architecture) -> int:
    """The projector a vision-language model's alignment stage trains, priced as a two-layer MLP of
    the language model's width (LLaVA-1.5's ``mlp2x_gelu`` from a narrower vision tower has fewer)."""
    return 2 * (arch.hidden_size * arch.hidden_size + arch.hidden_size)


def projector_only_fields(arch: Architecture) -> dict[str, Any]:
    """The ``TrainingSetup`` fields of that stage: the language model frozen whole (no gradients or
    optimizer states) while every block keeps what backward needs to reach the projector at its input."""
    return {"trainable_params": projector_params(arch), "frozen_layers": arch.num_layers, "freeze_embeddings": True,
            "freeze_head": True, "trains_inputs": True}
