"""Which library classes and functions a training script calls, by qualified name.

Names come from libcst's qualified-name analysis, so ``from transformers import Trainer as T``
and ``import transformers; transformers.Trainer`` both read ``transformers.Trainer``; submodule
spellings (``transformers.trainer.Trainer``, ``torch.optim.adamw.AdamW``) are accepted too.
"""

from __future__ import annotations

import re

from memlint.model.vocabulary import OPTIMIZER_CLASSES


def _root_last(qualname: str) -> tuple[str, str]:
    parts = qualname.split(".")
    return parts[0], parts[-1]


def trainer_framework(qualname: str) -> str | None:
    """The framework a trainer class belongs to (``transformers.Trainer`` -> ``hf-trainer``)."""
    root, last = _root_last(qualname)
    if root == "transformers" and last in ("Trainer", "Seq2SeqTrainer"):
        return "hf-trainer"
    if root == "trl" and last.endswith("Trainer"):
        return "trl"
    if root in ("lightning", "pytorch_lightning") and last in ("Trainer", "Fabric"):
        return "lightning"
    return None


def config_framework(qualname: str) -> str | None:
    """TrainingArguments-style config classes (``TrainingArguments``, TRL ``SFTConfig``...)."""
    root, last = _root_last(qualname)
    if root == "transformers" and last.endswith("TrainingArguments"):
        return "hf-trainer"
    if root == "trl" and last.endswith("Config") and last not in ("ModelConfig",):
        return "trl"
    return None


def is_library_dataclass(qualname: str) -> bool:
    """Library dataclasses an ``HfArgumentParser``/``TrlParser`` turns into options."""
    root, last = _root_last(qualname)
    if config_framework(qualname) is not None:
        return True
    return root == "trl" and (last == "ModelConfig" or last.endswith("ScriptArguments"))


def is_argument_parser(qualname: str) -> bool:
    root, last = _root_last(qualname)
    return (root == "transformers" and last == "HfArgumentParser") or (root == "trl" and last == "TrlParser")


_NOT_MODELS = ("Config", "Tokenizer", "TokenizerFast", "Processor", "FeatureExtractor", "ImageProcessor")


def is_model_loader(qualname: str) -> bool:
    """``AutoModelForCausalLM.from_pretrained`` and friends: calls that load a model's weights."""
    parts = qualname.split(".")
    if len(parts) < 3 or parts[-1] not in ("from_pretrained", "from_config"):
        return False
    root, cls = parts[0], parts[-2]
    if root == "unsloth":
        return is_unsloth_model(qualname, "from_pretrained")
    if root not in ("transformers", "liger_kernel"):
        return False
    if cls.startswith("Auto") and not cls.startswith(("AutoModel", "AutoLigerKernel")):
        return False
    if other_framework_model(qualname) is not None:
        return False
    return not cls.endswith(_NOT_MODELS) and ("Model" in cls or "For" in cls or "LigerKernel" in cls)


def other_framework_model(qualname: str) -> str | None:
    """The framework of a transformers model class that is not PyTorch's (``TFAutoModelForSeq2SeqLM``,
    ``FlaxBertForMaskedLM``): its training runs in TensorFlow/Keras or JAX, which memlint does not size."""
    parts = qualname.split(".")
    root, last = parts[0], parts[-2] if parts[-1] in ("from_pretrained", "from_config") and len(parts) > 2 else parts[-1]
    if root != "transformers" or last.endswith(_NOT_MODELS):
        return None
    # a model class (``TFBertModel``, ``FlaxT5ForConditionalGeneration``, ``TFAutoModelForCausalLM``),
    # not one of the output records its forward returns (``FlaxBaseModelOutput``)
    if "Output" in last or not (last.endswith("Model") or "For" in last):
        return None
    if last.startswith("TF") and last[2:3].isupper():
        return "TensorFlow"
    if last.startswith("Flax"):
        return "Flax"
    return None


def is_unsloth_model(qualname: str, method: str) -> bool:
    """``unsloth.FastLanguageModel.<method>`` (and ``FastModel``, ``FastVisionModel``): Unsloth's
    loaders, whose ``from_pretrained(model_name=...)`` loads in 4 bits unless told otherwise
    and whose ``get_peft_model(model, r=...)`` applies LoRA."""
    parts = qualname.split(".")
    return (len(parts) >= 3 and parts[0] == "unsloth" and parts[-1] == method
            and parts[-2].startswith("Fast") and parts[-2].endswith("Model"))


def image_model_library(qualname: str) -> str | None:
    """The library of a call that builds a model memlint's estimate has no recipe for: timm's
    ``create_model("resnet50d")``, torchvision's ``models.resnet50()`` (convolutional image models)."""
    parts = qualname.split(".")
    if parts[0] == "timm" and parts[-1] == "create_model":
        return "timm"
    if parts[:2] == ["torchvision", "models"] and len(parts) > 2 and parts[-1][:1].islower():
        return "torchvision"
    return None


def is_model_class(qualname: str) -> bool:
    """A transformers model class called directly (``LlamaForCausalLM(config)``)."""
    root, last = _root_last(qualname)
    return root == "transformers" and not last.startswith("Auto") and "For" in last and not last.endswith(_NOT_MODELS) \
        and other_framework_model(qualname) is None


def is_config_loader(qualname: str) -> bool:
    parts = qualname.split(".")
    return len(parts) >= 3 and parts[0] == "transformers" and parts[-1] == "from_pretrained" and parts[-2].endswith("Config")


def is_tokenizer_loader(qualname: str) -> bool:
    parts = qualname.split(".")
    return (
        len(parts) >= 3 and parts[0] == "transformers" and parts[-1] == "from_pretrained"
        and parts[-2].endswith(("Tokenizer", "TokenizerFast", "Processor"))
    )


PEFT_WRAPPERS = {"peft.get_peft_model", "peft.mapping.get_peft_model", "peft.mapping_func.get_peft_model"}
# peft's k-bit preparation under both its names: ``prepare_model_for_int8_training`` (peft before
# 0.4; it enables gradient checkpointing only for a model loaded in 8 bits) and its successor
KBIT_PREPARATION = {f"{module}.prepare_model_for_kbit_training" for module in ("peft", "peft.utils", "peft.utils.other")}
INT8_PREPARATION = {f"{module}.prepare_model_for_int8_training" for module in ("peft", "peft.utils", "peft.utils.other")}
MODEL_WRAPPERS = PEFT_WRAPPERS | KBIT_PREPARATION | INT8_PREPARATION | {"peft.PeftModel.from_pretrained"}
QUANTIZATION_CONFIGS = {"transformers.BitsAndBytesConfig", "transformers.utils.quantization_config.BitsAndBytesConfig"}
LORA_CONFIGS = {"peft.LoraConfig", "peft.tuners.lora.LoraConfig", "peft.tuners.lora.config.LoraConfig"}
DATALOADERS = {"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"}
# autocast entry points -> the device they run on ("any": the device_type argument says)
AUTOCAST_DEVICES = {
    "torch.autocast": "any",
    "torch.amp.autocast": "any",
    "torch.amp.autocast_mode.autocast": "any",
    "torch.cuda.amp.autocast": "cuda",
    "torch.cuda.amp.autocast_mode.autocast": "cuda",
    "torch.cpu.amp.autocast": "cpu",
    "torch.cpu.amp.autocast_mode.autocast": "cpu",
}
AUTOCASTS = {name for name, device in AUTOCAST_DEVICES.items() if device != "cpu"}  # those that can run on a GPU
CHECKPOINT_FUNCTIONS = {
    "torch.utils.checkpoint.checkpoint",
    "torch.utils.checkpoint.checkpoint_sequential",
    "deepspeed.checkpointing.checkpoint",
}
DEEPSPEED_INITIALIZE = {"deepspeed.initialize"}
ACCELERATORS = {"accelerate.Accelerator", "accelerate.accelerator.Accelerator"}
DEEPSPEED_PLUGINS = {"accelerate.DeepSpeedPlugin", "accelerate.utils.DeepSpeedPlugin",
                     "accelerate.utils.dataclasses.DeepSpeedPlugin"}
# What steps the parameters, by the name of the object whose ``.step()`` is called: an
# optimizer (``optimizer``, ``opt``, ``self.optim_g``), a GradScaler's ``scaler.step(opt)``, a
# DeepSpeed engine, an Accelerate / Lightning object. A scheduler's ``step()`` updates no weight.
# Shared by the script extractor (does the file train?) and the training-code rules.
UPDATER_NAME = re.compile(r"optim|^opt($|_|\d)|_opt($|\d)|scaler|engine|ds_model|deepspeed|accelerator|fabric|trainer")
NOT_UPDATER_NAME = re.compile(r"sched|^lr")

# PyTorch's own FSDP: the FSDP1 wrapper class, FSDP2's ``fully_shard`` and their precision/offload
TORCH_FSDP_WRAPPERS = {"torch.distributed.fsdp.FullyShardedDataParallel",
                       "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel"}
TORCH_FULLY_SHARD = {"torch.distributed.fsdp.fully_shard", "torch.distributed._composable.fsdp.fully_shard",
                     "torch.distributed.fsdp._fully_shard.fully_shard",
                     "torch.distributed.fsdp._fully_shard._fully_shard.fully_shard",
                     "torch.distributed._composable.fsdp.fully_shard.fully_shard"}
TORCH_FSDP_PRECISION = {"torch.distributed.fsdp.MixedPrecision",
                        "torch.distributed.fsdp.fully_sharded_data_parallel.MixedPrecision",
                        "torch.distributed.fsdp.MixedPrecisionPolicy",
                        "torch.distributed._composable.fsdp.MixedPrecisionPolicy"}
TORCH_FSDP_CPU_OFFLOAD = {"torch.distributed.fsdp.CPUOffload",
                          "torch.distributed.fsdp.fully_sharded_data_parallel.CPUOffload",
                          "torch.distributed.fsdp.CPUOffloadPolicy",
                          "torch.distributed._composable.fsdp.CPUOffloadPolicy"}
FSDP_PLUGINS = {"accelerate.FullyShardedDataParallelPlugin", "accelerate.utils.FullyShardedDataParallelPlugin",
                "accelerate.utils.dataclasses.FullyShardedDataParallelPlugin"}
# accelerate's N-D parallelism (>= 1.10): data-parallel replicas and shards, tensor and context parallel sizes
# PyTorch's tensor parallelism (DTensor): splits each named submodule over a device mesh
TORCH_TENSOR_PARALLEL = {"torch.distributed.tensor.parallel.parallelize_module",
                         "torch.distributed.tensor.parallel.api.parallelize_module"}
PARALLELISM_CONFIGS = {"accelerate.ParallelismConfig", "accelerate.parallelism_config.ParallelismConfig",
                       "accelerate.utils.ParallelismConfig"}


def lightning_strategy(qualname: str) -> str | None:
    """``DeepSpeedStrategy`` -> "deepspeed", ``FSDPStrategy`` -> "fsdp"."""
    root, last = _root_last(qualname)
    if root not in ("lightning", "pytorch_lightning"):
        return None
    return {"DeepSpeedStrategy": "deepspeed", "FSDPStrategy": "fsdp"}.get(last)


def liger(qualname: str) -> str | None:
    """Liger kernels: "loader" (AutoLigerKernelForCausalLM) or "patch" (apply_liger_kernel_to_*)."""
    root, last = _root_last(qualname)
    if root != "liger_kernel":
        return None
    if last.startswith("AutoLigerKernel") or qualname.endswith("AutoLigerKernelForCausalLM.from_pretrained"):
        return "loader"
    if last.startswith("apply_liger_kernel_to_") or last == "_apply_liger_kernel":
        return "patch"
    return None


# optimizer classes by their own name, for a call whose callee is not a library name
# (``opt = Lion(...)`` after a star import, ``self.optim_cls(...)`` is not one)
OPTIMIZER_CLASS_NAMES = {
    "AdamW",
    "Adam",
    "SGD",
    "Adafactor",
    "Adagrad",
    "Adadelta",
    "Adamax",
    "RMSprop",
    "Rprop",
    "ASGD",
    "NAdam",
    "RAdam",
    "LBFGS",
    "SparseAdam",
    "Lion",
    "LAMB",
    "Lamb",
    "AdamW8bit",
    "Adam8bit",
    "PagedAdamW",
    "PagedAdamW8bit",
    "PagedAdamW32bit",
    "PagedLion8bit",
    "PagedLion",
    "PagedLion32bit",
    "Lion8bit",
    "FusedAdam",
    "FusedLAMB",
    "DeepSpeedCPUAdam",
    "Muon",
    "SophiaG",
    "AdEMAMix",
    "CAME",
    "Prodigy",
    "AdamWScheduleFree",
    "SGDScheduleFree",
    "Adan",
    "GaLoreAdamW",
    "GaLoreAdamW8bit",
}
# modules whose classes are optimizers (``torch.optim.AdamW``, ``bitsandbytes.optim.AdamW8bit``)
OPTIMIZER_MODULES = (
    "torch.optim.",
    "bitsandbytes.optim.",
    "apex.optimizers.",
    "deepspeed.ops.",
    "timm.optim.",
    "lion_pytorch.",
    "torch_optimizer.",
    "schedulefree.",
    "galore_torch.",
    "adam_mini.",
    "transformers.optimization.Adafactor",
    "transformers.Adafactor",
    "transformers.AdamW",
    "transformers.optimization.AdamW",
)

# loss scalers: ``torch.amp.GradScaler`` and its older and FSDP spellings
SCALER_CLASSES = {
    "torch.amp.GradScaler",
    "torch.GradScaler",
    "torch.amp.grad_scaler.GradScaler",
    "torch.cuda.amp.GradScaler",
    "torch.cuda.amp.grad_scaler.GradScaler",
    "torch.cpu.amp.GradScaler",
    "torch.cpu.amp.grad_scaler.GradScaler",
    "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler",
    "torch.distributed.fsdp.ShardedGradScaler",
}


def is_optimizer_class(qualname: str) -> bool:
    """Is ``qualname`` an optimizer class (not a scheduler, a helper function or the base class)?"""
    last = qualname.rsplit(".", 1)[-1]
    if qualname.startswith("torch.optim.") and ("lr_scheduler" in qualname or not last[:1].isupper()
                                                 or last == "Optimizer"):
        return False
    return qualname.startswith(OPTIMIZER_MODULES)


def optimizer_class(qualname: str) -> str | None:
    """The estimator's optimizer for an optimizer class whose states it models (None for the
    others, which :func:`is_optimizer_class` still recognises)."""
    if qualname in OPTIMIZER_CLASSES:
        return OPTIMIZER_CLASSES[qualname]
    parts = qualname.split(".")
    if len(parts) >= 4 and parts[:2] == ["torch", "optim"]:  # torch.optim.adamw.AdamW
        return OPTIMIZER_CLASSES.get(f"torch.optim.{parts[-1]}")
    if parts[0] == "bitsandbytes" and len(parts) >= 3:  # bitsandbytes.optim.adamw.AdamW8bit
        return OPTIMIZER_CLASSES.get(f"bitsandbytes.optim.{parts[-1]}")
    if parts[0] == "transformers" and parts[-1] == "AdamW":
        return "adamw-forloop"  # transformers' own AdamW (removed in v5) steps parameter by parameter
    return None
