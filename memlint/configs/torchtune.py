"""torchtune recipe configs (``tune run lora_finetune_distributed --config 8B_lora.yaml``).

A torchtune config is an OmegaConf YAML whose blocks name the object a recipe builds
(``model: {_component_: torchtune.models.llama3_1.lora_llama3_1_8b, lora_rank: 8}``) beside the
recipe's own scalars (``batch_size``, ``dtype``, ``enable_activation_checkpointing``). What decides
memory, as torchtune's recipes run it:

* The model builder names architecture and size; ``lora_*`` builders train LoRA adapters over a
  frozen base, ``qlora_*`` ones over NF4 weights (torchao). The Hub checkpoint is the one the
  config's header downloads (``tune download meta-llama/Meta-Llama-3.1-8B-Instruct``) or the
  checkpointer's ``checkpoint_dir`` names, when its size agrees with the builder's.
* ``dtype: bf16`` trains in pure bf16: weights, gradients and optimizer states (no fp32 master).
* The GPU count is the header's ``tune run --nproc_per_node N``; the distributed recipes shard
  with FSDP (``fsdp_cpu_offload`` moves parameters, gradients and the optimizer step to the host).
* ``batch_size`` per device, ``gradient_accumulation_steps``, the sequence length the tokenizer
  (or dataset) truncates to (``max_seq_len``), ``enable_activation_checkpointing``.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from memlint.configs.deepspeed import positive_int
from memlint.configs.reading import ConfigReader, loaded_mapping, new_facts
from memlint.facts.extract import extractor
from memlint.facts.plan import RunFacts
from memlint.model.diagnostics import Position, Range
from memlint.model.provenance import Location, Sourced
from memlint.model.vocabulary import DTYPES, OPTIMIZER_CLASSES

if TYPE_CHECKING:
    from memlint.documents.parsed import ParsedDocument

TOOL = "torchtune"
COMPONENT = "_component_"
# torchtune's LoRA module names -> the Hugging Face names memlint's estimator uses
# (torchtune/models/convert_weights.py, _FROM_HF)
LORA_MODULES = {"q_proj": "q_proj", "k_proj": "k_proj", "v_proj": "v_proj", "output_proj": "o_proj"}
MLP_MODULES = ("gate_proj", "down_proj", "up_proj")  # torchtune's w1, w2, w3
# the loss that computes the output projection and cross-entropy chunk by chunk (modules/loss)
LINEAR_LOSS = ".LinearCrossEntropyLoss"
# the loss that upcasts the logits to fp32 one chunk of tokens at a time
CHUNKED_LOSS = ".CEWithChunkedOutputLoss"
# what to do with a run whose device mesh splits the model or the sequence (``tensor_parallel_dim``)
PARALLEL_ADVICE = ("memlint sizes data parallelism and FSDP only; measure the first steps (`log_peak_memory_stats: "
                   "True`) and silence this note with `# memlint: ignore[MEM003]`")
MODEL_KEYS = ("model", "policy_model")  # the trained model (PPO's is its policy)
_TUNE_RUN = re.compile(r"\btune\s+run\s+(?P<args>[^\n#]*)")
_TUNE_DOWNLOAD = re.compile(r"\btune\s+download\s+(?P<repo>[\w.\-]+/[\w.\-]+)")
# a size in a name: llama3_1_8b, qwen2_5_0_5b, Qwen2.5-0.5B, llama4_scout_17b_16e
_SIZE = re.compile(r"(?<![a-z])(\d+)(?:[_.](\d+))?b(?![a-z])")


def is_torchtune(value: Any) -> bool:
    """A mapping whose blocks name torchtune components (the model builder, the checkpointer)."""
    if not isinstance(value, dict):
        return False
    for block in value.values():
        if isinstance(block, dict) and str(block.get(COMPONENT, "")).startswith("torchtune."):
            return True
    return False


@extractor("torchtune")
def extract_torchtune(parsed: ParsedDocument) -> list[RunFacts]:
    data = loaded_mapping(parsed)
    if data is None or not isinstance(data.value.get("optimizer"), dict):
        return []  # evaluation, generation and quantization recipes train nothing
    facts = new_facts(parsed.path, "torchtune", data)
    facts.framework = Sourced("torchtune", None, "torchtune recipe config")
    reader = ConfigReader(parsed.path, data, facts, "torchtune")
    header = _Header(parsed.path, parsed.text)
    builder = _model(reader, header)
    reader.read("micro_batch", ("batch_size",), positive_int, TOOL)
    reader.read("grad_accum", ("gradient_accumulation_steps",), positive_int, TOOL)
    _sequence(reader)
    dtype = reader.value("dtype")
    if isinstance(dtype, str) and DTYPES.get(dtype.lower()) in ("bf16", "fp16", "fp32"):
        reader.set("load_dtype", DTYPES[dtype.lower()], reader.location("dtype"),
                   f"dtype: {dtype} (weights, gradients and optimizer states)")
    checkpointing = reader.value("enable_activation_checkpointing")
    if isinstance(checkpointing, bool):
        reader.set("grad_ckpt", int(checkpointing), reader.location("enable_activation_checkpointing"),
                   "enable_activation_checkpointing")
    _optimizer(reader)
    clip = reader.value("clip_grad_norm")
    if isinstance(clip, (int, float)) and not isinstance(clip, bool):
        reader.set("grad_clip", float(clip), reader.location("clip_grad_norm"), "clip_grad_norm")
    if str(reader.value("loss", COMPONENT)).endswith(LINEAR_LOSS):
        reader.set("fused_loss", True, reader.location("loss", COMPONENT),
                   "LinearCrossEntropyLoss: chunked output projection, no full logits")
    elif str(reader.value("loss", COMPONENT)).endswith(CHUNKED_LOSS):
        chunks = positive_int(reader.value("loss", "num_output_chunks")) or 8  # its default
        reader.set("loss_chunks", chunks, reader.location("loss", COMPONENT),
                   f"CEWithChunkedOutputLoss: logits upcast in {chunks} chunks")
        if reader.value("compile") is True:  # the recipes compile the loss with the model
            reader.set("loss_compiled", True, reader.location("compile"), "compile: the chunked loss compiled")
    if builder is not None and builder.startswith("qlora_"):
        reader.set("quantization", "nf4", reader.location(_builder(reader)[0], COMPONENT),
                   f"{builder}: NF4 base weights")
    _distribution(reader, header)
    return [facts]


def _builder(reader: ConfigReader) -> tuple[str, str] | tuple[None, None]:
    """(the key of the trained model's block, its builder's name)."""
    for key in MODEL_KEYS:
        component = reader.value(key, COMPONENT)
        if isinstance(component, str) and component.startswith("torchtune.models."):
            return key, component.rsplit(".", 1)[-1]
    return None, None


def _sizes(name: str) -> set[str]:
    """The sizes a builder or checkpoint name may state: ``8b``; ``qwen2_5_0_5b`` gives 0.5b (or
    5b: an underscore is both a separator and torchtune's decimal point), ``Llama-2-7b`` 7b."""
    out: set[str] = set()
    for found in _SIZE.finditer(name.lower().replace("-", "_")):
        whole, fraction = found.group(1), found.group(2)
        out.update((f"{whole}.{fraction}b", f"{fraction}b") if fraction else (f"{whole}b",))
    return out


def _model(reader: ConfigReader, header: "_Header") -> str | None:
    """The builder; the model fact is the Hub checkpoint its size agrees with, else the builder."""
    block, builder = _builder(reader)
    if block is None or builder is None:
        return None
    where = reader.location(block, COMPONENT)
    sizes = _sizes(builder)
    checkpoint_dir = reader.value("checkpointer", "checkpoint_dir")
    candidates = [(header.download, header.download_at)]
    if isinstance(checkpoint_dir, str) and checkpoint_dir.strip("/"):
        candidates.append((checkpoint_dir.rstrip("/").rsplit("/", 1)[-1], where))
    for name, _at in candidates:
        if name and (not sizes or not _sizes(name) or sizes & _sizes(name)):
            reader.set("model", name, where, f"{builder} (weights: {name})")
            break
    else:
        reader.set("model", builder, where, f"model builder {builder}")
    if builder.startswith(("lora_", "qlora_")):
        model = reader.inside(block)
        rank = model.value("lora_rank")
        if positive_int(rank):
            model.set("lora_r", positive_int(rank), model.location("lora_rank"), f"{block}.lora_rank")
        targets = _lora_targets(model)
        if targets:
            model.set("lora_targets", targets, model.location("lora_attn_modules"), f"{block}.lora_attn_modules")
        dropout = model.value("lora_dropout")
        if isinstance(dropout, (int, float)) and not isinstance(dropout, bool):
            model.set("lora_dropout", float(dropout), model.location("lora_dropout"), f"{block}.lora_dropout")
    return builder


def _lora_targets(model: ConfigReader) -> tuple[str, ...]:
    modules = model.value("lora_attn_modules")
    out = [LORA_MODULES[m] for m in modules if isinstance(m, str) and m in LORA_MODULES] \
        if isinstance(modules, list) else []
    if model.value("apply_lora_to_mlp") is True:
        out.extend(MLP_MODULES)
    if model.value("apply_lora_to_output") is True:
        out.append("lm_head")
    return tuple(out)


def _sequence(reader: ConfigReader) -> None:
    """The length the tokenizer truncates to, else the dataset's (one dataset or a list)."""
    for keys in (("tokenizer", "max_seq_len"), ("dataset", "max_seq_len")):
        if positive_int(reader.value(*keys)):
            reader.set("seq_len", positive_int(reader.value(*keys)), reader.location(*keys), ".".join(keys))
            return
    datasets = reader.value("dataset")
    if isinstance(datasets, list):
        for index, item in enumerate(datasets):
            if isinstance(item, dict) and positive_int(item.get("max_seq_len")):
                reader.set("seq_len", positive_int(item["max_seq_len"]), reader.location("dataset", index, "max_seq_len"),
                           f"dataset[{index}].max_seq_len")
                return


def _optimizer(reader: ConfigReader) -> None:
    component = reader.value("optimizer", COMPONENT)
    if not isinstance(component, str):
        return
    name = OPTIMIZER_CLASSES.get(component)
    if name == "adamw" and reader.value("optimizer", "fused") is True:
        name = "adamw-fused"
    if name is not None:
        reader.set("optimizer", name, reader.location("optimizer", COMPONENT), f"optimizer {component}")


def _distribution(reader: ConfigReader, header: "_Header") -> None:
    """GPU count from the header's ``tune run``; FSDP for the distributed recipes."""
    if header.processes is not None:
        reader.set("world_size", header.processes, header.processes_at, "tune run --nproc_per_node")
    if header.recipe is not None and "distributed" in header.recipe:
        # the recipe shards with FSDP whatever the config says: a fact no key of the file sets
        # (so no rule asks the user to choose a lighter sharding the recipe does not offer)
        reader.set("fsdp", "full", None, f"torchtune's {header.recipe} recipe shards with FSDP")
    for key, form in (("tensor_parallel_dim", "tensor"), ("context_parallel_dim", "context")):
        degree = positive_int(reader.value(key))
        if degree is not None and degree > 1:  # the distributed recipes' device mesh: FSDP x TP (x CP)
            reader.set("unmodelled", (f"{form} parallelism (`{key}: {degree}`)", PARALLEL_ADVICE), reader.location(key),
                       key)
            break
    offload = reader.value("fsdp_cpu_offload")
    if offload is True:
        where = reader.location("fsdp_cpu_offload")
        reader.set("offload_params", True, where, "fsdp_cpu_offload")
        reader.set("offload_optimizer", True, where, "fsdp_cpu_offload")


class _Header:
    """What the comment above the config says: ``tune download REPO`` and ``tune run [--nproc_per_node
    N] RECIPE --config ...`` (the first run line; every later one repeats it with overrides)."""

    def __init__(self, path: str, text: str) -> None:
        self.download: str | None = None
        self.download_at: Location | None = None
        self.recipe: str | None = None
        self.recipe_at: Location | None = None
        self.processes: int | None = None
        self.processes_at: Location | None = None
        comments = "\n".join(line if line.lstrip().startswith("#") else "" for line in text.splitlines())
        found = _TUNE_DOWNLOAD.search(comments)
        if found:
            self.download = found.group("repo")
            self.download_at = _at(path, comments, found.start("repo"), found.end("repo"))
        run = _TUNE_RUN.search(comments)
        if run is None:
            return
        words = list(re.finditer(r"\S+", run.group("args")))
        base = run.start("args")
        index = 0
        while index < len(words):
            word = words[index].group()
            value = words[index + 1] if index + 1 < len(words) else None
            if word.startswith("--nproc_per_node") or word.startswith("--nproc-per-node"):
                written, start = (word.split("=", 1)[1], words[index].start() + word.index("=") + 1) if "=" in word \
                    else (value.group() if value else "", value.start() if value else 0)
                if written.isdigit() and int(written) >= 1:
                    self.processes = int(written)
                    self.processes_at = _at(path, comments, base + start, base + start + len(written))
                index += 1 if "=" in word else 2
                continue
            if word.startswith("-"):
                index += 1 if "=" in word else 2
                continue
            named = _config_named(words[index + 1:])
            if named is not None and not _names_this_file(named, path):
                # the header of the config this file was copied from (SWE-Gym's 32B configs keep
                # qwen2_5/7B_full's "tune run --nproc_per_node 2 ... --config qwen2_5/7B_full"):
                # its recipe is this file's kind, its GPU count that other run's
                self.processes = self.processes_at = None
            self.recipe = word
            self.recipe_at = _at(path, comments, base + words[index].start(), base + words[index].end())
            if self.processes is None and not word.endswith("distributed"):
                self.processes = 1
                self.processes_at = self.recipe_at
            return


def _config_named(words: list[re.Match]) -> str | None:
    """The ``--config NAME`` of a ``tune run`` line's words after the recipe."""
    for index, match in enumerate(words):
        word = match.group()
        if word.startswith("--config="):
            return word.split("=", 1)[1]
        if word == "--config" and index + 1 < len(words):
            return words[index + 1].group()
    return None


def _names_this_file(named: str, path: str) -> bool:
    """Does a ``--config`` value name the file at ``path``: torchtune's built-in name
    (``qwen2_5/7B_full`` for ``recipes/configs/qwen2_5/7B_full.yaml``), the file's own path, or a
    placeholder (``<config>``, ``$CONFIG``) that stands for any file?"""
    if not re.fullmatch(r"[\w./\-]+", named):
        return True
    stem = named.removesuffix(".yaml").removesuffix(".yml").strip("./")
    own = PurePosixPath(Path(path).as_posix()).with_suffix("").as_posix()
    return own == stem or own.endswith("/" + stem) or PurePosixPath(stem).name == PurePosixPath(own).name


def _at(path: str, text: str, start: int, end: int) -> Location:
    return Location(path, Range(Position.at_offset(text, start), Position.at_offset(text, end)))
