"""Axolotl training YAMLs: the run they define, as Axolotl will set it up.

Axolotl loads the model in the dtype its precision flags choose (``resolve_dtype`` in
``axolotl/utils/config``: bf16 when ``bf16`` is true or ``auto`` on a GPU that has it, fp16
for ``fp16``/``load_in_8bit``, else fp32) and hands ``bf16``/``fp16`` to the HF Trainer.
``adapter: lora|qlora`` trains LoRA adapters (QLoRA on 4-bit NF4 weights with double
quantisation, Axolotl's bitsandbytes defaults); ``lora_target_linear`` targets every linear
layer. Liger's fused linear cross-entropy (and Cut Cross-Entropy) only run when their plugin is
listed under ``plugins:``. Keys the file leaves out take Axolotl's defaults from its schema
(``sequence_len``, ``micro_batch_size``, ``gradient_checkpointing``, ``optimizer``, ``bf16``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memlint.configs.deepspeed import positive_int, read_deepspeed
from memlint.configs.reading import ConfigReader, loaded_mapping, new_facts
from memlint.configs.schema import plugin_listed
from memlint.facts.extract import extractor
from memlint.facts.hf_args import _bool, lora_target_names
from memlint.facts.plan import RunFacts
from memlint.model.provenance import Sourced
from memlint.model.vocabulary import ATTENTION, optimizer_from_hf

if TYPE_CHECKING:
    from memlint.documents.parsed import ParsedDocument

TOOL = "Axolotl"
LIGER = "axolotl.integrations.liger.LigerPlugin"
CUT_CROSS_ENTROPY = "axolotl.integrations.cut_cross_entropy.CutCrossEntropyPlugin"
# Deprecated boolean attention switches, in Axolotl's order of precedence.
ATTENTION_FLAGS = (("flash_attention", "flash"), ("sdp_attention", "sdpa"), ("xformers_attention", "sdpa"),
                   ("flex_attention", "sdpa"), ("eager_attention", "eager"))


@extractor("axolotl")
def extract_axolotl(parsed: ParsedDocument) -> list[RunFacts]:
    data = loaded_mapping(parsed)
    if data is None:
        return []
    facts = new_facts(parsed.path, "axolotl", data)
    facts.framework = Sourced("axolotl", None, "Axolotl config")
    reader = ConfigReader(parsed.path, data, facts, "axolotl")
    reader.read("model", ("base_model",), lambda v: str(v) if v else None, TOOL)
    _sequence_classifier(reader)
    _sequence(reader)
    reader.read("micro_batch", ("micro_batch_size",), positive_int, TOOL)
    _accumulation(reader)
    _precision(reader)
    _adapter(reader)
    _attention(reader)
    reader.read("optimizer", ("optimizer",), lambda v: optimizer_from_hf(str(v)), TOOL)
    reader.read("grad_clip", ("max_grad_norm",), lambda v: float(v) if isinstance(v, (int, float)) else None, TOOL)
    _checkpointing(reader)
    _layer_sampling(reader)
    reader.read("trained_parameters", ("unfrozen_parameters",), regex_list, TOOL)
    _fused_loss(reader)
    deepspeed = reader.value("deepspeed")
    if isinstance(deepspeed, str):
        reader.reference(("deepspeed",), "deepspeed")
    elif isinstance(deepspeed, dict):
        read_deepspeed(reader.inside("deepspeed", schema_name="deepspeed"))
    if isinstance(reader.value("fsdp_config"), dict):
        _fsdp(reader.inside("fsdp_config"))
    return [facts]


def _sequence_classifier(reader: ConfigReader) -> None:
    """``model_type: AutoModelForSequenceClassification`` (Axolotl's reward-model examples): the
    base model is loaded with a score layer of ``num_labels`` (transformers' default 2)."""
    model_type, where = reader.setting("model_type")
    if not isinstance(model_type, str) or not model_type.endswith("ForSequenceClassification") or where is None:
        return
    labels, at = reader.setting("num_labels")
    if at is not None and (not isinstance(labels, int) or isinstance(labels, bool) or labels < 1):
        return
    reader.set("score_head", labels if at is not None else 2, at or where,
               "num_labels" if at is not None else f"{model_type} without num_labels: 2 labels")


def _sequence(reader: ConfigReader) -> None:
    """The tokens each GPU holds: ``sequence_len``, split over ``context_parallel_size`` ranks
    (ring/Ulysses attention give each rank its share of every sequence)."""
    ranks_key = next((k for k in ("context_parallel_size", "sequence_parallel_degree")
                      if (positive_int(reader.value(k)) or 0) > 1), None)
    if ranks_key is None:
        reader.read("seq_len", ("sequence_len",), positive_int, TOOL)
        return
    ranks = positive_int(reader.value(ranks_key))
    assert ranks is not None  # the key was chosen for its count over 1
    length, where = reader.setting("sequence_len")
    tokens = positive_int(length)
    if tokens:
        share = max(tokens // ranks, 1)
        reader.set("seq_len", share, where or reader.location(ranks_key), f"sequence_len / {ranks_key} ({ranks})")


def _accumulation(reader: ConfigReader) -> None:
    """``gradient_accumulation_steps``, or ``batch_size // micro_batch_size`` (normalize_config)."""
    if reader.value("gradient_accumulation_steps") is None and positive_int(reader.value("batch_size")):
        micro = positive_int(reader.value("micro_batch_size")) or positive_int(reader.default("micro_batch_size")) or 1
        steps = positive_int(reader.value("batch_size") // micro)
        reader.set("grad_accum", steps, reader.location("batch_size"), "batch_size // micro_batch_size")
        return
    reader.read("grad_accum", ("gradient_accumulation_steps",), positive_int, TOOL)


def _precision(reader: ConfigReader) -> None:
    bf16, bf16_at = reader.setting("bf16")
    fp16, fp16_at = reader.setting("fp16")
    pure_bf16, pure_bf16_at = reader.setting("bfloat16")
    pure_fp16, pure_fp16_at = reader.setting("float16")
    eight_bit, eight_bit_at = reader.setting("load_in_8bit")
    if bf16 == "auto":  # resolve_dtype: bf16 on GPUs that have it, unless fp16 is asked for
        bf16 = not _bool(fp16)
        note = "bf16: auto (bf16 on GPUs that support it, Ampere and newer)"
    else:
        bf16 = bf16 == "full" or bool(_bool(bf16))
        note = "bf16"
    fp16 = bool(_bool(fp16)) and not bf16
    if bf16:
        reader.set("mixed", "bf16", bf16_at, note)
    elif fp16:
        reader.set("mixed", "fp16", fp16_at, "fp16")
    if bf16 or _bool(pure_bf16):
        where, why = (bf16_at, note) if bf16 else (pure_bf16_at, "bfloat16")
        reader.set("load_dtype", "bf16", where, f"model loaded in bf16 ({why})")
    elif _bool(eight_bit) or fp16 or _bool(pure_fp16):
        where = eight_bit_at if _bool(eight_bit) else (fp16_at if fp16 else pure_fp16_at)
        reader.set("load_dtype", "fp16", where, "model loaded in fp16")
    else:
        reader.set("load_dtype", "fp32", None, "Axolotl loads the model in fp32 without bf16/fp16")


def _adapter(reader: ConfigReader) -> None:
    adapter = str(reader.value("adapter") or "").lower()
    if adapter not in ("lora", "qlora"):
        return  # lora_* keys do nothing without an adapter
    where = reader.location("adapter")
    reader.set("lora_r", positive_int(reader.value("lora_r")), reader.location("lora_r"), "lora_r")
    dropout = reader.value("lora_dropout")
    if isinstance(dropout, (int, float)) and not isinstance(dropout, bool):
        reader.set("lora_dropout", float(dropout), reader.location("lora_dropout"), "lora_dropout")
    if _bool(reader.value("lora_target_linear")):
        reader.set("lora_targets", ("all-linear",), reader.location("lora_target_linear"), "lora_target_linear")
    else:
        reader.set("lora_targets", lora_target_names(reader.value("lora_target_modules")),
                   reader.location("lora_target_modules"), "lora_target_modules")
    if adapter == "qlora" or _bool(reader.value("load_in_4bit")):
        at = reader.location("load_in_4bit") if reader.has("load_in_4bit") else where
        reader.set("quantization", "nf4", at, "4-bit NF4 (Axolotl's bitsandbytes config)")
        reader.set("double_quant", True, at, "bnb_4bit_use_double_quant (Axolotl default)")
    elif _bool(reader.value("load_in_8bit")):
        reader.set("quantization", "int8", reader.location("load_in_8bit"), "load_in_8bit")


def _attention(reader: ConfigReader) -> None:
    implementation = reader.value("attn_implementation")
    if isinstance(implementation, str) and implementation in ATTENTION:
        where = reader.location("attn_implementation")
        reader.set("attention", ATTENTION[implementation], where, "attn_implementation")
        return
    for key, attention in ATTENTION_FLAGS:
        if _bool(reader.value(key)):
            reader.set("attention", attention, reader.location(key), key)
            return


def _checkpointing(reader: ConfigReader) -> None:
    value, where = reader.setting("gradient_checkpointing")
    if value in ("offload", "offload_disk"):
        reader.set("grad_ckpt", 1, where, f"gradient_checkpointing: {value} (checkpoints offloaded)")
        return
    for key in ("activation_checkpointing", "fsdp_activation_checkpointing"):  # Axolotl strips `fsdp_`
        if _bool(reader.value("fsdp_config", key)):
            reader.set("grad_ckpt", 1, reader.location("fsdp_config", key), f"fsdp_config.{key}")
    flag = _bool(value)
    if flag is not None:
        note = "gradient_checkpointing" if where else "Axolotl default gradient_checkpointing"
        reader.set("grad_ckpt", int(flag), where, note)


def _layer_sampling(reader: ConfigReader) -> None:
    """LISA: Axolotl adds its layer-switching callback only when both ``lisa_n_layers`` and
    ``lisa_step_interval`` are set (``core/builders/causal.py``)."""
    count, interval = positive_int(reader.value("lisa_n_layers")), positive_int(reader.value("lisa_step_interval"))
    if count is None or interval is None:
        return
    where = reader.location("lisa_n_layers")
    reader.set("layer_sampling", True, where, f"lisa_n_layers: {count} with lisa_step_interval: {interval}")
    reader.set("sampled_blocks", count, where, "lisa_n_layers")


def regex_list(value: Any) -> tuple[str, ...] | None:
    """``unfrozen_parameters``: the patterns of the parameters that train (a lone string is one)."""
    items = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    patterns = tuple(item.strip() for item in items if isinstance(item, str) and item.strip())
    return patterns or None


def _fused_loss(reader: ConfigReader) -> None:
    """Liger FLCE or Cut Cross-Entropy: no full logits tensor, if their plugin is loaded."""
    plugins: Any = reader.value("plugins")
    if _bool(reader.value("liger_fused_linear_cross_entropy")) and plugin_listed(LIGER, plugins):
        reader.set("fused_loss", True, reader.location("liger_fused_linear_cross_entropy"),
                   "liger_fused_linear_cross_entropy")
    elif plugin_listed(CUT_CROSS_ENTROPY, plugins) and reader.value("cut_cross_entropy") is not False:
        at = reader.location("cut_cross_entropy") if reader.has("cut_cross_entropy") else reader.location("plugins")
        reader.set("fused_loss", True, at, "Cut Cross-Entropy plugin")


def _fsdp(reader: ConfigReader) -> None:
    key = next((k for k in ("reshard_after_forward", "fsdp_reshard_after_forward") if reader.has(k)), None)
    reshard = reader.value(key) if key else None
    sharding = "grad-op" if _bool(reshard) is False else "full"  # FSDP2 reshards after forward by default
    where = reader.location(key) if key else reader.key_location()
    reader.set("fsdp", sharding, where, key or "fsdp_config (FSDP2)")
    for key in ("offload_params", "fsdp_offload_params"):
        if _bool(reader.value(key)) is not None:
            reader.set("offload_params", bool(_bool(reader.value(key))), reader.location(key), key)
